"""What a merge reads from each input before writing: its tables (TTrees, RNTuples), their
columns and types, its other objects, its size; and how the inputs' column sets combine
(``schema="strict"``, ``"union"``, ``"intersection"``)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from cherenkov import _core
from cherenkov.arrays import to_layout
from cherenkov.dataset import TABLE_CLASSES, split_xrootd_url
from cherenkov.file import RNTUPLE_CLASS
from cherenkov.file import open as open_file
from cherenkov.processing.dataset import FileSpec
from cherenkov.writing import _from_ak_type

SCHEMAS = ("strict", "union", "intersection")
NUMBERS = {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"}
# Inputs opened at once: a few on local disk, many more when remote, where an open costs round
# trips (two, 0.28 s at 137 ms) that only overlapping hides. Memory bounds them: a remote file
# open ahead of the writer holds ~0.8 MB, and ~0.8 MB more once its TTree metadata is parsed
# (947 branches); `describe` keeps none open. Rewrite mode also holds decoded entries and
# compression buffers (1000 NanoAOD-like inputs at 137 ms: 0.76 GB peak at 96, 0.93 at 192);
# copy mode holds nothing else and opens twice as many (its merge of them in 4.9 s instead of
# 5.8 s, 0.54 GB peak instead of 0.37).
OPENED_AT_ONCE = 8
OPENED_AT_ONCE_REMOTE = 96
COPIED_OPENED_AT_ONCE_REMOTE = 192
PARSED_AT_ONCE_REMOTE = 32
DESCRIBED_AT_ONCE_REMOTE = 256
OPENED_EARLY = OPENED_AT_ONCE_REMOTE  # remote inputs opened for writing while the first is described


@dataclass
class TableSchema:
    """A table of one input: its entries and its top-level readable columns (name -> typename);
    columns None: not read yet (copy mode reads a TTree's metadata once, when it copies it)."""

    kind: str  # "TTree" or "RNTuple"
    entries: int
    columns: dict[str, str] | None
    compressed: int = 0  # bytes of its baskets or pages
    clusters: int = 0
    compression: int | None = None  # an RNTuple's pages' setting (its file's may be another)


@dataclass
class InputInfo:
    spec: FileSpec
    size: int
    compression: int  # its file's setting (a probed input's taken as the first's: only the first's is used)
    tables: dict[str, TableSchema]
    objects: dict[str, str] = field(default_factory=dict)  # path -> class, tables and dirs left out
    version: str | None = None  # as its source saw it (a modification time, an ETag), if known
    # The first input's core TTrees as `describe` parsed them: the others are compared with them.
    parsed: dict = field(default_factory=dict, repr=False)
    # Its TTrees' columns read with no entries (layouts), for `column_types`: the first input's.
    empty: dict = field(default_factory=dict, repr=False)
    probed: bool = False  # made by `_probed`: its tables are checked as they are written
    # Its file opened while `describe` ran, for writing (a remote merge's first inputs): taken
    # once by `raw.in_batches`.
    opening: Future | None = field(default=None, repr=False, compare=False)


def describe(specs: list[FileSpec], open_options: dict, trees: bool = True) -> list[InputInfo]:
    """Every input's `InputInfo`, opened a few at a time (the opening round trips overlap).
    `trees` False describes the first input only: the others are sized meanwhile (`_Probes`:
    from listings of their `root://` directories, else by opening their byte sources, over
    XRootD one round trip where ROOT's opening takes two, and no bytes), a remote merge's first
    `OPENED_EARLY` inputs are opened for writing (`InputInfo.opening`), and when the first's
    tables are all TTrees the others are taken to hold them, checked as each is written (see
    `raw.in_batches`); else the probes not started are dropped (one wave of them wasted at most)
    and the others described, their TTrees' columns left None.
    Inputs with the same columns share one dict of them: memory stays small with 10 000 inputs
    of 947 branches, and `combine` passes over an input whose columns are the first's."""
    with ThreadPoolExecutor(opened_at_once(specs, DESCRIBED_AT_ONCE_REMOTE)[0]) as pool:
        described = pool.submit(_describe, specs[0], open_options, True, True)
        # A remote merge's first inputs are opened meanwhile for writing: their opening round
        # trips overlap describing's instead of following them.
        early = specs[:OPENED_EARLY] if not trees and is_remote(specs) else []
        opening = {spec: pool.submit(open_file, list(spec.replicas), **open_options) for spec in dict.fromkeys(early)}
        probes = None if trees else _Probes(pool, specs[1:], open_options, opening)
        first = described.result()
        if probes and all(t.kind == "TTree" for t in first.tables.values()):
            others = [_probed(spec, first, *probes.result(spec)) for spec in specs[1:]]
        else:
            if probes:
                probes.cancel()
            others = list(pool.map(lambda spec: _describe(spec, open_options, trees, False), specs[1:]))
    shared: dict[tuple, dict[str, str]] = {}
    for info in [first, *others]:
        info.opening = opening.pop(info.spec, None)
        for t in info.tables.values():
            if t.columns is not None:
                t.columns = shared.setdefault(tuple(t.columns.items()), t.columns)
    return [first, *others]


def opened_at_once(specs: list[FileSpec], remote: int = OPENED_AT_ONCE_REMOTE) -> tuple[int, int]:
    """How many of these inputs to have opened at once, and of those how many with their TTree
    metadata parsed: `remote` and more parsed when one is remote."""
    if is_remote(specs):
        return remote, PARSED_AT_ONCE_REMOTE
    return OPENED_AT_ONCE, OPENED_AT_ONCE


def is_remote(specs: list[FileSpec]) -> bool:
    return any("://" in r and not r.startswith("file:") for s in specs for r in s.replicas)


def _describe(spec: FileSpec, open_options: dict, trees: bool, keep: bool) -> InputInfo:
    """`spec`'s `InputInfo`; `keep`: with its core TTrees and their columns read with no entries
    (what `column_types` reads: a remote input not opened again for it)."""
    with open_file(list(spec.replicas), **open_options) as f:
        tables, objects, parsed, empty = {}, {}, {}, {}
        for key, cls in f.classnames().items():
            path = key.split(";")[0]
            if cls in TABLE_CLASSES:
                if path not in tables:
                    tables[path] = (
                        _table_schema(f, path, cls, parsed if keep else {})
                        if trees or cls == RNTUPLE_CLASS
                        else TableSchema("TTree", 0, None)
                    )
                if path in parsed and path not in empty:
                    empty[path] = f[path].arrays(list(tables[path].columns), entry_start=0, entry_stop=0, library="layouts")
            elif cls not in ("TDirectory", "TDirectoryFile") and path not in objects:
                objects[path] = cls
        return InputInfo(spec, f.size, f._core.compression, tables, objects, f._core.version, parsed, empty)


def _probe(spec: FileSpec, open_options: dict) -> tuple[int, str | None]:
    """`spec`'s size and version, from opening its byte source without ROOT's opening."""
    source = _core.RawSource.open(list(spec.replicas), **open_options)
    return source.size, source.version


class _Probes:
    """The sizes and versions of inputs, asked for all at once: where two or more share a
    `root://` directory, from one listing of it (`_core.list_directory`: one request, where
    probing each costs the server an open and a close), else by `_probe`. An input the listing
    lacks is probed, which names what is wrong with it; a listing refused has its directory's
    inputs probed, all at once. An input no listing covers whose file is being opened already
    (`opening`: spec -> future of its `File`) is sized from that open instead of a probe."""

    def __init__(self, pool: ThreadPoolExecutor, specs: list[FileSpec], open_options: dict, opening: dict):
        self.pool, self.open_options = pool, open_options
        self.places = {spec: _listed_place(spec) for spec in specs}
        shared = Counter(place[0] for place in self.places.values() if place)
        self.listings = {d: pool.submit(_listing, d, open_options) for d, n in shared.items() if n > 1}
        unlisted = [spec for spec, place in self.places.items() if not place or place[0] not in self.listings]
        self.opened = {spec: opening[spec] for spec in unlisted if spec in opening}
        self.probes = {}
        self._probe_all(spec for spec in unlisted if spec not in self.opened)

    def _probe_all(self, specs) -> None:
        for spec in specs:
            if spec not in self.probes:
                self.probes[spec] = self.pool.submit(_probe, spec, self.open_options)

    def result(self, spec: FileSpec) -> tuple[int, str | None]:
        if spec in self.opened:
            f = self.opened[spec].result()
            return f.size, f._core.version
        if spec not in self.probes:
            directory, name = self.places[spec]
            try:
                found = self.listings[directory].result().get(name)
            except OSError:
                self._probe_all(s for s, place in self.places.items() if place and place[0] == directory)
            else:
                if found is not None:
                    return found
                self._probe_all([spec])
        return self.probes[spec].result()

    def cancel(self) -> None:
        for future in [*self.listings.values(), *self.probes.values()]:
            future.cancel()


def _listed_place(spec: FileSpec) -> tuple[str, str] | None:
    """(directory URL with the opaque part, file name) of an input read from one `root://` URL,
    else None."""
    parts = split_xrootd_url(spec.replicas[0]) if len(spec.replicas) == 1 else None
    if not parts or not parts[1]:
        return None
    directory, name, opaque = parts
    return directory + opaque, name


def _listing(directory: str, open_options: dict) -> dict[str, tuple[int, str]]:
    """{file name: (size, version)} of a `root://` directory's files."""
    return {name: (size, version) for name, size, version, is_dir in _core.list_directory(directory, **open_options) if not is_dir}


def _probed(spec: FileSpec, first: InputInfo, size: int, version: str | None) -> InputInfo:
    """A probed input's `InputInfo`: its tables taken as `first`'s TTrees, their columns not read (None)."""
    tables = {name: TableSchema("TTree", 0, None) for name in first.tables}
    return InputInfo(spec, size, first.compression, tables, version=version, probed=True)


def _table_schema(f, path: str, cls: str, parsed: dict) -> TableSchema:
    """The `TableSchema` of table `path` of class `cls` in `f`; a TTree's core tree kept in `parsed`."""
    if cls == RNTUPLE_CLASS:
        table = f[path]
        columns = {f.path: f.typename for f in table.fields if f.readable and "." not in f.path}  # top-level fields
        clusters = len(table.cluster_boundaries) - 1
        settings = Counter(f.compression for f in table.fields if f.num_pages)
        compression = settings.most_common(1)[0][0] if settings else None
        return TableSchema("RNTuple", table.num_entries, columns, table._core.stored_bytes(), clusters, compression)
    parsed[path] = f._core.tree(path)
    return tree_schema(parsed[path])


def tree_schema(tree) -> TableSchema:
    """The `TableSchema` of a core TTree: no Python object per branch (947 in NanoAOD) for a
    few names and sums."""
    entries, columns, compressed, clusters = tree.summary()
    return TableSchema("TTree", entries, dict(columns), compressed, clusters)


def missing_table(info: InputInfo, table: str) -> ValueError:
    return ValueError(f"{info.spec.replicas[0]} has no tree {table!r}; schema='union' merges the inputs that have it")


def other_kind(info: InputInfo, table: str, kind: str, first: InputInfo) -> ValueError:
    return ValueError(f"{info.spec.replicas[0]}: {table!r} is a {kind}, a {first.tables[table].kind} in {first.spec.replicas[0]}")


def check_probed(info: InputInfo, f, table: str, first: InputInfo) -> None:
    """Raise unless `f` (the open file of `info`, a probed input: see `_probed`) holds `table` as a
    TTree, and has the size it was probed with."""
    if f.size != info.size:
        raise ValueError(f"{info.spec.replicas[0]} changed while it was merged: {info.size} bytes when the merge began, {f.size} now")
    classes = {key.split(";")[0]: cls for key, cls in f.classnames().items()}
    if table not in classes:
        raise missing_table(info, table)
    if classes[table] != "TTree":
        raise other_kind(info, table, "RNTuple" if classes[table] == RNTUPLE_CLASS else classes[table], first)


def combine(table: str, inputs: list[InputInfo], schema: str) -> tuple[list[str], dict[str, list[str]]]:
    """The output's columns of `table` (in the first input's order, then new ones as met) and,
    for ``union``, the inputs each column is missing from (filled with defaults). ``strict``
    refuses inputs whose columns or types differ, naming the file and the column."""
    if schema not in SCHEMAS:
        raise ValueError(f"schema={schema!r}: one of {', '.join(SCHEMAS)}")
    having = [i for i in inputs if table in i.tables]
    if schema != "union" and len(having) < len(inputs):
        lacking = next(i for i in inputs if table not in i.tables)
        raise missing_table(lacking, table)
    first = having[0].tables[table].columns
    names = list(first)
    types = dict(first)
    for info in having[1:]:
        columns = info.tables[table].columns
        if columns is first or columns is None:  # shared by `describe`, or checked when copied
            continue
        for name, typename in columns.items():
            if name in types and types[name] != typename:
                raise ValueError(
                    f"{info.spec.replicas[0]}: tree {table!r}, branch {name!r} is {typename}, {types[name]} in {having[0].spec.replicas[0]}"
                )
        if schema == "strict" and list(columns) != names:
            missing = [n for n in names if n not in columns]
            extra = [n for n in columns if n not in types]
            raise ValueError(
                f"{info.spec.replicas[0]}: tree {table!r} has other branches than {having[0].spec.replicas[0]} "
                f"(missing {missing[:10]}, more {extra[:10]}); "
                "schema='union' fills missing ones with defaults, 'intersection' keeps common ones"
            )
        if schema == "union":
            for name, typename in columns.items():
                if name not in types:
                    names.append(name)
                    types[name] = typename
        elif schema == "intersection":
            names = [n for n in names if n in columns]
    missing = {}
    if schema == "union":
        for name in names:
            lacking = [i.spec.replicas[0] for i in having if name not in i.tables[table].columns]
            if lacking:
                missing[name] = lacking
    return names, missing


def column_types(table: str, names: list[str], inputs: list[InputInfo], open_options: dict) -> dict:
    """The writer's type of each column, from a read of no entries in the first input having it;
    a TTree's ``std::vector`` branches stay vectors (awkward lists would become counted leaves;
    an RNTuple's lists are all collections, as its fields were)."""
    types: dict = {}
    for info in inputs:
        having = info.tables[table].columns if table in info.tables else {}
        wanted = [n for n in names if n not in types and n in having]
        if not wanted:
            continue
        empty = info.empty.get(table)
        if empty is None:
            with open_file(list(info.spec.replicas), **open_options) as f:
                empty = f[table].arrays(wanted, entry_start=0, entry_stop=0, library="layouts")
        for name in wanted:
            typename = info.tables[table].columns[name]
            vector = info.tables[table].kind == "TTree" and _is_vector(typename)
            types[name] = typename if vector else writer_type(empty[name], name)
        if len(types) == len(names):
            break
    return {n: types[n] for n in names}


def writer_type(node: dict, where: str):
    """The writer's type of a column read as layouts (``library="layouts"``): what
    `cherenkov.writing._from_ak_type` makes of its awkward type, read from the layout's classes
    without building it (a merge of TTrees then runs without importing awkward)."""
    params = node["parameters"] or {}
    cls = node["class"]
    if params.get("__array__") in ("string", "bytestring") and cls == "ListOffsetArray":
        return ("string",)
    if cls == "NumpyArray" and not params and np.dtype(node["dtype"]).name in NUMBERS:
        spec = ("number", np.dtype(node["dtype"]).name)
        for size in reversed(node["inner_shape"]):
            spec = ("fixed", size, spec)
        return spec
    if cls == "ListOffsetArray" and not params:
        return ("list", writer_type(node["content"], where), None)
    if cls == "RegularArray" and not params:
        return ("fixed", node["size"], writer_type(node["content"], where))
    return _from_ak_type(to_layout(node).form.type, where)  # the rest, and its errors, as awkward says


def _is_vector(typename: str) -> bool:
    return typename.replace(" ", "").startswith(("std::vector<", "vector<", "ROOT::VecOps::RVec<"))


def default_column(name: str, spec, length: int, chunk: dict):
    """A column `name` of `length` default values (0, empty lists, empty strings) of the writer's
    type `spec`; a list of numbers takes its lengths from its counter in `chunk` when there (as
    the writer finds it: ``n`` + the name, or ``n`` + its prefix), so the two agree."""
    import awkward as ak

    if isinstance(spec, str):  # a C++ vector: empty vectors
        return ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(np.zeros(length + 1, np.int64)), ak.contents.EmptyArray()))
    if spec[0] == "number":
        return np.zeros(length, dtype=spec[1])
    if spec[0] == "fixed":
        shape, inner = [length], spec
        while inner[0] == "fixed":
            shape.append(inner[1])
            inner = inner[2]
        return np.zeros(shape, dtype=inner[1]) if inner[0] == "number" else ak.Array([[]] * length)
    if spec[0] == "string":
        return ak.Array([""] * length)
    if spec[0] == "list":
        counts = np.zeros(length, np.int64)
        for counter in (f"n{name}", f"n{name.split('_', 1)[0]}"):
            if counter in chunk and spec[1][0] in ("number", "fixed"):
                counts = np.asarray(chunk[counter], dtype=np.int64)
                break
        content = default_column(name, spec[1], int(counts.sum()), chunk)
        return ak.unflatten(content, counts)
    raise TypeError(f"no default value for a column of type {spec}")
