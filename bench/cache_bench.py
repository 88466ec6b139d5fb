"""The disk cache in the latency lab: the same read locally, remotely without the cache, remotely
filling a fresh cache (first pass) and remotely from the filled cache (second pass), at the lab's
round trip. Prints medians and the two ratios issue 21 asks for: first pass / no cache, and second
pass / local.

    .venv/bin/python bench/cache_bench.py [--rtt 137] [--repeat 3] [--protocol http|root]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import cherenkov
from cherenkov.lab import Lab

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"
FILE = "nanolike-root6.40-zstd-4clusters.root"


def read(url, **options) -> tuple[float, int]:
    t0 = time.perf_counter()
    f = cherenkov.open(url, **options)
    tree = f["Events"]
    names = [b.path for b in tree.branches if b.readable][::3]  # a third of the branches
    for _ in tree.iterate(names, step_size=1, library="np", progress=False):
        pass
    return time.perf_counter() - t0, f.source_counters().requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtt", type=float, default=137)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--protocol", choices=["http", "root"], default="http")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"local": [], "no cache": [], "first pass": [], "second pass": []}
    requests: dict[str, int] = {}
    with Lab(SHARED) as lab:
        url = lab.url(args.protocol, FILE)
        lab.set_rtt(args.rtt)
        for _ in range(args.repeat):
            cache = Path(tempfile.mkdtemp(prefix="cherenkov-cache-bench-"))
            try:
                for name, target, options in [
                    ("local", SHARED / FILE, {}),
                    ("no cache", url, {}),
                    ("first pass", url, {"cache": cache}),
                    ("second pass", url, {"cache": cache}),
                ]:
                    seconds, requests[name] = read(target, **options)
                    times[name].append(seconds)
            finally:
                shutil.rmtree(cache)
    median = {k: statistics.median(v) for k, v in times.items()}
    print(f"{FILE}, a third of the branches, {args.protocol}:// at {args.rtt:.0f} ms, median of {args.repeat}")
    for name, seconds in median.items():
        print(f"  {name:<12} {seconds:7.3f} s  {requests[name]:4d} requests")
    print(f"first pass / no cache: {median['first pass'] / median['no cache']:.2f}")
    print(f"second pass / local:   {median['second pass'] / median['local']:.2f}")
    floor = median["local"] + 2 * args.rtt / 1000  # TCP connect and the opening request
    print(f"second pass / (local + the opening's 2 round trips): {median['second pass'] / floor:.2f}")


if __name__ == "__main__":
    main()
