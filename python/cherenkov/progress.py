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


class Bars:
    """Rich progress bars on stderr, one per task (a tree read, or each dataset of a job), with
    entries done of the total, entries/s, MB/s and the time left."""

    def __init__(self, totals: dict[str, int]):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn

        self.progress = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("entries {task.fields[rates]}"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.tasks = {name: self.progress.add_task(name, total=total, rates="") for name, total in totals.items()}
        self.progress.start()

    def update(self, name: str, done: int, nbytes: int, elapsed: float) -> None:
        rates = f"{done / elapsed:,.0f}/s, {nbytes / 1e6 / elapsed:,.1f} MB/s" if elapsed > 0 else ""
        self.progress.update(self.tasks[name], completed=done, rates=rates)

    def set_total(self, name: str, total: int) -> None:
        self.progress.update(self.tasks[name], total=total)

    def close(self) -> None:
        self.progress.stop()


def wants_bars(progress) -> bool:
    """`None`: bars when stderr is a terminal; True/False: force them on/off."""
    return sys.stderr.isatty() if progress is None else progress is True


class Progress:
    """`progress=None`: a bar when stderr is a terminal; True/False: force on/off; a callable:
    called with a `ProgressUpdate` after each step instead of drawing."""

    def __init__(self, progress, entries_total: int, description: str):
        self.total = entries_total
        self.description = description
        self.callback: Callable[[ProgressUpdate], None] | None = progress if callable(progress) else None
        self.bars = Bars({description: entries_total}) if self.callback is None and wants_bars(progress) else None
        self.began = time.perf_counter()
        self.entries = 0
        self.bytes = 0

    def advance(self, entries: int, nbytes: int) -> None:
        self.entries += entries
        self.bytes += nbytes
        update = ProgressUpdate(self.entries, self.total, self.bytes, time.perf_counter() - self.began)
        if self.callback is not None:
            self.callback(update)
        elif self.bars is not None:
            self.bars.update(self.description, self.entries, self.bytes, update.elapsed)

    def close(self) -> None:
        if self.bars is not None:
            self.bars.close()
            self.bars = None
