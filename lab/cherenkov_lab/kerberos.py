"""Kerberos (`krb5`) for tests and benchmarks: a realm of its own with a KDC on 127.0.0.1 (MIT
krb5, Debian packages krb5-kdc, krb5-admin-server, krb5-user), a user with a ticket, and the
service key an xrootd asking for `krb5` authenticates clients with.

Everything lives in one folder and is found through the environment: `KRB5_CONFIG` (the realm and
its KDC, no DNS), `KRB5_KDC_PROFILE` (the KDC's database) and `KRB5CCNAME` (the user's tickets).
The server must be started with `KRB5_CONFIG` in its environment."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from cherenkov_lab.servers import _Process, free_port, wait_for_port
from cherenkov_lab.tokens import give_to_xrootd

REALM = "CHERENKOV.TEST"
PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
USER, PASSWORD = "tester", "tester-password"
SERVICE = f"xrootd/localhost@{REALM}"


def available() -> bool:
    return all(shutil.which(p) for p in PROGRAMS)


class Kdc(_Process):
    """A KDC for `REALM` on a free port of 127.0.0.1, with `USER` (a ticket in `ccache`) and the
    xrootd service principal (its key in `keytab`), in `folder` (one xrootd can reach)."""

    def __init__(self, folder: Path):
        self.workdir = folder  # _Process.stop removes it
        os.chmod(folder, 0o755)
        self.port = free_port()
        self.config = folder / "krb5.conf"
        self.config.write_text(
            f"[libdefaults]\n default_realm = {REALM}\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
            " rdns = false\n dns_canonicalize_hostname = false\n udp_preference_limit = 1\n"
            f"[realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n"
        )
        (folder / "kdc.conf").write_text(
            f"[kdcdefaults]\n kdc_ports = {self.port}\n kdc_tcp_ports = {self.port}\n"
            f"[realms]\n {REALM} = {{\n  database_name = {folder}/principal\n  key_stash_file = {folder}/stash\n"
            f"  acl_file = {folder}/kadm5.acl\n }}\n[logging]\n kdc = FILE:{folder}/kdc.log\n"
        )
        self.keytab = folder / "xrootd.keytab"
        self.ccache = folder / "tickets"
        env = {**os.environ, "KRB5_CONFIG": str(self.config), "KRB5_KDC_PROFILE": str(folder / "kdc.conf")}
        self._run(["kdb5_util", "create", "-s", "-r", REALM, "-P", "kdc-master-password"], env)
        for query in (f"addprinc -pw {PASSWORD} {USER}", f"addprinc -randkey {SERVICE}", f"ktadd -k {self.keytab} {SERVICE}"):
            self._run(["kadmin.local", "-r", REALM, "-q", query], env)
        give_to_xrootd(self.keytab)
        self.proc = subprocess.Popen(["krb5kdc", "-n", "-r", REALM], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc, "krb5kdc", folder / "kdc.log")
        self._run(["kinit", USER], {**env, "KRB5CCNAME": f"FILE:{self.ccache}"}, data=f"{PASSWORD}\n")

    @staticmethod
    def _run(command: list[str], env: dict, data: str | None = None) -> None:
        subprocess.run(command, env=env, input=data, text=True, check=True, capture_output=True, timeout=60)

    def server_config(self) -> str:
        """xrootd configuration lines: `krb5` only, with the service key."""
        return f"xrootd.seclib libXrdSec.so\nsec.protocol krb5 {self.keytab} {SERVICE}\nsec.protbind * only krb5\n"

    def client_environment(self, ccache: Path | None = None) -> dict[str, str]:
        """A client's environment: the realm, and the user's tickets (or those in `ccache`)."""
        return {"KRB5_CONFIG": str(self.config), "KRB5CCNAME": f"FILE:{ccache or self.ccache}"}
