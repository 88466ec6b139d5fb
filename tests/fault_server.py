"""A small HTTP file server for the faults real servers cannot be made to show on demand: a file
replaced between two requests (same size, new ETag), answers dripping at a few bytes a second
(every one, or only the next few), a refused request (404) for one name. And `DripRelay`, a TCP
relay in front of a real server (xrootd) whose connections open at a given moment drip what the
server sends from then on, while connections made later go at full speed: toxiproxy's toxics act
on every connection of a proxy alike, old and new, so they cannot drip one answer and let its
retry through.

It answers GET with `Range:` as nginx does (206 with Content-Range for one range,
multipart/byteranges for several, ETag and Last-Modified on every answer) from files held in
memory, in a thread of the test's process. Tests change its behaviour between requests:

>>> with FaultServer({"f.root": data}) as server:
...     url = server.url("f.root")
...     server.replace("f.root", other_data)    # a new version: new ETag and Last-Modified
...     server.drip_rate = 1                     # every answer from now on: 1 byte a second
...     server.drip_next(1, rate=1)              # only the next answer: 1 byte a second

Run as a script to serve a folder by hand: `python tests/fault_server.py DIR [--drip BYTES_PER_S]`.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BOUNDARY = "cherenkov-fault-server"


class _Version:
    def __init__(self, data: bytes, generation: int):
        self.data = data
        self.etag = f'"{hashlib.sha1(data).hexdigest()[:16]}-{generation}"'
        self.last_modified = email.utils.formatdate(1_700_000_000 + generation, usegmt=True)


def parse_ranges(header: str, size: int) -> list[tuple[int, int]] | None:
    """`bytes=a-b,c-,-n` as (start, stop) pairs within `size`; None when not a byte-range header."""
    match = re.fullmatch(r"\s*bytes\s*=\s*(.+)", header)
    if not match:
        return None
    out = []
    for spec in match.group(1).split(","):
        first, _, last = spec.strip().partition("-")
        if first == "":
            start, stop = max(0, size - int(last)), size
        else:
            start = int(first)
            stop = min(size, int(last) + 1) if last else size
        if start < stop:
            out.append((start, stop))
    return out


class FaultServer:
    """Files by name, served on 127.0.0.1 from a thread; see the module's documentation."""

    def __init__(self, files: dict[str, bytes]):
        self._versions = {name: _Version(data, 0) for name, data in files.items()}
        self._generation = 0
        self.drip_rate: float | None = None  # bytes per second of every answer's body, when set
        self._drips: list[float] = []  # rates of the next answers that drip, one each
        self.dripped = 0  # answers that dripped
        self.missing: set[str] = set()  # names answered with 404
        self.requests = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/{name}"

    def replace(self, name: str, data: bytes) -> None:
        """Serve `data` as `name` from now on: a new version, with a new ETag and Last-Modified."""
        with self._lock:
            self._generation += 1
            self._versions[name] = _Version(data, self._generation)

    def drip_next(self, count: int = 1, rate: float = 1) -> None:
        """The next `count` answers drip their body at `rate` bytes a second; later ones do not."""
        with self._lock:
            self._drips.extend([rate] * count)

    def _rate_of_this_answer(self) -> float | None:
        with self._lock:
            if self._drips:
                self.dripped += 1
                return self._drips.pop(0)
        return self.drip_rate

    def version(self, name: str) -> _Version | None:
        with self._lock:
            return None if name in self.missing else self._versions.get(name)

    def __enter__(self) -> FaultServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                server.requests += 1
                version = server.version(self.path.lstrip("/"))
                if version is None:
                    return self._answer(404, {}, b"not found")
                size = len(version.data)
                headers = {"ETag": version.etag, "Last-Modified": version.last_modified, "Accept-Ranges": "bytes"}
                ranges = parse_ranges(self.headers.get("Range", ""), size)
                if not ranges:
                    if ranges == []:
                        return self._answer(416, {**headers, "Content-Range": f"bytes */{size}"}, b"")
                    return self._answer(200, headers, version.data)
                if len(ranges) == 1:
                    start, stop = ranges[0]
                    headers["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
                    return self._answer(206, headers, version.data[start:stop])
                body = b"".join(
                    f"\r\n--{BOUNDARY}\r\nContent-Type: application/octet-stream\r\n"
                    f"Content-Range: bytes {start}-{stop - 1}/{size}\r\n\r\n".encode()
                    + version.data[start:stop]
                    for start, stop in ranges
                )
                body += f"\r\n--{BOUNDARY}--\r\n".encode()
                headers["Content-Type"] = f"multipart/byteranges; boundary={BOUNDARY}"
                return self._answer(206, headers, body)

            def _answer(self, status: int, headers: dict, body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                rate = server._rate_of_this_answer() if status in (200, 206) else None
                if not rate:
                    self.wfile.write(body)
                    return
                for k in range(len(body)):
                    if server._stop.is_set():
                        return
                    self.wfile.write(body[k : k + 1])
                    self.wfile.flush()
                    time.sleep(1 / rate)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that gave up on a dripping answer closes its connection: expected

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


class DripRelay:
    """A TCP relay on 127.0.0.1 to `upstream_port`: `drip(rate)` makes the connections open at
    that moment send on what the server sends them at `rate` bytes a second from then on (their
    answers drip: the server is alive, the transfer crawls); connections made later are not
    touched. `dripped` counts the bytes that went through at the drip's pace. The relay runs in a
    thread of its own (asyncio) and stops with its context."""

    CHUNK = 64 << 10

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.dripped = 0
        self._open: set[asyncio.Event] = set()  # per live connection: set when it drips
        self._rates: dict[asyncio.Event, float] = {}
        self._tasks: set[asyncio.Task] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="drip-relay", daemon=True)

    def __enter__(self) -> DripRelay:
        self._thread.start()

        async def start():
            self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
            return self._server.sockets[0].getsockname()[1]

        self.port = asyncio.run_coroutine_threadsafe(start(), self._loop).result(timeout=10)
        return self

    def drip(self, rate: float = 1) -> int:
        """Make every connection open now drip at `rate` bytes a second; returns how many."""

        async def mark() -> int:
            for dripping in self._open:
                self._rates[dripping] = rate
                dripping.set()
            return len(self._open)

        return asyncio.run_coroutine_threadsafe(mark(), self._loop).result(timeout=10)

    async def _connection(self, client_r, client_w) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_w.close()
            return
        dripping = asyncio.Event()
        self._open.add(dripping)
        up = asyncio.ensure_future(self._pipe(client_r, server_w, None))
        down = asyncio.ensure_future(self._pipe(server_r, client_w, dripping))
        self._tasks.update((up, down))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        self._tasks.difference_update((up, down))
        self._open.discard(dripping)
        self._rates.pop(dripping, None)
        for task in (up, down):
            task.cancel()
        for w in (client_w, server_w):
            w.close()

    async def _pipe(self, reader, writer, dripping: asyncio.Event | None) -> None:
        try:
            while chunk := await reader.read(self.CHUNK):
                if dripping is None or not dripping.is_set():
                    writer.write(chunk)
                    await writer.drain()
                    continue
                for k in range(len(chunk)):
                    writer.write(chunk[k : k + 1])
                    await writer.drain()
                    self.dripped += 1
                    await asyncio.sleep(1 / self._rates.get(dripping, 1))
        except (OSError, asyncio.CancelledError):
            pass

    def __exit__(self, *exc) -> None:
        async def stop():
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await asyncio.sleep(0)  # the connections' own tasks see their pipes end and close

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--drip", type=float, help="bytes per second of every answer")
    args = parser.parse_args()
    files = {p.name: p.read_bytes() for p in args.folder.iterdir() if p.is_file()}
    with FaultServer(files) as server:
        server.drip_rate = args.drip
        print(f"serving {len(files)} files at {server.url('')}")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
