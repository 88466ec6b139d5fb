"""Splitting a dataset into work packets, handed to workers as they ask (PROOF's packetizer).

Each file is cut once into chunks of whole clusters (`FileMeta.chunks`); the processor sees exactly
these chunks whatever the executor. A packet is a run of consecutive chunks of one file. Files join
as their metadata is learned, so the first packets run while the last files are still opening.

- *Size*: about `target_seconds` of work at the speed measured for the worker that asks, or for
  the file when it is slower (a far server), never more than a share of what is left, so packets
  shrink towards the end; a worker's first packet is one chunk, which measures it.
- *Order*: a worker keeps to its file (open, its read-ahead warm), then to the files it was told it
  reads next (it opened them meanwhile), then takes the file with the most work left, counting a
  slow file's entries as many times as it is slower (its metadata took longer to learn, or its
  packets ran slower): far files start first instead of holding the end.
- *Training*: the first packet of a dataset's tree is one chunk, and the others wait for it: it
  teaches the access profile (which branches the processor uses) that every later packet carries,
  so no other worker reads a whole chunk to learn it again.
- *Stragglers*: once nothing is left to hand out, an idle worker gets a copy of the running packet
  expected to end last, if it would end sooner there; the first answer counts.
- *Read ahead*: with a packet, a worker is told the ones it gets next (promised to it), and reads
  their first chunks while it works: one to start with, twice as many whenever it still waited
  for a packet's start (a far server, short packets), up to `MAX_PROMISED`; a worker with nothing
  left to do takes a packet promised to another.
- *What travels*: a packet carries its file's `FileMetadata` and the trained profile only to a
  worker that was not given them before.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cherenkov.processing.dataset import FileSpec
from cherenkov.processing.metadata import FileMeta

#: Seconds between two rankings of the files by weight (and medians of their speeds).
RANK_SECONDS = 1.0
#: Up to this many files left, files learned are ranked as soon as they are handed out.
RANK_ALWAYS = 512
#: Packets promised to a worker at most (their starts read ahead, each holding its first chunk).
MAX_PROMISED = 8
#: Packets a worker holds at first (the one it runs and the next: it does not wait for the driver
#: and the cluster between two), and at most (more when it still waited between two).
HELD, MAX_HELD = 2, 8


@dataclass
class FileInfo:
    """A file of the job whose metadata is known, cut into chunks."""

    spec: FileSpec
    index: int  # position in the job's list (a URL may appear twice)
    position: int  # position among its dataset's files
    meta: FileMeta
    chunks: list[tuple[int, int]]  # (entry_start, entry_stop)

    @property
    def url(self):
        return self.spec.url

    @property
    def profile_key(self) -> tuple[str, str]:
        return (self.spec.dataset, self.spec.tree)


@dataclass
class Packet:
    """Chunks [first_chunk, first_chunk + len(chunks)) of one file."""

    id: int
    file_index: int
    position: int  # of the file among its dataset's
    dataset: str
    url: str | tuple[str, ...]
    tree: str
    first_chunk: int  # within the file
    chunks: list[tuple[int, int]]
    file_entries: int = 0  # the file's entries, as learned
    attempts: int = 0
    failed_on: set = field(default_factory=set)  # workers it failed on; a retry goes elsewhere
    metadata: bytes | None = None  # the file's FileMetadata, when this worker lacks it
    profile: dict | None = None  # the trained AccessProfile's state, when this worker lacks it
    open_ahead: tuple = ()  # (url, metadata or None) of the files the worker reads next
    then: tuple = ()  # the packets the worker gets next, in order: it reads their starts ahead
    copies: int = 0  # copies handed to other workers near the end
    copy: bool = False  # this is such a copy

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
        url = self.url if isinstance(self.url, str) else " | ".join(self.url)
        return f"packet {self.id} ({url}, entries {self.entry_start}..{self.entry_stop})"


class _Cursor:
    """The part of a file not yet handed out, and the speed its packets ran at."""

    def __init__(self, info: FileInfo):
        self.info = info
        self.next = 0  # index into info.chunks
        self.rate: float | None = None  # entries per second of its packets

    @property
    def remaining_entries(self) -> int:
        if self.next >= len(self.info.chunks):
            return 0
        return self.info.meta.num_entries - self.info.chunks[self.next][0]


class Packetizer:
    """Hands out packets to workers on request (see the module's help)."""

    def __init__(
        self,
        target_seconds: float = 5.0,
        max_share: float = 0.25,
        open_ahead: int = 3,
        metadata: Callable[[FileInfo], bytes | None] = lambda info: None,
    ):
        self.target_seconds = target_seconds
        self.max_share = max_share  # a packet takes at most this share of a worker's part of what is left
        self.open_ahead = open_ahead
        self.metadata = metadata  # a file's FileMetadata bytes, for workers
        self.cursors: dict[int, _Cursor] = {}
        self.retry: list[Packet] = []
        self.rate: dict[str, float] = {}  # entries per second, per worker
        self.current: dict[str, int] = {}  # worker -> index of the file it reads
        self.ahead: dict[str, list[int]] = {}  # worker -> files it reads next, in order (it opens them early)
        self.given: dict[str, set] = {}  # worker -> ("file", index) and ("profile", key) it was sent
        self.profiles: dict[tuple, dict | None] = {}  # (dataset, tree) -> trained profile state
        self.training: dict[tuple, tuple[int, int]] = {}  # (dataset, tree) -> (packet id, file) training it
        self.promised: dict[str, deque[Packet]] = {}  # worker -> the packets it gets next (`Packet.then`)
        self.depth: dict[str, int] = {}  # worker -> how many packets it is promised
        self.held: dict[str, int] = {}  # worker -> how many packets it holds (see `holds`)
        self._typical: tuple[float | None, float] | None = None  # medians of file rates and learning times
        self._typical_at = 0.0
        # Kept as packets are cut, so that no call scans every file: with thousands of files a
        # scan per packet made the driver quadratic (2000 files: 5.7 CPU seconds to hand out).
        self.left: dict[int, None] = {}  # files with chunks not handed out, in the order learned
        self.unhanded = 0  # their entries not handed out
        self._ranking: list[int] = []  # files by weight, heaviest first (see `_ranked`)
        self._ranked_at = -1e9
        self._ranking_added = False
        self._ids = 0

    def add_file(self, info: FileInfo) -> None:
        if info.chunks:
            self.cursors[info.index] = _Cursor(info)
            self.left[info.index] = None
            self.unhanded += self.cursors[info.index].remaining_entries
            self._ranking.append(info.index)  # ranked with the others at the next `_ranked`
            self._ranking_added = True
            self._typical = None

    def _advance(self, cursor: _Cursor, to: int) -> None:
        """Chunks of `cursor` up to `to` are handed out."""
        before = cursor.remaining_entries
        cursor.next = to
        self.unhanded -= before - cursor.remaining_entries
        if cursor.remaining_entries == 0:
            self.left.pop(cursor.info.index, None)

    @property
    def remaining_entries(self) -> int:
        waiting = self.retry + [p for promised in self.promised.values() for p in promised]
        return self.unhanded + sum(p.num_entries for p in waiting)

    def describe(self) -> str:
        """What is left and why it may wait: for an error when nothing can be handed out."""
        promised = {w: [p.id for p in q] for w, q in self.promised.items() if q}
        gated = sorted({self.cursors[i].info.profile_key for i in self.left if self._gated(*self.cursors[i].info.profile_key)})
        return (
            f"{len(self.left)} files with chunks not handed out, {len(self.retry)} retries waiting "
            f"(failed on {[sorted(p.failed_on) for p in self.retry]}), promised {promised}, "
            f"trees waiting for training {gated} (training {self.training}, trained {sorted(self.profiles)})"
        )

    def exhausted(self) -> bool:
        promised = any(self.promised.values())
        return not self.retry and not promised and not self.left

    def next_packet(self, worker: str, workers: list[str], held: Sequence[Packet] = ()) -> Packet | None:
        """The next packet for `worker` (one of `workers`, those present, holding `held`), or None
        when nothing suits it now: the first promised to it, else a new one; with it, those it
        gets after, whose starts it reads ahead (`Packet.then`), within its share of what is left
        with those it holds. A packet that failed on this worker waits for one it has not failed
        on, if any is present. Near the end, a worker with nothing takes what was promised to
        another."""
        promised = self.promised.setdefault(worker, deque())
        packet = self._dressed(promised.popleft(), worker) if promised else self._take(worker, workers)
        if packet is None:
            packet = self._steal(worker)
        if packet is None:
            return None
        share = self._share(len(workers)) - sum(p.num_entries for p in held)
        while len(promised) < self.depth.setdefault(worker, 1) and sum(p.num_entries for p in promised) < share:
            follow = self._take(worker, workers, promise=True)
            if follow is None:
                break
            promised.append(follow)
        return dataclasses.replace(packet, then=tuple(promised))

    def _steal(self, worker: str) -> Packet | None:
        """The last packet promised to the worker promised most, when nothing else is left: it
        read ahead for nothing, but no worker waits while a packet does."""
        if self.retry or any(self._available(i) for i in self.left):
            return None
        other = max((w for w in self.promised if w != worker), key=lambda w: len(self.promised[w]), default=None)
        if other is None or not self.promised[other]:
            return None
        packet = self.promised[other].pop()
        # The metadata of the files `other` was to open ahead travelled with this packet: it is
        # sent to `other` again with its next packet of them.
        sent = {url for url, metadata in packet.open_ahead if metadata is not None}
        given = self.given.get(other, set())
        given -= {("file", i) for i in self.ahead.get(other, []) if self.cursors[i].info.url in sent}
        return self._dressed(dataclasses.replace(packet, open_ahead=()), worker)

    def _take(self, worker: str, workers: list[str], promise: bool = False) -> Packet | None:
        """A retry or a new packet for `worker`; with `promise`, none that would train a profile."""
        for p in self.retry:
            if self._gated(p.dataset, p.tree, p.id) or (promise and (p.dataset, p.tree) not in self.profiles):
                continue
            if worker not in p.failed_on or all(w in p.failed_on for w in workers):
                self.retry.remove(p)
                return self._dressed(p, worker)
        index = self._pick_file(worker)
        if index is None:
            return None
        cursor = self.cursors[index]
        info = cursor.info
        trains = info.profile_key not in self.profiles
        if promise and trains:
            return None
        want = 1 if trains else self._packet_entries(worker, len(workers), cursor)
        first = end = cursor.next
        taken = 0
        while end < len(info.chunks) and (taken == 0 or taken + _size(info.chunks[end]) <= want):
            taken += _size(info.chunks[end])
            end += 1
        self._advance(cursor, end)
        self._ids += 1
        packet = Packet(
            self._ids,
            index,
            info.position,
            info.spec.dataset,
            info.url,
            info.spec.tree,
            first,
            info.chunks[first : cursor.next],
            info.meta.num_entries,
        )
        if trains:
            self.training[info.profile_key] = (packet.id, index)
        ahead = self._claim_ahead(worker, len(workers))
        packet.open_ahead = tuple((self.cursors[i].info.url, self._file_metadata(worker, i)) for i in ahead)
        return self._dressed(packet, worker)

    def _dressed(self, packet: Packet, worker: str) -> Packet:
        """A copy of `packet` (one may be in flight) with what `worker` was not sent yet: its
        file's metadata, the trained profile."""
        key = (packet.dataset, packet.tree)
        given = self.given.setdefault(worker, set())
        profile = None
        if self.profiles.get(key) is not None and ("profile", key) not in given:
            given.add(("profile", key))
            profile = self.profiles[key]
        metadata = self._file_metadata(worker, packet.file_index)
        return dataclasses.replace(packet, metadata=metadata, profile=profile, then=())

    def _file_metadata(self, worker: str, index: int) -> bytes | None:
        given = self.given.setdefault(worker, set())
        if ("file", index) in given or index not in self.cursors:
            return None
        given.add(("file", index))
        return self.metadata(self.cursors[index].info)

    def _gated(self, dataset: str, tree: str, packet_id: int | None = None) -> bool:
        """Whether packets of this tree wait for the one training its profile."""
        key = (dataset, tree)
        return key not in self.profiles and key in self.training and self.training[key][0] != packet_id

    def _available(self, index: int | None) -> bool:
        if index is None:
            return False
        cursor = self.cursors[index]
        return cursor.remaining_entries > 0 and not self._gated(*cursor.info.profile_key)

    def _claimed(self) -> set[int]:
        return set(self.current.values()).union(*self.ahead.values())

    def _slowness(self, cursor: _Cursor) -> float:
        """How many times slower than the typical file this one is read (at least 1): from its
        packets' speed when measured, else from how long learning its metadata took."""
        if self._typical is None or time.monotonic() - self._typical_at > RANK_SECONDS:
            self._typical_at = time.monotonic()
            rates = [c.rate for c in self.cursors.values() if c.rate]
            learned = [c.info.meta.learn_seconds for c in self.cursors.values()]
            rate = statistics.median(rates) if len(rates) > 1 else None
            self._typical = (rate, statistics.median(learned) if learned else 0.0)
        rate, learn_seconds = self._typical
        if cursor.rate and rate:
            return max(1.0, rate / cursor.rate)
        return max(1.0, cursor.info.meta.learn_seconds / learn_seconds) if learn_seconds > 0 else 1.0

    def _weight(self, index: int) -> float:
        cursor = self.cursors[index]
        return cursor.remaining_entries * self._slowness(cursor)

    def _ranked(self) -> list[int]:
        """Files with chunks left, heaviest first. With many files, ranked again at most every
        `RANK_SECONDS` (weights move slowly; files learned since wait at the end), so that
        choosing a file costs no sort of thousands each time."""
        fresh = self._ranking_added and len(self.left) <= RANK_ALWAYS
        if fresh or time.monotonic() - self._ranked_at > RANK_SECONDS:
            self._ranking_added = False
            self._ranking = sorted(self.left, key=self._weight, reverse=True)
            self._ranked_at = time.monotonic()
        while self._ranking and self._ranking[0] not in self.left:
            self._ranking.pop(0)
        return self._ranking

    def _heaviest(self, count: int, skip: set[int]) -> list[int]:
        """Up to `count` available files not in `skip`, heaviest first."""
        found = []
        for i in self._ranked():
            if len(found) == count:
                break
            if i in self.left and i not in skip and self._available(i):
                found.append(i)
        return found

    def _pick_file(self, worker: str) -> int | None:
        """The file `worker` reads now: the one it is reading (open, cache warm), else the next it
        opened ahead, else the heaviest file nobody has, else the heaviest file left (then shared)."""
        if not self._available(self.current.get(worker)):
            ahead = [i for i in self.ahead.get(worker, []) if self._available(i)]
            if ahead:
                self.current[worker] = ahead[0]
            else:
                chosen = self._heaviest(1, self._claimed()) or self._heaviest(1, set())
                if not chosen:
                    return None
                self.current[worker] = chosen[0]
            self.ahead[worker] = [i for i in self.ahead.get(worker, []) if i != self.current[worker]]
        return self.current[worker]

    def _claim_ahead(self, worker: str, num_workers: int) -> list[int]:
        """Up to `open_ahead` files `worker` will read after its current one, claimed for it now so
        that it can open them while it works (at a long round trip an open costs several). A worker
        claims no more than its share of the unclaimed files, so that others find files of their own."""
        mine = [i for i in self.ahead.get(worker, []) if i in self.left]
        if len(mine) < self.open_ahead:
            claimed = self._claimed()
            free = self._heaviest(self.open_ahead * num_workers, claimed)
            mine += free[: min(self.open_ahead - len(mine), len(free) // num_workers)]
        self.ahead[worker] = mine
        return mine

    def _packet_entries(self, worker: str, num_workers: int, cursor: _Cursor) -> int:
        rate = self.rate.get(worker)
        if rate is None:
            return 1  # one chunk: it measures the worker
        if cursor.rate is not None:
            rate = min(rate, cursor.rate)  # a far file: smaller packets, shared by more workers
        if num_workers == 1:
            return max(1, int(rate * self.target_seconds))  # nobody to wait for at the end
        share = self.max_share * self.remaining_entries / num_workers
        return max(1, int(min(rate * self.target_seconds, share)))

    def _share(self, num_workers: int) -> float:
        """A worker's part of the entries not handed out yet: what it may be promised, and hold
        beyond `HELD`. Without this bound the worker that measured fastest first took up to
        `MAX_HELD` + `MAX_PROMISED` packets while others ran out (16 files at 137 ms, 4 Dask
        workers: one ran 18 of 32 packets, the others idled 2 of 3 s)."""
        return self.remaining_entries / max(1, num_workers)

    def holds(self, worker: str, held: Sequence[Packet] = (), num_workers: int = 1) -> int:
        """How many packets the driver keeps handed out to `worker`, which holds `held` now: the one
        it runs and those it runs next (queued where it runs), so that it does not wait for the
        driver and the cluster between two; more than `HELD` only within its share of what is left,
        or by taking up the packets already promised to it (which takes nothing from the others:
        counted against its share, they crowded out the held ones, and a worker of 8 whose packets
        took 0.07 s waited 0.2-1 s for each next pair to come through the cluster)."""
        wanted = self.held.get(worker, HELD)
        if len(held) < HELD or self.promised.get(worker):
            return wanted
        holding = sum(p.num_entries for p in held)
        return len(held) if holding >= self._share(num_workers) else wanted

    def completed(
        self, worker: str, packet: Packet, seconds: float, profile: dict | None = None, waited: float = 0.0, gap: float = 0.0
    ) -> None:
        """`worker` ran `packet` in `seconds`, of which it `waited` for its start (read ahead, or
        not), after waiting `gap` seconds for it since its last one; a packet that trained its
        tree's profile brings the profile."""
        if gap > 0.2 * seconds:  # it waited for the packet to reach it: it holds more
            self.held[worker] = min(MAX_HELD, 2 * self.held.get(worker, HELD))
        if waited > 0.25 * seconds:  # its start was not read ahead, or not soon enough: read further
            # As many starts in flight as the wait covers packets' work (Little's law): far files
            # and quick packets (an open and a read at 137 ms, 40 ms of work) need 8 at once, which
            # doubling from 1 reached only when half the files were done.
            work = max(seconds - waited, 1e-3)
            wanted = max(2 * self.depth.get(worker, 1), math.ceil(waited / work) + 1)
            self.depth[worker] = min(MAX_PROMISED, wanted)
        self.depth[worker] = max(self.depth.get(worker, 1), self.held.get(worker, HELD))  # those it holds are read ahead
        rate = packet.num_entries / max(seconds, 1e-6)
        old = self.rate.get(worker)
        self.rate[worker] = rate if old is None else 0.5 * old + 0.5 * rate
        cursor = self.cursors.get(packet.file_index)
        if cursor is not None:
            cursor.rate = rate if cursor.rate is None else 0.5 * cursor.rate + 0.5 * rate
        key = (packet.dataset, packet.tree)
        if key not in self.profiles:
            self.profiles[key] = profile  # None: untrained, each worker learns for itself
        if profile is not None:
            self.given.setdefault(worker, set()).add(("profile", key))

    def failed(self, worker: str, packet: Packet) -> None:
        """Put `packet` back, to be retried on another worker if there is one."""
        packet.attempts += 1
        packet.failed_on.add(worker)
        self.rate.pop(worker, None)  # measure it again
        packet.open_ahead = ()  # the files `worker` was to open next are not the next worker's
        self.retry.append(packet)
        self._stop_training(lambda trainer: trainer[0] == packet.id)

    def _stop_training(self, which: Callable[[tuple[int, int]], bool]) -> None:
        # A training packet that failed or whose file was given up: the next packet trains.
        for key in [key for key, trainer in self.training.items() if which(trainer)]:
            del self.training[key]

    def forget_worker(self, worker: str) -> None:
        """`worker` is gone: the files it had claimed and its promised packet go to others, what it
        was sent is forgotten."""
        self.retry.extend(dataclasses.replace(p, open_ahead=()) for p in self.promised.pop(worker, ()))
        self.depth.pop(worker, None)
        self.held.pop(worker, None)
        self.current.pop(worker, None)
        self.ahead.pop(worker, None)
        self.given.pop(worker, None)
        self.rate.pop(worker, None)

    def drop_file(self, index: int) -> list[Packet]:
        """Stop handing out file `index`: packets for its chunks not handed out (and retries queued)."""
        dropped = [p for p in self.retry if p.file_index == index]
        self.retry = [p for p in self.retry if p.file_index != index]
        self._stop_training(lambda trainer: trainer[1] == index)
        cursor = self.cursors.get(index)
        if cursor is not None and cursor.next < len(cursor.info.chunks):
            info = cursor.info
            self._ids += 1
            rest = info.chunks[cursor.next :]
            dropped.append(Packet(self._ids, index, info.position, info.spec.dataset, info.url, info.spec.tree, cursor.next, rest))
            self._advance(cursor, len(info.chunks))
        return dropped

    def expected_seconds(self, worker: str, packet: Packet) -> float | None:
        """How long `packet` should take on `worker`: at its measured speed, else at the median of
        the others' (a worker whose first packet never answered has none)."""
        rate = self.rate.get(worker) or (statistics.median(self.rate.values()) if self.rate else None)
        return packet.num_entries / rate if rate else None

    def straggler(self, worker: str, running: Sequence[tuple[str, Packet, float]], now: float) -> Packet | None:
        """Near the end (nothing left to hand out), a copy for idle `worker` of the held packet
        expected to end last, if it would end sooner on `worker`, or is long overdue. `running`:
        (worker, packet, when it started, or is expected to start behind the others it holds)."""
        if not self.exhausted():
            return None
        best, best_gain = None, 0.0
        for other, packet, started in running:
            if other == worker or packet.copies or worker in packet.failed_on:
                continue
            expected = self.expected_seconds(other, packet)
            if expected is None:
                continue
            elapsed = now - started  # negative while it waits behind others
            cursor = self.cursors.get(packet.file_index)
            open_cost = cursor.info.meta.learn_seconds if cursor else 0.0
            mine = self.rate.get(worker)
            copy_takes = open_cost + (packet.num_entries / mine if mine else expected)
            left = expected - elapsed
            overdue = elapsed > 3 * expected + 1.0
            gain = (left - 1.25 * copy_takes) if not overdue else elapsed
            if (overdue or gain > 0) and gain > best_gain:
                best, best_gain = packet, gain
        if best is None:
            return None
        best.copies += 1
        return dataclasses.replace(self._dressed(best, worker), copy=True)


def _size(chunk: tuple[int, int]) -> int:
    return chunk[1] - chunk[0]
