"""Direct I/O against the page cache: a cold and a warm read of every branch of a file with
`direct_io=True` (O_DIRECT) and without, and how much of the file the page cache holds afterwards.

Before each read the file alone leaves the page cache (`posix_fadvise(DONTNEED)`: its clean pages
are dropped, nothing else is touched), so both modes start cold without dropping the machine's
caches. The page cache's share of the file after the read is `fincore`'s (util-linux).

    python bench/direct_io.py [--file F.root] [--tree Events] [--repeat 3]

A file larger than the lab's (5 GB: `cherenkov merge --mode copy` of 100 links to it) shows what
direct I/O does to the page cache of a machine with less free memory than the file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import cherenkov
from make_nanolike import default_output, ensure

STEP = 200_000


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_bytes(path: Path) -> int:
    """Bytes of `path` in the page cache (fincore's RES column, in bytes)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def read(path: Path, tree: str, direct: bool, cold: bool = True) -> tuple[float, float, int]:
    if cold:
        evict(path)
    t = cherenkov.open(path, direct_io=direct)[tree]
    names = [b.path for b in t.branches if b.readable]
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in t.iterate(names, step_size=STEP, library="np"):  # in steps: a 5 GB file does not fit as arrays
        pass
    return time.perf_counter() - wall, time.process_time() - cpu, resident_bytes(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, help="default: the lab's 40 000-entry NanoAOD-like file")
    parser.add_argument("--tree", default="Events")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    path = args.file or ensure(default_output(40_000), 40_000)
    runs = {False: [], True: []}
    for _ in range(args.repeat):  # interleaved
        for direct in (False, True):
            runs[direct].append(read(path, args.tree, direct))
    # Warm: the file read through the page cache once, then again by each mode (direct I/O goes
    # to the disk whatever the cache holds).
    read(path, args.tree, False)
    warm = {direct: read(path, args.tree, direct, cold=False) for direct in (False, True)}
    size = path.stat().st_size
    print(f"{path.name}: {size / 1e6:.1f} MB, every readable branch; cold: the file evicted before each read, medians of {args.repeat}")
    print(f"  {'read':30} {'wall s':>7} {'cpu s':>7} {'MB/s':>7} {'page cache after':>17}")
    for direct, label in ((False, "page cache"), (True, "direct_io=True")):
        cold = [median(x[i] for x in runs[direct]) for i in range(3)]
        for when, (wall, cpu, kept) in (("cold", cold), ("warm", warm[direct])):
            print(f"  {label + ', ' + when:30} {wall:7.3f} {cpu:7.3f} {size / 1e6 / wall:7.0f} {kept / 1e6:10.1f} MB ({kept / size:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
