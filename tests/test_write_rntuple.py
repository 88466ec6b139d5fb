"""RNTuples written by cherenkov (`format="rntuple"`), read back by cherenkov, uproot and ROOT's
RNTupleReader: every type the writer takes, every compression, one and many clusters and pages,
0 entries, empty lists, NaN and extremes; forms and values equal what was written."""

from __future__ import annotations

import awkward as ak
import cherenkov
import numpy as np
import pytest
from rntuple_support import assert_same_array, same_values

uproot = pytest.importorskip("uproot")

NUMBERS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")
COMPRESSIONS = {"zstd": 505, "lz4": 404, "zlib": 101, "lzma": 207, "none": 0}


def _numbers(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.startswith("float"):
        v = (rng.standard_normal(n) * 100).astype(dtype)
        specials = [np.nan, np.inf, -np.inf, -0.0, np.finfo(dtype).max, np.finfo(dtype).tiny]
        v[: min(n, len(specials))] = specials[: min(n, len(specials))]
        return v
    info = np.iinfo(dtype)
    v = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    v[: min(n, 3)] = [info.min, info.max, 0][: min(n, 3)]
    return v


def sample(n: int, seed: int = 0) -> ak.Array:
    """Every type the writer takes: numbers of each dtype, fixed-size arrays (also 2-D), lists
    (empty ones first), nested lists, strings and lists of strings, records, lists of records,
    records holding lists and records."""
    rng = np.random.default_rng(seed)
    d = {f"x_{t}": _numbers(rng, t, n) for t in NUMBERS}
    counts = rng.integers(0, 5, n)
    counts[: min(n, 2)] = 0
    total = int(counts.sum())
    d["fixed"] = rng.standard_normal((n, 3)).astype(np.float32)
    d["fixed2d"] = rng.integers(-9, 9, (n, 2, 3)).astype(np.int16)
    d["jagged"] = ak.unflatten(_numbers(rng, "float32", total), counts)
    d["jagged_bool"] = ak.unflatten(_numbers(rng, "bool", total), counts)
    inner = rng.integers(0, 3, total)
    d["nested"] = ak.unflatten(ak.unflatten(_numbers(rng, "int64", int(inner.sum())), inner), counts)
    d["text"] = ak.Array([("é" + chr(65 + i % 26)) * (i % 4) for i in range(n)])
    d["texts"] = ak.Array([[f"w{i}"] * (i % 3) + [""] * (i % 2) for i in range(n)])
    d["record"] = ak.zip({"a": rng.integers(0, 5, n).astype(np.int32), "b": _numbers(rng, "float64", n)})
    d["muons"] = ak.zip(
        {
            "pt": ak.unflatten(_numbers(rng, "float32", total), counts),
            "charge": ak.unflatten(rng.integers(-1, 2, total).astype(np.int8), counts),
        }
    )
    d["event"] = ak.zip(
        {
            "run": np.arange(n, dtype=np.uint32),
            "tags": ak.Array([[f"t{i % 5}"] * (i % 2) for i in range(n)]),
            "lead": ak.zip({"pt": _numbers(rng, "float32", n), "ids": ak.unflatten(np.arange(total, dtype=np.int32), counts)}),
        },
        depth_limit=1,
    )
    return ak.Array(d)


def write(path, data: ak.Array, *, compression=505, chunks=1, **options) -> None:
    """``data`` as the RNTuple ``Events`` in ``chunks`` `extend` calls."""
    with cherenkov.recreate(path, compression=compression) as f:
        types = {name: data[name].type.content for name in data.fields}
        ntuple = f.mktree("Events", types, format="rntuple", **options)
        step = -(-len(data) // chunks) if len(data) else 1
        for start in range(0, max(len(data), 1), step):
            ntuple.extend({name: data[name][start : start + step] for name in data.fields})


def assert_reads_back(path, data: ak.Array) -> None:
    """cherenkov and uproot read every field back as written: the same forms, the same values."""
    ours = cherenkov.open(path)["Events"].arrays()
    theirs = uproot.open(path)["Events"].arrays()
    assert ours.fields == theirs.fields == data.fields
    for name in data.fields:
        assert_same_array(ours[name], theirs[name], name)
        assert same_values(ours[name].to_list(), data[name].to_list()), name


@pytest.mark.parametrize("compression", COMPRESSIONS, ids=list(COMPRESSIONS))
def test_every_type_reads_back_in_every_compression(tmp_path, compression):
    data = sample(300)
    path = tmp_path / f"{compression}.root"
    write(path, data, compression=COMPRESSIONS[compression])
    assert cherenkov.open(path)["Events"].cluster_boundaries.tolist() == [0, 300]
    assert_reads_back(path, data)


def test_many_clusters_and_pages_read_back(tmp_path):
    data = sample(2000, seed=1)
    path = tmp_path / "clusters.root"
    write(path, data, chunks=7, cluster_bytes=20_000)
    bounds = cherenkov.open(path)["Events"].cluster_boundaries.tolist()
    assert len(bounds) > 10 and bounds[-1] == 2000
    assert_reads_back(path, data)


def test_zero_entries_and_empty_lists(tmp_path):
    path = tmp_path / "empty.root"
    write(path, sample(10)[:0])
    assert cherenkov.open(path)["Events"].num_entries == 0
    assert len(uproot.open(path)["Events"].arrays()) == 0
    data = ak.Array({"v": ak.unflatten(np.zeros(0, np.float32), [0, 0, 0]), "s": ["", "", ""]})
    path = tmp_path / "empty-lists.root"
    write(path, data)
    assert_reads_back(path, data)


def test_types_rntuples_cannot_hold_are_refused_by_name(tmp_path):
    with cherenkov.recreate(tmp_path / "bad.root") as f:
        records = ak.types.RegularType(ak.types.RecordType([ak.types.NumpyType("float32")], ["x"]), 2)
        with pytest.raises(ValueError, match="'a'.*untyped"):
            f.mktree("Events", {"a": records}, format="rntuple")
        with pytest.raises(ValueError, match="RNTuple 'E.v'"):
            f.mktree("E.v", {"x": "float32"}, format="rntuple")
        ntuple = f.mktree("Events", {"x": "var * float32"}, format="rntuple")
        with pytest.raises((ValueError, TypeError), match="x"):
            ntuple.extend({"x": np.arange(3.0)})


# -- ROOT 6.40 ---------------------------------------------------------------------------------------


def _python(value):
    """A value from RDataFrame's AsNumpy as plain Python (RVecs and nested RVecs as lists)."""
    if isinstance(value, np.ndarray):
        return [_python(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, (str, bytes, int, float, bool, np.generic)):
        return value.item() if isinstance(value, np.generic) else value
    return [_python(v) for v in value]


def _plain(x):
    """numpy scalars and strings as Python's, for comparing with awkward's to_list()."""
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, bytes):
        return x.decode()
    if hasattr(x, "item"):
        return x.item()
    if hasattr(x, "c_str"):  # std::string from cppyy
        return str(x)
    return x


NESTED_HELPERS = """
template <typename T> ROOT::RVec<T> cherenkov_flat(const ROOT::RVec<ROOT::RVec<T>> &v) {
   ROOT::RVec<T> out;
   for (auto &inner : v) out.insert(out.end(), inner.begin(), inner.end());
   return out;
}
template <typename T> ROOT::RVec<std::uint64_t> cherenkov_sizes(const ROOT::RVec<ROOT::RVec<T>> &v) {
   ROOT::RVec<std::uint64_t> out;
   for (auto &inner : v) out.push_back(inner.size());
   return out;
}
"""


def _root_values(ROOT, frame, columns: list[str]) -> dict:
    """Every column as Python lists; lists of lists (which PyROOT's AsNumpy cannot take) through
    their flattened values and sizes, defined in C++."""
    if not hasattr(ROOT, "cherenkov_flat"):
        ROOT.gInterpreter.Declare(NESTED_HELPERS)
    types = {c: str(frame.GetColumnType(c)) for c in columns}
    nested = [c for c in columns if types[c].count("RVec<") > 1]
    # RVecs of 8-bit integers have no dictionary either: widened in C++.
    small = [c for c in columns if c not in nested and "RVec<std::" in types[c] and "int8_t>" in types[c]]
    defined = {c: c.replace(".", "_") for c in nested + small}  # new columns need C++ names
    for c in nested:
        d = defined[c]
        frame = frame.Define(f"{d}__flat", f"cherenkov_flat({c})").Define(f"{d}__sizes", f"cherenkov_sizes({c})")
    for c in small:
        frame = frame.Define(f"{defined[c]}__wide", f"ROOT::RVec<int>({c}.begin(), {c}.end())")
    plain = [c for c in columns if c not in defined]
    wanted = plain + [f"{defined[c]}__wide" for c in small]
    wanted += [f"{defined[c]}__{p}" for c in nested for p in ("flat", "sizes")]
    raw = {k: _plain(_python(v)) for k, v in frame.AsNumpy(wanted).items()}
    out = {c: raw[c] for c in plain} | {c: raw[f"{defined[c]}__wide"] for c in small}
    for c in nested:
        out[c] = []
        for flat, sizes in zip(raw[f"{defined[c]}__flat"], raw[f"{defined[c]}__sizes"]):
            at, entry = 0, []
            for n in sizes:
                entry.append(flat[at : at + n])
                at += n
            out[c].append(entry)
    return out


def test_root_reads_every_field_back(tmp_path):
    ROOT = pytest.importorskip("ROOT", reason="ROOT does not import here (pip install root): no ROOT read-back")
    data = sample(500, seed=2)
    for compression, setting in COMPRESSIONS.items():
        path = tmp_path / f"root-{compression}.root"
        write(path, data, compression=setting, chunks=3, cluster_bytes=50_000)
        reader = ROOT.RNTupleReader.Open("Events", str(path))
        assert reader.GetNEntries() == len(data)
        frame = ROOT.RDataFrame("Events", str(path))
        columns = [str(c) for c in frame.GetColumnNames() if not str(c).startswith("R_rdf")]
        values = _root_values(ROOT, frame, columns)
        checked = set()
        for column in columns:
            expected = data
            for part in column.split("."):
                expected = expected[part]
            assert same_values(values[column], _plain(expected.to_list())), (compression, column)
            checked.add(column.split(".")[0])
        assert checked == set(data.fields), compression
