"""Where the time of a read went: the engine's counters and the byte source's, per file and summed
over a dataset (ROOT's TTreePerfStats: ReadCalls, ReadSize, ReadUnZip, real and CPU time, and more)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from rich.table import Table

from cherenkov._core import EngineCounters, ReplicaReport, SourceCounters
from cherenkov.summary import human_bytes


def as_dict(obj) -> dict:
    """The attributes of a typed object from the core (counters, reports, branch info)."""
    out = {}
    for name in dir(obj):
        value = getattr(obj, name)
        if not name.startswith("_") and not callable(value):
            out[name] = as_dict(value) if type(value).__module__ == "cherenkov._core" else value
    return out


@dataclass
class Stats:
    """Counters since the file was opened (or summed over files): the engine's
    (`cherenkov.EngineCounters`: baskets, bytes, times, caches) and the byte source's
    (`cherenkov.SourceCounters`: requests, round trips, ranges, bytes), both readable as
    attributes of this object (``stats.baskets``, ``stats.round_trips``; ``bytes_read`` is the
    source's ``bytes``)."""

    sources: tuple[str, ...] = ()
    engine: EngineCounters = field(default_factory=EngineCounters)
    source: SourceCounters = field(default_factory=SourceCounters)
    #: Since the file was opened: wall-clock time, and the CPU time of this process (all threads).
    real_seconds: float = 0.0
    cpu_seconds: float = 0.0
    #: Per replica (for replica sets): `cherenkov.ReplicaReport`s.
    per_source: tuple[ReplicaReport, ...] = ()
    #: The throughput steps that set the number of parallel streams (`File.stream_steps()`).
    stream_steps: tuple = ()

    def __getattr__(self, name: str):
        for counters in (self.__dict__.get("engine"), self.__dict__.get("source")):
            if counters is not None and hasattr(counters, name):
                return getattr(counters, name)
        raise AttributeError(f"'Stats' has no counter {name!r}")

    @property
    def bytes_read(self) -> int:
        return self.source.bytes

    def __add__(self, other: Stats) -> Stats:
        """Counters add up; times since opening do not (files read together overlap): the sum keeps
        the longest."""
        return Stats(
            sources=self.sources + other.sources,
            engine=self.engine + other.engine,
            source=self.source + other.source,
            real_seconds=max(self.real_seconds, other.real_seconds),
            cpu_seconds=max(self.cpu_seconds, other.cpu_seconds),
            per_source=self.per_source + other.per_source,
            stream_steps=self.stream_steps + other.stream_steps,
        )

    @staticmethod
    def total(items) -> Stats:
        out = Stats()
        for s in items:
            out = out + s
        return out

    @property
    def extra_bytes(self) -> int:
        """Bytes read beyond the baskets asked for (metadata, coalescing gaps)."""
        return max(self.bytes_read - self.compressed_bytes, 0)

    @property
    def hit_rate(self) -> float:
        """Branch accesses of lazy chunks served from bytes already read (prefetched, speculated,
        startup or trigger reads), over all accesses (Furano's hit rate); 0 without accesses."""
        accesses = self.cache_hits + self.cache_misses
        return self.cache_hits / accesses if accesses else 0.0

    @property
    def miss_rate(self) -> float:
        """Branch accesses of lazy chunks that needed a request of their own, over all accesses."""
        accesses = self.cache_hits + self.cache_misses
        return self.cache_misses / accesses if accesses else 0.0

    @property
    def wasted_fraction(self) -> float:
        """Bytes fetched on speculation and never used, over the basket bytes read (the budget's
        measure, ``speculate_budget``)."""
        return self.speculative_wasted_bytes / self.compressed_bytes if self.compressed_bytes else 0.0

    def to_dict(self) -> dict:
        """Every counter by name (engine and source side by side), with the sources, times and
        per-replica reports: for JSON."""
        return {
            **as_dict(self.engine),
            **as_dict(self.source),
            "bytes_read": self.bytes_read,
            "extra_bytes": self.extra_bytes,
            "hit_rate": self.hit_rate,
            "miss_rate": self.miss_rate,
            "wasted_fraction": self.wasted_fraction,
            "sources": list(self.sources),
            "real_seconds": self.real_seconds,
            "cpu_seconds": self.cpu_seconds,
            "per_source": [as_dict(r) for r in self.per_source],
            "stream_steps": [as_dict(s) for s in self.stream_steps],
        }

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
            (
                "cache",
                f"{self.cache_hits:,} hits",
                f"{self.cache_misses:,} misses in {self.miss_fetches:,} fetches; "
                f"{self.startup_fetches} startup, {self.learned_fetches} learned-set fetches",
            ),
            ("read but unused", human_bytes(self.unused_bytes), "unzipped bytes read ahead and never used"),
            (
                "speculation",
                human_bytes(self.speculative_bytes),
                f"{human_bytes(self.speculative_used_bytes)} used, {human_bytes(self.speculative_wasted_bytes)} wasted "
                f"({100 * self.wasted_fraction:.1f} % of basket bytes); hit rate {100 * self.hit_rate:.0f} %, "
                f"miss rate {100 * self.miss_rate:.0f} %",
            ),
        ]
        if self.streams_peak:
            measured = ", ".join(f"{s.streams}: {s.throughput / 1e6:.0f} MB/s" for s in self.stream_steps[:8])
            rows.append(("streams", f"{self.streams} in use", f"at most {self.streams_peak}; {measured or 'not measured'}"))
        if self.disk_cache_hits or self.disk_cache_misses:
            saved = f"{human_bytes(self.disk_cache_bytes_saved)} served from disk"
            rows.append(("disk cache", f"{self.disk_cache_hits:,} hits", f"{self.disk_cache_misses:,} ranges fetched; {saved}"))
        for row in rows:
            t.add_row(*row)
        for src in self.per_source:
            detail = (
                f"{src.requests:,} requests, {src.errors} errors, latency {1000 * src.quality.latency:.0f} ms, "
                f"{src.quality.throughput / 1e6:.0f} MB/s"
            )
            t.add_row(f"  {src.name}", human_bytes(src.bytes), detail)
        return t


class Timer:
    """Real and CPU time of a block: ``with Timer() as t: ...; t.real, t.cpu``."""

    def __enter__(self) -> Timer:
        self._real, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.real = time.perf_counter() - self._real
        self.cpu = time.process_time() - self._cpu
