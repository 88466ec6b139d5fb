"""What a merge buys a remote analysis (issue 35's "effect"): the lab's fixed 30 % selection read
with `cherenkov.iterate` at --rtt from the N small inputs of merge_bench.py, and from their merges
by `cherenkov merge` in copy and in rewrite mode, each served by a real nginx (or xrootd,
`--protocol root`) behind toxiproxy. Per dataset: the wall time (median of the runs), the requests
the reads made (summed over the files' `stats()`) and the requests `cherenkov layout` predicts for
the same selection (its error is judged within 20 %), and how much faster than from the inputs.

    .venv/bin/python bench/merge_effect.py [--files 1000] [--entries 100] [--outputs 2] [--rtt 137]
                                           [--protocol http|root] [--repeat 3] [--inputs-repeat 1] [--json F]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from merge_bench import SELECTION, make_inputs, max_size_for, predicted  # noqa: E402


def read_remote(urls: list[str]) -> tuple[float, int, int]:
    """Seconds, requests and entries of the fixed selection read over `urls` with `iterate`."""
    import cherenkov

    current, requests, entries = None, 0, 0
    t0 = time.perf_counter()
    for _, report in cherenkov.iterate(urls, SELECTION, report=True, library="np", progress=False):
        if report.file is not current:  # the previous file is read: count it, and let it go
            requests += current.stats().requests if current else 0
            current = report.file
        entries += report.tree_entry_stop - report.tree_entry_start
    seconds = time.perf_counter() - t0
    return seconds, requests + (current.stats().requests if current else 0), entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--outputs", type=int, default=2)
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip of the link, ms")
    parser.add_argument("--protocol", choices=("http", "root"), default="http", help="nginx (as the issue measured) or xrootd")
    parser.add_argument("--repeat", type=int, default=3, help="runs per merged dataset")
    parser.add_argument("--inputs-repeat", type=int, default=1, help="runs over the small inputs (the slow ones)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import cherenkov
    from cherenkov_lab.servers import Lab

    inputs = make_inputs(args.files, args.entries)
    max_size = max_size_for([p.stat().st_size for p in inputs], args.outputs)
    out = Path(tempfile.mkdtemp(prefix="cherenkov-merge-effect-"))
    try:
        merged = {}
        out.chmod(0o755)  # the servers run as another user
        for mode in ("copy", "rewrite"):
            (out / mode).mkdir(mode=0o755)
            cherenkov.merge(inputs, out / mode / "merged.root", mode=mode, max_size=max_size, progress=False)
            merged[mode] = sorted((out / mode).glob("merged*.root"))
            for p in merged[mode]:
                p.chmod(0o644)
        print(f"{len(inputs)} inputs of {args.entries} entries; merged into {len(merged['copy'])} outputs per mode")
        datasets = {f"{len(inputs)} inputs": (inputs, args.inputs_repeat)}
        datasets.update({f"{mode} merge": (paths, args.repeat) for mode, paths in merged.items()})
        results = {}
        with Lab(inputs[0].parent) as served_inputs, Lab(out) as served_outputs:
            for lab in (served_inputs, served_outputs):
                lab.set_rtt(args.rtt)
            for name, (paths, repeat) in datasets.items():
                lab, base = (served_inputs, inputs[0].parent) if name.endswith("inputs") else (served_outputs, out)
                urls = [lab.url(args.protocol, str(p.relative_to(base))) for p in paths]
                runs = []
                for _ in range(repeat):
                    runs.append(read_remote(urls))
                    print(f"  {name}: {runs[-1][0]:.2f} s, {runs[-1][1]} requests", flush=True)
                want_requests, want_seconds = predicted(paths, args.rtt)
                results[name] = {
                    "seconds": statistics.median(r[0] for r in runs),
                    "requests": statistics.median(r[1] for r in runs),
                    "entries": runs[0][2],
                    "predicted_requests": want_requests,
                    "predicted_seconds": want_seconds,
                }
        base = results[f"{len(inputs)} inputs"]
        print(f"\nthe fixed selection ({', '.join(SELECTION)}) read with cherenkov.iterate over {args.protocol}:// at {args.rtt:g} ms:")
        print(f"  {'dataset':14} {'wall s':>8} {'faster':>8} {'requests':>9} {'predicted':>10} {'error':>7} {'entries':>8}")
        for name, r in results.items():
            error = (r["predicted_requests"] - r["requests"]) / r["requests"]
            print(
                f"  {name:14} {r['seconds']:8.2f} {base['seconds'] / r['seconds']:7.1f}x {r['requests']:9.0f} "
                f"{r['predicted_requests']:10d} {error:+6.0%} {r['entries']:8d}"
            )
        if len({r["entries"] for r in results.values()}) != 1:
            raise SystemExit("the datasets read different numbers of entries")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
