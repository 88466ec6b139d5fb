"""Splitting a dataset into work packets.

Each file is cut once into chunks of whole clusters (`Tree.steps(step_size)`), numbered across its
dataset; the processor sees exactly these chunks whatever the executor. A packet is a run of
consecutive chunks of one file. Like PROOF's adaptive packetizer, the packet size follows the speed
measured for the worker that asks: about `target_seconds` of work, and never more than a share of
what is left, so packets shrink towards the end and slow workers do not keep the job waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from cherenkov.processing.dataset import FileSpec


@dataclass
class FileInfo:
    """A file whose metadata has been read: its chunks and where they sit in the dataset's numbering."""

    spec: FileSpec
    num_entries: int
    chunks: list[tuple[int, int]]  # (entry_start, entry_stop)
    first_chunk: int = 0  # number of the file's first chunk within its dataset
    file: object = None  # the open cherenkov.File, for executors in this process

    @property
    def url(self) -> str:
        return self.spec.url


@dataclass
class OpenFailure:
    spec: FileSpec
    error: BaseException


def open_files(specs: list[FileSpec], step_size: int, open_file: Callable, threads: int = 16) -> list:
    """Open every file's metadata concurrently (the GIL is released while a file opens): a FileInfo
    or an OpenFailure per spec, in order. `open_file(url)` returns a cherenkov.File."""

    def one(spec: FileSpec):
        try:
            f = open_file(spec.url)
            tree = f[spec.tree]
            return FileInfo(spec, tree.num_entries, tree.steps(step_size), file=f)
        except Exception as e:  # reported by name later; the job decides whether to go on
            return OpenFailure(spec, e)

    if not specs:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(specs)))) as pool:
        return list(pool.map(one, specs))


@dataclass
class Packet:
    """Chunks [first_chunk, first_chunk + len(chunks)) of a dataset, all in one file."""

    id: int
    dataset: str
    url: str
    tree: str
    first_chunk: int
    chunks: list[tuple[int, int]]
    attempts: int = 0
    failed_on: set = field(default_factory=set)  # workers it failed on; a retry goes elsewhere

    @property
    def entry_start(self) -> int:
        return self.chunks[0][0]

    @property
    def entry_stop(self) -> int:
        return self.chunks[-1][1]

    @property
    def num_entries(self) -> int:
        return self.entry_stop - self.entry_start

    def __str__(self) -> str:
        return f"packet {self.id} ({self.url}, entries {self.entry_start}..{self.entry_stop})"


class _Cursor:
    """The part of a file not yet handed out."""

    def __init__(self, info: FileInfo):
        self.info = info
        self.next = 0  # index into info.chunks

    @property
    def remaining_entries(self) -> int:
        if self.next >= len(self.info.chunks):
            return 0
        return self.info.num_entries - self.info.chunks[self.next][0]


class Packetizer:
    """Hands out packets to workers on request, sized by each worker's measured speed."""

    def __init__(self, files: list[FileInfo], target_seconds: float = 5.0, max_share: float = 0.25):
        self.target_seconds = target_seconds
        self.max_share = max_share  # a packet takes at most this share of a worker's part of what is left
        self.cursors = {info.url: _Cursor(info) for info in files if info.chunks}
        self.retry: list[Packet] = []
        self.rate: dict[str, float] = {}  # entries per second, per worker
        self.last_file: dict[str, str] = {}
        self.busy_on: dict[str, int] = {}  # url -> workers on it
        self._ids = 0

    @property
    def remaining_entries(self) -> int:
        return sum(c.remaining_entries for c in self.cursors.values()) + sum(p.num_entries for p in self.retry)

    def exhausted(self) -> bool:
        return not self.retry and all(c.remaining_entries == 0 for c in self.cursors.values())

    def next_packet(self, worker: str, num_workers: int, others_busy: bool) -> Packet | None:
        """The next packet for `worker`, or None when nothing suits it now. A packet that failed on
        this worker waits for another one unless no other worker is busy (then it is this or nothing)."""
        for p in self.retry:
            if worker not in p.failed_on or not others_busy or len(p.failed_on) >= num_workers:
                self.retry.remove(p)
                return p
        cursor = self._pick_file(worker)
        if cursor is None:
            return None
        info = cursor.info
        want = self._packet_entries(worker, num_workers)
        first = cursor.next
        taken = 0
        while cursor.next < len(info.chunks) and (taken == 0 or taken + _size(info.chunks[cursor.next]) <= want):
            taken += _size(info.chunks[cursor.next])
            cursor.next += 1
        self._ids += 1
        self.last_file[worker] = info.url
        return Packet(self._ids, info.spec.dataset, info.url, info.spec.tree, info.first_chunk + first, info.chunks[first : cursor.next])

    def _pick_file(self, worker: str) -> _Cursor | None:
        # stay on the same file (it is open, its cache is warm); else the biggest file nobody reads
        last = self.cursors.get(self.last_file.get(worker, ""))
        if last is not None and last.remaining_entries:
            return last
        left = [c for c in self.cursors.values() if c.remaining_entries]
        if not left:
            return None
        return min(left, key=lambda c: (c.info.url in self.last_file.values(), -c.remaining_entries))

    def _packet_entries(self, worker: str, num_workers: int) -> int:
        rate = self.rate.get(worker)
        if rate is None:
            return 1  # one chunk: it measures the worker and trains its access profile
        share = self.max_share * self.remaining_entries / max(1, num_workers)
        return max(1, int(min(rate * self.target_seconds, share)))

    def completed(self, worker: str, packet: Packet, seconds: float) -> None:
        rate = packet.num_entries / max(seconds, 1e-6)
        old = self.rate.get(worker)
        self.rate[worker] = rate if old is None else 0.5 * old + 0.5 * rate

    def failed(self, worker: str, packet: Packet) -> None:
        """Put `packet` back, to be retried on another worker if there is one."""
        packet.attempts += 1
        packet.failed_on.add(worker)
        self.rate.pop(worker, None)  # measure it again
        self.retry.append(packet)

    def drop_file(self, url: str) -> list[Packet]:
        """Stop handing out `url`: returns packets for its chunks not handed out (and retries queued)."""
        dropped = [p for p in self.retry if p.url == url]
        self.retry = [p for p in self.retry if p.url != url]
        cursor = self.cursors.get(url)
        if cursor is not None and cursor.next < len(cursor.info.chunks):
            info = cursor.info
            self._ids += 1
            dropped.append(Packet(self._ids, info.spec.dataset, url, info.spec.tree, info.first_chunk + cursor.next, info.chunks[cursor.next :]))
            cursor.next = len(info.chunks)
        return dropped


def _size(chunk: tuple[int, int]) -> int:
    return chunk[1] - chunk[0]


def number_chunks(files: list[FileInfo]) -> dict[str, int]:
    """Number chunks across each dataset's files, in order; returns chunks per dataset."""
    counts: dict[str, int] = {}
    for info in files:
        info.first_chunk = counts.get(info.spec.dataset, 0)
        counts[info.spec.dataset] = info.first_chunk + len(info.chunks)
    return counts


def now() -> float:
    return time.perf_counter()
