"""Datasets in one process: `iterate`, `concatenate` and lazy `chunks` over many files, as uproot
users write them. While one file is read, the next ones (see `iterate`'s `files_ahead`) are opened
in a thread pool and their first steps fetched, so a dataset pays its files' opening round trips
once, not once per file.

Files are given as uproot takes them: a path or URL, a glob (``"data/*.root"``; over ``root://``
in the file name only, from one listing of its directory), ``"file.root:Events"`` (a TTree or
RNTuple path after the last colon), a ``{file: tree}`` dict, or a list of these; a list inside
the list is one file with replicas (see `cherenkov.open`).
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from cherenkov import _core
from cherenkov.arrays import Jagged
from cherenkov.file import File, open
from cherenkov.processing.dataset import FileSpec, normalize
from cherenkov.progress import Progress
from cherenkov.tree import LazyChunk, Tree, _convert
from cherenkov.units import parse_size

log = logging.getLogger("cherenkov")

TABLE_CLASSES = ("TTree", "TNtuple", "ROOT::RNTuple")  # what holds entries to iterate over
# After the last colon of "file.root:Events" comes a tree path, unless it is a URL's port or path.
_NOT_A_TREE = re.compile(r"^(//|\d+(/|$))")


def file_specs(files, tree: str | None = None) -> list[FileSpec]:
    """The files of `files` (see the module's help) in order, globs expanded; `tree` is the tree of
    files that name none (None: the file's only TTree or RNTuple, found when it is opened)."""
    if isinstance(files, Mapping):
        out = [spec for f, t in files.items() for spec in _expand(f, t or tree)]
    elif isinstance(files, (str, os.PathLike)):
        out = _expand(files, tree)
    else:
        out = []
        for f in files:
            if isinstance(f, (list, tuple)):  # one file's replicas
                out.append(_spec([os.fspath(r) for r in f], tree))
            else:
                out.extend(file_specs(f, tree))
    if not out:
        raise ValueError("no files given")
    return out


def _expand(path, tree: str | None) -> list[FileSpec]:
    path, tree = split_tree(os.fspath(path), tree)
    if path.lower().startswith(_XROOTD_SCHEMES):
        matched = _xrootd_glob(path)
    elif "://" in path or not glob.has_magic(path):
        return [_spec([path], tree)]
    else:
        matched = sorted(glob.glob(path))
    if not matched:
        raise FileNotFoundError(f"{_core.redact(path)}: no file matches this pattern")
    return [_spec([m], tree) for m in matched]


_XROOTD_SCHEMES = ("root://", "xroot://", "roots://", "xroots://")


def split_xrootd_url(url: str) -> tuple[str, str, str] | None:
    """(directory, file name, opaque part) of a `root://` URL, else None: ``?`` starts XRootD's
    opaque part (``?authz=...``), which a listing of the directory needs too."""
    if not url.lower().startswith(_XROOTD_SCHEMES):
        return None
    path, query, opaque = url.partition("?")
    cut = path.rfind("/") + 1
    return path[:cut], path[cut:], query + opaque


def _xrootd_glob(url: str) -> list[str]:
    """The files a `root://` URL's file name matches when it holds ``*`` or ``[...]``, sorted,
    from one listing of its directory (`_core.list_directory`), each with the URL's opaque
    part; else the URL itself. Its directories may hold no ``*`` (a ``[`` there is taken as it is)."""
    directory, pattern, opaque = split_xrootd_url(url)
    if "*" in directory.partition("://")[2]:
        raise ValueError(f"{_core.redact(url)}: a root:// pattern matches file names in one directory, not directories")
    if not any(c in pattern for c in "*["):
        return [url]
    listed = _core.list_directory(directory + opaque)
    names = sorted(name for name, _, _, is_dir in listed if not is_dir and fnmatch.fnmatchcase(name, pattern))
    return [f"{directory}{name}{opaque}" for name in names]


def split_tree(path: str, tree: str | None) -> tuple[str, str | None]:
    """``"file.root:Events"`` to ("file.root", "Events"); a path or URL without one keeps `tree`.
    What follows the last colon is a tree unless it is a URL's ``//``, a port, a Windows drive's
    path or ends in ``.root``."""
    head, colon, tail = path.rpartition(":")
    if not colon or not head or not tail or len(head) == 1 or _NOT_A_TREE.match(tail) or tail.endswith(".root"):
        return path, tree
    return head, tail


def _spec(replicas, tree: str | None) -> FileSpec:
    # one file through the processing layer's parser: the same replica rules as cherenkov.process
    return normalize({"": {"files": [list(replicas)], "tree": tree or ""}})[0]


@dataclass(frozen=True)
class FileTiming:
    """When a file of the dataset was opened and read, in `time.perf_counter()` seconds."""

    path: str
    open_started: float
    opened: float
    first_step_started: float | None = None
    finished: float | None = None


@dataclass
class Report:
    """What `iterate(report=True)` gives beside each step, as uproot's Report: where the step's
    entries are in their file (``tree_entry_*``) and in the dataset (``global_entry_*``)."""

    file: File
    tree: Tree
    tree_entry_start: int
    tree_entry_stop: int
    global_offset: int
    timing: FileTiming

    @property
    def file_path(self) -> str:
        return self.file.path

    @property
    def object_path(self) -> str:
        return self.tree.name

    @property
    def global_entry_start(self) -> int:
        return self.global_offset + self.tree_entry_start

    @property
    def global_entry_stop(self) -> int:
        return self.global_offset + self.tree_entry_stop

    start = global_entry_start
    stop = global_entry_stop

    def __repr__(self) -> str:
        where = f"{self.file_path}:{self.object_path}"
        return f"<Report {where} entries {self.tree_entry_start}..{self.tree_entry_stop} (global {self.global_entry_start}..)>"


@dataclass
class _Opened:
    """A file opened ahead, with its reads started: `stream` for iterate, `chunks` for lazy chunks."""

    spec: FileSpec
    file: File | None
    tree: Tree | None
    open_started: float
    opened: float = 0.0
    reads_started: float | None = None
    selected: list = field(default_factory=list)
    stream: object = None
    chunks: object = None
    first: Future | None = None  # lazy chunks: the first advance, started ahead of use
    taken: bool = False  # lazy chunks: the reader has started on this file
    lock: threading.Lock = field(default_factory=threading.Lock)
    error: Exception | None = None

    def timing(self, finished: float | None = None) -> FileTiming:
        return FileTiming(
            self.file.path if self.file else self.spec.replicas[0], self.open_started, self.opened, self.reads_started, finished
        )

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()

    def start_chunks(self, pool: ThreadPoolExecutor) -> None:
        """Advance to the first chunk in `pool` (the learned set is fetched then), unless the
        reader has got here first."""
        with self.lock:
            if self.first is None and not self.taken:
                try:
                    self.first = pool.submit(self.chunks.advance)
                except RuntimeError:  # the pool is shut down: the reader has left
                    return
                self.reads_started = time.perf_counter()

    def follow_profile(self, pool: ThreadPoolExecutor) -> None:
        """Read ahead, in `pool`, the sets the profile speculates since this file's first chunk
        was started (the file read now found them), as deep as its read-ahead got there, unless
        the reader has got here."""
        with self.lock:
            if self.first is not None and not self.taken:
                try:
                    pool.submit(self.chunks.follow_profile)
                except RuntimeError:  # the pool is shut down: the reader has left
                    return

    def first_span(self) -> tuple[int, int] | None:
        """The first chunk's entry range: the advance started ahead, or one made now."""
        with self.lock:
            self.taken = True
        if self.first is not None:
            return self.first.result()
        self.reads_started = time.perf_counter()
        return self.chunks.advance()


def find_table(f: File, tree: str) -> Tree:
    """The tree named `tree`, or with no name the file's only TTree or RNTuple."""
    if tree:
        return f[tree]
    names = sorted({k.split(";")[0] for k, cls in f.classnames().items() if cls in TABLE_CLASSES})
    if len(names) != 1:
        found = ", ".join(names) or "none"
        raise _core.NotFoundError(f"{f.path}: name the tree as 'file.root:tree' or {{file: tree}} (trees here: {found})")
    return f[names[0]]


# Files opened ahead when the caller sets no number, all at once: each holds a share of the memory
# budget reserved for this many whatever the pace, so a slower start saves no memory, and a far
# server's opening round trips (three or four per file) are paid once for the first files, not
# once per wave. Starting at 2 and growing with the measured opening over reading time cost a fast
# reader of small remote files later waves (bench/dataset_bench.py, 8 files over HTTP at 137 ms:
# 1.29-1.36 s; all at once 0.70 s, at its floor).
FILES_AHEAD = 8


def ahead_limit(files_ahead: int | None, files: int) -> int:
    """How many files are opened ahead: `files_ahead`, or with None FILES_AHEAD (at most all but one)."""
    if files_ahead is not None and files_ahead < 0:
        raise ValueError("files_ahead must be at least 0")
    return files_ahead if files_ahead is not None else min(FILES_AHEAD, max(files - 1, 0))


class _Ahead:
    """Yields the `prepare`d files in order while the next `files_ahead` are prepared in a thread
    pool. Leaving early closes what was prepared and drops what was not started."""

    def __init__(self, specs: list[FileSpec], prepare: Callable[[FileSpec], _Opened], files_ahead: int | None):
        self.specs = iter(specs)
        self.prepare = prepare
        self.depth = ahead_limit(files_ahead, len(specs))
        # The file handed over next may still be opening too: one worker more than files ahead.
        self.pool = ThreadPoolExecutor(max_workers=self.depth + 1, thread_name_prefix="cherenkov-dataset")
        self.pending: deque[Future] = deque()

    def _fill(self, count: int) -> None:
        while len(self.pending) < count and (spec := next(self.specs, None)) is not None:
            self.pending.append(self.pool.submit(self.prepare, spec))

    def __iter__(self) -> Iterator[_Opened]:
        try:
            while True:
                if not self.pending:
                    self._fill(1)
                if not self.pending:
                    return
                current = self.pending.popleft()
                self._fill(self.depth)  # the next files open while this one is read
                opened = current.result()
                if opened.error is None:  # its read-ahead decodes before that of the files ahead
                    opened.file.begin_reading()
                yield opened
        finally:
            for future in self.pending:
                if not future.cancel():  # already running: close its reads when it is done
                    future.add_done_callback(_close_when_done)
            self.pool.shutdown(wait=False, cancel_futures=True)


def _close_when_done(future: Future) -> None:
    if future.exception() is None:
        future.result().close()


class DatasetIterator:
    """What `iterate` and `chunks` return: an iterator that also keeps `timings`, one
    `FileTiming` per file read so far (when it was opened, its reads started, it was finished)."""

    def __init__(self, make: Callable[[list], Iterator]):
        self.timings: list[FileTiming] = []
        self._it = make(self.timings)

    def __iter__(self) -> DatasetIterator:
        return self

    def __next__(self):
        return next(self._it)

    def close(self) -> None:
        """Stop early: what is read ahead is dropped."""
        self._it.close()


def _opener(open_options: dict, allow_missing: bool, then: Callable[[_Opened], None]) -> Callable[[FileSpec], _Opened]:
    def prepare(spec: FileSpec) -> _Opened:
        opened = _Opened(spec, None, None, time.perf_counter())
        try:
            opened.file = open(spec.url, **open_options)
            opened.tree = find_table(opened.file, spec.tree)
            opened.opened = time.perf_counter()
        except (_core.CherenkovError, OSError) as e:
            if not allow_missing:
                raise
            opened.error = e
            return opened
        then(opened)
        return opened

    return prepare


def _check(step_size) -> None:
    if isinstance(step_size, str):
        parse_size(step_size)  # raises, saying how to write a size
    elif not isinstance(step_size, (int, np.integer)) or isinstance(step_size, bool):
        raise TypeError(f"step_size is a number of entries (whole clusters are read) or a memory size ('100 MB'), not {step_size!r}")


def iterate(
    files,
    expressions=None,
    *,
    filter_name=None,
    step_size: int | str = 100_000,
    library: str = "ak",
    report: bool = False,
    tree: str | None = None,
    allow_missing: bool = False,
    files_ahead: int | None = None,
    memory_budget: int = 256 << 20,
    steps_ahead: int | None = None,
    progress=None,
    **open_options,
) -> DatasetIterator:
    """Arrays of `expressions` (names, globs, /regex/; None: every readable branch, or those
    matching `filter_name`) over every file of `files` in steps of whole clusters of about
    `step_size` entries (or of a memory size, ``"100 MB"``, worked out per file), like
    `uproot.iterate`; `report=True` yields (arrays, `Report`) pairs.

    While a file is read, the next files are opened in background threads and their first steps
    fetched: `files_ahead` of them (default 8, fewer for a shorter list), all at once.
    `memory_budget` is shared by the files in flight (each gets `memory_budget // (files ahead +
    1)`). `allow_missing=True` skips files that cannot be opened or lack the tree (logged). Other
    keywords (`connections`, `timeout`, `cache`, ...) go to `cherenkov.open`. One progress bar
    counts entries over the dataset (`progress` as in `Tree.iterate`); its total grows as files
    are opened."""
    _check(step_size)
    specs = file_specs(files, tree)
    per_file_budget = max(memory_budget // (ahead_limit(files_ahead, len(specs)) + 1), 1 << 20)

    def start_reads(opened: _Opened) -> None:
        opened.selected = opened.tree.select(expressions, filter_name)
        opened.reads_started = time.perf_counter()
        steps = opened.tree.steps(step_size, selected=opened.selected)
        opened.stream = opened.tree.start_steps(opened.selected, steps, per_file_budget, steps_ahead)

    task = f"{len(specs)} files"

    def run(timings: list) -> Iterator:
        bar = Progress({task: 0}, progress)
        ahead = iter(_Ahead(specs, _opener(open_options, allow_missing, start_reads), files_ahead))
        offset = 0
        try:
            for opened in ahead:
                if opened.error is not None:
                    log.warning("skipping %s: %s", opened.spec.replicas[0], opened.error)
                    continue
                bar.grow(task, opened.tree.num_entries)
                try:
                    for lo, hi, branches, stats in opened.stream:
                        bar.advance(task, hi - lo, stats.uncompressed_bytes)
                        arrays = _convert([(key, b) for (key, _), b in zip(opened.selected, branches)], library)
                        yield (arrays, Report(opened.file, opened.tree, lo, hi, offset, opened.timing())) if report else arrays
                finally:
                    opened.close()
                timings.append(opened.timing(time.perf_counter()))
                offset += opened.tree.num_entries
        finally:
            ahead.close()
            bar.close()

    return DatasetIterator(run)


def concatenate(
    files,
    expressions=None,
    *,
    filter_name=None,
    library: str = "ak",
    tree: str | None = None,
    allow_missing: bool = False,
    files_ahead: int | None = None,
    memory_budget: int = 256 << 20,
    progress=None,
    **open_options,
):
    """Every entry of every file in one array (library="ak") or a dict of numpy arrays ("np"),
    like `uproot.concatenate`; read as `iterate` reads, files opened ahead."""
    parts = list(
        iterate(
            files,
            expressions,
            filter_name=filter_name,
            library=library,
            tree=tree,
            allow_missing=allow_missing,
            files_ahead=files_ahead,
            memory_budget=memory_budget,
            progress=progress,
            **open_options,
        )
    )
    if library == "ak":
        import awkward as ak

        return ak.concatenate(parts) if parts else ak.Array([])
    keys = list(parts[0]) if parts else []
    for p in parts:
        if list(p) != keys:
            raise ValueError(f"the files select different branches ({sorted(keys)} and {sorted(p)}): name them in `expressions`")
    return {key: _concat_np([p[key] for p in parts]) for key in keys}


def _concat_np(values: list):
    if isinstance(values[0], Jagged):
        sizes = np.cumsum([0] + [len(v.content) for v in values[:-1]])
        offsets = np.concatenate([values[0].offsets[:1]] + [v.offsets[1:] - v.offsets[0] + s for v, s in zip(values, sizes)])
        return Jagged(offsets - offsets[0], np.concatenate([v.content for v in values]))
    return np.concatenate(values)


def chunks(
    files,
    *,
    step_size: int | str = 100_000,
    tree: str | None = None,
    profile: _core.AccessProfile | None = None,
    learning: bool = True,
    allow_missing: bool = False,
    files_ahead: int | None = None,
    memory_budget: int = 256 << 20,
    steps_ahead: int = 3,
    **open_options,
) -> DatasetIterator:
    """Lazy chunks (see `Tree.chunks`) over every file of `files`, with one `AccessProfile` for
    all: the branches used are learned in the first file and read ahead in the others. While a
    file is read, the next ones are opened (`files_ahead` as in `iterate`); once the profile is
    trained, their first chunks' learned branches are fetched too. ``chunk.tree.file`` says which file a chunk is in."""
    _check(step_size)
    specs = file_specs(files, tree)
    profile = profile if profile is not None else _core.AccessProfile()
    per_file_budget = max(memory_budget // (ahead_limit(files_ahead, len(specs)) + 1), 1 << 20)

    def start_reads(opened: _Opened) -> None:
        steps = opened.tree.steps(step_size)
        opened.chunks = opened.tree.start_chunks(steps, profile, learning, per_file_budget, steps_ahead)
        if profile.trained:  # the learned set is known: fetch this file's first chunk now
            opened.start_chunks(ahead_files.pool)

    def when_opened(action: Callable[[_Opened], None]) -> Callable[[Future], None]:
        def call(future: Future) -> None:
            if not future.cancelled() and future.exception() is None and future.result().error is None:
                action(future.result())

        return call

    ahead_files = _Ahead(specs, _opener(open_options, allow_missing, start_reads), files_ahead)

    def run(timings: list) -> Iterator[LazyChunk]:
        ahead = iter(ahead_files)
        trained, speculated, depth = profile.trained, profile.speculated, profile.depth

        def for_files_ahead(action: Callable[[_Opened], None]) -> None:
            for future in list(ahead_files.pending):
                future.add_done_callback(when_opened(action))

        try:
            for opened in ahead:
                if opened.error is not None:
                    log.warning("skipping %s: %s", opened.spec.replicas[0], opened.error)
                    continue
                core = opened.chunks
                span = opened.first_span()
                while span:
                    yield LazyChunk(opened.tree, core, *span)
                    if not trained:
                        # Learn now, not after the next chunk came: the files opened ahead start
                        # their read-ahead a round trip sooner.
                        core.end_training()
                        if profile.trained:
                            trained, speculated, depth = True, profile.speculated, profile.depth
                            for_files_ahead(lambda o: o.start_chunks(ahead_files.pool))
                    span = core.advance()
                    if trained and (profile.speculated, profile.depth) != (speculated, depth):
                        speculated, depth = profile.speculated, profile.depth  # follow them
                        for_files_ahead(lambda o: o.follow_profile(ahead_files.pool))
                opened.tree.last_chunk_stats = core.stats()
                timings.append(opened.timing(time.perf_counter()))
        finally:
            ahead.close()

    return DatasetIterator(run)
