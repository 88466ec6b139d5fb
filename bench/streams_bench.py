"""Adaptive streams on narrow and thin links (issue 20): the lab's fixed set (30 % of the branches by
volume, every entry, prefetched) read from xrootd and nginx through toxiproxy at 137 ms, with the
stream count as it was (fixed: 2 XRootD connections, 8 HTTP requests in flight), adaptive (the
default) and fixed at 8; medians of `--repeat` runs, interleaved, one at a time.

    python bench/streams_bench.py --link narrow --rate 10   # each connection capped at 10 MB/s
    python bench/streams_bench.py --link thin --rate 20     # one 20 MB/s link for all connections

Prints a table (seconds from open to the last step, the streams used, the measured steps) and
writes bench/results/streams-<link>.json. Values are checked against a local read.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from statistics import median

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import cherenkov  # noqa: E402
import numpy as np  # noqa: E402
from cherenkov_lab import Lab  # noqa: E402

CONFIGS = {
    "fixed (2 / 8)": {"adaptive_streams": False},
    "adaptive": {},
    "8 fixed": {"adaptive_streams": False, "connections": 8},
}


def read_fixed(url: str, branches: list[str], **options) -> tuple[float, dict, list]:
    """Seconds from open to the last step, a check of the values, the file's stats."""
    t0 = time.perf_counter()
    f = cherenkov.open(url, **options)
    tree = f["Events"]
    sums = dict.fromkeys(branches, 0.0)
    for arrays in tree.iterate(branches, step_size=1, library="np", progress=False):
        for b in branches:
            values = arrays[b]
            flat = values.content if hasattr(values, "content") else values
            if flat.dtype.kind in "biuf":
                sums[b] += float(np.sum(flat, dtype=np.float64))
    seconds = time.perf_counter() - t0
    stats = f.stats()
    del f, tree
    gc.collect()
    return seconds, sums, stats


def main(argv: list[str] | None = None) -> int:
    from make_nanolike import default_output, ensure

    from lab import make_plan

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--link", choices=["narrow", "thin"], default="narrow")
    parser.add_argument("--rate", type=float, help="MB/s (default 10 narrow, 20 thin)")
    parser.add_argument("--rtt", type=float, default=137)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--entries", type=int, default=40_000, help="entries of the lab's file (default 40000)")
    parser.add_argument("--protocols", default="root,http")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    args = parser.parse_args(argv)
    rate = args.rate or (10.0 if args.link == "narrow" else 20.0)
    path = ensure(default_output(args.entries), args.entries, seed=1)
    plan = make_plan([path])
    _, reference, _ = read_fixed(str(path), plan.fixed)
    protocols = args.protocols.split(",")
    times: dict[tuple, list] = {}
    rows = []
    with Lab(path.parent, link=args.link, rate=rate) as lab:
        lab.set_rtt(args.rtt)
        for rep in range(args.repeat):
            for protocol in protocols:
                for name, options in CONFIGS.items():
                    seconds, sums, stats = read_fixed(lab.url(protocol, path.name), plan.fixed, **options)
                    bad = [b for b in plan.fixed if not np.isclose(sums[b], reference[b], rtol=1e-9, atol=1e-6)]
                    steps = [(s.streams, round(s.throughput / 1e6, 1), s.decision) for s in stats.stream_steps]
                    row = {
                        "protocol": protocol,
                        "config": name,
                        "repetition": rep,
                        "seconds": seconds,
                        "bytes": stats.bytes_read,
                        "streams": stats.streams,
                        "streams_peak": stats.streams_peak,
                        "steps": steps,
                        "values_equal_local": not bad,
                    }
                    rows.append(row)
                    times.setdefault((protocol, name), []).append(seconds)
                    print(
                        f"{protocol:5} {name:14} {seconds:6.2f} s  {stats.bytes_read / 1e6:6.1f} MB  "
                        f"streams {stats.streams} (peak {stats.streams_peak})  {'ok' if not bad else 'VALUES DIFFER'}  {steps[:6]}",
                        flush=True,
                    )
    print(f"\n{args.link} link, {rate:g} MB/s, {args.rtt:g} ms, fixed set of {path.name}: medians of {args.repeat}")
    for protocol in protocols:
        eight = median(times[(protocol, "8 fixed")])
        for name in CONFIGS:
            m = median(times[(protocol, name)])
            print(f"  {protocol:5} {name:14} {m:6.2f} s   {eight / m:5.0%} of 8 connections' throughput")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"streams-{args.link}.json"
    summary = {f"{p} {n}": median(times[(p, n)]) for p in protocols for n in CONFIGS}
    out.write_text(json.dumps({"link": args.link, "rate": rate, "rtt": args.rtt, "medians": summary, "runs": rows}, indent=1))
    print(f"wrote {out}")
    return 0 if all(r["values_equal_local"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
