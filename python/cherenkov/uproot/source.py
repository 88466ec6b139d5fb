"""`Source`: uproot's Source contract on cherenkov's byte sources.

uproot asks a source for ``chunk(start, stop)`` (answered at once) and ``chunks(ranges,
notifications)`` (answered later: every chunk is filled, or failed, and then put on the queue
exactly once, since uproot waits for one notification per range). Here a ``chunks`` call is one
vectored read through the engine (split by the server's limits there), run on a shared pool of
waiting threads while the GIL is released; its answer fills every chunk, and its error fails
every chunk, so uproot sees the error where it reads the data and never waits forever.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading

import uproot
import uproot.source.chunk
import uproot.source.futures

from cherenkov import _core

# Options of `cherenkov.open` a handler accepts; uproot passes its own options too (ignored here).
from cherenkov.file import OPEN_OPTIONS

# Threads that only wait for the engine (which does the I/O on its own runtime): one per
# ``chunks`` call in flight, shared by every open source.
_waiters: concurrent.futures.ThreadPoolExecutor | None = None
_waiters_lock = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _waiters
    with _waiters_lock:
        if _waiters is None:
            _waiters = concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="cherenkov-uproot")
        return _waiters


class Source(uproot.source.chunk.Source):
    """uproot's ``handler`` reading through cherenkov: ``uproot.open(url,
    handler=cherenkov.uproot.Source)``, or ``uproot_options={"handler": cherenkov.uproot.Source}``
    in coffea.

    ``url``: a path, ``file://``, ``root://`` or ``http(s)://`` URL. Options (given to
    ``uproot.open`` or ``uproot_options``, all optional): ``replicas``, other URLs of the same
    file, or a dict from a URL to its other replicas (for datasets); ``tree_aware=True``, the
    learning basket cache of `cherenkov.uproot.baskets` (for coffea's lazy mode, which asks for
    one branch at a time); ``profile``, a `cherenkov.uproot.baskets.BasketProfile` shared by the
    files of a dataset; and every option of `cherenkov.open` (``timeout``, ``cache``, ``token``,
    ``ca``, ...). Replicas that cannot be opened are left out, as by `cherenkov.open`.
    ``opened``: the file already open in cherenkov (a `cherenkov.File`), read instead of opening
    it again (`cherenkov.dask` lets uproot read the metadata of a file it has opened).

    The file opens lazily again after pickling (Dask sends sources to its workers).
    """

    def __init__(self, file_path: str, **options):
        super().__init__()
        self._file_path = os.fspath(file_path)
        self._urls = [self._file_path, *_replicas_of(self._file_path, options.get("replicas"))]
        self._open_options = {k: options[k] for k in OPEN_OPTIONS if options.get(k) is not None}
        self._tree_aware = bool(options.get("tree_aware", False))
        self._profile = options.get("profile")
        self._closed = False
        self._lock = threading.Lock()
        opened = options.get("opened")
        self._file = None if opened is None else opened._core
        self._fetch = None
        self._open()  # uproot expects an opening error here, not at the first read

    def _open(self):
        with self._lock:
            if self._fetch is None:
                if self._file is None:
                    # Its errors are OSErrors, as uproot's own sources raise (a missing file a
                    # FileNotFoundError, refused credentials a PermissionError, a silent server
                    # a TimeoutError), naming the file and the cause.
                    self._file = _core.RootFile.open(self._urls, **self._open_options)
                self._num_bytes = self._file.size
                if self._tree_aware:
                    from cherenkov.uproot.baskets import BasketCache

                    self._fetch = BasketCache(self._file, self._profile).read
                else:
                    self._fetch = self._file.read_ranges
            return self._fetch

    def __getstate__(self):
        state = dict(self.__dict__)
        for live in ("_lock", "_file", "_fetch"):
            state.pop(live)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._file = None
        self._fetch = None  # reopened on first use

    def __repr__(self):
        return f"<cherenkov.uproot.Source {self._file_path!r}>"

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def num_bytes(self) -> int:
        self._open()
        return self._num_bytes

    @property
    def file(self) -> _core.RootFile:
        """The open cherenkov file (its counters, replicas, trace)."""
        self._open()
        return self._file

    def _count(self, ranges):
        self._num_requests += 1
        self._num_requested_chunks += len(ranges)
        self._num_requested_bytes += sum(stop - start for start, stop in ranges)

    def _check_open(self):
        if self._closed:
            raise OSError(f"file {self._file_path!r} is closed")

    def chunk(self, start: int, stop: int) -> uproot.source.chunk.Chunk:
        self._check_open()
        self._count([(start, stop)])
        (data,) = self._open()([(start, stop)])
        return uproot.source.chunk.Chunk(self, start, stop, uproot.source.futures.TrivialFuture(data))

    def chunks(self, ranges, notifications) -> list[uproot.source.chunk.Chunk]:
        self._check_open()
        ranges = [(int(start), int(stop)) for start, stop in ranges]
        self._count(ranges)
        futures = [concurrent.futures.Future() for _ in ranges]
        chunks = [uproot.source.chunk.Chunk(self, start, stop, f) for (start, stop), f in zip(ranges, futures)]
        if not ranges:
            return chunks

        def deliver():
            try:
                results = self._open()(ranges)
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


def _replicas_of(url: str, replicas) -> list[str]:
    """The other replicas of ``url``: a list as given, or a dict's entry for this URL."""
    if replicas is None:
        return []
    if isinstance(replicas, dict):
        replicas = replicas.get(url, [])
    if isinstance(replicas, (str, os.PathLike)):
        replicas = [replicas]
    return [os.fspath(r) for r in replicas if os.fspath(r) != url]
