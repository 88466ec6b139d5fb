"""Large output buffers, offsets too, are kept for the next read when their arrays are dropped
(`engine/recycle.rs`): a read's arrays are right whatever an earlier read's arrays held or were
changed to, arrays still held are never reused, and arrays stay writable, for a TTree (written
by uproot) and an RNTuple (written by cherenkov) of one cluster, whose numbers arrays are the
buffers their baskets and pages were decoded into (and its offsets its index column's), and of
several clusters."""

import gc

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import flat

uproot = pytest.importorskip("uproot")

N = 60_000  # 240 KB of float32: above the size kept


def sample() -> dict:
    rng = np.random.default_rng(7)
    counts = rng.integers(0, 5, N)
    return {
        "x": rng.normal(size=N).astype(np.float32),
        "y": rng.normal(size=N),
        "n": counts.astype(np.int32),
        "v": ak.unflatten(rng.normal(size=int(counts.sum())).astype(np.float32), counts),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    data = sample()
    tree = tmp_path_factory.mktemp("recycled") / "tree.root"
    with uproot.recreate(tree) as f:
        # (mktree: uproot 5.7's `f[name] = arrays` writes an RNTuple)
        t = f.mktree("t", {"x": np.float32, "y": np.float64, "v": data["v"].type.content})
        t.extend({"x": data["x"], "y": data["y"], "v": data["v"]})
    ntuple = tree.with_name("ntuple.root")
    with cherenkov.recreate(ntuple) as f:
        t = f.mktree("t", {"x": "float32", "y": "float64", "v": "var * float32"}, format="rntuple")
        t.extend({"x": data["x"], "y": data["y"], "v": data["v"]})
    # Several clusters: the collection's offsets are then copied from its index columns, whose
    # buffers go back to the pool.
    clusters = tree.with_name("clusters.root")
    with cherenkov.recreate(clusters) as f:
        t = f.mktree("t", {"x": "float32", "y": "float64", "v": "var * float32"}, format="rntuple", cluster_bytes=400_000)
        t.extend({"x": data["x"], "y": data["y"], "v": data["v"]})
    return {"TTree": tree, "RNTuple": ntuple, "RNTuple clusters": clusters}, data


@pytest.mark.parametrize("kind", ["TTree", "RNTuple", "RNTuple clusters"])
def test_reads_after_dropped_and_changed_arrays_read_the_same(files, kind):
    paths, data = files
    table = cherenkov.open(paths[kind])["t"]
    if kind == "RNTuple clusters":
        assert len(table.cluster_boundaries) > 3
    names = ["x", "y", "v"]
    expected = {"x": data["x"], "y": data["y"], "v": ak.to_numpy(ak.flatten(data["v"]))}
    offsets = np.concatenate([[0], np.cumsum(data["n"])])
    held = table.arrays(names, library="np")
    for _ in range(3):
        got = table.arrays(names, library="np")
        for name in names:
            values = flat(got[name])
            assert values.flags.writeable, name
            assert np.array_equal(values, expected[name]), name
            assert not np.shares_memory(values, flat(held[name])), name
            values[:] = -1  # what the next read may get back, to overwrite
        assert got["v"].offsets.flags.writeable  # the list's own
        assert np.array_equal(got["v"].offsets, offsets)
        got["v"].offsets[:] = -1
        del got, values
        gc.collect()
    for name in names:  # held all along: never handed to another read
        assert np.array_equal(flat(held[name]), expected[name]), name
    assert np.array_equal(held["v"].offsets, offsets)
    assert ak.to_list(table.arrays(["v"], library="ak")["v"]) == ak.to_list(data["v"])
