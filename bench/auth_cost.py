"""What authentication costs: open a file and read its branches over http:// and over https://
with a bearer token checked by the server, and over root://, roots://, roots:// with a ztn
token and root:// with an sss key, all behind the same toxiproxy round-trip delay.

    .venv/bin/python bench/auth_cost.py [--rtt 137] [--tls TLSv1.3|TLSv1.2] [--http2] [--file F] [--no-xrootd]

nginx serves ../shared/testdata twice (plain, and TLS with a CA made here by openssl, 401 without
the token); xrootd serves it with TLS (`xrd.tls`, root:// and roots:// on the same port) and, on a
second server, with `ztn` tokens required and checked by the SciTokens plugin (see
`cherenkov_lab.tokens`), and on a third with `sss` required (a keytab made by `xrdsssadmin`, its key
name ending in '+': through the proxy the server sees the proxy's address, not ours). Prints open and
read times, requests and round trips for each, best of 3 (sss: the first open, when the server's wish
is learnt from the login's answer, and the best of the later ones, whose credential goes with the
login)."""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import cherenkov
from cherenkov_lab.servers import Toxiproxy, XrootdServer, free_port, wait_for_port
from cherenkov_lab.tokens import Issuer, give_to_xrootd, make_pki, xrootd_tls, ztn_server_config

TOKEN = "bench-token-0123456789abcdef"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "testdata"


def start_nginx(work: Path, data: Path, http_port: int, https_port: int, protocols: str, http2: bool) -> subprocess.Popen:
    (work / "nginx.conf").write_text(
        f"daemon off; master_process off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log;\n"
        "events { worker_connections 256; }\n"
        f"http {{ access_log off; sendfile on; client_body_temp_path {work};\n"
        f"  server {{ listen 127.0.0.1:{http_port}; root {data}; max_ranges 4096; }}\n"
        f"  server {{ listen 127.0.0.1:{https_port} ssl{' http2' if http2 else ''}; root {data}; max_ranges 4096;\n"
        f"    ssl_certificate {work}/host.pem; ssl_certificate_key {work}/host.key; ssl_protocols {protocols};\n"
        f'    if ($http_authorization != "Bearer {TOKEN}") {{ return 401; }} }} }}\n'
    )
    proc = subprocess.Popen(["nginx", "-c", str(work / "nginx.conf"), "-p", str(work)])
    wait_for_port(https_port, proc, "nginx", work / "error.log")
    return proc


def measure(url: str, **options) -> dict:
    t0 = time.perf_counter()
    f = cherenkov.open(url, **options)
    tree = f["Events"]
    opened = time.perf_counter() - t0
    at_open = f.source_counters()
    names = [b.path for b in tree.branches if b.readable][::3]
    t1 = time.perf_counter()
    tree.arrays(names, library="np")
    read = time.perf_counter() - t1
    done = f.source_counters()
    return {
        "open_s": opened,
        "open_round_trips": at_open.round_trips,
        "read_s": read,
        "read_requests": done.requests - at_open.requests,
        "read_round_trips": done.round_trips - at_open.round_trips,
    }


def start_xrootd(work: Path, data: Path) -> tuple[tuple[XrootdServer, XrootdServer], str]:
    """xrootd with TLS, and xrootd with TLS requiring ztn tokens (SciTokens plugin); a token."""
    issuer = Issuer(work, "https://127.0.0.1:1/issuer")
    config, cache = ztn_server_config(work, issuer)
    os.environ["XDG_CACHE_HOME"] = str(cache)  # the ztn server's key cache
    servers = XrootdServer(data, extra_config=xrootd_tls(work)), XrootdServer(data, extra_config=xrootd_tls(work) + config)
    return servers, issuer.token(lifetime=3600)


def start_sss(work: Path, data: Path) -> tuple[XrootdServer, Path]:
    """xrootd requiring sss, and the client's copy of its keytab."""
    keytab, client = work / "sss.keytab", work / "sss-client.keytab"
    command = ["xrdsssadmin", "-k", "bench+", "-u", "anybody", "-g", "usrgroup", "add", str(keytab)]
    subprocess.run(command, check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
    client.write_text(keytab.read_text())
    os.chmod(client, 0o600)
    give_to_xrootd(keytab)
    config = f"xrootd.seclib libXrdSec.so\nsec.protocol sss -s {keytab}\nsec.protbind * only sss\n"
    return XrootdServer(data, extra_config=config), client


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtt", type=float, default=137)
    parser.add_argument("--file", default="nanolike-root6.40-zstd-4clusters.root")
    # Debian 12's nginx offers TLS 1.2 only unless told (a full handshake of 2 round trips, 1 for 1.3).
    parser.add_argument("--tls", default="TLSv1.3", help="nginx ssl_protocols (TLSv1.2 or TLSv1.3)")
    parser.add_argument("--http2", action="store_true", help="HTTP/2 over TLS: parallel requests share one connection")
    parser.add_argument("--no-xrootd", action="store_true", help="only the HTTP rows")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cherenkov-auth-bench-"))
    make_pki(work)
    http_port, https_port = free_port(), free_port()
    nginx = start_nginx(work, SHARED, http_port, https_port, args.tls, args.http2)
    xrootd, ztn_token = ((), "") if args.no_xrootd else start_xrootd(work, SHARED)
    if not args.no_xrootd:
        sss_server, sss_keytab = start_sss(work, SHARED)
        xrootd += (sss_server,)
    try:
        with Toxiproxy() as toxiproxy:
            ports = {"http": toxiproxy.proxy("http", http_port), "https": toxiproxy.proxy("https", https_port)}
            if xrootd:
                ports |= {"xrootd": toxiproxy.proxy("xrootd", xrootd[0].port), "ztn": toxiproxy.proxy("ztn", xrootd[1].port)}
                # Two ways in to the sss server: each address is a server seen for the first time.
                ports |= {"sss": toxiproxy.proxy("sss", xrootd[2].port), "sss-home": toxiproxy.proxy("sss-home", xrootd[2].port)}
            for name in ports:
                toxiproxy.set_rtt(name, args.rtt)
            ca = {"ca": work / "ca.pem"}
            cases = {
                "http": (f"http://127.0.0.1:{ports['http']}/{args.file}", {}),
                "https+token": (f"https://127.0.0.1:{ports['https']}/{args.file}", {"token": TOKEN, **ca}),
            }
            if xrootd:
                cases |= {
                    "root": (f"root://127.0.0.1:{ports['xrootd']}//{args.file}", {}),
                    "roots": (f"roots://127.0.0.1:{ports['xrootd']}//{args.file}", ca),
                    "roots+ztn": (f"roots://127.0.0.1:{ports['ztn']}//{args.file}", {"token": ztn_token, **ca}),
                    "root+sss": (f"root://127.0.0.1:{ports['sss']}//{args.file}", {"sss_keytab": sss_keytab}),
                    "root+sss ~": (f"root://127.0.0.1:{ports['sss-home']}//{args.file}", {}),
                }
            home = work / "home"
            (home / ".xrd").mkdir(parents=True)
            (home / ".xrd" / "sss.keytab").write_text(sss_keytab.read_text())
            os.chmod(home / ".xrd" / "sss.keytab", 0o600)
            own_home = os.environ.get("HOME", "")
            for name, (url, options) in cases.items():
                # "root+sss ~": the keytab found in ~/.xrd, not named: the first open learns that
                # the server wants sss from the login's answer.
                os.environ["HOME"] = str(home) if name == "root+sss ~" else own_home
                runs = [measure(url, **options) for _ in range(4 if "sss" in name else 3)]
                if "sss" in name:
                    show(f"{name} 1st", args.rtt, runs.pop(0))
                show(name, args.rtt, min(runs, key=lambda r: r["open_s"] + r["read_s"]))
    finally:
        nginx.kill()
        nginx.wait(timeout=10)
        for server in xrootd:
            server.stop()


def show(name: str, rtt: float, run: dict) -> None:
    values = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in run.items())
    print(f"{name:12s} rtt {rtt:.0f} ms: {values}")


if __name__ == "__main__":
    main()
