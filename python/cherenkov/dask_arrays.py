"""`cherenkov.dask`: a dask-awkward array like ``uproot.dask``'s, read by cherenkov's engine,
of TTrees or RNTuples.

The graph is uproot's in every way a Dask or coffea user can see: the form comes from uproot's
own helpers (so ``form``, ``dak.necessary_columns``, ``form_mapping`` such as coffea's schemas,
and ``known_base_form`` behave the same), and the IO function follows dask-awkward's column
projection protocol through uproot's `UprootReadMixin`. What differs is underneath: the files
are opened concurrently by cherenkov (for uproot only the first, through
`cherenkov.uproot.Source`, to learn the form), partitions are made of whole clusters, and each
partition reads its columns with one vectored request, decompressed on cherenkov's threads
(capped to the Dask worker's own thread count). An RNTuple's columns are its top-level fields,
as for ``uproot.dask``: a field used by the graph is read with all of its subfields.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
import time
import uuid
from collections import OrderedDict

import uproot
import uproot._dask as _ud
from uproot._util import no_filter

import cherenkov
from cherenkov.file import OPEN_OPTIONS
from cherenkov.units import parse_size
from cherenkov.uproot import Source
from cherenkov.uproot.source import OPENED_AT_ONCE


def dask(
    files,
    *,
    filter_name=no_filter,
    filter_typename=no_filter,
    filter_branch=no_filter,
    recursive=True,
    full_paths=False,
    step_size: int | str | None = None,
    steps_per_file: int | None = None,
    ak_add_doc=False,
    form_mapping=None,
    known_base_form=None,
    allow_missing=False,
    allow_read_errors_with_report=False,
    open_options: dict | None = None,
    open_files=True,
    decompression_executor=None,
    interpretation_executor=None,
    **options,
):
    """A lazy dask-awkward array of the TTrees or RNTuples in ``files``, as
    ``uproot.dask(files, ...)`` gives (``files`` in any form uproot accepts, ``{"f.root": "Events"}``, coffea's
    ``{"f.root": {"object_path": ..., "steps": [...]}}`` included).

    ``step_size``: at most this many entries per partition (or a memory size, ``"100 MB"``, as
    uproot.dask takes it), in whole clusters (a larger cluster
    is a partition of its own); None: one partition per file. ``open_options``: options of
    `cherenkov.open` (``connections``, ``timeout``, ``retries``, ...). ``form_mapping`` and
    ``known_base_form`` (which spares opening any file with uproot) as in ``uproot.dask``.
    ``steps_per_file``: that many partitions per file (rounded to clusters), when no
    ``step_size`` is given. The arguments coffea gives ``uproot.dask`` are accepted too
    (``open_files``, the executors, uproot's options): the engine has its own threads, and
    `cherenkov.open`'s options given there are used.
    """
    dask_awkward = uproot.extras.dask_awkward()
    open_options = {**{k: options[k] for k in OPEN_OPTIONS if options.get(k) is not None}, **(open_options or {})}
    files = uproot._util.regularize_files(files, steps_allowed=True)
    trees = _open_all([(f[0], f[1]) for f in files], open_options)
    interp_options = {"ak_add_doc": ak_add_doc}
    if known_base_form is not None:
        base_form = known_base_form
    else:
        ttrees, keys, _, _ = _ud._resolve_trees_and_keys(
            [(files[0][0], files[0][1])],
            filter_name,
            filter_typename,
            uproot._util.regularize_filter(filter_branch),
            recursive,
            full_paths,
            None,
            allow_missing,
            {"handler": Source, "opened": trees[0].file, **open_options},  # no second opening
        )
        present = set.intersection(*(_names(t) for t in trees))
        keys = [k for k in keys if k in present]
        keys = _ud._normalize_grouped_keys(ttrees[0], keys, full_paths)
        base_form = _ud._base_form_of(ttrees[0], keys, ak_add_doc, form_mapping)
    expected_form, form_mapping_info = _ud._mapping_of(form_mapping, base_form)

    divisions, partitions = [0], []
    for i, (f, tree) in enumerate(zip(files, trees)):
        per_file = step_size
        if isinstance(step_size, str):  # a memory size ("100 MB"), as uproot.dask takes it
            selected = [(n, tree[n]) for n in base_form.fields if n in tree]
            per_file = tree.entries_in(parse_size(step_size), selected or None)
        if per_file is None and isinstance(steps_per_file, int) and steps_per_file > 0:
            per_file = max(1, -(-tree.num_entries // steps_per_file))
        steps = f[2] if len(f) == 3 else _cluster_steps(tree, per_file)
        for start, stop in steps:
            if stop > start:
                divisions.append(divisions[-1] + stop - start)
                partitions.append((i, int(start), int(stop)))
    if not partitions:
        divisions.append(0)
        partitions.append((0, 0, 0))
    fn = CherenkovRead(
        [(f[0], f[1]) for f in files],
        list(base_form.fields),
        interp_options,
        base_form,
        expected_form,
        form_mapping_info,
        allow_read_errors_with_report,
        open_options,
    )
    out = dask_awkward.from_map(fn, partitions, divisions=tuple(divisions), label="from-cherenkov")
    if allow_read_errors_with_report:
        out[0].clear_divisions()
    return out


@contextlib.contextmanager
def replacing_uproot_dask():
    """Within the block, ``uproot.dask`` is `dask` (for code that calls ``uproot.dask`` itself,
    such as coffea's ``NanoEventsFactory.from_root(..., mode="dask")``); restored after."""
    original = uproot.dask
    uproot.dask = dask
    try:
        yield
    finally:
        uproot.dask = original


def _cluster_steps(tree, step_size):
    """Consecutive whole clusters of at most ``step_size`` entries (None: the whole tree)."""
    bounds = [int(b) for b in tree.cluster_boundaries]
    if step_size is None:
        return [(0, tree.num_entries)]
    steps, start = [], 0
    for lo, hi in zip(bounds, bounds[1:]):
        if hi - start > step_size and lo > start:
            steps.append((start, lo))
            start = lo
    if start < tree.num_entries or not steps:
        steps.append((start, tree.num_entries))
    return steps


def _names(tree) -> set[str]:
    return {b.name for b in tree.branches} | {b.path for b in tree.branches}


def _open_all(files, open_options):
    """The trees of all files, opened at once (the engine waits without the GIL)."""
    with concurrent.futures.ThreadPoolExecutor(min(OPENED_AT_ONCE, len(files))) as pool:
        return list(pool.map(lambda f: _tree(f[0], f[1], open_options), files))


# A worker process keeps its recently used files open: partitions of one file share them.
_open_trees: OrderedDict = OrderedDict()
_open_lock = threading.Lock()
_KEPT_FILES = 64
_TREE_CLASSES = ("TTree", "ROOT::RNTuple")


def _tree(url, object_path, open_options) -> cherenkov.Tree:
    key = (url, object_path, tuple(sorted(open_options.items())))
    with _open_lock:
        tree = _open_trees.get(key)
        if tree is not None:
            _open_trees.move_to_end(key)
            return tree
    f = cherenkov.open(url, **open_options)
    if object_path is None:
        trees = [k for k, cls in f.classnames().items() if cls in _TREE_CLASSES]
        if len(trees) != 1:
            raise ValueError(f"{url}: name the TTree or RNTuple to read (found {trees})")
        object_path = trees[0]
    tree = f[object_path]
    with _open_lock:
        _open_trees[key] = tree
        while len(_open_trees) > _KEPT_FILES:
            _open_trees.popitem(last=False)
    return tree


def _cap_threads_in_dask_worker():
    """Inside a Dask worker, cherenkov's decompression pool gets the worker's thread count
    (read once, when the pool starts), so that workers sharing a machine do not oversubscribe
    it; elsewhere it uses every core."""
    if "RAYON_NUM_THREADS" in os.environ:
        return
    try:
        from distributed import get_worker

        threads = get_worker().state.nthreads
    except (ImportError, ValueError, AttributeError):
        return
    os.environ["RAYON_NUM_THREADS"] = str(max(1, threads))


class TreeView:
    """The part of an uproot TTree that form mappings read through (``arrays``, ``tree[key]``,
    ``key in tree``, ``file.file_path``, ``object_path``), answered by a cherenkov tree or
    RNTuple. For an RNTuple, uproot's mapping asks for top-level fields by name, as of a TTree."""

    def __init__(self, tree: cherenkov.Tree, file_path: str, object_path: str | None):
        self._tree = tree
        self.file = _FileView(file_path)
        self.object_path = object_path or tree.name
        self.num_entries = tree.num_entries
        self._names = _names(tree)

    def __contains__(self, key) -> bool:
        return key in self._names

    def arrays(self, expressions=None, entry_start=None, entry_stop=None, how=None, **_ignored):
        keys = list(expressions)
        # cherenkov reads the set in one request; a branch given twice is read once
        record = self._tree.arrays(sorted(set(keys)), entry_start=entry_start, entry_stop=entry_stop, library="ak")
        if how is dict:
            return {k: record[k] for k in keys}
        return record

    def __getitem__(self, key):
        return _BranchView(self._tree, key)


class RNTupleView(TreeView):
    """`TreeView` of an RNTuple. uproot's form of a top-level field keeps only the subfields
    the filters selected, so a field is read as those leaves (in one request with the others)
    and put back together along its form, as uproot's own RNTuple reading does."""

    def __init__(self, ntuple: cherenkov.RNTuple, file_path: str, object_path: str | None, base_form):
        super().__init__(ntuple, file_path, object_path)
        self._form = base_form

    def arrays(self, expressions=None, entry_start=None, entry_stop=None, how=None, **_ignored):
        import awkward as ak

        keys = list(dict.fromkeys(expressions))
        leaves = {k: _ud._rntuple_leaf_paths(self._form.content(k), k) if k in self._form.fields else [k] for k in keys}
        read = self._tree.arrays(sorted({p for paths in leaves.values() for p in paths}), entry_start=entry_start, entry_stop=entry_stop)
        layouts = [_assemble(self._form.content(k) if k in self._form.fields else None, read, leaves[k], k) for k in keys]
        record = ak.Array(ak.contents.RecordArray(layouts, keys, length=len(read)))
        return {k: record[k] for k in expressions} if how is dict else record


def _assemble(form, read, paths: list[str], path: str):
    """The layout of ``form`` at field ``path`` from the leaves ``paths`` of ``read``: a leaf
    array carries every list and option above it (not the records), shared by all leaves under
    them, so each level is taken from the first leaf and checked against the others."""
    if path in paths:
        return read[path].layout
    return _level(form, {p: read[p].layout for p in paths}, path)


def _level(form, leaves: dict, path: str):
    if path in leaves:
        return leaves[path]
    import awkward as ak

    first = next(iter(leaves.values()))
    if form.is_record:
        contents = []
        for field in form.fields:
            below = f"{path}.{field}"
            contents.append(
                _level(form.content(field), {p: x for p, x in leaves.items() if p == below or p.startswith(below + ".")}, below)
            )
        fields = None if form.is_tuple else form.fields
        return ak.contents.RecordArray(contents, fields, length=first.length, parameters=form.parameters)
    if form.is_union or form.is_unknown or form.is_numpy:
        raise ValueError(f"{path}: cannot put {form.type} together from its subfields {sorted(leaves)}")
    for other in leaves.values():
        if type(other) is not type(first) or not _same_structure(other, first):
            raise ValueError(f"{path}: its subfields {sorted(leaves)} were read with different structures")
    return first.copy(content=_level(form.content, {p: x.content for p, x in leaves.items()}, path))


def _same_structure(a, b) -> bool:
    """Whether two list/option/indexed layouts index their contents alike."""
    import numpy as np

    for attr in ("offsets", "starts", "stops", "index", "mask"):
        x, y = getattr(a, attr, None), getattr(b, attr, None)
        if x is not None and not np.array_equal(np.asarray(x.data), np.asarray(y.data)):
            return False
    return getattr(a, "size", None) == getattr(b, "size", None)


class _FileView:
    def __init__(self, file_path: str):
        self.file_path = file_path
        self.uuid = uuid.uuid5(uuid.NAMESPACE_URL, file_path)


class _BranchView:
    def __init__(self, tree, key):
        self._tree, self._key = tree, key

    def array(self, entry_start=None, entry_stop=None, **_ignored):
        return self._tree.arrays([self._key], entry_start=entry_start, entry_stop=entry_stop, library="ak")[self._key]


class CherenkovRead(_ud.UprootReadMixin):
    """dask-awkward's IO function: ``(file index, start, stop)`` → the partition, reading only
    the projected columns, in one request. Picklable (holds URLs and forms, not open files) and
    tokenized by what it reads."""

    def __init__(
        self,
        files,
        common_keys,
        interp_options,
        base_form,
        expected_form,
        form_mapping_info,
        allow_read_errors_with_report,
        open_options,
    ):
        self.files = files
        self.common_keys = frozenset(common_keys)
        self.interp_options = interp_options
        self.base_form = base_form
        self.expected_form = expected_form
        self.form_mapping_info = form_mapping_info
        self.allow_read_errors_with_report = allow_read_errors_with_report
        self.open_options = open_options
        self.decompression_executor = None
        self.interpretation_executor = None

    def __dask_tokenize__(self):
        return (
            type(self).__name__,
            self.files,
            sorted(self.common_keys),
            str(self.expected_form),
            sorted(self.open_options.items()),
        )

    def project_keys(self, keys: frozenset[str]) -> CherenkovRead:
        return CherenkovRead(
            self.files,
            keys,
            self.interp_options,
            self.base_form,
            self.expected_form,
            self.form_mapping_info,
            self.allow_read_errors_with_report,
            self.open_options,
        )

    def read(self, i: int, start: int, stop: int):
        _cap_threads_in_dask_worker()
        url, object_path = self.files[i]
        # A SourceError is an OSError, which uproot's reports catch.
        tree = _tree(url, object_path, self.open_options)
        if isinstance(tree, cherenkov.RNTuple):
            view = RNTupleView(tree, url, object_path, self.base_form)
        else:
            view = TreeView(tree, url, object_path)
        return self._read_view(view, start, stop)

    def _read_view(self, view, start, stop):
        return _ud._read_tree(
            view,
            self.common_keys,
            start,
            stop,
            expected_form=self.expected_form,
            form_mapping_info=self.form_mapping_info,
            interp_options=self.interp_options,
            decompression_executor=None,
            interpretation_executor=None,
        )

    def __call__(self, i_start_stop):
        i, start, stop = i_start_stop
        if not self.return_report:
            return self.read(i, start, stop)
        call_time = time.time_ns()
        try:
            t0 = time.monotonic()
            result = self.read(i, start, stop)
            counters = uproot.source.chunk.SourcePerformanceCounters(0, 0, 0)
            return result, _ud._report_success(time.monotonic() - t0, self.files[i][0], start, stop, counters=counters)
        except self.allowed_exceptions as err:
            return self.mock_empty(backend="cpu"), _ud._report_failure(err, call_time, self.files[i][0], start, stop)


__all__ = ["dask", "CherenkovRead", "TreeView", "RNTupleView"]
