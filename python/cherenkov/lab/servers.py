"""Start real servers on 127.0.0.1 and put toxiproxy in front of them.

Every server is a child process in its own temporary directory, started on a free port, and stopped
(killed) when its context ends. Nothing listens beyond the loopback address except xrootd, which binds
all interfaces by design; the lab only ever connects to it through 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOOLS = REPO / ".tools" / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, log: Path | None = None, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            detail = log.read_text()[-2000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with code {proc.returncode} before listening on {port}\n{detail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


def _require(binary: str) -> str:
    path = shutil.which(binary) or (str(TOOLS / binary) if (TOOLS / binary).exists() else None)
    if path is None:
        raise FileNotFoundError(f"{binary} is not installed: run `make setup` (scripts/setup.sh) first")
    return path


class _Process:
    """A server process that is killed when the context ends."""

    proc: subprocess.Popen | None = None
    workdir: Path

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


class XrootdServer(_Process):
    """An XRootD data server exporting `data_dir` (Debian's xrootd-server)."""

    def __init__(self, data_dir: str | os.PathLike, port: int | None = None, extra_config: str = ""):
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="cherenkov-xrootd-"))
        os.chmod(self.workdir, 0o777)  # xrootd runs as nobody and writes its admin files here
        self.log = self.workdir / "xrootd.log"
        config = self.workdir / "xrootd.cfg"
        config.write_text(
            f"xrd.port {self.port}\nall.export /\noss.localroot {self.data_dir}\n"
            f"all.adminpath {self.workdir}\nall.pidpath {self.workdir}\n{extra_config}\n"
        )
        args = [_require("xrootd"), "-c", str(config), "-l", str(self.log), "-n", f"ck{self.port}"]
        if os.geteuid() == 0:
            args[1:1] = ["-R", "nobody"]  # xrootd refuses to run as root
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc, "xrootd", self.log)

    def url(self, name: str, port: int | None = None) -> str:
        return f"root://127.0.0.1:{port or self.port}//{name}"


class Cmsd(_Process):
    """The cluster management daemon beside an xrootd (same configuration file): a manager's cmsd
    listens for its data servers' cmsds, which report the files they hold."""

    def __init__(self, server: XrootdServer, listen_port: int | None = None):
        self.workdir = Path(tempfile.mkdtemp(prefix="cherenkov-cmsd-"))
        os.chmod(self.workdir, 0o777)  # cmsd runs as nobody too
        self.log = self.workdir / "cmsd.log"
        args = [_require("cmsd"), "-c", str(server.workdir / "xrootd.cfg"), "-l", str(self.log), "-n", f"ck{server.port}"]
        if os.geteuid() == 0:
            args[1:1] = ["-R", "nobody"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if listen_port is not None:
            wait_for_port(listen_port, self.proc, "cmsd", self.log)


class XrootdFederation:
    """A redirector (xrootd + cmsd, `all.role manager`) and `servers` data servers (xrootd + cmsd,
    `all.role server`) exporting the same folder, all on 127.0.0.1. Clients open
    `url(name)` on the redirector, which redirects them to a data server and answers `kXR_locate`
    with all of them. `kill(i)` kills data server i (its xrootd) to simulate a failure.

    The data servers are reached directly, not through toxiproxy: the redirector hands out the
    addresses they register with, so a proxy in front would be bypassed. Tests of slow or lossy
    replicas give the replicas' URLs through proxies explicitly instead (`cherenkov.open([...])`)."""

    def __init__(self, data_dir: str | os.PathLike, servers: int = 2):
        self.data_dir = Path(data_dir).resolve()
        self.count = servers

    def __enter__(self) -> "XrootdFederation":
        self.parts: list[_Process] = []
        cms_port = free_port()
        common = f"all.manager 127.0.0.1:{cms_port}\ncms.delay startup 1\n"
        try:
            self.manager = self._start(XrootdServer(self.data_dir, extra_config="all.role manager\n" + common))
            self._start(Cmsd(self.manager, listen_port=cms_port))
            self.servers = []
            for _ in range(self.count):
                server = self._start(XrootdServer(self.data_dir, extra_config="all.role server\n" + common))
                self._start(Cmsd(server))
                self.servers.append(server)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, part):
        self.parts.append(part)
        return part

    def url(self, name: str) -> str:
        return self.manager.url(name)

    def kill(self, i: int) -> None:
        self.servers[i].stop()

    def __exit__(self, *exc) -> None:
        for part in reversed(self.parts):
            part.__exit__(*exc)


class NginxServer(_Process):
    """nginx serving `data_dir` over HTTP with multi-range answers (`max_ranges`)."""

    def __init__(self, data_dir: str | os.PathLike, port: int | None = None, max_ranges: int | None = 4096):
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="cherenkov-nginx-"))
        ranges = f"max_ranges {max_ranges};" if max_ranges is not None else ""
        config = self.workdir / "nginx.conf"
        config.write_text(
            f"daemon off; worker_processes 1; pid {self.workdir}/nginx.pid; error_log {self.workdir}/error.log;\n"
            "events { worker_connections 256; }\n"
            f"http {{ access_log off; sendfile on; client_body_temp_path {self.workdir};\n"
            f"  server {{ listen 127.0.0.1:{self.port}; root {self.data_dir}; {ranges} }} }}\n"
        )
        self.proc = subprocess.Popen(
            [_require("nginx"), "-c", str(config), "-p", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.proc, "nginx", self.workdir / "error.log")

    def url(self, name: str, port: int | None = None) -> str:
        return f"http://127.0.0.1:{port or self.port}/{name}"


class Toxiproxy(_Process):
    """Shopify's toxiproxy: TCP proxies with injected latency, bandwidth limits and faults."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="cherenkov-toxiproxy-"))
        self.proc = subprocess.Popen(
            [_require("toxiproxy-server"), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.proc, "toxiproxy")

    def api(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def proxy(self, name: str, upstream_port: int, listen_port: int | None = None) -> int:
        """Create a proxy to 127.0.0.1:upstream_port; returns the port it listens on."""
        listen_port = listen_port or free_port()
        self.api("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen_port}", "upstream": f"127.0.0.1:{upstream_port}", "enabled": True})
        return listen_port

    def toxic(self, proxy: str, name: str, kind: str, stream: str = "downstream", **attributes) -> None:
        self.api("POST", f"/proxies/{proxy}/toxics", {"name": name, "type": kind, "stream": stream, "attributes": attributes})

    def remove_toxic(self, proxy: str, name: str) -> None:
        self.api("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def clear(self, proxy: str) -> None:
        for t in self.api("GET", f"/proxies/{proxy}/toxics") or []:
            self.remove_toxic(proxy, t["name"])

    def set_rtt(self, proxy: str, rtt_ms: float) -> None:
        """A round-trip delay of `rtt_ms`: half on the way up, half on the way down."""
        for stream in ("upstream", "downstream"):
            try:
                self.remove_toxic(proxy, f"latency-{stream}")
            except Exception:
                pass
            if rtt_ms > 0:
                self.toxic(proxy, f"latency-{stream}", "latency", stream=stream, latency=int(rtt_ms // 2))

    def enable(self, proxy: str, enabled: bool) -> None:
        self.api("POST", f"/proxies/{proxy}", {"enabled": enabled})


class Lab:
    """xrootd and nginx serving one folder, each behind its own toxiproxy proxy.

    >>> with Lab(folder) as lab:
    ...     lab.set_rtt(137)
    ...     cherenkov.open(lab.url("root", "file.root"))
    """

    def __init__(self, data_dir: str | os.PathLike, nginx_max_ranges: int | None = 4096):
        self.data_dir = Path(data_dir)
        self.nginx_max_ranges = nginx_max_ranges

    def __enter__(self) -> "Lab":
        self.xrootd = XrootdServer(self.data_dir).__enter__()
        self.nginx = NginxServer(self.data_dir, max_ranges=self.nginx_max_ranges).__enter__()
        self.toxiproxy = Toxiproxy().__enter__()
        self.ports = {
            "root": self.toxiproxy.proxy("xrootd", self.xrootd.port),
            "http": self.toxiproxy.proxy("nginx", self.nginx.port),
        }
        return self

    def url(self, protocol: str, name: str, direct: bool = False) -> str:
        """URL of `name` over "root" or "http", through the proxy unless `direct`."""
        server = self.xrootd if protocol == "root" else self.nginx
        return server.url(name, None if direct else self.ports[protocol])

    def proxy_name(self, protocol: str) -> str:
        return "xrootd" if protocol == "root" else "nginx"

    def set_rtt(self, rtt_ms: float) -> None:
        for name in ("xrootd", "nginx"):
            self.toxiproxy.set_rtt(name, rtt_ms)

    def __exit__(self, *exc) -> None:
        for part in ("toxiproxy", "nginx", "xrootd"):
            server = getattr(self, part, None)
            if server is not None:
                server.__exit__(*exc)
