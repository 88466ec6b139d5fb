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


def open(
    path: str | os.PathLike | list,
    *,
    connections: int | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    trace: bool = False,
    discover: bool = True,
    verify_checksums: bool = False,
    retry_window: float | None = None,
    min_rate: float | None = None,
    cache: str | os.PathLike | None = None,
    cache_max_bytes: int | None = None,
    token: str | None = None,
    ca: str | os.PathLike | None = None,
    insecure_skip_verify: bool = False,
    adaptive_streams: bool = True,
    sss_keytab: str | os.PathLike | None = None,
    speculate: bool = True,
    speculate_threshold: float = 0.3,
    speculate_budget: float = 0.2,
) -> File:
    """Open a ROOT file: a local path, a ``file://``, ``root://``, ``http://`` or ``https://`` URL,
    or a list of such URLs that are replicas of one file: reads are then shared between the two
    fastest, weighted by measured quality, and survive a failing replica (see `File.replicas()`).
    Replicas are opened all at once and the file is the first listed one that opens, whatever order
    they answer in (its values are read, never those of one that answered sooner); the others join
    if they hold the same file. One that is refused, missing or silent does not fail the open; one
    that holds another file (another size, or other bytes in the file's head and tail, where ROOT
    keeps the file's UUID and its index) is left out. Both are reported by `File.replicas()` (state ``"dropped"``)
    and with a warning when known at open (with ``verify_checksums``, every replica must open and
    agree, or the open fails). A replica whose file changes on its server while
    being read (new ETag or Last-Modified over HTTP) is dropped too; a single file that changes
    raises `SourceError`.

    Remote options (defaults in parentheses): ``connections``, parallel connections per file for
    XRootD (2) or requests in flight for HTTP (8); ``timeout``, seconds a request may wait for the
    server (XRootD 60, HTTP 30); ``retries``, retries of a failed read before it is reported (8), and
    ``retry_window``, seconds after a request's first failure within which retries may start (5): the
    waits between attempts grow from 0.2 s to at most 2 s, each drawn at random between half and all of
    its step, so a network blip or a server restart shorter than the window costs a delay, not the read;
    ``min_rate``, the slowest transfer accepted in bytes per second (32768): a transfer that receives
    fewer than ``min_rate * timeout`` bytes over any ``timeout`` seconds is abandoned at once and retried
    on a new connection (or read from another replica), whatever its size, as curl's speed limit does,
    so every read ends in bounded time however steadily an answer trickles in. Errors a caller may
    handle apart are also Python's own: a missing file raises `SourceNotFoundError` (a
    ``FileNotFoundError``), refused credentials `SourcePermissionError` (a ``PermissionError``), a
    silent or too slow server `SourceTimeoutError` (a ``TimeoutError``); every `SourceError` is an
    ``OSError``.
    ``adaptive_streams`` (True): ``connections`` is where reading starts; the count then follows the
    link, as a bandwidth-delay product is found: it doubles while doubling brings 1.3x the
    throughput or more, goes back when it does not, and halves when the server pushes back
    (``kXR_wait``, HTTP 503/429, a refused connection), within 1 to 16. On a link that caps each
    connection (a TCP window far away, a per-stream limit) this fills the link; on a shared cap it
    stays put. False keeps ``connections`` fixed. ``stats().streams`` and ``streams_peak`` say
    how many were used; `File.stream_steps()` the throughput measured at each count.
    ``trace=True`` records every request (offset, length, send and answer times): see
    `File.trace()` and `cherenkov.plots`. ``discover`` (root:// only): a redirector's data servers
    holding the file (``kXR_locate``) are read as replicas; False reads from the one it redirects to.
    ``verify_checksums``: replicas must also have the same checksum on their servers (XRootD
    ``kXR_query``), else the open fails naming each one's; a server that cannot tell fails it too.
    ``cache``: a directory keeping the byte ranges read, so that later passes read the disk
    (default: ``$CHERENKOV_CACHE``, else no cache); at most ``cache_max_bytes`` (20 GiB), least
    recently used first out. A file changed on its server is read anew, never from old entries.

    Authentication (see the README's "Authentication"): ``token``, a WLCG bearer token sent as
    ``Authorization: Bearer`` with every request (default: found in ``$BEARER_TOKEN``, the file
    ``$BEARER_TOKEN_FILE``, ``$XDG_RUNTIME_DIR/bt_u<uid>`` or ``/tmp/bt_u<uid>``, sent to https://
    only; a token file is read again when it changes and must be private, mode 600); a
    ``user:password@`` in an HTTP URL is sent with every request too. ``ca``, a CA certificate
    file or directory: the only CAs a server's certificate is checked against (default: the
    system's, plus ``$X509_CERT_DIR`` and ``$SSL_CERT_FILE``). ``insecure_skip_verify=True``
    checks no certificate at all: for tests with made-up certificates only. ``sss_keytab``, the
    keytab of an XRootD server asking for ``sss`` (default, as XrdCl: ``$XrdSecSSSKT``,
    ``$XrdSecsssKT``, the path the server names, ``~/.xrd/sss.keytab``, ``/etc/xrootd/sss.keytab``;
    it must be private, mode 600). Secrets never appear in ``File.path``, messages, stats or traces.

    Speculation (see the README's "Speculation"): lazy chunks fetch a set of branches outside the
    learned set (a trigger's extras) together with it, ahead of use, when more than
    ``speculate_threshold`` (0.3) of recent chunks used it; the bytes so fetched and never used stay
    within ``speculate_budget`` (0.2) of the bytes read, or the worst set stops being speculated.
    ``speculate=False`` turns it off. `File.stats()` reports ``speculative_bytes``,
    ``speculative_used_bytes``, ``speculative_wasted_bytes``, ``hit_rate`` and ``miss_rate``.
    """
    return File(
        path if isinstance(path, (list, tuple)) else os.fspath(path),
        connections=connections,
        timeout=timeout,
        retries=retries,
        trace=trace,
        discover=discover,
        verify_checksums=verify_checksums,
        retry_window=retry_window,
        min_rate=min_rate,
        cache=os.fspath(cache) if cache is not None else None,
        cache_max_bytes=cache_max_bytes,
        token=token,
        ca=None if ca is None else os.fspath(ca),
        insecure_skip_verify=insecure_skip_verify,
        adaptive_streams=adaptive_streams,
        sss_keytab=None if sss_keytab is None else os.fspath(sss_keytab),
        speculate=speculate,
        speculate_threshold=speculate_threshold,
        speculate_budget=speculate_budget,
    )


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

    def __init__(self, path: str | list, **source_options):
        urls = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else [path]
        self.path = " | ".join(_core.redact(url) for url in urls)
        self._opened = (time.perf_counter(), time.process_time())
        self._core = _core.RootFile.open(urls, **source_options)
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

    def close(self) -> None:
        """Files hold no resources beyond their source; present for `with` and uproot habits."""

    def __enter__(self) -> File:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<cherenkov.File {self.path!r} ({self.size} bytes)>"
