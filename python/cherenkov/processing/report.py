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
    """What a job did. `workers` maps each worker to its `WorkerStats` (entries, bytes, busy and
    idle time, ...); `total` sums them.

    `failures` lists every failed attempt (retried or not), `lost_workers` the workers that died,
    `bad_files` the files skipped (URL to error) and `skipped_entries` the entries not read because
    of them (files that could not even be opened count 0: their size is unknown).
    `metadata_opened` counts the files opened to learn their metadata (0 when every file's was
    kept from an earlier job), `metadata_requests` and `metadata_bytes` what those opens asked
    their servers for, `open_seconds` the time until every file was known (packets ran
    meanwhile), `first_output_seconds` the time from the job's start to the first chunk processed.
    `copies` counts packets copied to an idle worker near the end, `copies_won` those whose copy
    answered first, `discarded` what the answers that came second did (counted in `workers` too,
    not in the result); `changed_files` the files that changed on their server since their metadata
    was learned (read as they are now, their kept metadata dropped). `reused_workers` counts the
    worker processes taken up from an earlier call (`LocalProcesses` keeps them), which started
    nothing."""

    executor: str
    entries: int = 0
    packets: int = 0
    files: int = 0
    elapsed_seconds: float = 0.0
    open_seconds: float = 0.0
    metadata_opened: int = 0
    metadata_requests: int = 0
    metadata_bytes: int = 0
    first_output_seconds: float | None = None
    retries: int = 0
    copies: int = 0
    copies_won: int = 0
    discarded: WorkerStats = field(default_factory=WorkerStats)
    failures: list[PacketFailure] = field(default_factory=list)
    lost_workers: list[str] = field(default_factory=list)
    bad_files: dict[str, str] = field(default_factory=dict)
    changed_files: list[str] = field(default_factory=list)
    skipped_entries: int = 0
    workers: dict[str, WorkerStats] = field(default_factory=dict)
    merges: int = 0  # merges of event outputs' files (output_max_size), run by the workers
    merge_seconds: float = 0.0
    reused_workers: int = 0

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
        head = f"{'worker':<28} {'packets':>7} {'entries':>10} {'busy s':>8} {'idle s':>7} {'cpu s':>8} {'wait s':>8}"
        rows = [f"{head} {'fetch s':>8} {'MB':>9} {'requests':>8} {'opened':>6}"]
        for name, s in sorted(self.workers.items()) + [("total", self.total)]:
            rows.append(
                f"{name[-28:]:<28} {s.packets:>7} {s.entries:>10} {s.wall_seconds:>8.2f} {s.idle_seconds:>7.2f} {s.cpu_seconds:>8.2f} "
                f"{s.io_wait_seconds:>8.2f} {s.fetch_seconds:>8.2f} {s.bytes / 1e6:>9.1f} {s.requests:>8} {s.files_opened:>6}"
            )
        rate = self.entries / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0
        first = f"{self.first_output_seconds:.2f} s" if self.first_output_seconds is not None else "none"
        rows.append(
            f"{self.entries} entries in {self.elapsed_seconds:.2f} s ({rate:,.0f}/s) with {self.executor}: {self.bound}; "
            f"{self.files} files known in {self.open_seconds:.2f} s ({self.metadata_opened} opened for their metadata), "
            f"first chunk done at {first}"
        )
        rows.append(
            f"{self.retries} retries, {len(self.lost_workers)} workers lost, {len(self.bad_files)} bad files, "
            f"{self.copies} straggler copies ({self.copies_won} answered first)"
        )
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.summary()
