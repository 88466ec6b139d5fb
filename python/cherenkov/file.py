"""Files and directories."""

from __future__ import annotations

import atexit
import os
import time
import warnings
from typing import TYPE_CHECKING

from cherenkov import _core
from cherenkov.ntuple import RNTuple
from cherenkov.tree import Tree

if TYPE_CHECKING:
    from cherenkov.stats import Stats

# The disk cache writes its entries in the background: the last ones are written before exit.
atexit.register(_core.cache_flush)


#: The names of `open`'s options (defined once, in the core: see `open`'s documentation).
OPEN_OPTIONS: tuple[str, ...] = tuple(name for name, _default, _doc in _core.OPEN_OPTIONS)


def open(path: str | os.PathLike | list, metadata: _core.FileMetadata | bytes | None = None, **options) -> File:
    """Open a ROOT file: a local path, a ``file://``, ``root://``, ``http://`` or ``https://`` URL,
    or a list of such URLs that are replicas of one file: reads are then shared between the two
    fastest, weighted by measured quality, and survive a failing replica (see `File.replicas()`).
    Replicas are opened all at once and the file is the first listed one that opens, whatever order
    they answer in (its values are read, never those of one that answered sooner); the others join
    if they hold the same file. One that is refused, missing or silent does not fail the open; one
    that holds another file (another size, or other bytes in the file's head and tail, where ROOT
    keeps the file's UUID and its index) is left out. Both are reported by `File.replicas()` (state
    ``"dropped"``) and with a warning when known at open. A replica whose file changes on its server
    while being read (new ETag or Last-Modified over HTTP) is dropped too; a single file that
    changes raises `SourceError`. Authentication: see the README's "Authentication"; secrets never
    appear in ``File.path``, messages, stats or traces. Errors a caller may handle apart are also
    Python's own: a missing file raises `SourceNotFoundError` (a ``FileNotFoundError``), refused
    credentials `SourcePermissionError` (a ``PermissionError``), a silent or too slow server
    `SourceTimeoutError` (a ``TimeoutError``); every `SourceError` is an ``OSError``.

    `metadata`: what an earlier open of the same file learned (`File.metadata()`, or its bytes):
    the file opens without reading its header, keys, trees or streamer infos again, only the
    protocol's own opening remains. A file whose size or version on its server differs from what
    `metadata` says raises `SourceError` ("changed ... since its metadata was learned").

    Options (None, or leaving one out, means its default):

    {options}
    """
    urls = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else [os.fspath(path)]
    if isinstance(metadata, (bytes, bytearray, memoryview)):
        metadata = _core.FileMetadata.from_bytes(bytes(metadata))
    return File(urls, metadata=metadata, **options)


def _describe_options() -> str:
    lines = []
    for name, default, doc in _core.OPEN_OPTIONS:
        lines.append(f"``{name}`` ({default}): {doc}")
    return "\n\n    ".join(lines)


open.__doc__ = open.__doc__.replace("{options}", _describe_options())


RNTUPLE_CLASS = "ROOT::RNTuple"


class Directory:
    """A directory inside a file: ``keys()`` and ``dir["name"]``."""

    def __init__(self, file: File | None, prefix: str):
        # None: this directory is the file's top one, the file itself, which keeps no reference to
        # itself: that cycle held every file dropped, and its connections, until Python's cycle
        # collector happened to run (bench/soak.py counted hundreds of sockets).
        self._of_file = file
        self._prefix = prefix

    @property
    def _file(self) -> File:
        return self if self._of_file is None else self._of_file

    def keys(self, recursive: bool = True, cycle: bool = True) -> list[str]:
        out = []
        for path, cyc, _cls, _title in self._file._all_keys():
            if not path.startswith(self._prefix):
                continue
            rel = path[len(self._prefix) :]
            if not recursive and "/" in rel:
                continue
            out.append(f"{rel};{cyc}" if cycle else rel)
        return out

    def classnames(self) -> dict[str, str]:
        return {f"{p[len(self._prefix) :]};{c}": cls for p, c, cls, _ in self._file._all_keys() if p.startswith(self._prefix)}

    def __contains__(self, name: str) -> bool:
        want = name.split(";")[0].strip("/")
        return any(k.split(";")[0] == want for k in self.keys())

    def __getitem__(self, name: str):
        path = self._prefix + name.strip("/")
        bare = path.split(";")[0]
        for p, _c, cls, _t in self._file._all_keys():
            if p == bare and cls in ("TDirectory", "TDirectoryFile"):
                return Directory(self._file, bare + "/")
            if p == bare and cls == RNTUPLE_CLASS:
                return RNTuple(self._file._core.ntuple(path), self._file)
        return Tree(self._file._core.tree(path), self._file)

    def __repr__(self) -> str:
        return f"<Directory {self._prefix!r} in {self._file.path!r}>"


class File(Directory):
    """An open ROOT file."""

    def __init__(self, urls: list[str], metadata: _core.FileMetadata | None = None, **options):
        self.path = " | ".join(_core.redact(url) for url in urls)
        self._opened = (time.perf_counter(), time.process_time())
        self._core = _core.RootFile.open(urls, metadata=metadata, **options)
        for replica in self._core.replicas() or ():
            if replica.state == "dropped":
                warnings.warn(f"replica left out: {replica.last_error}", RuntimeWarning, stacklevel=3)
        self._keys = None
        super().__init__(None, "")

    def _all_keys(self):
        if self._keys is None:
            self._keys = self._core.keys()
        return self._keys

    @property
    def size(self) -> int:
        return self._core.size

    def stats(self) -> Stats:
        """What reads of this file did so far (see `cherenkov.Stats`)."""
        from cherenkov.stats import Stats

        return Stats(
            sources=(_core.redact(self._core.name),),  # says so when XrdCl reads it
            engine=self._core.engine_counters(),
            source=self._core.source_counters(),
            real_seconds=time.perf_counter() - self._opened[0],
            cpu_seconds=time.process_time() - self._opened[1],
            per_source=tuple(self._core.replicas() or ()),
            stream_steps=tuple(self._core.stream_steps()),
        )

    def trace(self) -> dict | None:
        """The recorded requests, one row per range (numpy columns request, offset, length, sent,
        answered, ok; times in seconds since opening), or None unless opened with trace=True."""
        return self._core.trace()

    def replicas(self) -> list[_core.ReplicaReport] | None:
        """Per replica: requests, bytes, errors, hedges won, probes, measured quality (latency,
        throughput), whether it is disabled, its last error and its state: ``"in use"``,
        ``"opening"`` (not answered yet; it joins when it does) or ``"dropped"`` (could not be
        opened, holds another file, or its file changed; ``last_error`` says why). None for a
        single source."""
        return self._core.replicas()

    def stream_steps(self) -> list[_core.StreamStep]:
        """The throughput steps that set the number of connections (XRootD) or requests in flight
        (HTTP), in order: streams in use, bytes, busy seconds, throughput (bytes/s) and the decision
        (``"grow"``, ``"keep"``, ``"back"``: doubling did not help, ``"pushback"``: the server asked
        to slow down). Empty with ``adaptive_streams=False`` or for local files."""
        return self._core.stream_steps()

    def metadata(self) -> _core.FileMetadata:
        """What opening this file, and the trees and RNTuples found in it so far, read: for
        `cherenkov.open(url, metadata=...)` elsewhere (it pickles; ``bytes(m)`` gives its
        bytes), which then reads none of it again. About the size of the trees' metadata."""
        return self._core.metadata()

    def begin_reading(self) -> None:
        """Say that reading of this file begins: its read-ahead steps decode after those of the
        files begun before it, and before those of files only read ahead (datasets call it)."""
        self._core.begin_reading()

    def checksum(self) -> str | None:
        """The checksum the server keeps for the file (``"adler32 0a1b2c3d"``; for replicas opened
        with ``verify_checksums``, the one they agree on), or None where the protocol cannot tell
        (HTTP, local files)."""
        return self._core.checksum()

    def source_counters(self) -> _core.SourceCounters:
        """What the file's source has done so far: requests, round_trips, ranges, bytes."""
        return self._core.source_counters()

    @property
    def format_version(self) -> int:
        return self._core.format_version

    def read_ranges(self, ranges) -> list:
        """The bytes of ``ranges`` (``[(start, stop), ...]``), for a reader that decodes ROOT itself
        (uproot, through `cherenkov.uproot.Source`): one read-only ``uint8`` numpy array per
        range, in at most one request. What the engine read already (the opening's head and tail,
        a tree's metadata) is served from memory, and the baskets of the file's TTrees are learned
        as lazy chunks learn them: a request brings what was read with the same branches before
        (in this file, or in earlier files whose trees are laid out alike), the next windows are
        read ahead, and a branch read alone for the first time brings its collection
        (``speculate=False`` turns this off)."""
        return self._core.read_ranges(ranges)

    def close(self) -> None:
        """Drop what was read ahead for `read_ranges`; the file's source needs no closing
        (present for `with` and uproot habits)."""
        self._core.close_raw()

    def __enter__(self) -> File:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<cherenkov.File {self.path!r} ({self.size} bytes)>"
