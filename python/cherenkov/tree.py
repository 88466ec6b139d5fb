"""Trees: branch listings, cluster boundaries, and reads into numpy or awkward arrays."""

from __future__ import annotations

import fnmatch
import logging
import re
import time
from collections.abc import Iterator, Sequence

import numpy as np

from cherenkov import _core
from cherenkov._core import BranchInfo
from cherenkov.arrays import to_awkward_layout, to_numpy
from cherenkov.progress import Progress
from cherenkov.units import parse_size

log = logging.getLogger("cherenkov")


def _is_pattern(s: str) -> bool:
    return any(ch in s for ch in "*?[") or (len(s) > 1 and s.startswith("/") and s.endswith("/"))


def _matches(pattern: str, info: BranchInfo) -> bool:
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        rx = re.compile(pattern[1:-1])
        return bool(rx.search(info.name) or rx.search(info.path))
    return fnmatch.fnmatchcase(info.name, pattern) or fnmatch.fnmatchcase(info.path, pattern)


class Tree:
    """A TTree. ``tree.arrays([...])`` reads branches; ``tree.iterate([...])`` steps over clusters."""

    def __init__(self, core: _core.Tree, file=None):
        self._core = core
        self.file = file
        self.branches: list[BranchInfo] = core.branches()
        # Full paths win over bare names; of several branches with one name, the first wins (as
        # in uproot: Delphes writes `Particle_size` twice).
        by_path: dict[str, BranchInfo] = {}
        for info in self.branches:
            by_path.setdefault(info.path, info)
        self._by_name: dict[str, BranchInfo] = {}
        for info in self.branches:
            self._by_name.setdefault(info.name, info)
        self._by_name.update(by_path)

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def title(self) -> str:
        return self._core.title

    @property
    def num_entries(self) -> int:
        return self._core.num_entries

    def __len__(self) -> int:
        return self.num_entries

    def __repr__(self) -> str:
        return f"<cherenkov.Tree {self.name!r} ({self.num_entries} entries, {len(self.branches)} branches)>"

    def keys(self, filter_name: str | None = None) -> list[str]:
        """Branch paths, depth first; `filter_name` is a glob or a /regex/."""
        return [b.path for b in self.branches if filter_name is None or self._matches(filter_name, b)]

    @staticmethod
    def _matches(pattern: str, info) -> bool:
        return _matches(pattern, info)

    def __getitem__(self, name: str) -> BranchInfo:
        try:
            return self._by_name[name]
        except KeyError:
            raise _core.NotFoundError(f"{self._where()}: no branch named {name!r}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def _where(self) -> str:
        return f"{self.file.path if self.file else '?'}: tree {self.name!r}"

    @property
    def cluster_boundaries(self) -> np.ndarray:
        """Entry numbers where clusters start, plus `num_entries` at the end."""
        return np.asarray(self._core.cluster_boundaries(), dtype=np.int64)

    def resolve(self, expressions: str | Sequence[str] | None) -> list[tuple[str, BranchInfo]]:
        """Names and patterns to (output key, branch). Explicit names must exist (unsupported ones
        raise when read); patterns and None select the readable branches they match."""
        if expressions is None:
            return [(b.name, b) for b in self.branches if b.readable and self._selected_by_default(b)]
        if isinstance(expressions, str):
            expressions = [expressions]
        out: list[tuple[str, BranchInfo]] = []
        seen: set[int] = set()
        for expr in expressions:
            if expr not in self._by_name and _is_pattern(expr):
                picked = [(b.name, b) for b in self.branches if b.readable and self._selected_by_default(b) and self._matches(expr, b)]
            else:
                picked = [(expr, self[expr])]
            for key, info in picked:
                if info.index not in seen:
                    seen.add(info.index)
                    out.append((key, info))
        return out

    @staticmethod
    def _selected_by_default(info) -> bool:
        # A split object read whole repeats its members, which patterns select themselves (as
        # uproot does: a group is a record only when named).
        return info.kind != "group"

    def _entry_range(self, entry_start, entry_stop) -> tuple[int, int]:
        n = self.num_entries
        start = 0 if entry_start is None else (entry_start + n if entry_start < 0 else entry_start)
        stop = n if entry_stop is None else (entry_stop + n if entry_stop < 0 else entry_stop)
        return min(max(start, 0), n), min(max(stop, 0), n)

    def read(self, expressions=None, entry_start=None, entry_stop=None):
        """Raw read: (list of (key, branch dict with numpy buffers), stats dict)."""
        selected = self.resolve(expressions)
        start, stop = self._entry_range(entry_start, entry_stop)
        stop = max(start, stop)
        t0 = time.perf_counter()
        branches, stats = self._core.read([info.index for _, info in selected], start, stop)
        log.debug(
            "%s: read %d branches, entries %d..%d: %d baskets, %d bytes in %.3f s",
            self._where(),
            len(selected),
            start,
            stop,
            stats.baskets,
            stats.compressed_bytes,
            time.perf_counter() - t0,
        )
        return [(key, b) for (key, _), b in zip(selected, branches)], stats

    def arrays(self, expressions=None, entry_start=None, entry_stop=None, library: str = "ak"):
        """Read branches over `[entry_start, entry_stop)`.

        library="np": a dict of numpy arrays (fixed dimensions as extra axes; jagged data as
        `cherenkov.Jagged` offsets and content; strings as object arrays; leaf lists as structured
        arrays). library="ak": one awkward record array with a field per branch.
        """
        pairs, _ = self.read(expressions, entry_start, entry_stop)
        return _convert(pairs, library)

    def iterate(
        self,
        expressions=None,
        step_size: int | str = 100_000,
        entry_start=None,
        entry_stop=None,
        library: str = "ak",
        memory_budget: int = 256 << 20,
        steps_ahead: int | None = None,
        progress=None,
    ) -> Iterator:
        """Yield arrays for consecutive entry ranges of about `step_size` entries (or of a memory
        size, ``"100 MB"``, as uproot takes it: see `steps`), each made of whole clusters. While
        one step is in use, the next ones are fetched and decompressed, at most `memory_budget`
        bytes: `steps_ahead` steps to start with (None: 3, or 7 where two round
        trips of the link, measured while opening, outlast their decoding), more while the
        consumer waits for the network; `steps_ahead=0` turns that off.
        A basket shared by two steps is read once. Leaving the loop early cancels what is in flight.
        `progress`: None shows a bar on terminals, True/False force it, a callable receives a
        `cherenkov.progress.ProgressUpdate` after each step."""
        start, stop = self._entry_range(entry_start, entry_stop)
        bar = Progress({self.name: max(stop - start, 0)}, progress)
        try:
            for lo, hi, pairs, stats in self.iterate_raw(expressions, step_size, start, stop, memory_budget, steps_ahead):
                bar.advance(self.name, hi - lo, stats.uncompressed_bytes)
                log.debug("%s: step %d..%d ready (%d baskets, %d bytes)", self._where(), lo, hi, stats.baskets, stats.compressed_bytes)
                yield _convert(pairs, library)
        finally:
            bar.close()

    def iterate_raw(
        self, expressions=None, step_size=100_000, entry_start=None, entry_stop=None, memory_budget=256 << 20, steps_ahead=None
    ):
        """Like `iterate`, yielding (start, stop, [(key, branch buffers)], stats) per step."""
        selected = self.resolve(expressions)
        start, stop = self._entry_range(entry_start, entry_stop)
        stream = self.start_steps(selected, self.steps(step_size, start, stop, selected), memory_budget, steps_ahead)
        try:
            for lo, hi, branches, stats in stream:
                yield lo, hi, [(key, b) for (key, _), b in zip(selected, branches)], stats
        finally:
            stream.close()

    def chunks(
        self,
        step_size: int | str = 100_000,
        entry_start=None,
        entry_stop=None,
        profile: _core.AccessProfile | None = None,
        steps_ahead: int = 3,
        learning: bool = True,
        memory_budget: int = 256 << 20,
    ) -> Iterator[LazyChunk]:
        """Yield lazy chunks of whole clusters: ``chunk["Muon_pt"]`` reads a branch on first use.

        The engine learns which branches are used: the first branch touched in the first chunk
        fetches every branch of that chunk in one request (up to 64 MB) and the ones used become
        the learned set, read `steps_ahead` chunks ahead of use (0: when first used). The first
        branch outside it that a chunk touches fetches every unread branch of that chunk in one
        request (a trigger fired); the ones then used become the miss set, fetched together on
        later misses. Pass one `cherenkov.AccessProfile` to the chunks of every file of a dataset
        so later files need no training. A chunk's branches can be read only while it is the
        current chunk.
        """
        start, stop = self._entry_range(entry_start, entry_stop)
        profile = profile if profile is not None else _core.AccessProfile()
        core = self.start_chunks(self.steps(step_size, start, stop), profile, learning, memory_budget, steps_ahead)
        while (span := core.advance()) is not None:
            yield LazyChunk(self, core, *span)
        self.last_chunk_stats = core.stats()

    def select(self, expressions=None, filter_name=None) -> list[tuple[str, BranchInfo]]:
        """What `expressions` select (as `resolve`), kept to those matching `filter_name` (a name,
        glob or /regex/, or a list of them) when given."""
        selected = self.resolve(expressions)
        if filter_name is None:
            return selected
        patterns = [filter_name] if isinstance(filter_name, str) else list(filter_name)
        return [(key, info) for key, info in selected if any(self._matches(p, info) for p in patterns)]

    def start_steps(self, selected, steps, memory_budget: int = 256 << 20, steps_ahead: int | None = None):
        """Start reading `selected` (from `select`) over `steps` (from `steps`), the first steps
        fetched and decompressed at once, before anything is consumed: an iterator of (start,
        stop, buffers, stats), one per step, whose `close()` drops what is in flight. The step
        reader of `iterate`; datasets start one per file they open ahead."""
        return self._core.iterate([info.index for _, info in selected], steps, memory_budget, steps_ahead)

    def start_chunks(self, steps, profile, learning: bool = True, memory_budget: int = 256 << 20, steps_ahead: int = 3):
        """The lazy chunk reader of `chunks` over `steps`, sharing `profile`; a trained profile's
        learned set is fetched as soon as its first chunk is advanced to."""
        return self._core.chunks(steps, profile, learning, memory_budget, steps_ahead)

    def steps(self, step_size: int | str, start: int = 0, stop: int | None = None, selected=None) -> list[tuple[int, int]]:
        """Cluster-aligned entry ranges of at least `step_size` entries (the last may be shorter).
        A memory size (``"100 MB"``, as uproot takes it) stands for the entries the `selected`
        branches (from `select`; None: those ``arrays()`` reads by default) hold uncompressed in
        that many bytes, on average over the tree."""
        stop = self.num_entries if stop is None else stop
        if isinstance(step_size, str):
            step_size = self.entries_in(parse_size(step_size), selected)
        return cluster_steps(self.cluster_boundaries.tolist(), step_size, start, stop)

    def entries_in(self, size: int, selected=None) -> int:
        """Entries (at least 1) whose `selected` branches take `size` bytes uncompressed, on
        average over the tree."""
        selected = self.resolve(None) if selected is None else selected
        per_entry = sum(info.uncompressed_bytes for _, info in selected) / max(self.num_entries, 1)
        return max(1, int(size / per_entry)) if per_entry else max(1, self.num_entries)


def cluster_steps(boundaries: Sequence[int], step_size: int, start: int, stop: int) -> list[tuple[int, int]]:
    """Entry ranges of whole clusters (`boundaries`: where clusters start, and the end) covering
    [start, stop), each of at least `step_size` entries (the last may be shorter)."""
    if step_size < 1:
        raise ValueError("step_size must be at least 1")
    bounds = [b for b in boundaries if start < b < stop]
    out, lo = [], start
    for b in bounds + [stop]:
        if b - lo >= step_size or b == stop:
            if b > lo:
                out.append((lo, b))
            lo = b
    return out


def _convert(pairs, library: str):
    if library == "layouts":  # the core's layout dicts as they are (for the merger's writing)
        return {key: b["array"] for key, b in pairs}
    if library == "np":
        return {key: to_numpy(b) for key, b in pairs}
    if library == "ak":
        import awkward as ak

        if not pairs:
            return ak.Array(ak.contents.RecordArray([], [], length=0))
        narrowed: dict = {}  # 32-bit offsets, made once for all fields of a collection
        layouts = [to_awkward_layout(b, narrowed) for _, b in pairs]
        return ak.Array(ak.contents.RecordArray(layouts, [key for key, _ in pairs], length=pairs[0][1]["entries"]))
    raise ValueError(f"library must be 'np' or 'ak', not {library!r}")


class LazyChunk:
    """Entries `[entry_start, entry_stop)` of a tree, read branch by branch on first use."""

    def __init__(self, tree: Tree, core, entry_start: int, entry_stop: int):
        self.tree = tree
        self.entry_start = entry_start
        self.entry_stop = entry_stop
        self._core = core
        self._raw: dict[int, dict] = {}

    def __len__(self) -> int:
        return self.entry_stop - self.entry_start

    def __repr__(self) -> str:
        return f"<LazyChunk entries {self.entry_start}..{self.entry_stop} of {self.tree.name!r}>"

    def _branch(self, name: str) -> dict:
        info = self.tree[name]
        if info.index not in self._raw:
            self._raw[info.index] = self._core.get(info.index)
        return self._raw[info.index]

    def __getitem__(self, name: str):
        """The branch as an awkward array."""
        return self.array(name, library="ak")

    def array(self, name: str, library: str = "ak"):
        pairs = [(name, self._branch(name))]
        return _convert(pairs, library)[name]

    def arrays(self, names, library: str = "ak"):
        # Several at once: a chunk that trains the access profile reads them ahead for the next
        # chunks now, not when it ends.
        unread = [i for i in (self.tree[n].index for n in names) if i not in self._raw]
        if len(unread) > 1:
            self._core.will_use(unread)
        return _convert([(n, self._branch(n)) for n in names], library)

    @property
    def stats(self) -> _core.LazyStats:
        """Cache counters so far: hits, misses, miss_fetches, startup_fetches, learned_fetches."""
        return self._core.stats()
