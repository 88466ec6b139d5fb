"""Peak memory of writing a large file: a stream of chunks (NanoAOD-like columns: numbers, counted
jagged leaves, a std::vector, strings; random, so they compress little) written by cherenkov until
the file passes ``--gigabytes``, peak resident memory sampled every 10 ms against what the writer
may hold (``memory_budget``: the cluster filling and the one compressing) plus the chunk being
written and the process before writing. The file is removed afterwards.

    python bench/write_memory.py [--gigabytes 5] [--budget-mb 256] [--chunk 200000] [--dir /tmp]
                                 [--format ttree|rntuple]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np


def resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Peak:
    """The largest resident size seen, sampled every 10 ms."""

    def __init__(self):
        self.peak, self.stop = resident(), threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(0.01):
            self.peak = max(self.peak, resident())

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def chunk(rng: np.random.Generator, n: int) -> dict:
    counts = rng.integers(0, 6, n)
    total = int(counts.sum())
    out = {f"x{i}": rng.random(n) for i in range(20)}
    out.update({f"i{i}": rng.integers(0, 1 << 30, n, dtype=np.int32) for i in range(10)})
    out["nJet"] = counts.astype(np.uint32)
    out.update({f"Jet_v{i}": ak.unflatten(rng.random(total).astype(np.float32), counts) for i in range(10)})
    out["tracks"] = ak.unflatten(rng.random(total), counts[::-1])
    out["label"] = ak.Array(np.char.mod("event-%08d", rng.integers(0, 10**8, n)).tolist())
    return out


def nbytes(columns: dict) -> int:
    return sum(v.nbytes if isinstance(v, np.ndarray) else ak.to_layout(v).nbytes for v in columns.values())


def check(path: Path, format: str) -> None:
    """The large file read by uproot (and ROOT where it imports): its last entries, past 4 GB."""
    import subprocess

    import uproot

    tree = uproot.open(path)["Events"]
    if format == "rntuple":
        last = tree.arrays(["Jet_v0"], entry_start=tree.num_entries - 3)["Jet_v0"]
        print(f"uproot reads its last entries: {last.tolist()}")
        return
    last = tree["Jet_v0"].array(entry_start=tree.num_entries - 3)
    print(f"uproot reads its last entries: {last.tolist()}")
    script = (
        "import sys, ROOT; f = ROOT.TFile.Open(sys.argv[1]); t = f.Get('Events'); "
        "t.GetEntry(t.GetEntries() - 1); print('ROOT reads entry', t.GetEntries() - 1, 'x0 =', t.x0, 'label =', str(t.label))"
    )
    run = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True)
    print(run.stdout.strip() or f"ROOT: {run.stderr.strip().splitlines()[-1:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=5.0)
    parser.add_argument("--budget-mb", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=200_000, help="entries per extend")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--format", choices=["ttree", "rntuple"], default="ttree")
    args = parser.parse_args(argv)
    budget = args.budget_mb << 20
    rng = np.random.default_rng(1)
    first = chunk(rng, args.chunk)
    chunk_bytes = nbytes(first)
    path = Path(args.dir) / "cherenkov-write-memory.root"
    before = resident()
    t0 = time.perf_counter()
    entries = 0
    try:
        with Peak() as peak, cherenkov.recreate(path) as f:
            tree = f.mktree(
                "Events",
                {n: ak.type(v).content if isinstance(v, ak.Array) else v.dtype for n, v in first.items()},
                memory_budget=budget,
                format=args.format,
            )
            data = first
            while True:
                tree.extend(data)
                entries += args.chunk
                # The file is under a temporary name until closed: its size is estimated.
                if entries * (chunk_bytes / args.chunk) * 0.8 > args.gigabytes * 1e9:
                    break
                data = chunk(rng, args.chunk)
        size = path.stat().st_size
        seconds = time.perf_counter() - t0
        threshold = budget // 3
        clusters = len(cherenkov.open(path)["Events"].cluster_boundaries) - 1
        mib = 2**20
        print(f"wrote {size / 1e9:.2f} GB ({entries} entries, {clusters} clusters) in {seconds:.0f} s")
        print(f"resident before writing {before / mib:.0f} MiB; a chunk of input {chunk_bytes / mib:.0f} MiB (two alive at a time)")
        print(f"memory_budget {budget / 2**20:.0f} MiB (clusters of at most {threshold / 2**20:.0f} MiB uncompressed)")
        print(f"peak resident {peak.peak / 2**20:.0f} MiB = before + {(peak.peak - before) / 2**20:.0f} MiB")
        bound = before + budget + 2 * threshold + 2 * chunk_bytes
        verdict = "within" if peak.peak <= bound else "PAST IT"
        check(path, args.format)
        print(f"bound: before + budget + two clusters + two input chunks = {bound / 2**20:.0f} MiB: {verdict}")
    finally:
        path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
