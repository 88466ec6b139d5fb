"""What a processing job did: per-worker statistics, failures, bad files, and a summary table."""

from __future__ import annotations

from dataclasses import dataclass, field

from cherenkov import _core
from cherenkov.processing.executors import WorkerStats


class ProcessingError(Exception):
    """The job cannot give a complete result: a packet kept failing, or a file could not be read."""


@dataclass
class PacketFailure:
    """One failed attempt at a packet."""

    packet: int
    url: str
    entries: tuple[int, int]
    worker: str
    error: str

    def __str__(self) -> str:
        url = _core.redact(self.url)
        return f"packet {self.packet} ({url}, entries {self.entries[0]}..{self.entries[1]}) on {self.worker}: {self.error}"


@dataclass
class Report:
    """What a job did. `workers` maps each worker to its `WorkerStats`; `total` sums them.

    `failures` lists every failed attempt (retried or not), `lost_workers` the workers that died,
    `bad_files` the files skipped (URL to error) and `skipped_entries` the entries not read because
    of them (files that could not even be opened count 0: their size is unknown)."""

    executor: str
    entries: int = 0
    packets: int = 0
    files: int = 0
    elapsed_seconds: float = 0.0
    open_seconds: float = 0.0  # reading the metadata of every file, concurrently
    retries: int = 0
    failures: list[PacketFailure] = field(default_factory=list)
    lost_workers: list[str] = field(default_factory=list)
    bad_files: dict[str, str] = field(default_factory=dict)
    skipped_entries: int = 0
    workers: dict[str, WorkerStats] = field(default_factory=dict)
    merges: int = 0  # merges of event outputs' files (output_max_size), run by the workers
    merge_seconds: float = 0.0

    @property
    def total(self) -> WorkerStats:
        out = WorkerStats()
        for stats in self.workers.values():
            out = out + stats
        return out

    @property
    def bound(self) -> str:
        """'CPU-bound' when workers mostly computed. When they mostly waited for data: 'latency-bound'
        if a round trip took 10 ms or more while moving under 50 MB/s (the wait was not for bytes),
        else 'I/O-bound'."""
        t = self.total
        if t.wall_seconds <= 0:
            return "idle"
        if t.io_wait_seconds < 0.5 * t.wall_seconds:
            return "CPU-bound"
        per_trip = t.fetch_seconds / max(1, t.round_trips)
        slow_trips = per_trip >= 0.010 and t.bytes / max(t.fetch_seconds, 1e-9) < 50e6
        return "latency-bound" if slow_trips else "I/O-bound"

    def summary(self) -> str:
        head = f"{'worker':<28} {'packets':>7} {'entries':>10} {'wall s':>8} {'cpu s':>8} {'wait s':>8} {'fetch s':>8}"
        rows = [f"{head} {'MB':>9} {'requests':>8} {'trips':>6}"]
        for name, s in sorted(self.workers.items()) + [("total", self.total)]:
            rows.append(
                f"{name[-28:]:<28} {s.packets:>7} {s.entries:>10} {s.wall_seconds:>8.2f} {s.cpu_seconds:>8.2f} "
                f"{s.io_wait_seconds:>8.2f} {s.fetch_seconds:>8.2f} {s.bytes / 1e6:>9.1f} {s.requests:>8} {s.round_trips:>6}"
            )
        rate = self.entries / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0
        rows.append(
            f"{self.entries} entries in {self.elapsed_seconds:.2f} s ({rate:,.0f}/s, opening {self.files} files "
            f"{self.open_seconds:.2f} s) with {self.executor}: {self.bound}; {self.retries} retries, "
            f"{len(self.lost_workers)} workers lost, {len(self.bad_files)} bad files"
        )
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.summary()
