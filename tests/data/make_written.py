"""Write written-ttree-zstd.root, written-ttree-uncompressed.root and written-rntuple-zstd.root:
small TTrees and an RNTuple written by cherenkov's own writer, one column of every kind it writes
(tests/test_write_ttree.py's `all_types`, tests/test_write_rntuple.py's `sample`), as seeds for
the fuzz targets (fuzz/make_corpus.sh) and the mutated-file test
(crates/cherenkov-core/tests/mutated_files.rs). Run once, the output is committed:

    .venv/bin/python tests/data/make_written.py
"""

import sys
from pathlib import Path

import cherenkov

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from test_write_rntuple import sample, write  # noqa: E402
from test_write_ttree import all_types  # noqa: E402

ENTRIES = 30

if __name__ == "__main__":
    types, data = all_types(ENTRIES)
    for name, compression in [("zstd", 505), ("uncompressed", 0)]:
        path = HERE / f"written-ttree-{name}.root"
        with cherenkov.recreate(path, compression=compression) as f:
            half = {k: v[: ENTRIES // 2] for k, v in data.items()}
            rest = {k: v[ENTRIES // 2 :] for k, v in data.items()}
            tree = f.mktree("Events", types, cluster_bytes=4000, aliases={"twice": "2*s_float32"})
            tree.extend(half)
            tree.extend(rest)
        print(path, path.stat().st_size, "bytes")
    path = HERE / "written-rntuple-zstd.root"
    write(path, sample(ENTRIES), chunks=2, cluster_bytes=2000)
    print(path, path.stat().st_size, "bytes", len(cherenkov.open(path)["Events"].cluster_boundaries) - 1, "clusters")
