"""Writing ROOT files: TTrees laid out for reading from far away.

>>> with cherenkov.recreate("skim.root") as f:          # compression=cherenkov.ZSTD(5) (505)
...     f["Events"] = events                             # awkward arrays, a dict, a chunk
...     f["Events"].extend(more_events)
...     tree = f.mktree("Runs", {"run": "uint32", "lumis": "var * uint32"})
...     tree.extend({"run": runs, "lumis": lumis})
>>> with cherenkov.recreate("skim.root") as f:          # a read, select, write loop
...     f["Events"] = (c[c.nMuon > 0] for c in cherenkov.iterate("in.root:Events"))

Clusters close at ROOT's AutoFlush size (30 MB compressed), one basket per branch each,
compressed on every core while the next cluster fills; the trees' metadata, the streamer infos and
the keys list are written at the end of the file, where a reader's opening request finds them.
The file is written under a temporary name and appears under its own when closed: a write that
fails (an exception in the ``with`` block, a full disk) leaves no file that looks complete.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from cherenkov import _core

#: Memory a tree being written holds at most (the cluster filling and the one compressing).
MEMORY_BUDGET = 256 << 20


@dataclass(frozen=True)
class Compression:
    """A compression setting; ``int(c)`` is ROOT's spelling (algorithm × 100 + level)."""

    algorithm: int
    level: int

    def __int__(self) -> int:
        return self.algorithm * 100 + self.level


def ZLIB(level: int = 1) -> Compression:
    return Compression(1, level)


def LZMA(level: int = 7) -> Compression:
    return Compression(2, level)


def LZ4(level: int = 4) -> Compression:
    return Compression(4, level)


def ZSTD(level: int = 5) -> Compression:
    return Compression(5, level)


def _setting(compression) -> int:
    return 0 if compression is None else int(compression)


def recreate(path: str | os.PathLike, *, compression: Compression | int = 505, title: str = "") -> WritableFile:
    """A new ROOT file at ``path`` (replacing one there when closed). ``compression`` as ROOT spells
    it (``505``, ``cherenkov.ZSTD(5)``: zstd level 5, the default; ``101`` zlib 1, ``207`` lzma 7,
    ``404`` lz4; ``0`` or ``None``: none) applies to every tree unless its own is given."""
    return WritableFile(_core.WritableFile.create(os.fspath(path), title, _setting(compression)))


def update(path: str | os.PathLike) -> WritableFile:
    """Add trees and directories to the existing ROOT file at ``path``, in place: the file stays
    as it was until ``close`` writes its new keys list and header."""
    return WritableFile(_core.WritableFile.update(os.fspath(path)))


class WritableFile:
    """A ROOT file being written (see `recreate`). Use it in a ``with`` block, or call `close`."""

    def __init__(self, core):
        self._core = core
        self._trees: dict[str, WritableTree] = {}

    def __repr__(self) -> str:
        state = "closed" if self._core.closed else "open"
        return f"<WritableFile {self._core.name!r} ({state})>"

    @property
    def closed(self) -> bool:
        return self._core.closed

    def mkdir(self, path: str) -> WritableDirectory:
        """The directory ``path`` ("a/b"), made where missing (directories made before the data
        written into them keep their records in the file's head, where readers look first)."""
        self._core.mkdir(path)
        return WritableDirectory(self, path.strip("/"))

    def mktree(
        self,
        name: str,
        types: Mapping,
        *,
        title: str = "",
        format: str = "ttree",
        jagged: str = "counted",
        counter_name=lambda name: "n" + name,
        titles: Mapping[str, str] | None = None,
        aliases: Mapping[str, str] | None = None,
        compression: Compression | int | None = None,
        cluster_bytes: int | None = None,
        memory_budget: int = MEMORY_BUDGET,
    ) -> WritableTree:
        """A new tree ``name`` ("dir/name" in a directory) with a branch per entry of ``types``:
        numpy dtypes and their names (``"float32"``), awkward types (``"var * float32"``,
        ``"3 * int32"``, ``"string"``, ``"var * string"``, ``"var * var * float64"``, records
        ``"var * {pt: float32, eta: float32}"``), or C++ names (``"std::vector<float>"``,
        ``"std::string"``). Records become branches named ``name_field``; a list of numbers is a
        NanoAOD-style counted leaf (``Muon_pt[nMuon]``) whose counter is the column ``n`` + its name,
        or ``n`` + its prefix before ``_`` when such an integer column is given (``nMuon`` for
        ``Muon_pt``), else a branch made as ``counter_name(name)`` says; ``jagged="vector"`` writes
        lists of numbers as ``std::vector`` instead. ``titles`` gives branches titles, ``aliases``
        the tree's aliases. ``compression`` (the file's by default), ``cluster_bytes`` (entries'
        uncompressed bytes per cluster; default ROOT's 30 MB compressed) and ``memory_budget``
        (the most the writer holds; a cluster takes at most a third) set the layout.
        ``format="rntuple"`` writes an RNTuple."""
        if name in self._trees:
            raise ValueError(f"{self._core.name}: a tree '{name}' is being written already")
        if jagged not in ("counted", "vector"):
            raise ValueError(f'jagged={jagged!r}: "counted" (NanoAOD-style leaves) or "vector" (std::vector)')
        directory, _, leaf = name.strip("/").rpartition("/")
        columns = _columns(types, jagged, counter_name, titles or {})
        table = self._core.mktree(
            directory,
            leaf,
            [(n, t, spec) for n, t, spec in columns],
            format,
            title,
            None if compression is None else _setting(compression),
            cluster_bytes,
            memory_budget,
            list((aliases or {}).items()),
        )
        tree = WritableTree(self, name, table, [(n, spec) for n, _, spec in columns])
        self._trees[name] = tree
        return tree

    def __setitem__(self, name: str, data) -> None:
        """Write ``data`` as a new tree ``name``: awkward arrays (a record array's fields are the
        branches), a dict of numpy or awkward arrays, a chunk read by cherenkov, or an iterable of
        those (``iterate()`` / ``chunks()`` output, selected on the way), written as it comes."""
        self.write(name, data)

    def write(self, name: str, data, **options) -> WritableTree:
        """``f[name] = data`` with `mktree`'s options (``format="rntuple"``, ``compression``, ...);
        returns the tree, to `extend` later."""
        chunks = _chunks(data)
        first = next(chunks, None)
        if first is None:
            raise ValueError(f"tree '{name}': no data to learn its types from")
        columns = _as_columns(first)
        tree = self.mktree(name, {n: _type_of(a) for n, a in columns.items()}, **options)
        tree.extend(columns)
        for chunk in chunks:
            tree.extend(chunk)
        return tree

    def __getitem__(self, name: str) -> WritableTree:
        return self._trees[name.strip("/")]

    def __contains__(self, name: str) -> bool:
        return name.strip("/") in self._trees

    def close(self) -> None:
        """Finish every tree, write the file's metadata at its end and make it appear."""
        self._core.close()

    def abandon(self) -> None:
        """Stop writing and remove the file being written (a file it replaces stays as it was)."""
        self._core.abandon()

    def __enter__(self) -> WritableFile:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abandon()


class WritableDirectory:
    """A directory of a file being written: ``d[name] = data`` and ``d.mktree`` write trees in it."""

    def __init__(self, file: WritableFile, path: str):
        self.file = file
        self.path = path

    def _path(self, name: str) -> str:
        return f"{self.path}/{name.strip('/')}"

    def mkdir(self, path: str) -> WritableDirectory:
        return self.file.mkdir(self._path(path))

    def mktree(self, name: str, types: Mapping, **options) -> WritableTree:
        return self.file.mktree(self._path(name), types, **options)

    def __setitem__(self, name: str, data) -> None:
        self.file[self._path(name)] = data

    def __getitem__(self, name: str) -> WritableTree:
        return self.file[self._path(name)]


class WritableTree:
    """A tree being written: `extend` appends entries."""

    def __init__(self, file: WritableFile, name: str, table: int, columns: list):
        self.file = file
        self.name = name
        self._table = table
        self._columns = columns

    def __repr__(self) -> str:
        return f"<WritableTree {self.name!r} ({self.num_entries} entries)>"

    @property
    def num_entries(self) -> int:
        return self.file._core.entries(self._table)

    @property
    def columns(self) -> list[str]:
        return [n for n, _ in self._columns]

    def extend(self, data) -> None:
        """Append entries: the same columns as the tree's, each of one length (awkward arrays,
        a dict of numpy or awkward arrays, a chunk read by cherenkov)."""
        columns = _as_columns(data)
        names = [n for n, _ in self._columns]
        if set(columns) != set(names):
            missing = [n for n in names if n not in columns]
            extra = [n for n in columns if n not in names]
            raise ValueError(f"tree '{self.name}': missing columns {missing}, unknown columns {extra}")
        layouts = [_layout(columns[n], spec, n) for n, spec in self._columns]
        self.file._core.extend(self._table, layouts)

    def _extend_layouts(self, layouts: list) -> None:
        """Append entries given as the writer's layout dicts, one per column in the tree's order
        (the merger's path: arrays read by cherenkov, written without passing through awkward)."""
        self.file._core.extend(self._table, layouts)


# -- types ---------------------------------------------------------------------------------------

_CPP_NUMBERS = {
    "bool": "bool",
    "Bool_t": "bool",
    "char": "int8",
    "Char_t": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "UChar_t": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "Short_t": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "UShort_t": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "Int_t": "int32",
    "int32_t": "int32",
    "unsigned int": "uint32",
    "UInt_t": "uint32",
    "uint32_t": "uint32",
    "long": "int64",
    "long long": "int64",
    "Long64_t": "int64",
    "int64_t": "int64",
    "unsigned long": "uint64",
    "unsigned long long": "uint64",
    "ULong64_t": "uint64",
    "uint64_t": "uint64",
    "float": "float32",
    "Float_t": "float32",
    "double": "float64",
    "Double_t": "float64",
}
_VECTOR = re.compile(r"^(?:std::)?vector\s*<\s*(.*?)\s*>$")


def _cpp_type(name: str):
    """A C++ type name as a type tuple (`std::vector` as ``("vector", items)``: a collection
    whatever ``jagged`` says), or None."""
    name = name.strip()
    if name in _CPP_NUMBERS:
        return ("number", _CPP_NUMBERS[name])
    if name in ("string", "std::string", "TString"):
        return ("string",)
    match = _VECTOR.match(name)
    if match:
        inner = _cpp_type(match.group(1))
        return None if inner is None else ("vector", inner)
    return None


def _from_ak_type(t, where: str):
    """An awkward type as a type tuple (lists' counters decided later)."""
    import awkward as ak

    if isinstance(t, ak.types.ArrayType | ak.types.ScalarType):
        return _from_ak_type(t.content, where)
    params = t.parameters or {}
    if params.get("__array__") in ("string", "bytestring"):
        return ("string",)
    if isinstance(t, ak.types.NumpyType):
        if t.primitive not in ("bool", "float16", "float32", "float64") and not re.fullmatch(r"u?int(8|16|32|64)", t.primitive):
            raise TypeError(f"{where}: {t.primitive} has no ROOT type")
        return ("number", t.primitive)
    if isinstance(t, ak.types.RegularType):
        return ("fixed", t.size, _from_ak_type(t.content, where))
    if isinstance(t, ak.types.ListType):
        return ("list", _from_ak_type(t.content, where), None)
    if isinstance(t, ak.types.RecordType):
        if t.is_tuple:
            raise TypeError(f"{where}: tuples have no field names to name branches by")
        return ("record", [(f, _from_ak_type(c, f"{where}.{f}")) for f, c in zip(t.fields, t.contents)])
    if isinstance(t, ak.types.OptionType):
        raise TypeError(f"{where}: missing values (type {t}) have no place in a TTree: fill them (ak.fill_none) first")
    raise TypeError(f"{where}: awkward type {t} cannot be written")


def _type(spec, where: str):
    """A type tuple from what `mktree` takes: dtype, awkward type (or its string), C++ name, or a
    dict of fields (a record)."""
    import awkward as ak

    if isinstance(spec, tuple) and spec and spec[0] in ("number", "fixed", "list", "vector", "string", "record"):
        return spec
    if isinstance(spec, Mapping):
        return ("record", [(f, _type(s, f"{where}.{f}")) for f, s in spec.items()])
    if isinstance(spec, ak.types.Type):
        return _from_ak_type(spec, where)
    if isinstance(spec, str):
        cpp = _cpp_type(spec)
        if cpp is not None:
            return cpp
        try:
            dtype = np.dtype(spec)
        except (TypeError, ValueError):
            dtype = None
        if dtype is not None:
            return ("number", _dtype_name(dtype, where))
        try:
            return _from_ak_type(ak.types.from_datashape(spec, highlevel=False), where)
        except (ValueError, TypeError) as e:
            raise TypeError(f"{where}: cannot read the type {spec!r} ({e})") from None
    return ("number", _dtype_name(np.dtype(spec), where))


def _dtype_name(dtype: np.dtype, where: str) -> str:
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(f"{where}: numpy {dtype} has no ROOT type")
    return dtype.newbyteorder("=").name


def _is_integer(spec) -> bool:
    return spec[0] == "number" and (spec[1].startswith("int") or spec[1].startswith("uint"))


def _columns(types: Mapping, jagged: str, counter_name, titles: Mapping) -> list:
    """(name, title, type tuple) of each column, lists given their counters."""
    specs = {name: _type(spec, name) for name, spec in types.items()}

    def counter(name: str) -> str:
        prefix = name.split("_", 1)[0]
        for candidate in (f"n{name}", f"n{prefix}"):
            if candidate in specs and _is_integer(specs[candidate]):
                return candidate
        return counter_name(name)

    def resolve(name: str, spec):
        if spec[0] == "record":
            return ("record", [(f, resolve(f"{name}_{f}", s)) for f, s in spec[1]])
        if spec[0] == "fixed":
            return ("fixed", spec[1], resolve(name, spec[2]))
        if spec[0] == "vector":
            return ("list", resolve(name, spec[1]), None)
        if spec[0] == "list" and spec[2] is None:
            items = spec[1]
            counted = items[0] == "record" or (items[0] in ("number", "fixed") and jagged == "counted")
            inner = resolve(name, items) if items[0] == "record" else items
            return ("list", inner, counter(name) if counted else None)
        return spec

    return [(name, titles.get(name, ""), resolve(name, spec)) for name, spec in specs.items()]


# -- data ----------------------------------------------------------------------------------------


def _chunks(data):
    """The chunks of what `f[name] = data` takes: one, or each of an iterable of them."""
    if _is_chunk(data):
        yield data
        return
    if isinstance(data, Iterable):
        yield from data
        return
    raise TypeError(f"cannot write {type(data).__name__}: give awkward or numpy arrays, a dict of them, or an iterable of those")


def _is_chunk(data) -> bool:
    import awkward as ak

    from cherenkov.tree import LazyChunk

    return isinstance(data, Mapping | ak.Array | np.ndarray | LazyChunk)


def _as_columns(data) -> dict:
    """A chunk as {column name: array}."""
    import awkward as ak

    from cherenkov.tree import LazyChunk

    if isinstance(data, LazyChunk):
        names = [b.name for b in data.tree.branches if b.readable and b.parent is None]
        return _as_columns(data.arrays(names, library="ak"))
    if isinstance(data, Mapping):
        return dict(data)
    if isinstance(data, ak.Array) and ak.fields(data) and not data.layout.is_tuple:
        layout = data.layout
        if isinstance(layout, ak.contents.RecordArray):  # its fields as they are: data[f] costs 0.1 ms each
            return {f: ak.Array(c if c.length == layout.length else c[: layout.length]) for f, c in zip(layout.fields, layout.contents)}
        return {f: data[f] for f in ak.fields(data)}
    if isinstance(data, np.ndarray) and data.dtype.names:
        return {f: data[f] for f in data.dtype.names}
    raise TypeError(f"cannot write {type(data).__name__} as columns: give a record array or a dict of arrays")


def _type_of(array):
    """The type tuple of an array given to `f[name] = ...` (before counters are decided)."""
    import awkward as ak

    from cherenkov.arrays import Jagged

    if isinstance(array, Jagged):
        return ("list", _type(array.content.dtype, "?"), None)
    if isinstance(array, np.ndarray) and array.dtype.kind in "biuf":
        spec = ("number", _dtype_name(array.dtype, "?"))
        for size in reversed(array.shape[1:]):
            spec = ("fixed", size, spec)
        return spec
    return _from_ak_type(ak.type(_awkward(array)), "?")


def _awkward(array):
    """An array as awkward (numpy's strings and objects, as ``library="np"`` gives them, item
    by item)."""
    import awkward as ak

    if isinstance(array, ak.Array):
        return array
    if isinstance(array, np.ndarray) and array.dtype.kind in "OUS":
        return ak.from_iter(array.tolist())
    return ak.Array(array)


def _numbers(data: np.ndarray, name: str, dtype: str) -> dict:
    """A NumpyArray layout dict over ``data`` (cast to the column's dtype where numpy allows it
    safely, else refused), its bytes not copied when already native and contiguous."""
    want = np.dtype(dtype)
    if data.dtype != want:
        if not np.can_cast(data.dtype, want, casting="same_kind"):
            raise TypeError(f"column '{name}': {data.dtype} values for a {dtype} branch")
        data = data.astype(want)
    data = np.ascontiguousarray(data)
    return {
        "class": "NumpyArray",
        "dtype": dtype,
        "inner_shape": tuple(data.shape[1:]),
        "data": data.reshape(-1).view(np.uint8),
        "parameters": {},
    }


def _layout(array, spec, name: str) -> dict:
    """The layout dict of a column's array, of type ``spec``."""

    from cherenkov.arrays import Jagged

    if isinstance(array, Jagged):
        array = array.to_awkward()
    if isinstance(array, np.ndarray) and array.dtype.kind in "biuf":
        return _np_layout(array, spec, name)
    return _ak_layout(_awkward(array).layout, spec, name)


def _np_layout(array: np.ndarray, spec, name: str) -> dict:
    if spec[0] == "fixed" or spec[0] == "number":
        inner = spec
        while inner[0] == "fixed":
            inner = inner[2]
        if inner[0] == "number":
            return _numbers(array, name, inner[1])
    raise TypeError(f"column '{name}': a numpy array of {array.dtype} {array.shape[1:]} for a branch of another type")


def _ak_layout(layout, spec, name: str) -> dict:
    import awkward as ak

    c = ak.contents
    if isinstance(layout, c.IndexedArray):
        return _ak_layout(layout.project(), spec, name)
    if isinstance(layout, c.UnmaskedArray):
        return _ak_layout(layout.content, spec, name)
    if isinstance(layout, c.IndexedOptionArray | c.ByteMaskedArray | c.BitMaskedArray | c.UnionArray):
        raise TypeError(f"column '{name}': missing values or unions ({layout.form.type}) have no place in a TTree")
    params = dict(layout.parameters or {})
    if isinstance(layout, c.EmptyArray):
        return _empty(spec, name)
    if isinstance(layout, c.NumpyArray):
        inner = spec
        while inner[0] == "fixed":
            inner = inner[2]
        out = _numbers(np.asarray(layout.data), name, _leaf_dtype(inner, name))
        out["parameters"] = params
        return out
    if isinstance(layout, c.RegularArray):
        if spec[0] != "fixed":
            raise TypeError(f"column '{name}': fixed-size arrays for a branch of another type")
        content = _ak_layout(layout.content, spec[2], name)
        return {"class": "RegularArray", "size": layout.size, "length": layout.length, "content": content, "parameters": params}
    if isinstance(layout, c.ListArray):
        layout = layout.to_ListOffsetArray64(False)
    if isinstance(layout, c.ListOffsetArray):
        offsets = np.asarray(layout.offsets.data, dtype=np.int64)
        if spec[0] == "string":
            content = _numbers(np.asarray(layout.content.data), name, "uint8")
            content["parameters"] = {"__array__": "char"}
            params["__array__"] = "string"
        elif spec[0] == "list":
            content = _ak_layout(layout.content, spec[1], name)
        else:
            raise TypeError(f"column '{name}': lists for a branch of another type")
        return {"class": "ListOffsetArray", "offsets": offsets, "content": content, "parameters": params}
    if isinstance(layout, c.RecordArray):
        if spec[0] != "record" or layout.is_tuple:
            raise TypeError(f"column '{name}': records for a branch of another type")
        fields = dict(spec[1])
        missing = [f for f in fields if f not in layout.fields]
        if missing:
            raise ValueError(f"column '{name}': record without the fields {missing}")
        contents = [_ak_layout(layout.content(f), fields[f], f"{name}_{f}") for f in fields]
        return {"class": "RecordArray", "fields": list(fields), "length": layout.length, "contents": contents, "parameters": params}
    raise TypeError(f"column '{name}': awkward {type(layout).__name__} cannot be written")


def _empty(spec, name: str) -> dict:
    """A layout dict of no entries of type ``spec`` (awkward's EmptyArray has no type)."""
    if spec[0] == "number":
        return _numbers(np.zeros(0, dtype=spec[1]), name, spec[1])
    if spec[0] == "fixed":
        return {"class": "RegularArray", "size": spec[1], "length": 0, "content": _empty(spec[2], name), "parameters": {}}
    if spec[0] in ("list", "string"):
        items = ("number", "uint8") if spec[0] == "string" else spec[1]
        out = {"class": "ListOffsetArray", "offsets": np.zeros(1, np.int64), "content": _empty(items, name), "parameters": {}}
        if spec[0] == "string":
            out["parameters"], out["content"]["parameters"] = {"__array__": "string"}, {"__array__": "char"}
        return out
    fields = [(f, _empty(t, f"{name}_{f}")) for f, t in spec[1]]
    return {"class": "RecordArray", "fields": [f for f, _ in fields], "length": 0, "contents": [c for _, c in fields], "parameters": {}}


def _leaf_dtype(spec, name: str) -> str:
    while spec[0] in ("fixed", "list"):
        spec = spec[2] if spec[0] == "fixed" else spec[1]
    if spec[0] != "number":
        raise TypeError(f"column '{name}': numbers for a branch of type {spec}")
    return spec[1]
