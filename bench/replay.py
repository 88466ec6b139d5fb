"""Record the read trace of a cherenkov run, and replay it against the lab's HTTP server (nginx behind
toxiproxy) at a chosen round-trip time with four strategies: the classic comparison of sync single
reads, async single reads, sync vector reads and async vector reads of the same byte ranges.

    python bench/replay.py                                   # record the fixed-set read, replay at 137 ms
    python bench/replay.py record --out trace.npz [--file F] [--scenario fixed|all]
    python bench/replay.py replay trace.npz --rtt 137 [--strategies sync-single,async-vector]
                                            [--connections 4] [--budget 60]

A trace (`cherenkov.open(..., trace=True)`, then `File.trace()`) has one row per byte range: the
request it went in, offset, length, and when it was sent and answered. The replay keeps the ranges
in the order they were sent and speaks HTTP/1.1 itself (asyncio streams, keep-alive):
- sync single: one connection, one `Range: bytes=a-b` request at a time;
- async single: the same requests pipelined on `--connections` connections (no waiting for answers);
- sync vector: many ranges per request (`Range: bytes=a-b,c-d,...`, answered `206 multipart/byteranges`;
  at most 4096 ranges, nginx's max_ranges in the lab, and a Range header under nginx's 8 KB line
  limit), one request at a time;
- async vector: the vector requests pipelined on `--connections` connections.
Every byte that comes back is compared with the file on disk. A strategy still running after
`--budget` seconds stops sending; its time is then projected from the fraction done (and marked so).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

STRATEGIES = ("sync-single", "async-single", "sync-vector", "async-vector")
MAX_RANGES = 4096  # nginx max_ranges in the lab
MAX_RANGE_HEADER = 7800  # nginx rejects request header lines over 8 KB (large_client_header_buffers)
REQUESTS_PER_CONNECTION = 900  # nginx closes a keep-alive connection after 1000 requests


# ---------------------------------------------------------------- record


def record(url: str, names: list[str] | None, tree: str = "Events") -> dict:
    """Read `names` (None: every readable branch) with cherenkov's defaults and return its trace."""
    import cherenkov

    f = cherenkov.open(url, trace=True)
    t = f[tree]
    for _ in t.iterate(names, step_size=1, library="np", progress=False):
        pass
    trace = f.trace()
    return {k: np.asarray(v) for k, v in trace.items()} | {"source": np.asarray(url)}


def save(trace: dict, path: Path) -> None:
    np.savez_compressed(path, **trace)


def load(path: Path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def ranges_in_order(trace: dict) -> list[tuple[int, int]]:
    order = np.lexsort((trace["offset"], trace["sent"]))
    return [(int(trace["offset"][i]), int(trace["length"][i])) for i in order if int(trace["length"][i]) > 0]


# ---------------------------------------------------------------- HTTP


def vector_groups(ranges: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Consecutive ranges packed into requests under the range-count and header-size limits."""
    groups, current, header = [], [], 0
    for off, n in ranges:
        piece = len(f"{off}-{off + n - 1},")
        if current and (len(current) >= MAX_RANGES or header + piece > MAX_RANGE_HEADER):
            groups.append(current)
            current, header = [], 0
        current.append((off, n))
        header += piece
    if current:
        groups.append(current)
    return groups


def request_bytes(host: str, path: str, group: list[tuple[int, int]]) -> bytes:
    spec = ",".join(f"{off}-{off + n - 1}" for off, n in sorted(group))
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nRange: bytes={spec}\r\n\r\n".encode()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict, bytes]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("the server closed the connection")
    status = int(status_line.split()[1])
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", 0)))
    return status, headers, body


def pieces(status: int, headers: dict, body: bytes) -> list[tuple[int, bytes]]:
    """(offset, data) of every range in a 206 answer, single or multipart."""
    if status != 206:
        raise ValueError(f"expected 206 Partial Content, got {status} (the server ignored or refused the ranges)")
    ctype = headers.get("content-type", "")
    if not ctype.startswith("multipart/byteranges"):
        first = int(headers["content-range"].split()[1].split("-")[0])
        return [(first, body)]
    boundary = ctype.split("boundary=")[1].strip('"').encode()
    out, pos = [], 0
    marker = b"--" + boundary
    while True:
        pos = body.index(marker, pos) + len(marker)
        if body[pos : pos + 2] == b"--":
            return out
        head_end = body.index(b"\r\n\r\n", pos)
        part_headers = body[pos:head_end].decode("latin-1").lower()
        crange = part_headers.split("content-range:")[1].split("\r\n")[0].split()[1]
        lo, hi = (int(x) for x in crange.split("/")[0].split("-"))
        start = head_end + 4
        out.append((lo, body[start : start + hi - lo + 1]))
        pos = start + hi - lo + 1


class Replayer:
    def __init__(self, host: str, port: int, path: str, local_file: Path):
        self.host, self.port, self.path = host, port, path
        self.data = np.memmap(local_file, dtype=np.uint8, mode="r")
        self.mismatches = 0
        self.bytes = 0
        self.ranges = 0

    def verify(self, group: list[tuple[int, int]], answer: list[tuple[int, bytes]]) -> None:
        got = dict(answer)
        for off, n in group:
            piece = got.get(off)
            self.ranges += 1
            if piece is None or len(piece) < n or np.frombuffer(piece[:n], np.uint8).tobytes() != self.data[off : off + n].tobytes():
                self.mismatches += 1
            else:
                self.bytes += n

    async def connection(self, groups: deque, depth: int, limit: int, deadline: float, done: list) -> None:
        """Send requests from the shared queue, up to `depth` unanswered at a time, on one
        connection; at most `limit` requests per connection (nginx closes a keep-alive connection
        after 1000), then a new one."""
        while groups and time.perf_counter() < deadline:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            pending: deque = deque()
            sent = 0
            while True:
                while groups and len(pending) < depth and sent < limit and time.perf_counter() < deadline:
                    group = groups.popleft()
                    writer.write(request_bytes(self.host, self.path, group))
                    pending.append(group)
                    sent += 1
                if not pending:
                    break
                await writer.drain()
                group = pending.popleft()
                status, headers, body = await read_response(reader)
                self.verify(group, pieces(status, headers, body))
                done.append(len(group))
            writer.close()

    async def run(self, groups: list, connections: int, depth: int, budget: float) -> tuple[float, int]:
        queue, done = deque(groups), []
        limit = min(REQUESTS_PER_CONNECTION, -(-len(groups) // connections))
        t0 = time.perf_counter()
        await asyncio.gather(*(self.connection(queue, depth, limit, t0 + budget, done) for _ in range(connections)))
        return time.perf_counter() - t0, len(done)


def replay(trace: dict, url: str, local_file: Path, strategies=STRATEGIES, connections: int = 4, budget: float = 60, log=print) -> dict:
    """Replay the trace's ranges against `url` (http://host:port/path) with each strategy."""
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    ranges = ranges_in_order(trace)
    singles = [[r] for r in ranges]
    vectors = vector_groups(ranges)
    rows = []
    for strategy in strategies:
        groups = vectors if strategy.endswith("vector") else singles
        conns, depth = (1, 1) if strategy.startswith("sync") else (connections, 1 << 30)
        r = Replayer(host, int(port), "/" + path, local_file)
        seconds, finished = asyncio.run(r.run(groups, conns, depth, budget))
        fraction = finished / len(groups)
        row = {
            "strategy": strategy,
            "requests": len(groups),
            "ranges": len(ranges),
            "connections": conns,
            "bytes": int(sum(n for _, n in ranges)),
            "seconds": seconds / fraction if fraction else None,
            "projected": fraction < 1,
            "done_fraction": fraction,
            "mismatches": r.mismatches,
            "bytes_verified": r.bytes,
        }
        rows.append(row)
        log(
            f"  {strategy:<13} {len(groups):6d} requests on {conns} connection(s): "
            f"{'projected ' if row['projected'] else ''}{row['seconds']:.2f} s"
            + (f" ({100 * fraction:.0f} % done in the {budget:g} s budget)" if row["projected"] else "")
            + (f", {r.mismatches} ranges DIFFER from the file" if r.mismatches else ", every byte checked against the file")
        )
    return {"rows": rows, "url": url, "ranges": len(ranges), "bytes": int(sum(n for _, n in ranges))}


def markdown(table: dict) -> str:
    rtt = table.get("rtt_ms")
    lines = [
        f"### Trace replay at {rtt:g} ms: the same {table['ranges']:,} byte ranges "
        f"({table['bytes'] / 1e6:.1f} MB, cherenkov's trace of the fixed-set read), four ways\n",
        "| strategy | requests | connections | seconds | vs sync single |",
        "|---|---:|---:|---:|---:|",
    ]
    base = next((r["seconds"] for r in table["rows"] if r["strategy"] == "sync-single"), None)
    for r in table["rows"]:
        secs = f"{'~' if r['projected'] else ''}{r['seconds']:.2f}" if r["seconds"] else "n/a"
        ratio = f"{base / r['seconds']:.0f}x faster" if base and r["seconds"] and r["strategy"] != "sync-single" else ""
        lines.append(f"| {r['strategy']} | {r['requests']:,} | {r['connections']} | {secs} | {ratio} |")
    lines.append("")
    lines.append(
        "~: stopped at the time budget and projected from the fraction done. Every byte read was compared "
        "with the file on disk" + (" (all equal)." if all(r["mismatches"] == 0 for r in table["rows"]) else ": MISMATCHES, see the log.")
    )
    return "\n".join(lines)


def lab_replay(path: Path, names: list[str] | None, rtt: float, budget: float = 60, connections: int = 4, log=print) -> dict:
    """Record a trace of reading `names` from `path` through the lab, then replay it at `rtt` ms."""
    from cherenkov_lab import Lab

    with Lab(path.parent) as lab:
        url = lab.url("http", path.name)
        trace = record(url, names)
        lab.set_rtt(rtt)
        table = replay(trace, url, path, connections=connections, budget=budget, log=log)
    table["rtt_ms"] = rtt
    return table


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    from make_nanolike import default_output, ensure

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="record a trace of a cherenkov read of the local file")
    rec.add_argument("--file", type=Path, help="default: the lab's 40 000-entry NanoAOD-like file")
    rec.add_argument("--scenario", choices=["fixed", "all"], default="fixed")
    rec.add_argument("--out", type=Path, default=BENCH / "results" / "trace.npz")
    rep = sub.add_parser("replay", help="replay a recorded trace against the lab's nginx")
    rep.add_argument("trace", type=Path)
    rep.add_argument("--file", type=Path, help="the file the trace was recorded on (default: from the trace)")
    for p in (parser, rep):
        p.add_argument("--rtt", type=float, default=137, help="round-trip time in ms (default 137)")
        p.add_argument("--strategies", default=",".join(STRATEGIES))
        p.add_argument("--connections", type=int, default=4, help="connections of the async strategies (default 4)")
        p.add_argument("--budget", type=float, default=60, help="seconds before a strategy stops and is projected")
    args = parser.parse_args(argv)
    strategies = [s for s in args.strategies.split(",") if s] if hasattr(args, "strategies") else STRATEGIES
    if set(strategies) - set(STRATEGIES):
        parser.error(f"strategies are {', '.join(STRATEGIES)}")

    def fixed_names(path):
        import cherenkov
        from local_read import counters_of, selections

        return selections(cherenkov.open(path)["Events"], counters_of(path, "Events"))["30% by volume"]

    if args.command == "record":
        path = args.file or ensure(default_output(40_000), 40_000)
        trace = record(str(path), fixed_names(path) if args.scenario == "fixed" else None)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        save(trace, args.out)
        print(
            f"{args.out}: {len(trace['offset'])} ranges, {int(trace['length'].sum()) / 1e6:.1f} MB, "
            f"{len(np.unique(trace['request']))} requests, recorded on {path}"
        )
        return 0
    if args.command == "replay":
        from cherenkov_lab import Lab

        trace = load(args.trace)
        path = args.file or Path(str(trace["source"]))
        if not path.exists():
            parser.error(f"{path} is absent: pass --file, the local copy of the traced file")
        with Lab(path.parent) as lab:
            lab.set_rtt(args.rtt)
            table = replay(trace, lab.url("http", path.name), path, strategies, args.connections, args.budget)
        table["rtt_ms"] = args.rtt
    else:
        path = ensure(default_output(40_000), 40_000)
        print(f"recording cherenkov's read of the fixed set of {path.name} through the lab, replaying at {args.rtt:g} ms:")
        table = lab_replay(path, fixed_names(path), args.rtt, args.budget, args.connections)
    print()
    print(markdown(table))
    return 0 if all(r["mismatches"] == 0 for r in table["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
