"""Grid (`gsi`) security for tests and benchmarks: a CA, a host certificate for `localhost`, a
user certificate and RFC 3820 proxies made here with openssl and `xrdgsiproxy`, and the xrootd
configuration asking for `gsi` only.

A client finds the proxy through `X509_USER_PROXY` and the CA through `X509_CERT_DIR` (hashed
names, as `openssl rehash` makes them). XrdCl checks that the server's certificate names the host
it connected to; the host certificate names `localhost`, and `XrdSecGSISRVNAMES` lets it stand for
127.0.0.1 (the lab connects to nothing else)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from cherenkov_lab.tokens import give_to_xrootd, openssl

DN = "/DC=test/DC=cherenkov"

# Signs a proxy with explicit dates (xrdgsiproxy makes only proxies valid from now on).
_PROXY_CA = """[ca]
default_ca = proxy
[proxy]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
unique_subject = no
[any]
[proxy_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
proxyCertInfo = critical,language:id-ppl-inheritAll
"""


def _sign(folder: Path, name: str, subject: str, extensions: str) -> None:
    openssl(folder, "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key", "-out", f"{name}.csr")
    (folder / f"{name}.ext").write_text(extensions)
    signed = ("-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1")
    openssl(folder, "x509", "-req", "-in", f"{name}.csr", *signed, "-extfile", f"{name}.ext", "-out", f"{name}.pem")


def make_grid_pki(folder: Path) -> Path:
    """In `folder` (one xrootd can reach): `ca.pem` and `certificates/` (the CA under its hashed
    names), `host.pem`/`host.key` for localhost, `user.pem`/`user.key`, a proxy valid for an
    hour (`proxy.pem`, by `xrdgsiproxy init`) and one that expired in 2020 (`expired.pem`)."""
    os.chmod(folder, 0o755)
    ca = ("-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    key = ("-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key")
    openssl(folder, "req", "-x509", *key, "-days", "1", "-subj", f"{DN}/CN=test CA", *ca, "-out", "ca.pem")
    certificates = folder / "certificates"
    certificates.mkdir()
    shutil.copy(folder / "ca.pem", certificates / "ca.pem")
    for hashing in ("-subject_hash", "-subject_hash_old"):  # XrdCrypto looks the CA up by either
        digest = openssl(folder, "x509", "-in", "ca.pem", "-noout", hashing).decode().strip()
        (certificates / f"{digest}.0").symlink_to("ca.pem")
    usage = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    host = f"{usage}subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
    _sign(folder, "host", f"{DN}/CN=localhost", host)
    _sign(folder, "user", f"{DN}/CN=cherenkov tester", f"{usage}extendedKeyUsage=clientAuth\n")
    os.chmod(folder / "user.key", 0o400)
    init = ["xrdgsiproxy", "init", "-cert", str(folder / "user.pem"), "-key", str(folder / "user.key"), "-certdir", str(certificates)]
    subprocess.run([*init, "-out", str(folder / "proxy.pem"), "-valid", "1:00"], cwd=folder, check=True, capture_output=True, timeout=60)
    _expired_proxy(folder)
    for name in ("ca.pem", "host.pem", "user.pem"):
        os.chmod(folder / name, 0o644)
    os.chmod(folder / "host.key", 0o600)
    give_to_xrootd(folder / "host.key", folder / "host.pem")
    return folder


def _expired_proxy(folder: Path) -> None:
    work = folder / "expired"
    work.mkdir()
    (work / "index.txt").write_text("")
    (work / "serial").write_text("01\n")
    (work / "ca.cnf").write_text(_PROXY_CA)
    subject = f"{DN}/CN=cherenkov tester/CN=2020"
    openssl(work, "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", "proxy.key", "-out", "proxy.csr")
    dates = ("-startdate", "20200101000000Z", "-enddate", "20200102000000Z")
    issuer = ("-cert", "../user.pem", "-keyfile", "../user.key", "-extensions", "proxy_ext")
    args = ("-batch", "-config", "ca.cnf", "-preserveDN", "-notext", "-subj", subject, "-in", "proxy.csr", "-out", "proxy.crt")
    openssl(work, "ca", *args, *dates, *issuer)
    proxy = folder / "expired.pem"
    proxy.write_bytes(b"".join((work / n).read_bytes() for n in ("proxy.crt", "proxy.key")) + (folder / "user.pem").read_bytes())
    os.chmod(proxy, 0o600)


def gsi_server_config(pki: Path) -> str:
    """xrootd configuration lines: `gsi` only, with the certificates of `make_grid_pki` (any
    user the CA signed is let in, without a grid map file)."""
    options = f"-certdir:{pki}/certificates -cert:{pki}/host.pem -key:{pki}/host.key -gmapopt:0 -crl:0"
    return f"xrootd.seclib libXrdSec.so\nsec.protocol gsi {options}\nsec.protbind * only gsi\n"


def gsi_client_environment(pki: Path, proxy: str = "proxy.pem") -> dict[str, str]:
    """What a client's environment needs to present `proxy` to a server of `gsi_server_config`
    (no user certificate: a missing or expired proxy is not replaced by a new one)."""
    return {
        "X509_USER_PROXY": str(pki / proxy),
        "X509_CERT_DIR": str(pki / "certificates"),
        "X509_USER_CERT": str(pki / "no-user-certificate.pem"),
        "X509_USER_KEY": str(pki / "no-user-key.pem"),
        "XrdSecGSISRVNAMES": "localhost",
    }
