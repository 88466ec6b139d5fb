"""XRootD over TLS and with authentication, against real xrootd servers on 127.0.0.1 started by
the test: a CA and a host certificate made with openssl (`xrd.tls`), `ztn` bearer tokens checked by
the SciTokens plugin (tokens the test signs), and a server asking only for a protocol cherenkov
does not speak. Every branch of a test file reads equal to a local read; every message, repr,
path, stats dump and trace is searched for the token."""

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import cherenkov
import pytest
from cherenkov.lab.servers import XrootdServer
from conftest import same_values

FILE = "uproot-HZZ.root"
SCITOKENS_PLUGIN = Path("/usr/lib/x86_64-linux-gnu/libXrdAccSciTokens-5.so")

pytestmark = pytest.mark.skipif(
    not (shutil.which("xrootd") and shutil.which("openssl")), reason="xrootd and openssl are needed: run `make setup`"
)


def openssl(cwd, *args, data=None):
    done = subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60, input=data)
    return done.stdout


def give_to_the_server(*paths):
    """xrootd runs as nobody (as root) and refuses private keys others may read."""
    for path in paths:
        if os.geteuid() == 0:
            shutil.chown(path, "nobody", "nogroup")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = tmp_path_factory.mktemp("pki")
    os.chmod(pki, 0o755)
    key = ("-newkey", "rsa:2048", "-nodes")
    openssl(pki, "req", "-x509", *key, "-days", "1", "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl(pki, "req", *key, "-subj", "/CN=127.0.0.1", "-keyout", "host.key", "-out", "host.csr")
    (pki / "host.ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n")
    signed_by_ca = ("-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1")
    openssl(pki, "x509", "-req", "-in", "host.csr", *signed_by_ca, "-extfile", "host.ext", "-out", "host.pem")
    for name in ("ca.pem", "host.pem"):
        os.chmod(pki / name, 0o644)
    os.chmod(pki / "host.key", 0o600)
    give_to_the_server(pki / "host.key")
    return pki


def tls_config(pki):
    return f"xrd.tls {pki}/host.pem {pki}/host.key\nxrd.tlsca certfile {pki}/ca.pem\n"


def assert_reads_like_local(remote, local_path):
    local = cherenkov.open(local_path)
    for key, cls in local.classnames().items():
        if cls != "TTree":
            continue
        names = [b.path for b in local[key].branches if b.readable]
        ours, theirs = remote[key].arrays(names, library="np"), local[key].arrays(names, library="np")
        assert names and all(same_values(ours[n], theirs[n]) for n in names), key


def everything_shown(f):
    return "\n".join([f.path, repr(f), repr(f.stats()), str(f.trace()), repr(f.source_counters())])


def test_roots_reads_every_branch_like_a_local_read(testdata, pki):
    with XrootdServer(testdata, extra_config=tls_config(pki)) as server:
        url = server.url(FILE).replace("root://", "roots://")
        f = cherenkov.open(url, ca=pki / "ca.pem", trace=True)
        assert_reads_like_local(f, testdata / FILE)
        assert f.path == url
        with pytest.raises(cherenkov.SourceError, match=r"TLS with 127\.0\.0\.1:\d+ failed, its certificate was not accepted"):
            cherenkov.open(url)  # the test's CA is not among the system's


# ---- ztn: bearer tokens checked by the SciTokens plugin ----------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """A token issuer: an RSA key made with openssl, tokens signed with it (RS256)."""

    def __init__(self, folder: Path, url: str, kid: str):
        self.folder, self.url, self.kid = folder, url, kid
        openssl(folder, "genrsa", "-out", f"{kid}.key", "2048")
        modulus = openssl(folder, "rsa", "-in", f"{kid}.key", "-noout", "-modulus").decode().strip().split("=")[1]
        self.jwk = {"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid, "n": b64url(bytes.fromhex(modulus)), "e": "AQAB"}

    def token(self, lifetime=600, scope="storage.read:/", issuer=None) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {
            "iss": issuer or self.url,
            "sub": "pytest",
            "aud": "https://wlcg.cern.ch/jwt/v1/any",
            "scope": scope,
            "wlcg.ver": "1.0",
            "jti": f"{self.kid}-{now}-{lifetime}",
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + lifetime,
        }
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = openssl(self.folder, "dgst", "-sha256", "-sign", f"{self.kid}.key", data=signing_input.encode())
        return f"{signing_input}.{b64url(signature)}"


@pytest.fixture(scope="module")
def ztn_server(testdata, pki, tmp_path_factory):
    if not SCITOKENS_PLUGIN.exists():
        pytest.skip("the SciTokens plugin is not installed (Debian package xrootd-scitokens-plugins)")
    work = tmp_path_factory.mktemp("ztn")
    os.chmod(work, 0o755)
    port = 1  # the issuer is never contacted: its keys are in the plugin's key cache
    issuer = Issuer(work, f"https://127.0.0.1:{port}/issuer", "test-key")
    stranger = Issuer(work, issuer.url, "test-key")  # same name, another key: a forged token
    # scitokens-cpp (0.7) fetches an issuer's keys with libcurl, which trusts only the system's CAs;
    # the keys go in its key cache instead, as a fetch would store them.
    cache = work / "cache"
    (cache / "scitokens").mkdir(parents=True)
    db = sqlite3.connect(cache / "scitokens" / "scitokens_cpp.sqllite")
    db.execute("CREATE TABLE IF NOT EXISTS keycache (issuer text UNIQUE PRIMARY KEY NOT NULL, keys text NOT NULL)")
    far = int(time.time()) + 86400
    entry = {"jwks": {"keys": [issuer.jwk]}, "next_update": far, "expires": far}
    db.execute("INSERT INTO keycache VALUES (?, ?)", (issuer.url, json.dumps(entry)))
    db.commit()
    db.close()
    for path in (cache, cache / "scitokens", cache / "scitokens" / "scitokens_cpp.sqllite"):
        give_to_the_server(path)
    (work / "scitokens.cfg").write_text(
        f"[Global]\naudience = https://wlcg.cern.ch/jwt/v1/any\n\n[Issuer test]\nissuer = {issuer.url}\nbase_path = /\n"
    )
    config = (
        tls_config(pki) + "xrootd.seclib libXrdSec.so\nsec.protocol ztn\nsec.protbind * only ztn\n"
        f"ofs.authorize 1\nofs.authlib libXrdAccSciTokens.so config={work}/scitokens.cfg\n"
    )
    os.environ["XDG_CACHE_HOME"] = str(cache)  # xrootd inherits it
    try:
        with XrootdServer(testdata, extra_config=config) as server:
            yield {"url": server.url(FILE).replace("root://", "roots://"), "issuer": issuer, "stranger": stranger, "log": server.log}
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
    }
    for what, token in cases.items():
        with pytest.raises(cherenkov.SourceError, match=r"refused the token given with token= \(ztn\)") as refused:
            cherenkov.open(ztn_server["url"], token=token, ca=ca)
        message = str(refused.value)
        assert token not in message, what
    with pytest.raises(cherenkov.SourceError, match=r"asks for a bearer token \(ztn.*none was found \(looked in token=") as missing:
        cherenkov.open(ztn_server["url"], ca=ca)
    assert "ztn" in str(missing.value)
    with pytest.raises(cherenkov.SourceError, match="TLS only: use roots://"):
        cherenkov.open(ztn_server["url"].replace("roots://", "root://"), token=issuer.token())


def test_a_server_asking_for_an_unknown_protocol_lists_what_it_offered(testdata, pki, tmp_path):
    keytab = tmp_path / "sss.keytab"
    subprocess.run(["xrdsssadmin", "-k", "test", "-u", "anybody", "-g", "usrgroup", "add", str(keytab)], check=True, capture_output=True, timeout=30)
    give_to_the_server(keytab)
    os.chmod(tmp_path, 0o755)
    config = f"xrootd.seclib libXrdSec.so\nsec.protocol sss -s {keytab}\nsec.protbind * only sss\n"
    with XrootdServer(testdata, extra_config=config) as server:
        with pytest.raises(cherenkov.SourceError, match=r"asks for authentication with sss, none of which cherenkov speaks"):
            cherenkov.open(server.url(FILE))
