"""Where one read of the fixed selection spends its time, phase by phase (issue 38): naming the
items (`resolve`), planning (`stored_ranges`: the plan and its byte ranges), the core's read with
its results built (numpy buffers in dicts), the Python conversion (`library="np"`), and the fixed
cost of a read of no entries; medians of `--repeat` reads, wall, CPU and the cores kept busy
(CPU / wall: a read bound by its CPU keeps every core busy). `--loop N` only reads N
times, for a profiler:

    python bench/read_phases.py                       # the RNTuple twin of the lab's 40 000-entry file
    python bench/read_phases.py --tree                # the TTree
    perf record -F 2000 -g python bench/read_phases.py --loop 300
"""

from __future__ import annotations

import argparse
import sys
import time
from statistics import median

import cherenkov
from cherenkov.tree import _convert
from local_read import TREE, counters_of, selections
from make_nanolike import default_output, ensure


def timed(f, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `f()`."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        f()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return median(walls), median(cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="store_true", help="the TTree, not its RNTuple twin")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--loop", type=int, help="only read this many times (for perf)")
    args = parser.parse_args(argv)
    path = ensure(default_output(40_000), 40_000)
    names = selections(cherenkov.open(path)[TREE], counters_of(path, TREE))["30% by volume"]
    table = cherenkov.open(path if args.tree else path.with_name(path.stem + "-rntuple.root"))[TREE]
    if args.loop:
        for _ in range(args.loop):
            table.arrays(names, library="np")
        return 0
    selected = table.resolve(names)
    items, n = [info.index for _, info in selected], table.num_entries
    table.arrays(names, library="np")  # once untimed: first-touch allocations

    def convert():
        branches, _ = table._core.read(items, 0, n)
        wall, cpu = time.perf_counter(), time.process_time()
        _convert([(key, b) for (key, _), b in zip(selected, branches)], "np")
        return time.perf_counter() - wall, time.process_time() - cpu

    conversions = [convert() for _ in range(args.repeat)]
    phases = {
        "resolve (names to items)": timed(lambda: table.resolve(names), args.repeat),
        "plan (units and byte ranges)": timed(lambda: table._core.stored_ranges(items, 0, n), args.repeat),
        "read of no entries (fixed cost)": timed(lambda: table._core.read(items, 0, 0), args.repeat),
        "core read, results built": timed(lambda: table._core.read(items, 0, n), args.repeat),
        "conversion to numpy (Python)": (median(w for w, _ in conversions), median(c for _, c in conversions)),
        "arrays(library='np') in all": timed(lambda: table.arrays(names, library="np"), args.repeat),
    }
    kind = "TTree" if args.tree else "RNTuple"
    print(f"{kind}: {len(items)} items, {n} entries; medians of {args.repeat} reads")
    for name, (wall, cpu) in phases.items():
        # Cores busy: a read that keeps every core decoding has CPU / wall near the cores.
        print(f"  {name:34} {wall * 1e3:8.2f} ms wall {cpu * 1e3:8.2f} ms CPU {cpu / wall:5.2f} cores busy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
