"""Splitting a dataset into work packets.

Each file is cut once into chunks of whole clusters (`Tree.steps(step_size)`), numbered across its
dataset; the processor sees exactly these chunks whatever the executor. A packet is a run of
consecutive chunks of one file. Like PROOF's adaptive packetizer, the packet size follows the speed
measured for the worker that asks: about `target_seconds` of work, and never more than a share of
what is left, so packets shrink towards the end and slow workers do not keep the job waiting.
"""

from __future__ import annotations

import heapq
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


def open_files(specs: list[FileSpec], step_size: int, open_file: Callable, threads: int = 64) -> list:
    """Open every file's metadata concurrently, `threads` at a time (an open mostly waits for round
    trips, with the GIL released): a FileInfo or an OpenFailure per spec, in order.
    `open_file(url)` returns a cherenkov.File."""

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
    file_index: int  # position of the file in the job's list (a URL may appear twice)
    dataset: str
    url: str
    tree: str
    first_chunk: int
    chunks: list[tuple[int, int]]
    attempts: int = 0
    failed_on: set = field(default_factory=set)  # workers it failed on; a retry goes elsewhere
    open_ahead: tuple[str, ...] = ()  # files the worker will probably read next

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

    def __init__(self, files: list[FileInfo], target_seconds: float = 5.0, max_share: float = 0.25, open_ahead: int = 3):
        self.target_seconds = target_seconds
        self.max_share = max_share  # a packet takes at most this share of a worker's part of what is left
        self.open_ahead = open_ahead
        self.cursors = {i: _Cursor(info) for i, info in enumerate(files) if info.chunks}
        self.retry: list[Packet] = []
        self.rate: dict[str, float] = {}  # entries per second, per worker
        self.current: dict[str, int] = {}  # worker -> index of the file it reads
        self.ahead: dict[str, list[int]] = {}  # worker -> files it reads next, in order (it opens them early)
        self._ids = 0

    @property
    def remaining_entries(self) -> int:
        return sum(c.remaining_entries for c in self.cursors.values()) + sum(p.num_entries for p in self.retry)

    def exhausted(self) -> bool:
        return not self.retry and all(c.remaining_entries == 0 for c in self.cursors.values())

    def next_packet(self, worker: str, workers: list[str]) -> Packet | None:
        """The next packet for `worker` (one of `workers`, those present), or None when nothing suits
        it now. A packet that failed on this worker waits for one it has not failed on, if any is present."""
        for p in self.retry:
            if worker not in p.failed_on or all(w in p.failed_on for w in workers):
                self.retry.remove(p)
                return p
        index = self._pick_file(worker)
        if index is None:
            return None
        cursor = self.cursors[index]
        info = cursor.info
        want = self._packet_entries(worker, len(workers))
        first = cursor.next
        taken = 0
        while cursor.next < len(info.chunks) and (taken == 0 or taken + _size(info.chunks[cursor.next]) <= want):
            taken += _size(info.chunks[cursor.next])
            cursor.next += 1
        self._ids += 1
        packet = Packet(
            self._ids, index, info.spec.dataset, info.url, info.spec.tree, info.first_chunk + first, info.chunks[first : cursor.next]
        )
        packet.open_ahead = tuple(self.cursors[i].info.url for i in self._claim_ahead(worker, len(workers)))
        return packet

    def _has_left(self, index: int | None) -> bool:
        return index is not None and self.cursors[index].remaining_entries > 0

    def _claimed(self) -> set[int]:
        return set(self.current.values()).union(*self.ahead.values())

    def _pick_file(self, worker: str) -> int | None:
        """The file `worker` reads now: the one it is reading (open, cache warm), else the next it
        opened ahead, else the biggest file nobody has, else the biggest file left (then shared)."""
        if not self._has_left(self.current.get(worker)):
            ahead = [i for i in self.ahead.get(worker, []) if self._has_left(i)]
            left = [i for i in self.cursors if self._has_left(i)]
            claimed = self._claimed()
            free = [i for i in left if i not in claimed]
            if ahead:
                self.current[worker] = ahead[0]
            elif free or left:
                self.current[worker] = max(free or left, key=lambda i: self.cursors[i].remaining_entries)
            else:
                return None
            self.ahead[worker] = [i for i in ahead if i != self.current[worker]]
        return self.current[worker]

    def _claim_ahead(self, worker: str, num_workers: int) -> list[int]:
        """Up to `open_ahead` files `worker` will read after its current one, claimed for it now so
        that it can open them while it works (at a long round trip an open costs several). A worker
        claims no more than its share of the unclaimed files, so that others find files of their own."""
        mine = [i for i in self.ahead.get(worker, []) if self._has_left(i)]
        claimed = self._claimed()
        free = [i for i in self.cursors if self._has_left(i) and i not in claimed]
        wanted = min(self.open_ahead - len(mine), len(free) // num_workers)
        self.ahead[worker] = mine + heapq.nlargest(max(0, wanted), free, key=lambda i: self.cursors[i].remaining_entries)
        return self.ahead[worker]

    def _packet_entries(self, worker: str, num_workers: int) -> int:
        rate = self.rate.get(worker)
        if rate is None:
            return 1  # one chunk: it measures the worker and trains its access profile
        if num_workers == 1:
            return max(1, int(rate * self.target_seconds))  # nobody to wait for at the end
        share = self.max_share * self.remaining_entries / num_workers
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
        for index, cursor in self.cursors.items():
            info = cursor.info
            if info.url == url and cursor.next < len(info.chunks):
                self._ids += 1
                dropped.append(
                    Packet(
                        self._ids, index, info.spec.dataset, url, info.spec.tree, info.first_chunk + cursor.next, info.chunks[cursor.next :]
                    )
                )
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
