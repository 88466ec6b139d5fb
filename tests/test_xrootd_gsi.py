"""XRootD servers asking for a security protocol cherenkov does not speak natively (`gsi`,
`krb5`), read through XrdCl (the `xrootd` Python package) with cherenkov's planning on top, against
real xrootd servers on 127.0.0.1 started by the test: for gsi a CA, a host certificate, a user
certificate and grid proxies made by the test (openssl, `xrdgsiproxy`); for krb5 a realm with its
KDC, a user with tickets and the server's key (`cherenkov_lab.kerberos`). Every branch of a test
file reads equal to a local read, `stats()` says XrdCl read it, and a missing or expired proxy, no
Kerberos tickets, a missing XrdCl and a protocol neither client can use each give their own clear
error, listing what the server offered; a refused proxy, a missing file and a silent server are
Python's PermissionError, FileNotFoundError and TimeoutError, from XrdCl's status codes.

Each case runs in a Python process of its own: XrdCl reads the grid environment (`X509_*`) once
per process and keeps authenticated connections, so cases in one process would not be independent.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cherenkov_lab import kerberos
from cherenkov_lab.gsi import gsi_client_environment, gsi_server_config, make_grid_pki
from cherenkov_lab.servers import XrootdServer
from cherenkov_lab.tokens import give_to_xrootd

FILE = "uproot-HZZ.root"
TESTS = Path(__file__).resolve().parent
TIME_LIMIT = 120  # seconds for one case's process: XrdCl's own timeouts are far below

pytestmark = [
    pytest.mark.skipif(
        not all(shutil.which(p) for p in ("xrootd", "openssl", "xrdgsiproxy", "xrdsssadmin")),
        reason="xrootd, xrdgsiproxy, xrdsssadmin and openssl are needed: run `make setup`",
    ),
    pytest.mark.skipif(
        subprocess.run([sys.executable, "-c", "import XRootD.client"], capture_output=True, timeout=60).returncode != 0,
        reason="XrdCl's Python bindings are needed (pip package `xrootd`): run `make setup`",
    ),
]


@pytest.fixture(scope="module")
def pki(folder):
    (folder / "pki").mkdir()
    return make_grid_pki(folder / "pki")


@pytest.fixture(scope="module")
def gsi_server(testdata, pki):
    with XrootdServer(testdata, extra_config=gsi_server_config(pki)) as server:
        yield server


def run(code: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    """`code` in a new Python process with `env` added to the environment (and the tests' folder
    on the import path, for conftest's helpers)."""
    environment = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=environment, capture_output=True, text=True, timeout=TIME_LIMIT, stdin=subprocess.DEVNULL
    )


READ_EVERYTHING = """
import json, sys
import cherenkov
from conftest import assert_reads_like_local

url, local = sys.argv[1], sys.argv[2]
for attempt in ("first", "again"):  # again: the server is known to want gsi, XrdCl at once
    f = cherenkov.open(url, trace=True)
    assert_reads_like_local(f, local)
    [head, middle] = f._core.read_ranges([(0, 4), (1000, 1100)])  # one vector read of two ranges
    with open(local, "rb") as plain:
        data = plain.read()
    assert bytes(head) == data[:4] and bytes(middle) == data[1000:1100]
    s = f.stats()
    trace = f.trace()
    print(json.dumps({"attempt": attempt, "sources": list(s.sources), "requests": s.requests, "ranges": s.ranges,
                      "round_trips": s.round_trips, "bytes": s.bytes_read, "traced_ranges": len(trace["offset"]),
                      "traced_requests": len(set(trace["request"].tolist()))}))
"""


def test_gsi_reads_every_branch_through_xrdcl_like_a_local_read(gsi_server, pki, testdata):
    done = run(READ_EVERYTHING, gsi_client_environment(pki), gsi_server.url(FILE), str(testdata / FILE))
    assert done.returncode == 0, done.stderr[-3000:]
    for line in done.stdout.splitlines():
        stats = json.loads(line)
        [source] = stats["sources"]
        assert source.startswith(gsi_server.url(FILE)) and "through XrdCl: the server asks for gsi" in source, stats
        # The engine's plan reached XrdCl as vector reads: fewer requests than ranges, each counted.
        assert 0 < stats["requests"] < stats["ranges"] and stats["bytes"] > 0, stats
        assert stats["traced_ranges"] == stats["ranges"] and stats["traced_requests"] == stats["requests"], stats


OPEN = """
import sys
import cherenkov
try:
    cherenkov.open(sys.argv[1])
except cherenkov.SourceError as e:
    kinds = [k.__name__ for k in (FileNotFoundError, PermissionError, TimeoutError) if isinstance(e, k)]
    print(*kinds, e)
else:
    print("opened")
"""


def open_error(url: str, env: dict) -> str:
    done = run(OPEN, env, url)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_a_missing_or_expired_proxy_is_a_clear_error(gsi_server, pki):
    url = gsi_server.url(FILE)
    missing = open_error(url, gsi_client_environment(pki, proxy="no-such-proxy.pem"))
    expired = open_error(url, gsi_client_environment(pki, proxy="expired.pem"))
    for message in (missing, expired):
        assert message.startswith("PermissionError "), message
        assert "asks for authentication with gsi, none of which cherenkov speaks" in message, message
        assert "through XrdCl: [FATAL] Auth failed" in message, message
    assert f"no grid proxy at {pki / 'no-such-proxy.pem'} (X509_USER_PROXY)" in missing, missing
    assert f"the grid proxy {pki / 'expired.pem'} (X509_USER_PROXY) expired on 2020-01-02" in expired, expired


def test_a_missing_file_through_xrdcl_is_a_file_not_found_error(gsi_server, pki):
    message = open_error(gsi_server.url("no-such-file.root"), gsi_client_environment(pki))
    assert message.startswith("FileNotFoundError "), message
    assert gsi_server.url("no-such-file.root") in message and "through XrdCl" in message, message
    assert "[3011] Unable to open /no-such-file.root" in message, message


SILENT = """
import json, sys, urllib.request
import cherenkov
url, toxiproxy, proxy = sys.argv[1:]
toxics = f"http://127.0.0.1:{toxiproxy}/proxies/{proxy}/toxics"
cherenkov.open(url)  # the server is known to ask for gsi: XrdCl opens the file from now on
toxic = {"name": "silence", "type": "timeout", "stream": "downstream", "attributes": {"timeout": 0}}
urllib.request.urlopen(urllib.request.Request(toxics, json.dumps(toxic).encode()), timeout=10).read()
try:
    cherenkov.open(url, timeout=2)
except TimeoutError as e:
    print("TimeoutError", isinstance(e, cherenkov.SourceError), e)
# The link back, so that XrdCl's connection closes at exit instead of waiting out its own timeouts.
urllib.request.urlopen(urllib.request.Request(toxics + "/silence", method="DELETE"), timeout=10).read()
"""


def test_a_silent_server_through_xrdcl_is_a_timeout_error(gsi_server, pki):
    from cherenkov_lab.servers import Toxiproxy

    with Toxiproxy() as toxiproxy:
        port = toxiproxy.proxy("gsi", gsi_server.port)
        url = gsi_server.url(FILE, port=port)
        # XrdCl checks its timeouts every XRD_TIMEOUTRESOLUTION seconds (15 by default).
        environment = {**gsi_client_environment(pki), "XRD_TIMEOUTRESOLUTION": "1"}
        done = run(SILENT, environment, url, str(toxiproxy.port), "gsi")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"TimeoutError True {url}"), done.stdout
    assert "through XrdCl" in done.stdout, done.stdout


def test_without_xrdcl_the_error_says_what_is_missing(gsi_server, pki, tmp_path):
    blocked = tmp_path / "XRootD"
    blocked.mkdir()
    (blocked / "__init__.py").write_text("raise ImportError('XRootD is blocked by the test')\n")
    message = open_error(gsi_server.url(FILE), {**gsi_client_environment(pki), "PYTHONPATH": str(tmp_path)})
    assert "asks for authentication with gsi" in message, message
    assert "XrdCl's Python bindings cannot be imported" in message and "pip install xrootd" in message, message


def test_an_sss_server_without_a_client_keytab_is_not_sent_to_xrdcl(testdata, folder):
    keytab = folder / "sss.keytab"
    make_keytab = ["xrdsssadmin", "-k", "test", "-u", "anybody", "-g", "usrgroup", "add", str(keytab)]
    subprocess.run(make_keytab, check=True, capture_output=True, timeout=30)
    give_to_xrootd(keytab)
    config = f"xrootd.seclib libXrdSec.so\nsec.protocol sss -s {keytab}\nsec.protbind * only sss\n"
    with XrootdServer(testdata, extra_config=config) as server:
        # cherenkov speaks sss itself; the keytab XrdSecSSSKT names is missing, and XrdCl, which
        # would look in the same places, is not tried.
        message = open_error(server.url(FILE), {"XrdSecSSSKT": str(folder / "no-such.keytab")})
    assert "asks for sss" in message and f"cannot use the sss keytab {folder / 'no-such.keytab'}" in message, message
    assert "XrdCl" not in message, message


@pytest.fixture(scope="module")
def krb5_server(testdata, folder):
    if not kerberos.available():
        pytest.skip(f"a Kerberos KDC is needed ({', '.join(kerberos.PROGRAMS)}; Debian krb5-kdc, krb5-admin-server, krb5-user)")
    (folder / "krb5").mkdir()
    with kerberos.Kdc(folder / "krb5") as kdc:
        os.environ["KRB5_CONFIG"] = str(kdc.config)  # xrootd inherits it: the realm and its KDC
        try:
            with XrootdServer(testdata, extra_config=kdc.server_config()) as server:
                yield kdc, server
        finally:
            os.environ.pop("KRB5_CONFIG", None)


def test_krb5_reads_every_branch_through_xrdcl_like_a_local_read(krb5_server, testdata):
    kdc, server = krb5_server
    done = run(READ_EVERYTHING, kdc.client_environment(), server.url(FILE), str(testdata / FILE))
    assert done.returncode == 0, done.stderr[-3000:]
    for line in done.stdout.splitlines():
        stats = json.loads(line)
        assert "through XrdCl: the server asks for krb5" in stats["sources"][0], stats
        assert 0 < stats["requests"] < stats["ranges"], stats


def test_krb5_without_a_ticket_is_a_clear_error(krb5_server, tmp_path):
    kdc, server = krb5_server
    message = open_error(server.url(FILE), kdc.client_environment(ccache=tmp_path / "no-tickets"))
    assert "asks for authentication with krb5" in message and "through XrdCl: [FATAL] Auth failed" in message, message
    assert f"no Kerberos tickets in {tmp_path / 'no-tickets'} (KRB5CCNAME; get them with kinit)" in message, message
