"""Progress of long work (a tree read, a processing job): rich bars on terminals, one per task, and
a callback with a `ProgressUpdate` for notebooks."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class ProgressUpdate:
    """What is done so far; given to progress callbacks after every step (a tree read) or finished
    packet (a processing job).

    `tasks` maps each task (the tree, or each dataset of a job) to (entries done, entries in
    total). For jobs, `partial()` merges what has arrived so far into {dataset: output} (in entry
    order, with the gaps of packets still running); it costs a merge, so call it when you want to
    look. `events_written`: events the job's workers wrote to files so far (`cherenkov.Events`).
    A job merging its output files (`output_max_size`) then reports the task "merging" (files
    merged, of the total)."""

    tasks: dict[str, tuple[int, int]]
    bytes: int
    elapsed_seconds: float
    steps_done: int
    _partial: Callable | None = field(default=None, repr=False)
    events_written: int = 0

    @property
    def entries(self) -> int:
        return sum(done for done, _ in self.tasks.values())

    @property
    def total_entries(self) -> int:
        return sum(total for _, total in self.tasks.values())

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
        if self._partial is None:
            raise ValueError("only processing jobs have partial outputs")
        return self._partial()


class _Bars:
    """Rich progress bars on stderr, one per task, with entries done of the total, entries/s, MB/s
    and the time left (or, counting bytes, bytes done of the total and MB/s)."""

    def __init__(self, totals: dict[str, int], unit: str = "entries"):
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self.unit = unit
        counted = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
        self.progress = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            counted,
            TextColumn(("" if unit == "bytes" else f"{unit} ") + "{task.fields[rates]}"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.tasks = {name: self.progress.add_task(name, total=total, rates="") for name, total in totals.items()}
        self.progress.start()

    def update(self, name: str, done: int, nbytes: int, elapsed: float, written: int = 0) -> None:
        rates = f"{done / elapsed:,.0f}/s, {nbytes / 1e6 / elapsed:,.1f} MB/s" if elapsed > 0 else ""
        if self.unit == "bytes":
            rates = f"{nbytes / 1e6 / elapsed:,.1f} MB/s" if elapsed > 0 else ""
        rates += f", {written:,} written" if written else ""
        self.progress.update(self.tasks[name], completed=done, rates=rates)

    def set_total(self, name: str, total: int) -> None:
        self.progress.update(self.tasks[name], total=total)

    def close(self) -> None:
        self.progress.stop()


class Progress:
    """Counts progress per task (in entries, or in `unit="bytes"`). `show=None`: bars when stderr is
    a terminal; True/False force them on/off. `callback` (or a callable `show`, for `Tree.iterate(progress=f)`) receives a
    `ProgressUpdate` after each step instead of, or besides, the bars."""

    def __init__(
        self, totals: dict[str, int], show=None, callback: Callable | None = None, partial: Callable | None = None, unit: str = "entries"
    ):
        if callable(show):
            show, callback = False, show
        self.totals = dict(totals)
        self.done = dict.fromkeys(totals, 0)
        self.bytes = dict.fromkeys(totals, 0)
        self.written = dict.fromkeys(totals, 0)
        self.steps = 0
        self.callback = callback
        self.partial = partial
        self.began = time.perf_counter()
        wanted = sys.stderr.isatty() if show is None else show is True
        self.bars = _Bars(self.totals, unit) if wanted else None

    def advance(self, task: str, entries: int, nbytes: int, written: int = 0) -> None:
        self.done[task] += entries
        self.bytes[task] += nbytes
        self.written[task] += written
        self.steps += 1
        elapsed = time.perf_counter() - self.began
        if self.bars is not None:
            self.bars.update(task, self.done[task], self.bytes[task], elapsed, self.written[task])
        if self.callback is not None:
            tasks = {name: (self.done[name], total) for name, total in self.totals.items()}
            written = sum(self.written.values())
            self.callback(ProgressUpdate(tasks, sum(self.bytes.values()), elapsed, self.steps, self.partial, written))

    def grow(self, task: str, entries: int) -> None:
        """Entries found later (a dataset's files as they are opened) join the total."""
        self.totals[task] += entries
        if self.bars is not None:
            self.bars.set_total(task, self.totals[task])

    def skipped(self, task: str, entries: int) -> None:
        """Entries that will not be read (a bad file skipped) leave the total."""
        self.totals[task] -= entries
        if self.bars is not None:
            self.bars.set_total(task, self.totals[task])

    def close(self) -> None:
        if self.bars is not None:
            self.bars.close()
            self.bars = None
