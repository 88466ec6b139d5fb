"""Files cherenkov writes, read from far away: the lab's NanoAOD-like data (all branches) written by
cherenkov and by uproot's writer (the same arrays; uproot one ``extend`` per cluster of
cherenkov's layout), served by nginx behind toxiproxy, and the fixed set (30 % of the branches by
volume, local_read.py's choice, counters aside: each writer has its own) read over HTTP by
cherenkov, fresh open per run. Prints the requests opening took (the size probe that also asks for
the file's head and tail; the tree's metadata must come from it), the reading time and what the
distance cost in round-trip times (the floor: 2, metadata then data).

    python bench/written_remote.py                 # 40 000 entries, 0 and 137 ms, 3 runs each
    python bench/written_remote.py --rtt 0,50,137 --repeat 5
"""

from __future__ import annotations

import argparse
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import cherenkov
from cherenkov_lab import Lab
from local_read import counters_of, selections
from make_nanolike import TREE, default_output, ensure


def write_both(source: Path, folder: Path) -> tuple[Path, Path]:
    """The source's branches written by cherenkov and by uproot (ZSTD 5 both)."""
    import uproot

    tree = cherenkov.open(source)[TREE]
    counters = set(counters_of(source, TREE).values())
    names = [b.name for b in tree.branches if b.readable and not b.has_children]
    arrays = tree.arrays(names, library="ak")
    ours, theirs = folder / "written-by-cherenkov.root", folder / "written-by-uproot.root"
    t0 = time.perf_counter()
    with cherenkov.recreate(ours, compression=cherenkov.ZSTD(5)) as f:
        f[TREE] = arrays
    print(f"cherenkov wrote {len(names)} branches in {time.perf_counter() - t0:.2f} s: {ours.stat().st_size / 1e6:.1f} MB")
    bounds = [int(b) for b in cherenkov.open(ours)[TREE].cluster_boundaries]
    plain = [n for n in names if n not in counters]
    t0 = time.perf_counter()
    with uproot.recreate(theirs, compression=uproot.ZSTD(5)) as f:
        f.mktree(TREE, {n: arrays[n].type for n in plain})
        for a, b in zip(bounds[:-1], bounds[1:]):
            f[TREE].extend({n: arrays[n][a:b] for n in plain})
    seconds, size = time.perf_counter() - t0, theirs.stat().st_size / 1e6
    print(f"uproot wrote {len(plain)} branches in {seconds:.2f} s: {size:.1f} MB, {len(bounds) - 1} clusters each")
    for path in (ours, theirs):
        path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    return ours, theirs


def read(url: str, names: list[str]) -> tuple[float, int, int, int]:
    """Seconds, requests by the time the tree's metadata is in, requests and round trips in all."""
    t0 = time.perf_counter()
    f = cherenkov.open(url)
    tree = f[TREE]
    opening = f.source_counters().requests
    tree.arrays(names, library="np")
    seconds = time.perf_counter() - t0
    counters = f.source_counters()
    return seconds, opening, counters.requests, counters.round_trips


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=40_000)
    parser.add_argument("--rtt", default="0,137", help="round-trip times in ms (default 0,137)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    source = ensure(default_output(args.entries), args.entries)
    counters = set(counters_of(source, TREE).values())
    fixed = [n for n in selections(cherenkov.open(source)[TREE], counters_of(source, TREE))["30% by volume"] if n not in counters]
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-written-remote-"))
    folder.chmod(0o755)
    try:
        files = write_both(source, folder)
        local = {p.name: median(read(str(p), fixed)[0] for _ in range(args.repeat)) for p in files}
        print(f"fixed set: {len(fixed)} branches; local: " + ", ".join(f"{n} {s:.3f} s" for n, s in local.items()))
        with Lab(folder) as lab:
            for rtt in [float(r) for r in args.rtt.split(",")]:
                lab.set_rtt(rtt)
                for path in files:
                    runs = [read(lab.url("http", path.name), fixed) for _ in range(args.repeat)]
                    seconds = median(r[0] for r in runs)
                    cost = (seconds - local[path.name]) / (rtt / 1000) if rtt else 0.0
                    print(
                        f"{rtt:5.0f} ms http {path.name:24} {seconds:6.3f} s; opening {runs[0][1]} request(s), "
                        f"{runs[0][2]} requests and {runs[0][3]} round trips in all; distance cost {cost:.1f} round-trip times"
                    )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
