"""The fixed scenario of the latency lab on the same data as a TTree and as an RNTuple: 30 % of the
branches by volume (local_read.py's choice, by flat name), all entries, read from xrootd and nginx
on 127.0.0.1 behind toxiproxy at each round-trip time; a fresh open per run, so opening is timed.
cherenkov on both; uproot on the RNTuple where it finishes within `--budget` seconds (it reads one
page per request). Prints seconds, requests and round trips, and what the distance cost in
round-trip times.

    python bench/rntuple_remote.py                  # 40 000 entries, 0 and 137 ms, 3 runs each
    python bench/rntuple_remote.py --rtt 0,50,137 --repeat 5 --uproot
"""

from __future__ import annotations

import argparse
import shutil
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median

import cherenkov
from cherenkov_lab import Lab
from local_read import counters_of, make_rntuple, selections
from make_nanolike import TREE, default_output, ensure, import_root


def read_cherenkov(url: str, names: list[str]) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    f = cherenkov.open(url)
    f[TREE].arrays(names, library="np")
    seconds = time.perf_counter() - t0
    counters = f.source_counters()
    return seconds, counters.requests, counters.round_trips


def read_uproot(url: str, names: list[str], budget: float) -> str:
    """Seconds, "> budget" when it did not finish in time (left running in a daemon thread), or
    why it failed."""
    import uproot

    done, failed = threading.Event(), []

    def work():
        try:
            with uproot.open(url) as f:
                f[TREE].arrays(names, library="ak")
        except Exception as e:  # a missing handler (aiohttp, fsspec-xrootd) or a server error
            failed.append(f"{type(e).__name__}: {e}")
        done.set()

    t0 = time.perf_counter()
    threading.Thread(target=work, daemon=True).start()
    if not done.wait(budget):
        return f"> {budget:.0f} s"
    return f"failed: {failed[0][:120]}" if failed else f"{time.perf_counter() - t0:.3f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=40_000)
    parser.add_argument("--rtt", default="0,137", help="round-trip times in ms (default 0,137)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--uproot", action="store_true", help="also uproot on the RNTuple (slow from far away)")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds uproot may take per run")
    args = parser.parse_args(argv)
    ROOT = import_root()
    if ROOT is None:
        print("the RNTuple is made by ROOT's RNTupleImporter: run scripts/setup-bench.sh", file=sys.stderr)
        return 1
    tree_path = ensure(default_output(args.entries), args.entries)
    ntuple_path = make_rntuple(tree_path, ROOT)
    fixed = selections(cherenkov.open(tree_path)[TREE], counters_of(tree_path, TREE))["30% by volume"]
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-rntuple-remote-"))
    folder.chmod(0o755)  # xrootd runs as nobody
    try:
        for path in (tree_path, ntuple_path):
            shutil.copyfile(path, folder / path.name)
            (folder / path.name).chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
        local = {
            p.name: median(read_cherenkov(str(folder / p.name), fixed)[0] for _ in range(args.repeat)) for p in (tree_path, ntuple_path)
        }
        print(
            f"fixed set: {len(fixed)} branches of {args.entries} entries; local: " + ", ".join(f"{n} {s:.3f} s" for n, s in local.items())
        )
        with Lab(folder) as lab:
            for rtt in [float(r) for r in args.rtt.split(",")]:
                lab.set_rtt(rtt)
                for name in (tree_path.name, ntuple_path.name):
                    for protocol in ("http", "root"):
                        runs = [read_cherenkov(lab.url(protocol, name), fixed) for _ in range(args.repeat)]
                        seconds = median(r[0] for r in runs)
                        extra = (seconds - local[name]) / (rtt / 1000) if rtt else 0.0
                        print(
                            f"{rtt:5.0f} ms {protocol:4} {name:32} cherenkov {seconds:6.3f} s, {runs[0][1]} requests, "
                            f"{runs[0][2]} round trips; distance cost {extra:.1f} round-trip times"
                        )
                        if args.uproot and name == ntuple_path.name:
                            print(f"{'':13} uproot on the RNTuple: {read_uproot(lab.url(protocol, name), fixed, args.budget)}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
