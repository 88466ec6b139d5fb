"""An fsspec filesystem over cherenkov's byte sources, registered as the protocol ``cherenkov``.

``fsspec.open("cherenkov://root://host//file.root")`` (or the chained form
``"cherenkov::root://host//file.root"`` where fsspec knows the inner protocol) reads through
cherenkov: ``cat_ranges`` is one vectored request per file, replicas, retries and hedging come
with it. Only the name ``cherenkov`` is registered: ``root://`` and ``http://`` stay with
whatever package provides them. Any file works (parquet, JSON corrections), not only ROOT files.
"""

from __future__ import annotations

import threading

import fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from cherenkov import _core
from cherenkov.file import OPEN_OPTIONS

PROTOCOL = "cherenkov"


class CherenkovFileSystem(AbstractFileSystem):
    """Read-only files by path or URL (``root://``, ``http(s)://``, ``file://`` or a path)
    through cherenkov. Options: those of `cherenkov.open` (``timeout``, ``cache``, ``token``, ...)
    and ``replicas``, a dict from a URL to its other replicas."""

    protocol = PROTOCOL
    root_marker = ""

    def __init__(self, target_protocol=None, target_options=None, fo=None, replicas=None, **options):
        super().__init__(**options)
        self._open_options = {k: options[k] for k in OPEN_OPTIONS if k in options}
        self._replicas = dict(replicas or {})
        # the chained form ("cherenkov::root://host//f"): fsspec hands over the inner URL split
        self._target_protocol = target_protocol
        self._target_options = dict(target_options or {})
        self._fo = fo
        self._files: dict[str, _core.RawSource] = {}
        self._lock = threading.Lock()

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, (list, tuple)):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        for prefix in (f"{PROTOCOL}::", f"{PROTOCOL}://"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
        return path

    def _url(self, path: str) -> str:
        path = self._strip_protocol(path) or self._fo or ""
        if self._target_protocol and "://" not in path and self._target_protocol != "file":
            host = self._target_options.get("hostid")  # fsspec-xrootd keeps the host apart
            return f"{self._target_protocol}://{host}/{path}" if host else f"{self._target_protocol}://{path}"
        return path

    def _file(self, path: str) -> _core.RawSource:
        url = self._url(path)
        with self._lock:
            f = self._files.get(url)
        if f is None:
            replicas = [r for r in self._replicas.get(url, []) if r != url]
            # A missing file raises FileNotFoundError (a SourceNotFoundError), as fsspec expects.
            f = _core.RawSource.open([url, *replicas], **self._open_options)
            with self._lock:
                f = self._files.setdefault(url, f)
        return f

    def info(self, path, **kwargs):
        return {"name": self._strip_protocol(path), "size": self._file(path).size, "type": "file"}

    def ls(self, path, detail=True, **kwargs):
        info = self.info(path)
        return [info] if detail else [info["name"]]

    def cat_file(self, path, start=None, end=None, **kwargs):
        size = self._file(path).size
        start, end = _bounds(start, end, size)
        return self.cat_ranges([path], [start], [end])[0]

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """One vectored request per file for all of its ranges."""
        if not (len(paths) == len(starts) == len(ends)):
            raise ValueError("paths, starts and ends must have the same length")
        out = [None] * len(paths)
        by_file: dict[str, list[int]] = {}
        for i, p in enumerate(paths):
            by_file.setdefault(self._url(p), []).append(i)
        for url, indices in by_file.items():
            try:
                f = self._file(url)
                ranges = [_bounds(starts[i], ends[i], f.size) for i in indices]
                buffers = f.read_ranges(ranges)
                for i, b in zip(indices, buffers):
                    out[i] = b.tobytes()
            except Exception as e:
                if on_error == "raise":
                    raise
                for i in indices:
                    out[i] = e
        return out

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode != "rb":
            raise NotImplementedError(f"{PROTOCOL}: files are read-only (mode {mode!r})")
        return CherenkovFile(self, path, mode, block_size or "default", cache_options=cache_options, **kwargs)


class CherenkovFile(AbstractBufferedFile):
    """A file opened through `CherenkovFileSystem`, read in blocks (fsspec's read-ahead cache)."""

    def _fetch_range(self, start, end):
        return self.fs.cat_file(self.path, start, end)


def _bounds(start, end, size):
    """fsspec's conventions: None is the file's start or end, negatives count from the end,
    and ranges are clipped to the file."""
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None else (end + size if end < 0 else end)
    start, end = max(0, min(start, size)), max(0, min(end, size))
    return start, max(start, end)


def register() -> None:
    """Register ``cherenkov`` with fsspec (done on import; other protocols are left alone)."""
    fsspec.register_implementation(PROTOCOL, CherenkovFileSystem, clobber=True)


register()
