"""Start real servers on 127.0.0.1 and put toxiproxy in front of them.

Every server is a child process in its own temporary directory, started on a free port, and stopped
(killed) when its context ends. Nothing listens beyond the loopback address except xrootd, which binds
all interfaces by design; the lab only ever connects to it through 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools" / "bin"
# Data servers answer checksum queries (computed when first asked): replicas can be verified.
CHECKSUMS = "xrootd.chksum adler32"


FIRST_TEST_PORT = 20000
_given_ports: set[int] = set()
_given_lock = threading.Lock()


def free_port() -> int:
    """A port nobody listens on now, for a server about to start: below the kernel's ephemeral
    range, so no outgoing connection takes it before the server binds it (a port from
    ``bind(0)`` can be), drawn at random so that test processes running at once rarely meet,
    and never handed out twice by this process."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    with _given_lock:
        for _ in range(1000 if ephemeral > FIRST_TEST_PORT + 1000 else 0):
            port = random.randrange(FIRST_TEST_PORT, ephemeral)
            if port in _given_ports:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _given_ports.add(port)
            return port
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
            f"xrd.port {self.port}\nall.export /\noss.localroot {self.data_dir}\n{CHECKSUMS}\n"
            f"all.adminpath {self.workdir}\nall.pidpath {self.workdir}\n{extra_config}\n"
        )
        args = [_require("xrootd"), "-c", str(config), "-l", str(self.log), "-n", f"ck{self.port}"]
        if os.geteuid() == 0:
            args[1:1] = ["-R", "nobody"]  # xrootd refuses to run as root
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc, "xrootd", self.log)

    def url(self, name: str, port: int | None = None) -> str:
        return f"root://127.0.0.1:{port or self.port}//{name}"


class _Daemon(_Process):
    """An xrootd or cmsd of a federation: `config` in the federation's folder, run as `name`."""

    def __init__(self, program: str, workdir: Path, name: str, config: str, args: tuple = (), port: int | None = None):
        self.workdir = workdir / name  # its admin path: the xrootd and cmsd of a server share it
        self.workdir.mkdir(exist_ok=True)
        os.chmod(self.workdir, 0o777)  # they run as nobody
        self.log = self.workdir / name / f"{program}.log"  # where they write with -l and -n
        config_file = workdir / f"{name}.cfg"
        config_file.write_text(f"{config}all.adminpath {self.workdir}\nall.pidpath {self.workdir}\n")
        command = [_require(program), *args, "-c", str(config_file), "-l", str(self.workdir / f"{program}.log"), "-n", name]
        if os.geteuid() == 0:
            command[1:1] = ["-R", "nobody"]  # xrootd and cmsd refuse to run as root
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if port is not None:
            wait_for_port(port, self.proc, f"{program} {name}", self.log)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def __exit__(self, *exc) -> None:
        self.signal(signal.SIGCONT)  # a frozen process is killed like any other
        self.stop()  # the folder is the federation's


class FederatedServer:
    """One data server of an `XrootdFederation`: its xrootd and cmsd, and its proxy if any."""

    def __init__(self, port: int, proxy: str | None):
        self.port = port
        self.proxy = proxy
        self.daemons: list[_Daemon] = []

    @property
    def address(self) -> str:
        """`host:port` the redirector names this server by: its proxy's, when proxied."""
        return f"[::1]:{self.port}" if self.proxy else f"127.0.0.1:{self.port}"

    def url(self, name: str) -> str:
        return f"root://{self.address}//{name}"


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class XrootdFederation:
    """A redirector (xrootd + cmsd, `all.role manager`) and `servers` data servers (xrootd + cmsd
    each, `all.role server`) serving the same folder, on free ports. Clients open `url(name)` on the
    redirector, which redirects them to a data server and answers `kXR_locate` with all of them.
    `kill(i)` kills data server i, `freeze(i)` stops its xrootd (SIGSTOP: it stays registered but
    answers nothing), `thaw(i)` resumes it.

    The redirector names each data server by the address its cmsd logged in from and the port its
    xrootd listens on. With `proxied=True` each data server sits behind its own toxiproxy proxy
    (`self.toxiproxy`, proxy `server.proxy`) and the redirector names the proxy: the xrootd listens
    on 127.0.0.1:PORT only (`-I v4`), the proxy on [::1]:PORT, and the cmsd logs in over [::1]. A
    redirector names only servers of the address family a client came in on (cherenkov's login does
    not claim both), so clients then reach the redirector over [::1] too: `url()` does.

    Data servers start one after the other, each once the previous one has registered (`kXR_locate`
    names it): a second or so each. `XrootdFederation.missing(proxied)` says what is not installed.
    """

    START_TIMEOUT = 40.0

    def __init__(self, data_dir: str | os.PathLike, servers: int = 2, proxied: bool = False):
        self.data_dir = Path(data_dir).resolve()
        self.count = servers
        self.proxied = proxied

    @staticmethod
    def missing(proxied: bool = False) -> str | None:
        """Why a federation cannot start here, or None."""
        for binary in ("xrootd", "cmsd") + (("toxiproxy-server",) if proxied else ()):
            if shutil.which(binary) is None and not (TOOLS / binary).exists():
                return f"{binary} is not installed: run `make setup`"
        if proxied and not _ipv6_loopback():
            return "no IPv6 loopback (::1), which proxied data servers need"
        return None

    def __enter__(self) -> XrootdFederation:
        self.workdir = Path(tempfile.mkdtemp(prefix="cherenkov-federation-"))
        os.chmod(self.workdir, 0o777)
        self.daemons: list[_Daemon] = []
        self.servers: list[FederatedServer] = []
        self.toxiproxy = None
        self.loopback = "[::1]" if self.proxied else "127.0.0.1"
        try:
            if self.proxied:
                self.toxiproxy = Toxiproxy().__enter__()
            cms_port, self.port = free_port(), free_port()
            # Its kXR_wait answers last a second (not 5 to 90): at startup, while it looks a file up,
            # while it has no data server.
            manager = (
                f"all.role manager\nall.manager 127.0.0.1:{cms_port}\nxrd.port {self.port} if exec xrootd\n"
                "cms.delay startup 1 lookup 1 service 1 suspend 1\nall.export /\n"
            )
            self._start("cmsd", "manager", manager, port=cms_port)
            self._start("xrootd", "manager", manager, port=self.port)
            for i in range(self.count):
                self._start_server(i, cms_port)
                self._wait_until_registered(i + 1)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, program, name, config, args=(), port=None) -> _Daemon:
        daemon = _Daemon(program, self.workdir, name, config, args, port)
        self.daemons.append(daemon)
        return daemon

    def _start_server(self, i: int, cms_port: int) -> None:
        name = f"server{i}"
        # The proxy (on [::1]:PORT to 127.0.0.1:PORT) comes first: it holds the port number.
        port = self.toxiproxy.proxy(name, listen_host="[::1]") if self.toxiproxy else free_port()
        # xrootd itself (IPv4 only when proxied) reads the manager's address too.
        config = (
            f"all.role server\nif exec cmsd\nall.manager {self.loopback}:{cms_port}\nelse\n"
            f"all.manager 127.0.0.1:{cms_port}\nfi\nxrd.port {port} if exec xrootd\n"
            f"all.export /\noss.localroot {self.data_dir}\n{CHECKSUMS}\n"
        )
        server = FederatedServer(port, name if self.proxied else None)
        # cmsd first: xrootd logs in to it at start, and would try again only ten seconds later.
        server.daemons.append(self._start("cmsd", name, config))
        admin_socket = self.workdir / name / name / ".olb" / "olbd.admin"
        deadline = time.monotonic() + self.START_TIMEOUT
        while not admin_socket.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"cmsd {name} did not start:\n{self.logs()}")
            time.sleep(0.02)
        args = ("-I", "v4") if self.proxied else ()
        server.daemons.append(self._start("xrootd", name, config, args, port=port))
        self.servers.append(server)

    def _wait_until_registered(self, count: int) -> None:
        """Poll kXR_locate, another file each time (the redirector keeps what it found for a file,
        and a server registered since may be missing from it for a while)."""
        from cherenkov._core import locate

        files = sorted(p.name for p in self.data_dir.iterdir() if p.is_file())
        deadline = time.monotonic() + self.START_TIMEOUT
        for name in itertools.cycle(files):
            try:
                if len(locate(self.url(name), timeout=2.0)) >= count:
                    return
            except Exception as e:
                last = e
            else:
                last = None
            if time.monotonic() > deadline:
                raise RuntimeError(f"the redirector did not name {count} data servers ({last}):\n{self.logs()}")
            time.sleep(0.2)

    def url(self, name: str) -> str:
        return f"root://{self.loopback}:{self.port}//{name}"

    def index(self, url_or_address: str) -> int:
        """Index of the data server a replica's URL (or `host:port`) names."""
        return next(i for i, s in enumerate(self.servers) if s.address in url_or_address)

    def kill(self, i: int) -> None:
        for daemon in self.servers[i].daemons:
            daemon.stop()

    def freeze(self, i: int) -> None:
        self.servers[i].daemons[1].signal(signal.SIGSTOP)

    def thaw(self, i: int) -> None:
        self.servers[i].daemons[1].signal(signal.SIGCONT)

    def logs(self) -> str:
        return "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in sorted(self.workdir.glob("*/*/*.log")))

    def __exit__(self, *exc) -> None:
        for daemon in reversed(getattr(self, "daemons", [])):
            daemon.__exit__(*exc)
        if getattr(self, "toxiproxy", None) is not None:
            self.toxiproxy.__exit__(*exc)
        shutil.rmtree(self.workdir, ignore_errors=True)


class NginxServer(_Process):
    """nginx serving `data_dir` over HTTP with multi-range answers (`max_ranges`)."""

    def __init__(
        self,
        data_dir: str | os.PathLike,
        port: int | None = None,
        max_ranges: int | None = 4096,
        http_config: str = "",
        server_config: str = "",
    ):
        """`http_config` and `server_config` are added to nginx's `http` and `server` blocks."""
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="cherenkov-nginx-"))
        ranges = f"max_ranges {max_ranges};" if max_ranges is not None else ""
        config = self.workdir / "nginx.conf"
        config.write_text(
            f"daemon off; worker_processes 1; pid {self.workdir}/nginx.pid; error_log {self.workdir}/error.log;\n"
            "events { worker_connections 256; }\n"
            f"http {{ access_log off; sendfile on; client_body_temp_path {self.workdir}; {http_config}\n"
            f"  server {{ listen 127.0.0.1:{self.port}; root {self.data_dir}; {ranges} {server_config} }} }}\n"
        )
        self.proc = subprocess.Popen(
            [_require("nginx"), "-c", str(config), "-p", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.proc, "nginx", self.workdir / "error.log")

    def url(self, name: str, port: int | None = None) -> str:
        return f"http://127.0.0.1:{port or self.port}/{name}"

    def stop(self) -> None:
        """nginx's fast shutdown (SIGTERM): the master stops its worker, then exits; killing the
        master would leave the worker behind."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        super().stop()


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

    def proxy(self, name: str, upstream_port: int | None = None, listen_host: str = "127.0.0.1") -> int:
        """Create a proxy on a free port of `listen_host` (an IPv6 address in brackets) to
        127.0.0.1:upstream_port, or to 127.0.0.1 on its own port number (for a server started
        after it); return that port. A port is tried again when toxiproxy finds it taken since it
        was seen free (an outgoing connection's ephemeral port, say)."""
        refusals = []
        while len(refusals) < 20:
            port = free_port()
            upstream = f"127.0.0.1:{upstream_port or port}"
            body = {"name": name, "listen": f"{listen_host}:{port}", "upstream": upstream, "enabled": True}
            try:
                self.api("POST", "/proxies", body)
                return port
            except urllib.error.HTTPError as e:
                refusals.append(e.read().decode(errors="replace"))
        raise RuntimeError(f"toxiproxy refused 20 ports for {name}: {refusals}")

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


class SharedLink:
    """One capped link for every connection through it: TCP relays (one per server) whose
    server-to-client bytes, over all their connections, share one budget of `rate_mb` MB/s.
    toxiproxy's bandwidth toxic caps each connection on its own (as a TCP window does); this is the
    other kind of narrow: a thin pipe that more connections cannot widen.

    Each chunk read from a server (at most 64 KiB) is given the link's next free slot (its length at
    the rate) and sent when the slot ends: connections take turns, in the order their bytes came.
    The client-to-server side is not capped. The relays run in one thread (asyncio) and stop with
    the context.
    """

    CHUNK = 64 << 10

    def __init__(self, rate_mb: float):
        if not rate_mb > 0:
            raise ValueError("a shared link needs a rate above 0 MB/s")
        self.rate = rate_mb * 1e6
        self.bytes = 0  # carried server to client, over every connection
        self.connections = 0
        self._free_at = 0.0  # when the link has sent everything given to it so far (loop time)
        self._servers: list[asyncio.base_events.Server] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="shared-link", daemon=True)
        self._thread.start()

    def relay(self, upstream_port: int) -> int:
        """A relay on a free port of 127.0.0.1 to 127.0.0.1:upstream_port; returns its port."""

        async def start() -> int:
            server = await asyncio.start_server(lambda r, w: self._connection(r, w, upstream_port), "127.0.0.1", 0)
            self._servers.append(server)
            return server.sockets[0].getsockname()[1]

        return asyncio.run_coroutine_threadsafe(start(), self._loop).result(timeout=10)

    async def _connection(self, client_r, client_w, upstream_port: int) -> None:
        self.connections += 1
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            client_w.close()
            return
        up = asyncio.ensure_future(self._pipe(client_r, server_w, capped=False))
        down = asyncio.ensure_future(self._pipe(server_r, client_w, capped=True))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for w in (client_w, server_w):
            w.close()

    async def _pipe(self, reader, writer, capped: bool) -> None:
        try:
            while chunk := await reader.read(self.CHUNK):
                if capped:
                    now = self._loop.time()
                    self._free_at = max(self._free_at, now) + len(chunk) / self.rate
                    self.bytes += len(chunk)
                    await asyncio.sleep(self._free_at - now)
                writer.write(chunk)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if writer.can_write_eof():
                try:
                    writer.write_eof()
                except OSError:
                    pass

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> SharedLink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


LINKS = ("narrow", "thin")


class Lab:
    """xrootd and nginx serving one folder, each behind its own toxiproxy proxy.

    >>> with Lab(folder) as lab:
    ...     lab.set_rtt(137)
    ...     cherenkov.open(lab.url("root", "file.root"))

    `link` narrows the links to `rate` MB/s: ``"narrow"`` caps each connection (toxiproxy's
    bandwidth toxic, per connection: as a TCP window or a per-stream server limit does; more
    connections carry more), ``"thin"`` caps all connections together (a `SharedLink` between
    toxiproxy and the servers: more connections carry no more).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike,
        nginx_max_ranges: int | None = 4096,
        link: str | None = None,
        rate: float | None = None,
    ):
        if link is not None and (link not in LINKS or not rate or rate <= 0):
            raise ValueError(f"link must be one of {LINKS} with a rate in MB/s above 0")
        self.data_dir = Path(data_dir)
        self.nginx_max_ranges = nginx_max_ranges
        self.link, self.rate = link, rate

    def __enter__(self) -> Lab:
        try:
            self.xrootd = XrootdServer(self.data_dir).__enter__()
            self.nginx = NginxServer(self.data_dir, max_ranges=self.nginx_max_ranges).__enter__()
            self.toxiproxy = Toxiproxy().__enter__()
            upstreams = {"root": self.xrootd.port, "http": self.nginx.port}
            if self.link == "thin":
                self.shared_link = SharedLink(self.rate)
                upstreams = {k: self.shared_link.relay(port) for k, port in upstreams.items()}
            self.ports = {
                "root": self.toxiproxy.proxy("xrootd", upstreams["root"]),
                "http": self.toxiproxy.proxy("nginx", upstreams["http"]),
            }
            if self.link == "narrow":
                for name in ("xrootd", "nginx"):
                    self.toxiproxy.toxic(name, "bandwidth", "bandwidth", stream="downstream", rate=int(self.rate * 1000))
        except BaseException:
            self.__exit__(None, None, None)
            raise
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
        for part in ("toxiproxy", "shared_link", "nginx", "xrootd"):
            server = getattr(self, part, None)
            if server is not None:
                server.__exit__(*exc)
