"""Authenticated HTTPS against a real nginx on 127.0.0.1: a CA and a host certificate made by the
test with openssl, a server that answers 401 unless it gets the bearer token (or alice's
password). Every branch of a test file reads equal to a local read; every message, repr, path,
stats dump, trace and CLI output is searched for the secrets."""

import re
import shutil
import subprocess

import cherenkov
import pytest
from cherenkov_lab.servers import free_port, wait_for_port
from cherenkov_lab.tokens import make_pki
from conftest import assert_reads_like_local, everything_shown

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJweXRlc3QifQ.cHl0ZXN0LXNpZ25hdHVyZQ"
PASSWORD = "s3cret-pw"
AUTHZ = "authz-value-never-shown"
BASIC = "YWxpY2U6czNjcmV0LXB3"  # alice:s3cret-pw
SECRETS = (TOKEN, PASSWORD, AUTHZ)
FILE = "uproot-HZZ.root"

pytestmark = pytest.mark.skipif(
    not (shutil.which("nginx") and shutil.which("openssl")), reason="nginx and openssl are needed: run `make setup`"
)


@pytest.fixture(scope="module")
def server(testdata, tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    work = tmp_path_factory.mktemp("nginx")
    port = free_port()
    (work / "nginx.conf").write_text(
        f"daemon off; master_process off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log;\n"
        "events { worker_connections 256; }\n"
        f"http {{ access_log off; client_body_temp_path {work}; server {{\n"
        f"  listen 127.0.0.1:{port} ssl; root {testdata}; max_ranges 4096;\n"
        f"  ssl_certificate {pki}/host.pem; ssl_certificate_key {pki}/host.key;\n"
        "  set $allowed no;\n"
        f'  if ($http_authorization = "Bearer {TOKEN}") {{ set $allowed yes; }}\n'
        f'  if ($http_authorization = "Basic {BASIC}") {{ set $allowed yes; }}\n'
        "  if ($allowed = no) { return 401; }\n"
        "} }\n"
    )
    command = ["nginx", "-c", str(work / "nginx.conf"), "-p", str(work)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, "nginx", work / "error.log")
        yield {"url": f"https://127.0.0.1:{port}/{FILE}", "ca": pki / "ca.pem", "local": testdata / FILE}
    finally:
        proc.kill()
        proc.wait(timeout=10)


def assert_no_secret(text):
    for secret in SECRETS:
        assert secret not in text, text


def test_a_token_reads_every_branch_like_a_local_read_and_is_never_shown(server):
    url = f"{server['url']}?authz={AUTHZ}"
    f = cherenkov.open(url, token=TOKEN, ca=server["ca"], trace=True)
    assert_reads_like_local(f, server["local"])
    assert f.source_counters().requests >= 1
    assert_no_secret(everything_shown(f))
    assert "authz=***" in f.path


def test_a_password_in_the_url_is_sent_with_every_request_and_never_shown(server):
    url = server["url"].replace("https://", f"https://alice:{PASSWORD}@")
    f = cherenkov.open(url, ca=server["ca"], trace=True)
    assert_reads_like_local(f, server["local"])
    assert_no_secret(everything_shown(f))
    assert f.path.startswith("https://alice:***@127.0.0.1")


def test_refusals_are_clear_errors_without_secrets(server, monkeypatch, tmp_path):
    for name in ("BEARER_TOKEN", "BEARER_TOKEN_FILE", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(PermissionError, match="refused the token given with token=") as wrong:
        cherenkov.open(server["url"], token=TOKEN + "x", ca=server["ca"])
    assert_no_secret(str(wrong.value))
    with pytest.raises(cherenkov.SourceError, match="UnknownIssuer"):
        cherenkov.open(server["url"], token=TOKEN)
    wrong_password = server["url"].replace("https://", "https://alice:wrong-pw@") + f"?authz={AUTHZ}"
    with pytest.raises(PermissionError, match="refused the user and password of 'alice'") as refused:
        cherenkov.open(wrong_password, ca=server["ca"])
    assert_no_secret(str(refused.value))
    assert "wrong-pw" not in str(refused.value)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o644)
    monkeypatch.setenv("BEARER_TOKEN_FILE", str(token_file))
    with pytest.raises(cherenkov.SourceError, match="chmod 600") as loose:
        cherenkov.open(server["url"], ca=server["ca"])
    assert_no_secret(str(loose.value))
    for unreadable in (tmp_path / "no-such-token", tmp_path):  # missing; a folder, not a file
        monkeypatch.setenv("BEARER_TOKEN_FILE", str(unreadable))
        with pytest.raises(cherenkov.SourceError, match=f"{re.escape(str(unreadable))}: cannot use this token file: "):
            cherenkov.open(server["url"], ca=server["ca"])
    monkeypatch.setenv("BEARER_TOKEN_FILE", str(token_file))
    token_file.chmod(0o600)
    assert_reads_like_local(cherenkov.open(server["url"], ca=server["ca"]), server["local"])


def test_cli_finds_the_token_and_the_ca_as_grid_hosts_set_them(server, monkeypatch, capsys):
    from cherenkov.cli import main as cli

    monkeypatch.delenv("BEARER_TOKEN_FILE", raising=False)
    monkeypatch.setenv("BEARER_TOKEN", TOKEN)
    monkeypatch.setenv("SSL_CERT_FILE", str(server["ca"]))
    url = server["url"].replace("https://", f"https://alice:{PASSWORD}@") + f"?authz={AUTHZ}"
    assert cli(["ls", url]) == 0
    out = capsys.readouterr()
    assert "events" in out.out
    assert_no_secret(out.out + out.err)


@pytest.mark.skipif(not shutil.which("xrootd"), reason="xrootd is not installed: run `make setup`")
def test_an_xrootd_authz_token_reaches_the_server_and_is_never_shown(testdata, capsys):
    from cherenkov.cli import main as cli
    from cherenkov_lab.servers import XrootdServer

    with XrootdServer(testdata) as server:
        url = f"{server.url(FILE)}?authz={AUTHZ}"
        f = cherenkov.open(url, trace=True)
        assert_reads_like_local(f, testdata / FILE)
        assert_no_secret(everything_shown(f))
        assert f.path.endswith("?authz=***")
        with pytest.raises(cherenkov.SourceError) as missing:
            cherenkov.open(f"{server.url('no-such.root')}?authz={AUTHZ}")
        assert_no_secret(str(missing.value))
        assert cli(["ls", url]) == 0
        out = capsys.readouterr()
        assert_no_secret(out.out + out.err)
