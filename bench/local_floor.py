"""Local reads against their decompression floor (issue 38): the lab's fixed 30 % selection of the
NanoAOD-like file read from a warm page cache by cherenkov (numpy and awkward) and by uproot
(`library="ak"`), as a TTree and (when it is there) as the RNTuple ROOT's importer made of it,
next to the floor: the zstd library alone decompressing the same compressed blocks on one core,
divided by the cores (`bench/floor.py`). Ratios, medians of interleaved runs, one process. On a
loaded machine wall times stretch and CPU times do not: `cpu/library` (the process' CPU time over
the library's on the same blocks) is then the measure of work done beyond decompression. The
library is also timed on every core at once (the blocks shared out among threads): on a virtual
machine whose two vCPUs share a physical core it does not scale linearly, and that time is the
floor the hardware allows.

    python bench/local_floor.py                    # the 40 000-entry lab file, 5 repetitions
    python bench/local_floor.py --file F.root --repeat 7 --no-uproot
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from statistics import median

import cherenkov
from floor import floor
from local_read import TREE, Cherenkov, Uproot, counters_of, selections, timed, warm_page_cache
from make_nanolike import default_output, ensure


def read_split(table, names, repeat: int) -> dict:
    """Where cherenkov's time goes (its own stats, medians): fetching, decompressing and
    assembling (wall), decompression summed over threads (CPU)."""
    runs = [table.read(names)[1] for _ in range(repeat)]
    return {
        "fetch": median(s.fetch_seconds for s in runs),
        "decode": median(s.decode_seconds for s in runs),
        "decompress_cpu": median(s.decompress_cpu_seconds for s in runs),
        "uncompressed": runs[0].uncompressed_bytes,
    }


def measure(path: Path, names: list[str], repeat: int, uproot: bool) -> None:
    table = cherenkov.open(path)[TREE]
    warm_page_cache(path)
    f = floor(str(path), table, names, repeat)
    tools = [Cherenkov("np"), Cherenkov("ak")] + ([Uproot()] if uproot else [])
    for tool in tools:
        timed(tool, path, names)  # once untimed: imports, first-touch allocations
    times = {tool.name: [] for tool in tools}
    for _ in range(repeat):
        for tool in tools:
            times[tool.name].append(timed(tool, path, names))
    split = read_split(table, names, repeat)
    kind = "RNTuple" if hasattr(table, "fields") else "TTree"
    print(
        f"\n{kind} {path.name}: {len(names)} items, {f['blocks']} blocks, {f['compressed_bytes'] / 1e6:.1f} MB -> "
        f"{f['uncompressed_bytes'] / 1e6:.1f} MB; floor {f['floor_seconds'] * 1e3:.0f} ms "
        f"({f['library']}, {f['rate_per_core'] / 1e6:.0f} MB/s per core x {f['cores']} cores)"
    )
    ours = median(w for w, _ in times[tools[0].name])
    library_cpu = f["one_core_cpu_seconds"]
    on_all = library_cpu / f["cores"]
    every = f["every_core_seconds"]
    print(
        f"  the library's CPU work on these blocks: {library_cpu * 1e3:.0f} ms (floor on {f['cores']} cores: {on_all * 1e3:.0f} ms); "
        f"the library itself on {f['cores']} cores at once: {every * 1e3:.0f} ms, {f['one_core_seconds'] / every:.2f}x its one core "
        f"(cherenkov np {ours / every:.2f}x that)"
    )
    print(f"  {'tool':34} {'wall s':>7} {'cpu s':>7} {'wall/floor':>11} {'cpu/library':>12} {'/ cherenkov np':>15}")
    for name, runs in times.items():
        wall, cpu = median(w for w, _ in runs), median(c for _, c in runs)
        print(f"  {name:34} {wall:7.3f} {cpu:7.3f} {wall / f['floor_seconds']:10.2f}x {cpu / library_cpu:11.2f}x {wall / ours:14.2f}x")
    print(
        f"  cherenkov's split: fetch {split['fetch'] * 1e3:.0f} ms, decompress+assemble {split['decode'] * 1e3:.0f} ms wall, "
        f"decompression {split['decompress_cpu'] * 1e3:.0f} ms CPU over threads "
        f"(the library alone: {f['one_core_seconds'] * 1e3:.0f} ms on one core)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, help="a NanoAOD-like file (default: the lab's 40 000-entry one)")
    parser.add_argument("--rntuple", type=Path, help="its RNTuple (default: NAME-rntuple.root beside it, when there)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-uproot", action="store_true", help="cherenkov and the floor only")
    args = parser.parse_args(argv)
    path = args.file or ensure(default_output(40_000), 40_000)
    names = selections(cherenkov.open(path)[TREE], counters_of(path, TREE))["30% by volume"]
    t0 = time.perf_counter()
    measure(path, names, args.repeat, not args.no_uproot)
    ntuple = args.rntuple or path.with_name(path.stem + "-rntuple.root")
    if ntuple.exists():
        measure(ntuple, names, args.repeat, not args.no_uproot)  # the importer keeps the branches' names
    print(f"\n({time.perf_counter() - t0:.0f} s in all; page cache warm, so CPU work, not the disk)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
