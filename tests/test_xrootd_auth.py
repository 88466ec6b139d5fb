"""XRootD over TLS and with authentication, against real xrootd servers on 127.0.0.1 started by
the test: a CA and a host certificate made with openssl (`xrd.tls`), `ztn` bearer tokens checked by
the SciTokens plugin (tokens the test signs, see `cherenkov_lab.tokens`) and `sss` shared keys
(keytabs made by `xrdsssadmin`); servers asking for protocols cherenkov does not speak are in
tests/test_xrootd_gsi.py. Every branch of a test file reads equal to a local read; every message,
repr, path, stats dump and trace is searched for the token and the key."""

import os
import shutil
import subprocess
from pathlib import Path

import cherenkov
import pytest
from cherenkov_lab.servers import XrootdServer
from cherenkov_lab.tokens import SCITOKENS_PLUGIN, Issuer, give_to_xrootd, make_pki, xrootd_tls, ztn_server_config
from conftest import assert_reads_like_local, everything_shown

FILE = "uproot-HZZ.root"

pytestmark = pytest.mark.skipif(
    not (shutil.which("xrootd") and shutil.which("openssl")), reason="xrootd and openssl are needed: run `make setup`"
)


@pytest.fixture(scope="module")
def pki(folder):
    (folder / "pki").mkdir()
    return make_pki(folder / "pki")


def test_roots_reads_every_branch_like_a_local_read(testdata, pki):
    with XrootdServer(testdata, extra_config=xrootd_tls(pki)) as server:
        url = server.url(FILE).replace("root://", "roots://")
        f = cherenkov.open(url, ca=pki / "ca.pem", trace=True)
        assert_reads_like_local(f, testdata / FILE)
        assert f.path == url
        with pytest.raises(cherenkov.SourceError, match=r"TLS with 127\.0\.0\.1:\d+ failed, its certificate was not accepted"):
            cherenkov.open(url)  # the test's CA is not among the system's


@pytest.fixture(scope="module")
def ztn_server(testdata, pki, folder):
    if not SCITOKENS_PLUGIN.exists():
        pytest.skip("the SciTokens plugin is not installed (Debian package xrootd-scitokens-plugins)")
    (folder / "ztn").mkdir()
    issuer = Issuer(folder / "ztn", "https://127.0.0.1:1/issuer")  # never contacted: keys cached
    stranger = Issuer(folder / "ztn", issuer.url)  # same issuer and key name, another key: forged tokens
    config, cache = ztn_server_config(folder / "ztn", issuer)
    os.environ["XDG_CACHE_HOME"] = str(cache)  # xrootd inherits it
    try:
        with XrootdServer(testdata, extra_config=xrootd_tls(pki) + config) as server:
            url = server.url(FILE).replace("root://", "roots://")
            yield {"url": url, "issuer": issuer, "stranger": stranger, "log": server.log}
    finally:
        os.environ.pop("XDG_CACHE_HOME", None)


@pytest.fixture
def no_ambient_token(monkeypatch, tmp_path):
    for name in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # an empty place: no bt_u<uid> there


def test_a_token_reads_every_branch_over_ztn_and_is_never_shown(ztn_server, testdata, pki, no_ambient_token):
    token = ztn_server["issuer"].token()
    f = cherenkov.open(ztn_server["url"], token=token, ca=pki / "ca.pem", trace=True)
    assert_reads_like_local(f, testdata / FILE)
    assert token not in everything_shown(f)


def test_a_discovered_token_file_is_used(ztn_server, testdata, pki, no_ambient_token, monkeypatch, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(ztn_server["issuer"].token() + "\n")
    os.chmod(token_file, 0o600)
    monkeypatch.setenv("BEARER_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("SSL_CERT_FILE", str(pki / "ca.pem"))
    assert_reads_like_local(cherenkov.open(ztn_server["url"]), testdata / FILE)


def test_refused_and_missing_tokens_are_one_clear_error(ztn_server, pki, no_ambient_token):
    issuer, ca = ztn_server["issuer"], pki / "ca.pem"
    cases = {
        "expired": issuer.token(lifetime=-120),
        "forged": ztn_server["stranger"].token(),
        "unknown issuer": issuer.token(issuer="https://127.0.0.1:1/other"),
        "not a token": "not-a-jwt",
    }
    for what, token in cases.items():
        with pytest.raises(PermissionError, match=r"refused the token given with token= \(ztn\)") as refused:
            cherenkov.open(ztn_server["url"], token=token, ca=ca)
        message = str(refused.value)
        assert token not in message and "ztn" in message, (what, message)
    with pytest.raises(PermissionError, match=r"asks for a token \(ztn.*none was found \(looked in token=") as missing:
        cherenkov.open(ztn_server["url"], ca=ca)
    assert "ztn" in str(missing.value)


def make_keytab(path: Path, name: str = "test") -> str:
    """A keytab with one new key (`xrdsssadmin add`), private; its hex key, to search for."""
    subprocess.run(
        ["xrdsssadmin", "-k", name, "-u", "anybody", "-g", "usrgroup", "add", str(path)],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    os.chmod(path, 0o600)
    return path.read_text().split(" k:")[1].split()[0]


@pytest.fixture(scope="module")
def sss_server(testdata, folder):
    if not shutil.which("xrdsssadmin"):
        pytest.skip("xrdsssadmin is not installed (Debian package xrootd-client)")
    (folder / "sss").mkdir()
    keytab = folder / "sss" / "server.keytab"
    key = make_keytab(keytab)
    client_keytab = folder / "sss" / "client.keytab"
    shutil.copyfile(keytab, client_keytab)
    os.chmod(client_keytab, 0o600)
    give_to_xrootd(keytab)
    config = f"xrootd.seclib libXrdSec.so\nsec.protocol sss -s {keytab}\nsec.protbind * only sss\n"
    with XrootdServer(testdata, extra_config=config) as server:
        yield {"url": server.url(FILE), "keytab": client_keytab, "key": key}


@pytest.fixture
def no_ambient_keytab(monkeypatch, tmp_path):
    for name in ("XrdSecSSSKT", "XrdSecsssKT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.xrd/sss.keytab there


def test_sss_reads_every_branch_and_never_shows_the_key(sss_server, testdata, no_ambient_keytab, monkeypatch):
    f = cherenkov.open(sss_server["url"], sss_keytab=sss_server["keytab"], trace=True)
    assert_reads_like_local(f, testdata / FILE)
    assert sss_server["key"] not in everything_shown(f)
    # Found as XrdCl finds it: $XrdSecSSSKT.
    monkeypatch.setenv("XrdSecSSSKT", str(sss_server["keytab"]))
    assert_reads_like_local(cherenkov.open(sss_server["url"]), testdata / FILE)


def test_wrong_expired_loose_and_missing_keytabs_are_each_one_clear_error(sss_server, folder, tmp_path, no_ambient_keytab):
    url, key = sss_server["url"], sss_server["key"]
    other = tmp_path / "other.keytab"
    make_keytab(other)  # same key name, another key: the server cannot decrypt
    expired = tmp_path / "expired.keytab"
    expired.write_text(sss_server["keytab"].read_text().replace(" e:0 ", " e:1600000000 "))
    os.chmod(expired, 0o600)
    loose = tmp_path / "loose.keytab"
    loose.write_text(sss_server["keytab"].read_text())
    os.chmod(loose, 0o644)
    cases = {
        # Key numbers are the creation second and a counter: the other key's may equal the server's.
        other: r"refused the sss key 'test' \(number \d+\) of .*other\.keytab \(sss\): (Unable to decrypt|Decryption key not found)",
        expired: r"expired\.keytab: every key in it has expired",
        loose: r"loose\.keytab: its permissions 644 .*chmod 600",
        tmp_path / "missing.keytab": r"cannot use the sss keytab .*missing\.keytab",
    }
    for keytab, expected in cases.items():
        with pytest.raises(PermissionError, match=expected) as refused:
            cherenkov.open(url, sss_keytab=keytab, timeout=10)
        assert key not in str(refused.value) and "127.0.0.1" in str(refused.value)
    with pytest.raises(PermissionError, match=r"asks for authentication with sss and no sss keytab was found \(looked in"):
        cherenkov.open(url, timeout=10)
