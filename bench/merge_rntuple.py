"""Merging RNTuples: `cherenkov merge --mode copy` (pages copied, the first input's layout kept)
and `--mode rewrite` against ROOT 6.40's `hadd -ff` (its RNTuple merger copying pages), each in a
process of its own, over N links to one RNTuple (the lab's NanoAOD-like data as ROOT's importer
writes it: `local_read.py` makes it). Medians of interleaved runs of wall and CPU time (the
children's rusage), peak RSS and output size; each output read back and compared with the input.

    python bench/merge_rntuple.py [--file bench/data/nanolike-40000-rntuple.root] [--copies 8]
                                  [--repeat 3] [--tools copy,hadd,rewrite]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from statistics import median

import awkward as ak
import cherenkov

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from merge_bench import find_hadd, measured  # noqa: E402 (one way to time a tool and find hadd)


def check(output: Path, source: Path, copies: int) -> None:
    """A few columns of the output equal the input's, `copies` times over."""
    once, merged = cherenkov.open(source)["Events"], cherenkov.open(output)["Events"]
    assert merged.num_entries == copies * once.num_entries, (output, merged.num_entries)
    names = [f.path for f in once.fields if f.readable and "." not in f.path][:: max(1, len(once.fields) // 40)]
    a, b = once.arrays(names), merged.arrays(names)
    for n in names:
        assert ak.array_equal(ak.concatenate([a[n]] * copies), b[n], equal_nan=True), (output, n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=BENCH / "data" / "nanolike-40000-rntuple.root")
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tools", default="copy,hadd,rewrite")
    args = parser.parse_args(argv)
    if not args.file.exists():
        sys.exit(f"{args.file} is missing: `python bench/local_read.py` makes it with ROOT")
    cli = str(Path(sys.executable).parent / "cherenkov")
    hadd = find_hadd()
    tools = args.tools.split(",")
    if "hadd" in tools and hadd is None:
        print("hadd not found (pip install root): left out")
        tools.remove("hadd")
    inputs = [str(args.file)] * args.copies
    with tempfile.TemporaryDirectory(prefix="cherenkov-merge-rntuple-") as work:
        outputs = {t: Path(work) / f"{t}.root" for t in tools}
        commands = {
            "copy": [cli, "merge", "--quiet", "--mode", "copy", str(outputs.get("copy")), *inputs],
            "rewrite": [cli, "merge", "--quiet", "--mode", "rewrite", str(outputs.get("rewrite")), *inputs],
            "hadd": [hadd, "-f", "-ff", str(outputs.get("hadd")), *inputs],
        }
        runs: dict[str, list] = {t: [] for t in tools}
        for i in range(args.repeat):
            for t in tools:
                if t == "rewrite" and i > 0:
                    continue  # slow: once is enough to place it
                outputs[t].unlink(missing_ok=True)
                runs[t].append(measured(commands[t]))  # (wall, peak RSS bytes, CPU)
        size = args.file.stat().st_size * args.copies / 1e6
        print(f"{args.copies} copies of {args.file.name} ({size:.0f} MB), medians of {args.repeat} runs, load {os.getloadavg()[0]:.1f}")
        for t in tools:
            check(outputs[t], args.file, args.copies)
            wall, rss, cpu = (median(r[k] for r in runs[t]) for k in range(3))
            mb = outputs[t].stat().st_size / 1e6
            print(f"  {t:8s} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak RSS {rss / 1e9:5.2f} GB  output {mb:7.1f} MB")
        if "copy" in tools and "hadd" in tools:
            c, h = (median(r[0] for r in runs[t]) for t in ("copy", "hadd"))
            print(f"  hadd -ff / cherenkov copy: {h / c:.2f}x in wall time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
