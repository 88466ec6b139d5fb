"""Helpers of the RNTuple tests: files written with uproot's RNTuple writer, the RNTuples of a
file, and comparisons with uproot (forms and values; NaN equals NaN)."""

from __future__ import annotations

import math
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np

ANCHOR = "ROOT::RNTuple"
# Entries per `extend` call: each call writes a cluster group of one cluster.
CHUNKS = [120, 2, 75]


def ntuples_of(path) -> list[str]:
    return [k for k, cls in cherenkov.open(path).classnames().items() if cls == ANCHOR]


def _values(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.startswith("float"):
        v = (rng.standard_normal(n) * 100).astype(dtype)
        v[: min(n, 3)] = [np.nan, np.inf, -0.0][: min(n, 3)]
        return v
    info = np.iinfo(dtype)
    v = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    v[: min(n, 2)] = [info.min, info.max][: min(n, 2)]
    return v


def chunk(n: int, seed: int) -> ak.Array:
    """Every type uproot's writer writes: numbers of each dtype, strings, lists, nested lists,
    fixed-size arrays, records, lists of records, tuples, options and unions (variants)."""
    rng = np.random.default_rng(seed)
    d = {
        f"x_{t}": _values(rng, t, n)
        for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")
    }
    counts = rng.integers(0, 5, n)
    counts[: min(n, 1)] = 0
    d["jagged"] = ak.unflatten(_values(rng, "float32", int(counts.sum())), counts)
    d["text"] = ak.Array([f"é{i}" * (i % 4) for i in range(n)])
    d["texts"] = ak.Array([[f"w{i}"] * (i % 3) for i in range(n)])
    inner = rng.integers(0, 3, int(counts.sum()))
    d["nested"] = ak.unflatten(ak.unflatten(np.arange(int(inner.sum()), dtype=np.int64), inner), counts)
    d["fixed"] = ak.to_regular(ak.Array(rng.standard_normal((n, 3))), axis=1)
    d["record"] = ak.zip({"a": rng.integers(0, 5, n), "b": rng.standard_normal(n)})
    d["particles"] = ak.zip(
        {
            "pt": ak.unflatten(rng.standard_normal(int(counts.sum())), counts),
            "charge": ak.unflatten(rng.integers(-1, 2, int(counts.sum())).astype("int8"), counts),
        }
    )
    d["pair"] = ak.zip((rng.integers(0, 5, n), ak.Array([str(i) for i in range(n)])))
    present = np.arange(n) % 3 != 0
    index = np.where(present, np.cumsum(present) - 1, -1)
    values = ak.to_layout(np.arange(n, dtype=np.int32)[present])
    d["optional"] = ak.Array(ak.contents.IndexedOptionArray(ak.index.Index64(index), values))
    tags = (np.arange(n) % 2).astype(np.int8)
    index = np.arange(n, dtype=np.int64)
    d["variant"] = ak.Array(
        ak.contents.UnionArray.simplified(
            ak.index.Index8(tags),
            ak.index.Index64(index),
            [ak.to_layout(np.arange(n, dtype=np.int64)), ak.to_layout([str(i) for i in range(n)])],
        )
    )
    return ak.Array(d)


def write_generated(directory: Path, compression_name: str, compression) -> Path:
    path = directory / f"uproot-written-{compression_name}-rntuple.root"
    with __import__("uproot").recreate(path, compression=compression) as f:
        ntuple = f.mkrntuple("ntuple", chunk(CHUNKS[0], 0))
        for seed, n in enumerate(CHUNKS[1:], 1):
            ntuple.extend(chunk(n, seed))
    return path


def same_values(a, b) -> bool:
    """Equal lists, NaN equal to NaN, types compared too (1 != 1.0 != True)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    return a == b


def assert_same_array(ours: ak.Array, theirs: ak.Array, what: str) -> None:
    assert ours.layout.form == theirs.layout.form, (what, str(ours.layout.form), str(theirs.layout.form))
    assert same_values(ours.to_list(), theirs.to_list()), what


def write_as_rntuple(tree_path: Path, path: Path, branches: list[str] | None = None) -> Path:
    """The `Events` TTree's `branches` as an RNTuple written by uproot: one field per branch, same
    names, one cluster per TTree cluster (so steps and chunks are the same)."""
    uproot = __import__("uproot")
    tree = uproot.open(tree_path)["Events"]
    bounds = cherenkov.open(tree_path)["Events"].cluster_boundaries.tolist()
    with uproot.recreate(path, compression=uproot.ZSTD(4)) as f:
        ntuple = None
        for lo, hi in zip(bounds, bounds[1:]):
            data = tree.arrays(filter_name=branches, entry_start=lo, entry_stop=hi)
            if ntuple is None:
                ntuple = f.mkrntuple("Events", data)
            else:
                ntuple.extend(data)
    return path
