"""`Source`: uproot's Source contract on cherenkov's byte sources.

uproot asks a source for ``chunk(start, stop)`` (answered at once) and ``chunks(ranges,
notifications)`` (answered later: every chunk is filled, or failed, and then put on the queue
exactly once, since uproot waits for one notification per range). Here a ``chunks`` call is at most
one vectored request through the engine (`cherenkov.File.read_ranges`), run on a shared pool of
waiting threads while the GIL is released; its answer fills every chunk, and its error fails every
chunk, so uproot sees the error where it reads the data and never waits forever.

The engine knows what uproot asks for: metadata it read already is served from memory, and the
baskets of the file's TTrees are learned and read ahead (`engine/raw` in the core), by tree layout
across the files of the process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
import warnings

import fsspec.core
import uproot
import uproot.source.chunk
import uproot.source.fsspec
import uproot.source.futures
from fsspec.implementations.local import LocalFileSystem

import cherenkov
from cherenkov.file import OPEN_OPTIONS

# Threads that only wait for the engine (which does the I/O on its own runtime): one per
# ``chunks`` call in flight, shared by every open source.
_waiters: concurrent.futures.ThreadPoolExecutor | None = None
_waiters_lock = threading.Lock()

#: URL schemes cherenkov reads itself; other protocols (fsspec's zip://, s3://, chained ``::``
#: URLs) are read as uproot's default source reads them.
SCHEMES = ("root", "roots", "xroot", "xroots", "http", "https", "dav", "davs")
#: Options of earlier versions, accepted and ignored: learning is the default now.
_GONE = {"tree_aware": "baskets are learned by default", "profile": "files alike share what was learned by themselves"}


# Files opened by `open_ahead`, by what `Source` opens (its location, replicas and options), until
# a `Source` takes them; at most _AHEAD_KEPT (the oldest are dropped first).
_ahead: dict[tuple, concurrent.futures.Future] = {}
_ahead_lock = threading.Lock()
_AHEAD_KEPT = 4096
#: Files opened at once, at most: each opening thread only waits (the engine does the I/O, without
#: the GIL), so a dataset's files open in the time of one.
OPENED_AT_ONCE = 128


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _waiters
    with _waiters_lock:
        if _waiters is None:
            _waiters = concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="cherenkov-uproot")
        return _waiters


def location(path: str) -> str | None:
    """What cherenkov opens for a path uproot was given: a local path as fsspec resolves it (plain,
    relative, ``~``, ``file:/path``, ``file://path``, names with ``%`` read literally, as uproot's
    default source reads them), a root:// or http(s):// URL as it is, or None for what cherenkov
    does not read (other fsspec protocols and chained URLs)."""
    if "::" in path:
        return None
    protocol, _ = fsspec.core.split_protocol(path)
    if protocol is None or protocol in LocalFileSystem.protocol:
        return LocalFileSystem._strip_protocol(path)
    return path if protocol.lower() in SCHEMES else None


class Source(uproot.source.chunk.Source):
    """uproot's ``handler`` reading through cherenkov: ``uproot.open(url,
    handler=cherenkov.uproot.Source)``, or ``uproot_options={"handler": cherenkov.uproot.Source}``
    in coffea.

    ``file_path``: any path or URL uproot opens (local paths and ``file:`` URIs in every form,
    ``root://``, ``http(s)://``; other fsspec protocols are read as uproot's default source reads
    them). Options (given to ``uproot.open`` or ``uproot_options``, all optional): ``replicas``,
    other URLs of the same file, or a dict from a URL to its other replicas (for datasets), and
    every option of `cherenkov.open` (``timeout``, ``cache``, ``token``, ``speculate``, ...).
    ``opened``: the file already open in cherenkov (a `cherenkov.File`), read instead of opening
    it again (`cherenkov.dask` lets uproot read the metadata of a file it has opened).

    Errors are uproot's own builtin exceptions, naming the file: a missing file raises
    ``FileNotFoundError``, refused credentials ``PermissionError``, a silent server
    ``TimeoutError``, other failures ``OSError``; cherenkov's typed error is their ``__cause__``.
    The file opens lazily again after pickling (Dask sends sources to its workers).
    """

    def __init__(self, file_path: str, **options):
        super().__init__()
        for name, why in _GONE.items():
            if options.get(name) is not None:
                warnings.warn(f"cherenkov.uproot.Source: {name}= does nothing any more ({why})", DeprecationWarning, stacklevel=2)
        self._file_path = os.fspath(file_path)
        self._location = location(self._file_path)
        self._open_options = {k: options[k] for k in OPEN_OPTIONS if options.get(k) is not None}
        self._replicas = _replicas_of(self._file_path, options.get("replicas"))
        self._closed = False
        self._lock = threading.Lock()
        self._file: cherenkov.File | None = options.get("opened")
        self._owned = self._file is None
        self._fallback = None
        if self._location is None:
            # A protocol cherenkov does not speak: read as uproot's default source reads it.
            self._fallback = uproot.source.fsspec.FSSpecSource(self._file_path, **options)
        else:
            self._open()  # uproot expects an opening error here, not at the first read

    def _open(self) -> cherenkov.File:
        with self._lock:
            if self._file is None:
                urls = [self._location, *self._replicas]
                with _as_builtin():
                    self._file = _take_ahead(urls, self._open_options) or cherenkov.File(urls, **self._open_options)
            return self._file

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_lock"] = None
        state["_file"] = None  # reopened on first use
        state["_owned"] = True
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self):
        return f"<cherenkov.uproot.Source {self._file_path!r}>"

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if self._fallback is not None:
            self._fallback.__exit__(exception_type, exception_value, traceback)
        elif self._owned and self._file is not None and not self._closed:
            self._file.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def num_bytes(self) -> int:
        if self._fallback is not None:
            return self._fallback.num_bytes
        return self._open().size

    @property
    def num_requests(self) -> int:
        return self._num_requests if self._fallback is None else self._fallback.num_requests

    @property
    def num_requested_chunks(self) -> int:
        return self._num_requested_chunks if self._fallback is None else self._fallback.num_requested_chunks

    @property
    def num_requested_bytes(self) -> int:
        return self._num_requested_bytes if self._fallback is None else self._fallback.num_requested_bytes

    @property
    def file(self) -> cherenkov.File | None:
        """The open cherenkov file (its stats, counters, replicas, trace); None for a protocol
        cherenkov does not read."""
        return None if self._fallback is not None else self._open()

    def _count(self, ranges):
        self._num_requests += 1
        self._num_requested_chunks += len(ranges)
        self._num_requested_bytes += sum(stop - start for start, stop in ranges)

    def _check_open(self):
        if self._closed:
            raise OSError(f"file {self._file_path!r} is closed")

    def _read(self, ranges):
        file = self._open()
        with _as_builtin():
            return file.read_ranges(ranges)

    def chunk(self, start: int, stop: int) -> uproot.source.chunk.Chunk:
        if self._fallback is not None:
            return self._fallback.chunk(start, stop)
        self._check_open()
        self._count([(start, stop)])
        (data,) = self._read([(start, stop)])
        return uproot.source.chunk.Chunk(self, start, stop, uproot.source.futures.TrivialFuture(data))

    def chunks(self, ranges, notifications) -> list[uproot.source.chunk.Chunk]:
        if self._fallback is not None:
            return self._fallback.chunks(ranges, notifications)
        self._check_open()
        ranges = [(int(start), int(stop)) for start, stop in ranges]
        self._count(ranges)
        futures = [concurrent.futures.Future() for _ in ranges]
        chunks = [uproot.source.chunk.Chunk(self, start, stop, f) for (start, stop), f in zip(ranges, futures)]
        if not ranges:
            return chunks

        def deliver():
            try:
                results = self._read(ranges)
            except BaseException as e:  # every chunk must be delivered, even on KeyboardInterrupt
                results = None
                error = e
            for i, chunk in enumerate(chunks):
                if results is None:
                    futures[i].set_exception(error)
                else:
                    futures[i].set_result(results[i])
                notifications.put(chunk)

        try:
            _pool().submit(deliver)
        except RuntimeError as e:  # the interpreter is shutting down: fail the chunks, still deliver
            for future, chunk in zip(futures, chunks):
                future.set_exception(OSError(f"{self._file_path}: cannot read ({e})"))
                notifications.put(chunk)
        return chunks


def open_ahead(files, **options) -> int:
    """Open ``files`` all at once, in the background, for the `Source` objects that open them
    next (coffea's ``preprocess`` and processors, ``uproot.open`` in a loop): each file's opening
    and the metadata uproot reads of it (streamer infos, trees' keys) are then in memory when
    uproot asks, instead of costing round trips file after file. Returns at once, with the number
    of files being opened.

    ``files``: paths and URLs (a list, or a dict from each to its tree as uproot takes it), or a
    coffea fileset (``{dataset: {"files": {url: tree}}}``). ``options``: the handler's options as
    given to ``uproot.open`` or in ``uproot_options`` (``timeout``, ``replicas``, ...); a `Source`
    takes a file opened ahead only with the same options. A file that failed to open ahead
    raises that error from its `Source` (same URLs, same options: opening it again would cost
    a silent server's timeout twice)."""
    open_options = {k: options[k] for k in OPEN_OPTIONS if options.get(k) is not None}
    wanted = []
    for path in _paths_in(files):
        where = location(path)
        if where is not None:
            wanted.append([where, *_replicas_of(path, options.get("replicas"))])
    started = []
    with _ahead_lock:
        for urls in wanted:
            key = _ahead_key(urls, open_options)
            if key not in _ahead:
                _ahead[key] = concurrent.futures.Future()
                started.append((_ahead[key], urls))
        while len(_ahead) > _AHEAD_KEPT:
            _ahead.pop(next(iter(_ahead))).cancel()
    if started:
        threading.Thread(target=_open_all, args=(started, open_options), daemon=True, name="cherenkov-open-ahead").start()
    return len(wanted)


def _open_all(started, open_options):
    def one(item):
        future, urls = item
        if not future.set_running_or_notify_cancel():
            return  # dropped from the registry before its turn
        try:
            f = cherenkov.File(urls, **open_options)
            f.read_ranges([])  # the metadata uproot reads beyond the opening's: streamers, trees' keys
            future.set_result(f)
        except BaseException as e:
            future.set_exception(e)

    with concurrent.futures.ThreadPoolExecutor(min(OPENED_AT_ONCE, len(started)), thread_name_prefix="cherenkov-open") as pool:
        list(pool.map(one, started))


def _take_ahead(urls, open_options) -> cherenkov.File | None:
    """The file `open_ahead` opened for these URLs and options (waiting for it; its opening
    error raised), or None."""
    with _ahead_lock:
        future = _ahead.pop(_ahead_key(urls, open_options), None)
    if future is None or future.cancelled():
        return None
    return future.result()


def _ahead_key(urls, open_options) -> tuple:
    return (tuple(urls), tuple(sorted((k, repr(v)) for k, v in open_options.items())))


def _paths_in(files) -> list[str]:
    """The paths and URLs of a list, of a dict from each to its tree, or of a coffea fileset."""
    if isinstance(files, (str, os.PathLike)):
        return [os.fspath(files)]
    if isinstance(files, dict):
        values = list(files.values())
        if values and all(isinstance(v, dict) and "files" in v for v in values):
            return [p for v in values for p in _paths_in(v["files"])]
    return [os.fspath(f) for f in files]


@contextlib.contextmanager
def _as_builtin():
    """cherenkov's typed errors as the builtin exceptions uproot's own sources raise (uproot's
    failure reports and coffea name them by their type's name): the nearest builtin class, with
    the same message, caused by the typed error (``__cause__``)."""
    try:
        yield
    except OSError as e:
        builtin = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
        if builtin is type(e):
            raise
        raise builtin(*e.args) from e


def _replicas_of(url: str, replicas) -> list[str]:
    """The other replicas of ``url``: a list as given, or a dict's entry for this URL."""
    if replicas is None:
        return []
    if isinstance(replicas, dict):
        replicas = replicas.get(url, [])
    if isinstance(replicas, (str, os.PathLike)):
        replicas = [replicas]
    return [os.fspath(r) for r in replicas if os.fspath(r) != url]
