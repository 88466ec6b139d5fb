"""Where the time of a read went: the engine's counters and the byte source's, per file and summed
over a dataset (ROOT's TTreePerfStats: ReadCalls, ReadSize, ReadUnZip, real and CPU time, and more)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields

from rich.table import Table

from cherenkov.summary import human_bytes


@dataclass
class Stats:
    """Counters since the file was opened (or summed over files)."""

    sources: tuple[str, ...] = ()
    read_calls: int = 0
    baskets: int = 0
    compressed_bytes: int = 0
    uncompressed_bytes: int = 0
    fetch_seconds: float = 0.0
    decompress_wall_seconds: float = 0.0
    decompress_cpu_seconds: float = 0.0
    blocked_seconds: float = 0.0
    prefetched_steps: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    miss_fetches: int = 0
    startup_fetches: int = 0
    learned_fetches: int = 0
    unused_bytes: int = 0
    requests: int = 0
    round_trips: int = 0
    ranges: int = 0
    bytes_read: int = 0
    #: Since the file was opened: wall-clock time, and the CPU time of this process (all threads).
    real_seconds: float = 0.0
    cpu_seconds: float = 0.0
    #: Per source (per replica for replica sets): name, requests, bytes, errors, latency, throughput.
    per_source: tuple[dict, ...] = ()

    @classmethod
    def from_core(cls, d: dict, replicas: list[dict] | None = None) -> "Stats":
        d = dict(d)
        name = d.pop("source")
        per_source = tuple(replicas) if replicas else (
            {"name": name, "requests": d["requests"], "bytes": d["bytes_read"], "errors": 0},
        )
        return cls(sources=(name,), per_source=per_source, **d)

    def __add__(self, other: "Stats") -> "Stats":
        """Counters add up; times since opening do not (files read together overlap): the sum keeps
        the longest."""
        out = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            out[f.name] = max(a, b) if f.name in ("real_seconds", "cpu_seconds") else a + b
        return Stats(**out)

    @staticmethod
    def total(items) -> "Stats":
        out = Stats()
        for s in items:
            out = out + s
        return out

    @property
    def extra_bytes(self) -> int:
        """Bytes read beyond the baskets asked for (metadata, coalescing gaps)."""
        return max(self.bytes_read - self.compressed_bytes, 0)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["sources"] = list(self.sources)
        d["per_source"] = list(self.per_source)
        d["extra_bytes"] = self.extra_bytes
        return d

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def table(self, title: str = "cherenkov read statistics") -> Table:
        t = Table(title=title, show_header=False, title_justify="left")
        t.add_column(style="bold")
        t.add_column(justify="right")
        t.add_column(style="dim")
        rows = [
            ("real time", f"{self.real_seconds:.3f} s", f"{self.cpu_seconds:.3f} s CPU (this process, since opening)"),
            ("read calls", f"{self.read_calls:,}", "arrays() calls, prefetched steps and cache fills"),
            ("baskets", f"{self.baskets:,}", ""),
            ("requests", f"{self.requests:,}", f"{self.round_trips:,} round trips, {self.ranges:,} ranges"),
            ("bytes read", human_bytes(self.bytes_read), f"{human_bytes(self.extra_bytes)} beyond the baskets"),
            ("basket bytes", human_bytes(self.compressed_bytes), f"{human_bytes(self.uncompressed_bytes)} unzipped"),
            ("waiting for bytes", f"{self.fetch_seconds:.3f} s", "summed over reads"),
            ("decompression", f"{self.decompress_wall_seconds:.3f} s", f"{self.decompress_cpu_seconds:.3f} s CPU over threads"),
            ("blocked on data", f"{self.blocked_seconds:.3f} s", f"{self.prefetched_steps:,} steps prefetched"),
            ("cache", f"{self.cache_hits:,} hits", f"{self.cache_misses:,} misses in {self.miss_fetches:,} fetches; "
             f"{self.startup_fetches} startup, {self.learned_fetches} learned-set fetches"),
            ("read but unused", human_bytes(self.unused_bytes), "unzipped bytes read ahead and never used"),
        ]
        for row in rows:
            t.add_row(*row)
        if len(self.per_source) > 1:
            for src in self.per_source:
                detail = f"{src['requests']:,} requests, {src.get('errors', 0)} errors"
                if "latency_seconds" in src:
                    detail += f", latency {1000 * src['latency_seconds']:.0f} ms, {src['throughput_bytes_per_second'] / 1e6:.0f} MB/s"
                t.add_row(f"  {src['name']}", human_bytes(src["bytes"]), detail)
        return t


class Timer:
    """Real and CPU time of a block: ``with Timer() as t: ...; t.real, t.cpu``."""

    def __enter__(self) -> "Timer":
        self._real, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.real = time.perf_counter() - self._real
        self.cpu = time.process_time() - self._cpu
