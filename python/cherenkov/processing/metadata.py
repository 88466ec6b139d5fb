"""What a dataset's files hold, learned once: every file is opened at the same time (a bounded
number at once), and what is learned is kept, so that a second run over the same files, or a
second processor, opens none of them for it.

Per file: its entries, cluster boundaries and size (the driver plans packets from them), how long
learning it took (a far or slow server shows there, and its file is started first), and the
`cherenkov.FileMetadata` of the open (its header, keys, the tree's metadata) that workers open the
file with, reading none of it again. Kept in the disk cache when one is set (``cache=`` or
``$CHERENKOV_CACHE``: notes beside the cached ranges, shared by every process using the cache),
else in this process's memory (`MEMORY_BUDGET` bytes of metadata at most, least recently used
first out). A file that has changed on its server since is found out by the worker that opens it
(its size or version differ), read as it is now, and its note forgotten.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass

from cherenkov import _core
from cherenkov.processing.dataset import FileSpec
from cherenkov.tree import cluster_steps

#: Files opened at once while learning a dataset: an open mostly waits for round trips.
OPEN_AT_ONCE = 64
#: Bytes of file metadata this process keeps when there is no disk cache.
MEMORY_BUDGET = 1 << 30
NOTE_VERSION = 1


@dataclass
class FileMeta:
    """What the driver knows of one file of a dataset without opening it."""

    num_entries: int
    boundaries: list[int]  # entries where clusters start, and num_entries
    size: int
    learn_seconds: float  # how long opening the file and finding its tree took

    def chunks(self, step_size: int) -> list[tuple[int, int]]:
        """The file cut into whole clusters of about `step_size` entries (as `Tree.steps`)."""
        return cluster_steps(self.boundaries, step_size, 0, self.num_entries)


@dataclass
class Learned:
    """A file learned: what the driver knows, and `file` when it was opened here and now."""

    spec: FileSpec
    meta: FileMeta
    opened: bool = False  # learned by opening the file now (else found kept)
    file: object = None  # the cherenkov.File, when opened now and asked to be kept
    requests: int = 0  # what opening it now asked its server for
    nbytes: int = 0


@dataclass
class OpenFailure:
    spec: FileSpec
    error: BaseException


def _note_name(spec: FileSpec, what: str) -> str:
    # Redacted: a renewed token in a URL keeps the notes (as the cache keeps its ranges).
    where = " | ".join(_core.redact(r) for r in spec.replicas)
    return f"cherenkov.process v{NOTE_VERSION} {what} {spec.tree} {where}"


def cache_dir(open_options: dict) -> str | None:
    """The disk cache `cherenkov.open` would use with these options."""
    given = open_options.get("cache")
    return os.fspath(given) if given else (os.environ.get("CHERENKOV_CACHE") or None)


class _Memory:
    """Metadata kept in this process: summaries of every file, metadata within MEMORY_BUDGET."""

    def __init__(self):
        self.lock = threading.Lock()
        self.summaries: dict[tuple, FileMeta] = {}
        self.metadata: OrderedDict[tuple, bytes] = OrderedDict()
        self.bytes = 0

    def put(self, key: tuple, meta: FileMeta, metadata: bytes | None) -> None:
        with self.lock:
            self.summaries[key] = meta
            if metadata is not None:
                self.bytes += len(metadata) - len(self.metadata.pop(key, b""))
                self.metadata[key] = metadata
            while self.bytes > MEMORY_BUDGET and self.metadata:
                self.bytes -= len(self.metadata.popitem(last=False)[1])

    def forget(self, key: tuple) -> None:
        with self.lock:
            self.summaries.pop(key, None)
            self.bytes -= len(self.metadata.pop(key, b""))


_MEMORY = _Memory()


class MetadataStore:
    """Where a job finds and keeps its files' metadata: the disk cache `cache_dir`, or memory."""

    def __init__(self, cache_dir: str | None):
        self.dir = cache_dir

    @staticmethod
    def _key(spec: FileSpec) -> tuple:
        return (spec.replicas, spec.tree)

    def summary(self, spec: FileSpec) -> FileMeta | None:
        key = self._key(spec)
        meta = _MEMORY.summaries.get(key)
        if meta is None and self.dir is not None:
            note = _core.cache_note_get(self.dir, _note_name(spec, "summary"))
            if note is not None:
                try:
                    meta = FileMeta(**json.loads(note))
                except (ValueError, TypeError):
                    return None  # a note of another layout: learned again
                _MEMORY.put(key, meta, None)
        return meta

    def metadata(self, spec: FileSpec) -> bytes | None:
        """The file's `FileMetadata` bytes, for workers; None when not kept (they read it)."""
        with _MEMORY.lock:
            held = _MEMORY.metadata.get(self._key(spec))
        if held is None and self.dir is not None:
            held = _core.cache_note_get(self.dir, _note_name(spec, "metadata"))
        return held

    def put(self, spec: FileSpec, meta: FileMeta, metadata: bytes) -> None:
        if self.dir is not None:
            try:
                _core.cache_note_put(self.dir, _note_name(spec, "metadata"), metadata)
                _core.cache_note_put(self.dir, _note_name(spec, "summary"), json.dumps(asdict(meta)).encode())
                _MEMORY.put(self._key(spec), meta, None)
                return
            except OSError:
                pass  # a cache that cannot be written: kept here instead
        _MEMORY.put(self._key(spec), meta, metadata)

    def forget(self, spec: FileSpec) -> None:
        """The file changed since it was learned: learn it again next time."""
        _MEMORY.forget(self._key(spec))
        if self.dir is not None:
            for what in ("summary", "metadata"):
                try:
                    _core.cache_note_remove(self.dir, _note_name(spec, what))
                except OSError:
                    pass


def learn(
    specs: list[FileSpec], store: MetadataStore, open_file: Callable, keep_files: bool, at_once: int = OPEN_AT_ONCE
) -> Iterator[tuple[int, Learned | OpenFailure]]:
    """(position in `specs`, what was learned or why not) for every file, as soon as known: first
    those the store holds, then the others as their opens finish, `at_once` opening together.
    `open_file(spec)` opens a file (a `cherenkov.File`); `keep_files` keeps it in the answer."""
    unknown = []
    for i, spec in enumerate(specs):
        meta = store.summary(spec)
        if meta is None:
            unknown.append(i)
        else:
            yield i, Learned(spec, meta)
    if not unknown:
        return

    def one(i: int) -> Learned | OpenFailure:
        spec = specs[i]
        start = time.perf_counter()
        try:
            f = open_file(spec)
            table = f[spec.tree]
            boundaries = [int(b) for b in table.cluster_boundaries.tolist()]
            meta = FileMeta(table.num_entries, boundaries, f.size, time.perf_counter() - start)
            store.put(spec, meta, bytes(f.metadata()))
            asked = f.source_counters()
            return Learned(spec, meta, True, f if keep_files else None, asked.requests, asked.bytes)
        except Exception as e:  # reported by name; the job decides whether to go on
            return OpenFailure(spec, e)

    pool = ThreadPoolExecutor(max_workers=max(1, min(at_once, len(unknown))), thread_name_prefix="cherenkov-learn")
    try:
        futures = {pool.submit(one, i): i for i in unknown}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
