"""Write directories.root and unclosed.root with ROOT: the zero seeks of directory records.

- directories.root: directories made with ``mkdir`` and never written to keep the record ROOT
  wrote when it made them, whose fSeekKeys is 0 (no keys list): ``empty`` at the top and
  ``full/inner_empty`` inside a directory holding a tree; trees beside them.
- unclosed.root: a file whose writer wrote a tree and a histogram and died before closing it:
  the top directory's record still says fSeekKeys 0, the keys list was never written (ROOT finds
  the objects by walking the records, ``TFile::Recover``; uproot lists nothing).

Needs ROOT (``bash scripts/setup-bench.sh``); run once, the output is committed:

    .venv/bin/python tests/data/make_directories.py

tests/test_directories.py reads them.
"""

from __future__ import annotations

import array
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
DIRECTORIES = HERE / "directories.root"
UNCLOSED = HERE / "unclosed.root"
ENTRIES = 20


def fill(tree_name: str, scale: float):
    """A tree of `ENTRIES` entries: i, i * scale, and i % 4 values of a counted array."""
    import ROOT

    tree = ROOT.TTree(tree_name, tree_name)
    n, i, x = array.array("i", [0]), array.array("i", [0]), array.array("d", [0.0])
    v = array.array("f", [0.0] * 4)
    tree.Branch("i", i, "i/I")
    tree.Branch("x", x, "x/D")
    tree.Branch("n", n, "n/I")
    tree.Branch("v", v, "v[n]/F")
    for k in range(ENTRIES):
        i[0], x[0], n[0] = k, k * scale, k % 4
        for j in range(n[0]):
            v[j] = k + 0.25 * j
        tree.Fill()
    return tree


def write_directories() -> None:
    import ROOT

    f = ROOT.TFile(str(DIRECTORIES), "RECREATE")
    fill("top", 1.5).Write()
    f.mkdir("empty")
    full = f.mkdir("full")
    full.mkdir("inner_empty")
    full.cd()
    fill("inner", -2.0).Write()
    f.Close()


def write_unclosed() -> None:
    """In a child process that ends without closing the file, as a crashed job does."""
    import ROOT

    f = ROOT.TFile(str(UNCLOSED), "RECREATE")
    fill("events", 0.5).Write()
    h = ROOT.TH1D("h", "h", 10, 0.0, 10.0)
    for k in range(ENTRIES):
        h.Fill(k % 10)
    h.Write()
    f.Flush()
    os._exit(0)


def main() -> None:
    if sys.argv[1:] == ["--unclosed"]:
        write_unclosed()
    write_directories()
    subprocess.run([sys.executable, __file__, "--unclosed"], check=True)
    for path in (DIRECTORIES, UNCLOSED):
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
