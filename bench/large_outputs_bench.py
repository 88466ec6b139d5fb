"""Large histogram outputs: 2 000 histograms per chunk over 64 chunks, merged by `cherenkov.process`
along its fixed merge tree (workers fold a packet's chunks, the driver merges blocks with their
siblings as they arrive), against the single-process way (every chunk's output held, then summed).

The driver's peak memory (tracemalloc: Python objects and numpy buffers) is measured for both, with
what the merge tree holds: the blocks waiting for a sibling (about log2(chunks), plus those of
packets in flight), not every chunk's output. Results are compared bin for bin.

    python bench/large_outputs_bench.py                   # 16 copies of the 4-cluster test file: 64 chunks
    python bench/large_outputs_bench.py --histograms 500 --workers 2
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import awkward as ak
import hist
import numpy as np

NANO = "nanolike-root6.40-zstd-4clusters.root"  # 2000 entries in 4 clusters of 500
STEP = 500


class ManyHistograms:
    def __init__(self, count: int):
        self.count = count

    def __call__(self, chunk):
        pt = ak.to_numpy(ak.flatten(chunk["Muon_pt"])).astype(np.float64)
        out = {}
        for i in range(self.count):
            h = hist.Hist(hist.axis.Regular(100, 0, 200, name="pt"), storage=hist.storage.Double())
            out[f"h{i:05d}"] = h.fill(pt * (1 + i / self.count))
        return out


def peak_of(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, seconds, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histograms", type=int, default=2000)
    parser.add_argument("--files", type=int, default=16, help="copies of the 4-chunk test file")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)

    import cherenkov
    from cherenkov.processing import LocalProcesses
    from cherenkov.processing.merge import merge

    shared = Path(os.environ.get("CHERENKOV_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-large-outputs-"))
    try:
        files = []
        for i in range(args.files):
            shutil.copyfile(shared / "testdata" / NANO, folder / f"nano-{i}.root")
            files.append(str(folder / f"nano-{i}.root"))
        chunks = 4 * args.files
        processor = ManyHistograms(args.histograms)
        first_chunk = next(iter(cherenkov.chunks(files[0], step_size=STEP)))
        _, _, output_bytes = peak_of(lambda: processor(first_chunk))

        def tree_merge():
            return cherenkov.process({"d": files}, processor, executor=LocalProcesses(args.workers), step_size=STEP, progress=False)["d"]

        sum_seconds = []

        def single_process():
            held = [processor(chunk) for f in files for chunk in cherenkov.chunks(f, step_size=STEP)]
            start = time.perf_counter()
            total = None
            for out in held:
                total = merge(total, out)
            sum_seconds.append(time.perf_counter() - start)
            return total

        tree, tree_seconds, tree_peak = peak_of(tree_merge)
        single, single_seconds, single_peak = peak_of(single_process)
        if any((tree[k].values() != single[k].values()).any() for k in single):
            print("VALUES DIFFER between the two merges", file=sys.stderr)
            return 1
        print(f"{args.histograms} histograms per chunk, {chunks} chunks, one chunk's output {output_bytes / 1e6:.1f} MB")
        print(f"| {'merge':44} | seconds | driver peak MB |")
        print(f"|{'-' * 46}|---------|---------------|")
        print(
            f"| {'cherenkov.process, ' + str(args.workers) + ' workers (merge tree)':44} | {tree_seconds:7.2f} | {tree_peak / 1e6:13.1f} |"
        )
        print(f"| {'one process: all chunks held, then summed':44} | {single_seconds:7.2f} | {single_peak / 1e6:13.1f} |")
        print(f"(of which summing the held outputs: {sum_seconds[0]:.2f} s; the merge tree's additions run as outputs arrive)")
        print(
            f"driver peak in chunk outputs: merge tree {tree_peak / output_bytes:.1f} (blocks waiting for a sibling, about "
            f"log2({chunks}) = {math.log2(chunks):.0f}, plus those of packets in flight, their pickles and a merge in progress), "
            f"all held {single_peak / output_bytes:.1f}"
        )
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
