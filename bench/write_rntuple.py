"""Writing the lab's NanoAOD-like data as an RNTuple (ZSTD 5), time of writing only (arrays already
in memory): cherenkov against the compression floor (the zstd library alone compressing the same
uncompressed pages, split as RNTuple pages are, 1 MiB each, on both cores), uproot 5.7's RNTuple
writer (the same arrays, one `extend` per 5000 entries; at ZSTD(5), which uproot hands zstd as
level 5, and at ZSTD(10), the zstd level of ROOT's 505) and ROOT's RDataFrame Snapshot to an
RNTuple (implicit multithreading on both cores; it reads the TTree too). The chunks are sliced
before the clocks start (awkward's slicing of 389 columns took 0.1 to 0.17 s of CPU, not writing).
Medians of interleaved runs; ratios in one run. Then the written RNTuple is read back and checked
against the arrays.

    python bench/write_rntuple.py                    # bench/data/nanolike-40000.root, 3 runs
    python bench/write_rntuple.py --repeat 5 --selection all
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median

import awkward as ak
import cherenkov
import numpy as np
import uproot
import zstandard
from local_read import counters_of, selections
from make_nanolike import TREE, default_output, ensure, import_root

LEVEL = 5  # ZSTD 5: ROOT's 505, as cherenkov.ZSTD(5) and uproot.ZSTD(5) spell it
ZSTD_LEVEL = 2 * LEVEL  # what zstd itself gets from ROOT's 505 (ROOT doubles the level; uproot does not)
PAGE = 1 << 20  # ROOT's MaxUnzippedPageSize
CHUNK = 5000  # entries per extend call


def split_bytes(buffer: np.ndarray) -> bytes:
    """A column's values as an RNTuple page holds them: split (all first bytes, then all second
    bytes, ...)."""
    raw = np.ascontiguousarray(buffer).view(np.uint8)
    width = buffer.dtype.itemsize
    return (raw if width == 1 else raw.reshape(-1, width).T.ravel()).tobytes()


def pages(data: dict) -> list[bytes]:
    """The uncompressed pages of an RNTuple of ``data``: each column's values split, lists' sizes
    as 64-bit indices, cut in pages of 1 MiB."""
    out = []

    def column(values: np.ndarray) -> None:
        raw = split_bytes(values)
        out.extend(raw[i : i + PAGE] for i in range(0, len(raw), PAGE))

    for array in data.values():
        layout = ak.to_layout(array)
        while True:
            if isinstance(layout, ak.contents.ListOffsetArray):
                offsets = np.asarray(layout.offsets)
                column(offsets[1:] - offsets[0])
                layout = layout.content[offsets[0] : offsets[-1]]
            elif isinstance(layout, ak.contents.RegularArray):
                layout = layout.content
            else:
                column(np.asarray(layout.data).reshape(-1))
                break
    return out


def cpu_seconds() -> float:
    """CPU time of the process, every thread (what a load on the machine spares, unlike wall time)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def floor(page_bytes: list[bytes]) -> tuple[float, float]:
    """The zstd library alone compressing the pages on both cores (it releases the GIL)."""
    local = __import__("threading").local()

    def compress(page: bytes) -> int:
        if not hasattr(local, "c"):
            local.c = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        return len(local.c.compress(page))

    c0, t0 = cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        sum(pool.map(compress, page_bytes, chunksize=16))
    return time.perf_counter() - t0, cpu_seconds() - c0


def chunks(data: dict, n: int) -> list[dict]:
    """The arrays in chunks of CHUNK entries, sliced once, before any writer is timed."""
    return [{k: v[start : start + CHUNK] for k, v in data.items()} for start in range(0, n, CHUNK)]


def write_cherenkov(parts: list[dict], path: Path) -> tuple[float, float]:
    c0, t0 = cpu_seconds(), time.perf_counter()
    with cherenkov.recreate(path, compression=505) as f:
        ntuple = f.mktree(TREE, {k: v.type.content for k, v in parts[0].items()}, format="rntuple")
        for chunk in parts:
            ntuple.extend(chunk)
    return time.perf_counter() - t0, cpu_seconds() - c0


def write_uproot(parts: list[dict], path: Path, level: int) -> float:
    t0 = time.perf_counter()
    with uproot.recreate(path, compression=uproot.ZSTD(level)) as f:
        ntuple = None
        for chunk in parts:
            if ntuple is None:
                f[TREE] = ak.Array(chunk)
                ntuple = f[TREE]
            else:
                ntuple.extend(ak.Array(chunk))
    return time.perf_counter() - t0


def write_root(ROOT, source: Path, names: list[str], path: Path) -> float:
    options = ROOT.RDF.RSnapshotOptions()
    options.fOutputFormat = ROOT.RDF.ESnapshotOutputFormat.kRNTuple
    options.fCompressionAlgorithm = ROOT.RCompressionSetting.EAlgorithm.kZSTD
    options.fCompressionLevel = LEVEL
    t0 = time.perf_counter()
    frame = ROOT.RDataFrame(TREE, str(source))
    frame.Snapshot(TREE, str(path), names, options)
    return time.perf_counter() - t0


def check(path: Path, data: dict) -> None:
    back = cherenkov.open(path)[TREE].arrays(list(data))
    for name, array in data.items():
        if not ak.array_equal(back[name], array, equal_nan=True):
            raise SystemExit(f"{path}: field {name} does not read back as written")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--selection", choices=["fixed", "all"], default="fixed")
    parser.add_argument("--no-root", action="store_true")
    parser.add_argument("--no-uproot", action="store_true")
    args = parser.parse_args(argv)
    source = ensure(default_output(args.entries), args.entries)
    tree = cherenkov.open(source)[TREE]
    chosen = selections(tree, counters_of(source, TREE))
    names = chosen["30% by volume" if args.selection == "fixed" else "all"]
    arrays = tree.arrays(names)
    data = {n: arrays[n] for n in names}
    n = len(arrays)
    page_bytes = pages(data)
    uncompressed = sum(len(p) for p in page_bytes)
    print(f"{source.name}: {len(names)} branches, {n} entries, {uncompressed / 1e6:.1f} MB in {len(page_bytes)} pages")
    ROOT = None if args.no_root else import_root()
    parts = chunks(data, n)
    # uproot hands zstd its level as it is: ZSTD(10) is the zstd level of ROOT's (and cherenkov's) 505.
    uproot_levels = {f"uproot ZSTD({level})": level for level in (LEVEL, ZSTD_LEVEL)}
    times = {"floor": [], "cherenkov": [], **{k: [] for k in uproot_levels}, "ROOT": []}
    sizes, cpu = {}, {"floor": [], "cherenkov": []}
    with tempfile.TemporaryDirectory(prefix="cherenkov-write-rntuple-") as tmp:
        out = Path(tmp)
        for _ in range(args.repeat):
            for tool, (wall, used) in [("floor", floor(page_bytes)), ("cherenkov", write_cherenkov(parts, out / "cherenkov.root"))]:
                times[tool].append(wall)
                cpu[tool].append(used)
            sizes["cherenkov"] = (out / "cherenkov.root").stat().st_size
            for tool, level in uproot_levels.items() if not args.no_uproot else ():
                times[tool].append(write_uproot(parts, out / "uproot.root", level))
                sizes[tool] = (out / "uproot.root").stat().st_size
            if ROOT is not None:
                ROOT.EnableImplicitMT(os.cpu_count() or 2)
                times["ROOT"].append(write_root(ROOT, source, names, out / "root.root"))
                sizes["ROOT"] = (out / "root.root").stat().st_size
        check(out / "cherenkov.root", data)
    best = median(times["cherenkov"])
    print(f"{'writer':<24}{'seconds':>10}{'vs cherenkov':>14}{'MB':>8}")
    for tool, runs in times.items():
        if not runs:
            continue
        t = median(runs)
        size = f"{sizes[tool] / 1e6:8.1f}" if tool in sizes else " " * 8
        ratio = f"{best / t:.2f}x floor" if tool == "floor" else f"{t / best:.2f}x"
        print(f"{tool:<24}{t:10.3f}{ratio:>14}{size}")
    spent = {tool: median(runs) for tool, runs in cpu.items()}
    print(
        f"CPU time: zstd alone {spent['floor']:.3f} s, cherenkov {spent['cherenkov']:.3f} s, "
        f"{spent['cherenkov'] / spent['floor']:.2f}x of it (a measure the load on the machine spares); "
        f"load {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
