"""Multi-source reads through an XRootD redirector: the ratios of issue #7, measured on a federation
(cmsd + xrootd manager and two data servers) on 127.0.0.1, each data server behind its own toxiproxy
proxy, which the redirector names (see cherenkov_lab.XrootdFederation).

    python bench/multi_source.py                 # 5 runs, bench/data/nanolike-40000.root
    python bench/multi_source.py --runs 3 --publish   # also docs/bench/multi_source.{md,json}

Three setups, each comparing a read with both replicas (opened through the redirector) to a read
from one replica alone (opened directly, discovery off):
- far: one replica ten times farther than the other (RTT 10 ms and 100 ms). Time with both over
  time with the near one alone: 1.0 means the far one costs nothing (issue's target: at most 1.2).
- narrow: one replica with a tenth of the other's bandwidth (toxiproxy caps, default 20 and 2
  MB/s). Time with both over time with the wide one alone: at most 1.0, 0.91 if the pair adds up.
- capped: two equal replicas each capped (default 20 MB/s). Throughput of the pair over that of
  one: 2.0 means the pair adds up.

Each run opens the file anew and reads every readable branch twice: the first read is where the
replica set learns each server's latency and throughput, the second is a job's steady state; the
tables give medians of both. toxiproxy caps each connection, not the server, so the capped setups
use one connection per replica (fixed: adaptive streams would open more and carry more than the
cap the setup gives the replica). `make bench` runs this as part of the lab (bench/lab.py); both write
bench/results/multi_source.{md,json}, and docs/bench/ when publishing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import median

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
PUBLISHED = BENCH.parent / "docs" / "bench"
sys.path.insert(0, str(BENCH))

import cherenkov  # noqa: E402
from cherenkov_lab import XrootdFederation  # noqa: E402

# What each setup's ratio means, and its target.
SETUPS = {
    "far": "time near+far / near alone: one replica at {near:g} ms RTT, the other at {far:g} ms (target ≤ 1.2)",
    "narrow": "time wide+narrow / wide alone: one replica capped at {rate:g} MB/s, the other at a tenth of it "
    "(target ≤ 1.0; 0.91 if they add up)",
    "capped": "throughput pair / one: both replicas capped at {rate:g} MB/s (target close to 2)",
}


def two_reads(f, names) -> tuple[float, float]:
    """Seconds of a first and a second read of `names` from `f`."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        f["Events"].arrays(names, library="np")
        times.append(time.perf_counter() - start)
    return times[0], times[1]


def open_replicas(url: str, count: int = 2, **options):
    """Open through the redirector and wait (5 s at most) until every replica has joined: the
    redirector may name the second data server only when asked again, a second after the open."""
    f = cherenkov.open(url, **options)
    deadline = time.monotonic() + 5
    while len(f.replicas() or []) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return f


def measure(runs: int, url_one: str, url_both: str, names, connections: int | None, log) -> list[dict]:
    """Medians over `runs` runs of the first and second read, one replica alone and both, and the
    share of the bytes of the second read each replica served."""
    options = {"connections": connections, "adaptive_streams": False} if connections else {}
    one, both, shares = [], [], []
    for run in range(runs):
        one.append(two_reads(cherenkov.open(url_one, discover=False, **options), names))
        f = open_replicas(url_both, **options)
        both.append(two_reads(f, names))
        served = {r.name: r.bytes for r in f.replicas() or []}
        shares.append(served.get(url_one, 0) / max(1, sum(served.values())))
        log(f"  run {run + 1}/{runs}: one {one[-1][0]:.2f} / {one[-1][1]:.2f} s, both {both[-1][0]:.2f} / {both[-1][1]:.2f} s")
    return [
        {
            "read": label,
            "one_seconds": median(t[k] for t in one),
            "both_seconds": median(t[k] for t in both),
            "share_of_the_one": median(shares),
        }
        for k, label in enumerate(("first", "second"))
    ]


def run_setups(data: Path, file: str, runs: int = 5, rate: float = 20, near: float = 10, far: float = 100, log=print) -> dict:
    """Start a proxied federation serving `data` and measure the three setups on `file`."""
    names = [b.path for b in cherenkov.open(data / file)["Events"].branches if b.readable]
    setup = {
        "file": file,
        "size_bytes": (data / file).stat().st_size,
        "branches": len(names),
        "runs": runs,
        "near_rtt_ms": near,
        "far_rtt_ms": far,
        "cap_mb_per_s": rate,
    }
    results = {}
    with XrootdFederation(data, servers=2, proxied=True) as fed:
        toxiproxy = fed.toxiproxy
        first, second = fed.servers
        url = fed.url(file)

        def reset():
            for server in fed.servers:
                toxiproxy.clear(server.proxy)

        def cap(server, mb_per_s):
            toxiproxy.toxic(server.proxy, "cap", "bandwidth", rate=int(mb_per_s * 1000))  # KB/s

        log(f"multi-source: far ({near:g} and {far:g} ms) ...")
        toxiproxy.set_rtt(first.proxy, near)
        toxiproxy.set_rtt(second.proxy, far)
        results["far"] = measure(runs, first.url(file), url, names, None, log)
        log(f"multi-source: narrow ({rate:g} and {rate / 10:g} MB/s) ...")
        reset()
        cap(first, rate)
        cap(second, rate / 10)
        results["narrow"] = measure(runs, first.url(file), url, names, 1, log)
        log(f"multi-source: capped (both {rate:g} MB/s) ...")
        reset()
        cap(first, rate)
        cap(second, rate)
        results["capped"] = measure(runs, first.url(file), url, names, 1, log)
    for name, rows in results.items():
        for row in rows:
            ratio = row["both_seconds"] / row["one_seconds"]
            row["ratio"] = 1 / ratio if name == "capped" else ratio
    return {"setup": setup, "results": results}


def markdown(table: dict) -> str:
    s = table["setup"]
    lines = [
        "### Multi-source reads through an XRootD redirector",
        "",
        f"`{s['file']}` ({s['size_bytes'] / 1e6:.0f} MB, all {s['branches']} branches) opened through a redirector "
        "(`cmsd` + `xrootd` manager) whose two data servers sit each behind its own toxiproxy proxy, against one data "
        f"server opened directly; medians of {s['runs']} runs (`python bench/multi_source.py`). The first read "
        "learns each replica's latency and throughput; the second is a long job's steady state. *share* is the part "
        "of the second read's bytes served by the replica read alone (the near, wide or first one).",
        "",
        "| setup | ratio, 1st read | ratio, 2nd read | one alone (2nd) | both (2nd) | share |",
        "|---|---|---|---|---|---|",
    ]
    params = {"near": s["near_rtt_ms"], "far": s["far_rtt_ms"], "rate": s["cap_mb_per_s"]}
    for name, rows in table["results"].items():
        first, second = rows
        lines.append(
            f"| **{name}**: {SETUPS[name].format(**params)} | **{first['ratio']:.2f}** | **{second['ratio']:.2f}** "
            f"| {second['one_seconds']:.2f} s | {second['both_seconds']:.2f} s | {second['share_of_the_one']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def write(table: dict, out: Path) -> str:
    """Write multi_source.{md,json} to `out`; the markdown."""
    text = markdown(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / "multi_source.md").write_text(text)
    (out / "multi_source.json").write_text(json.dumps(table, indent=1) + "\n")
    return text


def main(argv=None) -> int:
    from make_nanolike import ensure

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rate", type=float, default=20, help="bandwidth cap, MB/s (default 20)")
    parser.add_argument("--near", type=float, default=10, help="RTT of the near replica, ms (default 10)")
    parser.add_argument("--far", type=float, default=100, help="RTT of the far replica, ms (default 100)")
    parser.add_argument("--publish", action="store_true", help="also write docs/bench/multi_source.{md,json}")
    args = parser.parse_args(argv)
    reason = XrootdFederation.missing(proxied=True)
    if reason:
        print(f"SKIPPED: {reason}")
        return 0
    path = ensure()
    table = run_setups(path.parent, path.name, args.runs, args.rate, args.near, args.far)
    for out in [RESULTS] + ([PUBLISHED] if args.publish else []):
        text = write(table, out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
