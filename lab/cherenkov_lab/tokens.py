"""Secure xrootd for tests and benchmarks: a CA and a host certificate for 127.0.0.1 made with
openssl, and WLCG tokens (JWT, RS256) signed by an issuer made here and checked by xrootd's
SciTokens plugin (`ztn` over TLS).

scitokens-cpp (0.7, Debian 12) fetches an issuer's keys with libcurl, which trusts only the
system's CAs, so the issuer's keys go straight into its key cache (the SQLite file a fetch would
fill) under the `XDG_CACHE_HOME` the server is started with."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

SCITOKENS_PLUGIN = Path("/usr/lib/x86_64-linux-gnu/libXrdAccSciTokens-5.so")
ANY_AUDIENCE = "https://wlcg.cern.ch/jwt/v1/any"


def openssl(cwd: Path, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120, input=data)
    return done.stdout


def give_to_xrootd(*paths: Path) -> None:
    """xrootd runs as nobody when started as root, and refuses private keys others may read."""
    for path in paths:
        if os.geteuid() == 0:
            shutil.chown(path, "nobody", "nogroup")


def make_pki(folder: Path) -> Path:
    """`ca.pem`, and `host.pem`/`host.key` for IP 127.0.0.1 signed by it, in `folder` (one xrootd
    can reach: not under pytest's private temporary folders)."""
    os.chmod(folder, 0o755)
    key = ("-newkey", "rsa:2048", "-nodes")
    openssl(folder, "req", "-x509", *key, "-days", "1", "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl(folder, "req", *key, "-subj", "/CN=127.0.0.1", "-keyout", "host.key", "-out", "host.csr")
    (folder / "host.ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n")
    signed = ("-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1")
    openssl(folder, "x509", "-req", "-in", "host.csr", *signed, "-extfile", "host.ext", "-out", "host.pem")
    for name in ("ca.pem", "host.pem"):
        os.chmod(folder / name, 0o644)
    os.chmod(folder / "host.key", 0o600)
    give_to_xrootd(folder / "host.key")
    return folder


def xrootd_tls(pki: Path) -> str:
    """xrootd configuration lines: TLS with the certificates of `make_pki`."""
    return f"xrd.tls {pki}/host.pem {pki}/host.key\nxrd.tlsca certfile {pki}/ca.pem\n"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """A token issuer: an RSA key made with openssl; tokens signed with it (RS256)."""

    def __init__(self, folder: Path, url: str, kid: str = "test-key"):
        self.folder, self.url, self.kid = folder, url, kid
        self.key = f"{kid}-{len(list(folder.glob('*.key')))}.key"
        openssl(folder, "genrsa", "-out", self.key, "2048")
        modulus = openssl(folder, "rsa", "-in", self.key, "-noout", "-modulus").decode().strip().split("=")[1]
        self.jwk = {"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid, "n": b64url(bytes.fromhex(modulus)), "e": "AQAB"}

    def token(self, lifetime: int = 600, scope: str = "storage.read:/", issuer: str | None = None) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {
            "iss": issuer or self.url,
            "sub": "cherenkov-test",
            "aud": ANY_AUDIENCE,
            "scope": scope,
            "wlcg.ver": "1.0",
            "jti": f"{self.key}-{now}-{lifetime}",
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + lifetime,
        }
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = openssl(self.folder, "dgst", "-sha256", "-sign", self.key, data=signing_input.encode())
        return f"{signing_input}.{b64url(signature)}"


def ztn_server_config(folder: Path, issuer: Issuer) -> tuple[str, Path]:
    """xrootd configuration lines requiring ztn tokens from `issuer` (add `xrootd_tls`), and the
    `XDG_CACHE_HOME` to start the server with (the issuer's keys are cached there). `folder` must
    be one xrootd (nobody) can reach: not under pytest's private temporary folders."""
    os.chmod(folder, 0o755)
    cache = folder / "cache"
    (cache / "scitokens").mkdir(parents=True, exist_ok=True)
    db_path = cache / "scitokens" / "scitokens_cpp.sqllite"
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE IF NOT EXISTS keycache (issuer text UNIQUE PRIMARY KEY NOT NULL, keys text NOT NULL)")
    far = int(time.time()) + 86400
    entry = {"jwks": {"keys": [issuer.jwk]}, "next_update": far, "expires": far}
    db.execute("INSERT OR REPLACE INTO keycache VALUES (?, ?)", (issuer.url, json.dumps(entry)))
    db.commit()
    db.close()
    give_to_xrootd(cache, cache / "scitokens", db_path)
    (folder / "scitokens.cfg").write_text(f"[Global]\naudience = {ANY_AUDIENCE}\n\n[Issuer test]\nissuer = {issuer.url}\nbase_path = /\n")
    config = (
        "xrootd.seclib libXrdSec.so\nsec.protocol ztn\nsec.protbind * only ztn\n"
        f"ofs.authorize 1\nofs.authlib libXrdAccSciTokens.so config={folder}/scitokens.cfg\n"
    )
    return config, cache
