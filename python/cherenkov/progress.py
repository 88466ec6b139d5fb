"""Progress of long reads: a rich progress bar on terminals, or a callback for notebooks."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class ProgressUpdate:
    """Passed to progress callbacks after each step."""

    entries_done: int
    entries_total: int
    bytes_done: int
    elapsed: float

    @property
    def entries_per_second(self) -> float:
        return self.entries_done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def megabytes_per_second(self) -> float:
        return self.bytes_done / 1e6 / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        rate = self.entries_per_second
        return (self.entries_total - self.entries_done) / rate if rate > 0 else None


class Progress:
    """`progress=None`: a bar when stderr is a terminal; True/False: force on/off; a callable:
    called with a `ProgressUpdate` after each step instead of drawing."""

    def __init__(self, progress, entries_total: int, description: str):
        self.total = entries_total
        self.callback: Callable[[ProgressUpdate], None] | None = progress if callable(progress) else None
        show = sys.stderr.isatty() if progress is None else (progress is True)
        self.bar = None
        if show and self.callback is None:
            from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn

            self.bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,} entries"),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                transient=True,
            )
            self.task = self.bar.add_task(description, total=entries_total, rate="")
            self.bar.start()
        self.began = time.perf_counter()
        self.entries = 0
        self.bytes = 0

    def advance(self, entries: int, nbytes: int) -> None:
        self.entries += entries
        self.bytes += nbytes
        update = ProgressUpdate(self.entries, self.total, self.bytes, time.perf_counter() - self.began)
        if self.callback is not None:
            self.callback(update)
        elif self.bar is not None:
            rate = f"{update.entries_per_second:,.0f} entries/s, {update.megabytes_per_second:,.1f} MB/s"
            self.bar.update(self.task, completed=self.entries, rate=rate)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
