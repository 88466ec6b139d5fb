"""Adaptive streams (issue 20) against real servers: xrootd and nginx on 127.0.0.1 behind toxiproxy,
on a narrow link (each connection capped: more connections carry more), a thin link (one cap
shared by all connections) and an unconstrained one; nginx refusing connections beyond a few (503);
and the HTTPS pool opened with the file, so that the first parallel reads pay no TLS handshake.
Values are compared with a local read; no assert is about time."""

import shutil
import subprocess

import cherenkov
import numpy as np
import pytest
from cherenkov.lab import Lab
from cherenkov.lab.servers import NginxServer, free_port, wait_for_port
from cherenkov.lab.tokens import make_pki
from conftest import assert_reads_like_local

pytestmark = pytest.mark.skipif(
    not all(shutil.which(b) or (cherenkov.lab.servers.TOOLS / b).exists() for b in ("xrootd", "nginx", "toxiproxy-server")),
    reason="xrootd, nginx and toxiproxy are needed: run `make setup`",
)

ENTRIES = 1_000_000  # 3 branches of float64: 24 MB of values, 20 baskets each
NAME = "streams.root"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A ROOT file large enough for bandwidth to matter (random doubles do not compress)."""
    uproot = pytest.importorskip("uproot")
    folder = tmp_path_factory.mktemp("streams")
    rng = np.random.default_rng(20)
    with uproot.recreate(folder / NAME, compression=None) as f:
        f.mktree("Events", {"a": np.float64, "b": np.float64, "c": np.float64})
        for _ in range(20):
            n = ENTRIES // 20
            f["Events"].extend({k: rng.normal(size=n) for k in "abc"})
    return folder


def read_all(url, **options):
    f = cherenkov.open(url, timeout=30, **options)
    assert_reads_like_local(f, url_local(url))
    return f.stats(), f.stream_steps()


_LOCAL = {}


def url_local(url):
    return _LOCAL[url.rsplit("/", 1)[-1]]


@pytest.fixture(scope="module")
def narrow(data):
    _LOCAL[NAME] = data / NAME
    with Lab(data, link="narrow", rate=5) as lab:
        lab.set_rtt(20)
        yield lab


@pytest.mark.parametrize("protocol", ["root", "http"])
def test_a_narrow_link_gets_more_streams_and_the_same_values(narrow, protocol):
    stats, steps = read_all(narrow.url(protocol, NAME))
    start = 2 if protocol == "root" else 8
    assert stats.streams_peak > start, (stats.streams, steps)
    assert any(s.decision == "grow" for s in steps), steps
    # what was measured: more streams carried more
    by_count = {}
    for s in steps:
        by_count[s.streams] = max(by_count.get(s.streams, 0), s.throughput)
    counts = sorted(by_count)
    assert by_count[counts[-1]] > by_count[counts[0]], steps


@pytest.mark.parametrize(("protocol", "count"), [("root", 2), ("http", 8)])
def test_adaptive_streams_false_keeps_the_fixed_count(narrow, protocol, count):
    stats, steps = read_all(narrow.url(protocol, NAME), adaptive_streams=False)
    assert (stats.streams, stats.streams_peak) == (count, count)
    assert all(s.decision == "fixed" for s in steps), steps


def test_a_thin_link_goes_back_to_the_count_that_did_as_well(data):
    _LOCAL[NAME] = data / NAME
    with Lab(data, link="thin", rate=15) as lab:
        lab.set_rtt(20)
        stats, steps = read_all(lab.url("root", NAME))
    assert stats.streams == 2, steps
    assert any(s.decision == "back" for s in steps), steps


def test_an_unconstrained_link_stays_small(data):
    _LOCAL[NAME] = data / NAME
    with Lab(data) as lab:
        stats, steps = read_all(lab.url("root", NAME, direct=True))
    assert stats.streams <= 4, steps


def test_a_server_refusing_connections_gets_fewer(data):
    """nginx answers 503 to a fifth concurrent connection: the requests in flight are halved."""
    _LOCAL[NAME] = data / NAME
    limit = "limit_conn_zone $server_name zone=per_server:1m; limit_conn_status 503;"
    with NginxServer(data, http_config=limit, server_config="limit_conn per_server 4;") as nginx:
        stats, steps = read_all(nginx.url(NAME), retries=20, retry_window=30)
    assert stats.streams <= 4, steps
    assert any(s.decision == "pushback" for s in steps), steps


@pytest.mark.skipif(not shutil.which("openssl"), reason="openssl is needed: run `make setup`")
def test_https_reads_after_opening_open_no_new_connection(testdata, tmp_path):
    """nginx logs each request's connection and its number on it: with the pool opened with the
    file, no read after the open is the first request of a connection (a new TLS handshake)."""
    name = "nanolike-root6.40-zstd-4clusters.root"
    pki = make_pki(tmp_path / "pki")
    port = free_port()
    log = tmp_path / "access.log"
    (tmp_path / "nginx.conf").write_text(
        f"daemon off; master_process off; worker_processes 1; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;\n"
        "events { worker_connections 256; }\n"
        f"http {{ log_format conn '$connection $connection_requests $request_method $status';\n"
        f"  access_log {log} conn; client_body_temp_path {tmp_path};\n"
        f"  server {{ listen 127.0.0.1:{port} ssl; root {testdata}; max_ranges 4096;\n"
        f"  ssl_certificate {pki}/host.pem; ssl_certificate_key {pki}/host.key; }} }}\n"
    )
    proc = subprocess.Popen(["nginx", "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path)], stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, "nginx", tmp_path / "error.log")
        url = f"https://127.0.0.1:{port}/{name}"
        f = cherenkov.open(url, ca=pki / "ca.pem", adaptive_streams=False)
        opened = len(log.read_text().splitlines())
        assert_reads_like_local(f, testdata / name)
        lines = [line.split() for line in log.read_text().splitlines()]
    finally:
        proc.kill()
        proc.wait(timeout=10)
    reads = [line for line in lines[opened:] if line[2] == "GET"]
    heads = [line for line in lines if line[2] == "HEAD"]
    assert len(heads) == 7, lines  # connections - 1 opened beside the first request
    assert len({line[0] for line in reads}) > 1, "the reads went in parallel"
    assert all(int(line[1]) > 1 for line in reads), f"a read opened a new connection: {reads}"
