"""Feedback while a job runs: a rich progress bar per dataset, and a callback for notebooks."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cherenkov.progress import Bars, wants_bars


@dataclass
class ProgressUpdate:
    """What a job has done so far; given to `process(..., callback=)` after every finished packet.

    `datasets` maps each dataset to (entries done, entries in total). `partial()` merges what has
    arrived so far into {dataset: output} (in entry order, with the gaps of packets still running);
    it costs a merge, so call it when you want to look."""

    datasets: dict[str, tuple[int, int]]
    bytes: int
    elapsed_seconds: float
    packets_done: int
    _partial: Callable = field(repr=False)

    @property
    def entries(self) -> int:
        return sum(done for done, _ in self.datasets.values())

    @property
    def total_entries(self) -> int:
        return sum(total for _, total in self.datasets.values())

    @property
    def entries_per_second(self) -> float:
        return self.entries / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def megabytes_per_second(self) -> float:
        return self.bytes / 1e6 / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        rate = self.entries_per_second
        return (self.total_entries - self.entries) / rate if rate > 0 else None

    def partial(self) -> dict:
        return self._partial()


class Feedback:
    """Counts progress per dataset; draws it with rich when wanted, and calls the user's callback."""

    def __init__(self, totals: dict[str, int], show: bool, callback: Callable | None, partial: Callable):
        self.totals = totals
        self.done = dict.fromkeys(totals, 0)
        self.bytes = dict.fromkeys(totals, 0)
        self.packets = 0
        self.callback = callback
        self.partial = partial
        self.start = time.perf_counter()
        self.bar = Bars(totals) if wants_bars(show) else None

    def packet_done(self, dataset: str, entries: int, nbytes: int) -> None:
        self.done[dataset] += entries
        self.bytes[dataset] += nbytes
        self.packets += 1
        elapsed = time.perf_counter() - self.start
        if self.bar is not None:
            self.bar.update(dataset, self.done[dataset], self.bytes[dataset], elapsed)
        if self.callback is not None:
            datasets = {name: (self.done[name], total) for name, total in self.totals.items()}
            self.callback(ProgressUpdate(datasets, sum(self.bytes.values()), elapsed, self.packets, self.partial))

    def skipped(self, dataset: str, entries: int) -> None:
        """Entries of a skipped bad file: they leave the total."""
        self.totals[dataset] -= entries
        if self.bar is not None:
            self.bar.set_total(dataset, self.totals[dataset])

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
