"""Does the lab's xrootd grant `kXR_bind` substreams (issue 20, item 3), and for which reads? Raw
protocol against a local XRootD server: log in and open a file of random bytes on one connection,
bind a second TCP connection to that session, send a `kXR_read` with the substream's path id on the
first, and check that the answer comes back on the second, equal to the file; then the same with a
`kXR_readv` (the vectored read cherenkov's reads are made of), and say where its answer came back.
Prints what it saw; exits 1 if the server refuses the bind or the bytes differ.

    python bench/xrootd_bind_probe.py
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from cherenkov_lab import XrootdServer

KXR_PROTOCOL, KXR_LOGIN, KXR_OPEN, KXR_READ, KXR_BIND, KXR_READV = 3006, 3007, 3010, 3013, 3024, 3025
KXR_OK, KXR_OKSOFAR = 0, 4000


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the server closed the connection")
        data += chunk
    return data


def answer(sock: socket.socket) -> tuple[bytes, int, bytes]:
    stream_id, status, dlen = struct.unpack(">2sHI", recv_exact(sock, 8))
    return stream_id, status, recv_exact(sock, dlen)


def request(stream_id: int, code: int, params: bytes, data: bytes = b"") -> bytes:
    return struct.pack(">HH", stream_id, code) + params.ljust(16, b"\0") + struct.pack(">I", len(data)) + data


def connect(port: int) -> socket.socket:
    """TCP connect, handshake and kXR_protocol (sent together)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(struct.pack(">5i", 0, 0, 0, 4, 2012) + request(1, KXR_PROTOCOL, struct.pack(">i", 0x511)))
    recv_exact(sock, 16)  # the server's handshake answer
    _, status, _ = answer(sock)
    assert status == KXR_OK, status
    return sock


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-bind-"))
    folder.chmod(0o755)
    payload = os.urandom(4 << 20)
    (folder / "f.bin").write_bytes(payload)
    (folder / "f.bin").chmod(0o644)
    with XrootdServer(folder) as server:
        first = connect(server.port)
        first.sendall(request(2, KXR_LOGIN, struct.pack(">i8sBBBB", os.getpid(), b"probe", 0, 0, 0x80 | 5, 0)))
        _, status, body = answer(first)
        session = body[:16]
        first.sendall(request(3, KXR_OPEN, struct.pack(">HH", 0, 0x10), b"/f.bin"))
        _, status, body = answer(first)
        assert status == KXR_OK, status
        handle = body[:4]
        second = connect(server.port)
        t0 = time.perf_counter()
        second.sendall(request(4, KXR_BIND, session))
        _, status, body = answer(second)
        print(f"kXR_bind: status {status}, substream path id {body[:1].hex()}, {1e3 * (time.perf_counter() - t0):.2f} ms")
        if status != KXR_OK:
            shutil.rmtree(folder, ignore_errors=True)
            return 1
        offset, length = 1 << 20, 1 << 20
        first.sendall(request(5, KXR_READ, handle + struct.pack(">qi", offset, length), body[:1] + bytes(7)))
        second.settimeout(5)
        got, status = b"", KXR_OKSOFAR
        while status == KXR_OKSOFAR:
            stream_id, status, chunk = answer(second)
            got += chunk
        same = got == payload[offset : offset + length]
        print(f"kXR_read sent on the first connection: {len(got)} bytes came back on the bound one, equal to the file: {same}")
        # kXR_readv: the path id is the last byte of its 16 parameter bytes
        ranges = [(0, 1000), (2 << 20, 5000)]
        vector = b"".join(handle + struct.pack(">iq", n, o) for o, n in ranges)
        first.sendall(request(6, KXR_READV, bytes(15) + body[:1], vector))
        ready, _, _ = select.select([first, second], [], [], 5)
        where = {first: "the first (main) connection", second: "the bound one"}
        print(f"kXR_readv with the same path id: its answer came back on {', '.join(where[r] for r in ready) or 'neither'}")
    shutil.rmtree(folder, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
