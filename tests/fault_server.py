"""A small HTTP file server for the faults real servers cannot be made to show on demand: a file
replaced between two requests (same size, new ETag), an answer dripping at a few bytes a second,
a refused request (404) for one name.

It answers GET with `Range:` as nginx does (206 with Content-Range for one range,
multipart/byteranges for several, ETag and Last-Modified on every answer) from files held in
memory, in a thread of the test's process. Tests change its behaviour between requests:

>>> with FaultServer({"f.root": data}) as server:
...     url = server.url("f.root")
...     server.replace("f.root", other_data)    # a new version: new ETag and Last-Modified
...     server.drip_rate = 1                     # every answer from now on: 1 byte a second

Run as a script to serve a folder by hand: `python tests/fault_server.py DIR [--drip BYTES_PER_S]`.
"""

from __future__ import annotations

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
                rate = server.drip_rate
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
