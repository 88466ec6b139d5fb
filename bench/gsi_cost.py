"""What reading through XrdCl costs: open a file and read every third branch over root:// spoken
natively, and from xrootd servers asking for `gsi` and for `krb5` (read through XrdCl, with
cherenkov's planning on top), all behind the same toxiproxy round-trip delay.

    .venv/bin/python bench/gsi_cost.py [--rtt 137] [--file F]

The grid certificates and proxy, and the Kerberos realm with its KDC (not delayed), are made here
(see `cherenkov_lab.gsi`, `cherenkov_lab.kerberos`; krb5 is left out without a KDC). Each case runs in a
Python process of its own, three times: the first open of a process also learns what the server
asks for (a native connection and login) and has XrdCl connect and authenticate; the later ones
go to XrdCl at once, over the connection it keeps. Prints open and read times, requests and round
trips; the first run and the best of the later ones; and the time and requests of one read of
5000 ranges."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cherenkov_lab import kerberos
from cherenkov_lab.gsi import gsi_client_environment, gsi_server_config, make_grid_pki
from cherenkov_lab.servers import Toxiproxy, XrootdServer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "testdata"

RUNS = """
import json, sys, time
import cherenkov
sys.path.insert(0, sys.argv[2])
from auth_cost import measure
runs = [measure(sys.argv[1]) for _ in range(3)]
# 5000 ranges: 5 vector reads of at most 1024 ranges, all in flight at once (one round trip).
f = cherenkov.open(sys.argv[1])
before = f.source_counters().requests
t = time.perf_counter()
f._core.read_ranges([(i * 1000, i * 1000 + 100) for i in range(5000)])
runs[-1]["5000_ranges_s"] = time.perf_counter() - t
runs[-1]["5000_ranges_requests"] = f.source_counters().requests - before
print(json.dumps(runs))
"""


def runs(url: str, env: dict) -> list[dict]:
    bench = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", RUNS, url, bench], env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{url}: the runs failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtt", type=float, default=137)
    parser.add_argument("--file", default="nanolike-root6.40-zstd-4clusters.root")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cherenkov-gsi-bench-"))
    os.chmod(work, 0o755)  # xrootd runs as nobody and reads its certificate from there
    (work / "pki").mkdir()
    pki = make_grid_pki(work / "pki")
    with contextlib.ExitStack() as stack:
        servers = {
            "root": (stack.enter_context(XrootdServer(SHARED)), {}),
            "gsi": (stack.enter_context(XrootdServer(SHARED, extra_config=gsi_server_config(pki))), gsi_client_environment(pki)),
        }
        if kerberos.available():
            (work / "krb5").mkdir()
            kdc = stack.enter_context(kerberos.Kdc(work / "krb5"))
            os.environ["KRB5_CONFIG"] = str(kdc.config)  # the server's realm
            servers["krb5"] = (stack.enter_context(XrootdServer(SHARED, extra_config=kdc.server_config())), kdc.client_environment())
        toxiproxy = stack.enter_context(Toxiproxy())
        for name, (server, env) in servers.items():
            port = toxiproxy.proxy(name, server.port)
            toxiproxy.set_rtt(name, args.rtt)
            first, *later = runs(f"root://127.0.0.1:{port}//{args.file}", env)
            best = min(later, key=lambda r: r["open_s"] + r["read_s"])
            best |= {k: v for k, v in later[-1].items() if k.startswith("5000")}
            for what, result in (("first", first), ("later", best)):
                shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items())
                print(f"{name:5s} {what:5s} rtt {args.rtt:.0f} ms: {shown}")


if __name__ == "__main__":
    main()
