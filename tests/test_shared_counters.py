"""Jagged branches of one counter share one offsets array (tests/data/shared-counters.root, made by
make_shared_counters.py with ROOT): ``a[n]``, ``b[n]`` and ``e[n][2]`` in baskets ending at
different entries read with one offsets array, ``d[m]`` with its own, and ``c[n]``, whose
entries disagree with ``n``, with offsets of its own from its baskets, as uproot reads it; over
the whole tree and over entry ranges that cut baskets, in numpy and awkward."""

from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest

uproot = pytest.importorskip("uproot")

FILE = Path(__file__).parent / "data" / "shared-counters.root"
TREE = "t"
NAMES = ["n", "a", "b", "e", "c", "m", "d"]
RANGES = [(None, None), (37, 411), (250, 251), (599, None)]


@pytest.fixture(scope="module")
def theirs():
    return uproot.open(FILE)[TREE]


def test_baskets_end_at_different_entries(theirs):
    """The file tests what it should: the branches of `n` are cut into baskets differently."""
    starts = {name: tuple(theirs[name].member("fBasketEntry")[: theirs[name].num_baskets]) for name in "abe"}
    assert len(set(starts.values())) == 3 and all(len(s) > 3 for s in starts.values())


@pytest.mark.parametrize("start, stop", RANGES)
def test_values_equal_uproot(theirs, start, stop):
    got = cherenkov.open(FILE)[TREE].arrays(NAMES, entry_start=start, entry_stop=stop, library="ak")
    expected = theirs.arrays(NAMES, entry_start=start, entry_stop=stop, library="ak")
    for name in NAMES:
        assert str(got[name].type) == str(expected[name].type), name
        assert ak.to_list(got[name]) == ak.to_list(expected[name]), name


@pytest.mark.parametrize("start, stop", RANGES)
def test_one_offsets_array_per_counter(theirs, start, stop):
    got = cherenkov.open(FILE)[TREE].arrays(NAMES, entry_start=start, entry_stop=stop, library="np")
    a, b, e, c, d = (got[name] for name in "abecd")
    assert a.offsets is b.offsets is e.offsets
    assert not a.offsets.flags.writeable  # shared: a change to one would show in the others
    assert not np.shares_memory(a.offsets, d.offsets)
    # c disagrees with n: its own offsets, from its baskets, as uproot reads them.
    assert not np.shares_memory(a.offsets, c.offsets)
    counts = ak.num(theirs["c"].array(entry_start=start, entry_stop=stop, library="ak")).to_numpy()
    assert np.array_equal(np.diff(c.offsets), counts)
    assert not np.array_equal(np.diff(a.offsets), counts)
    assert e.content.shape == (a.offsets[-1], 2)


def test_a_branch_read_alone_owns_its_offsets():
    """Nothing to share with: its offsets are handed over, writable, as before."""
    got = cherenkov.open(FILE)[TREE].arrays(["b", "d"], library="np")
    assert got["b"].offsets.flags.writeable and got["d"].offsets.flags.writeable


def test_a_large_read_in_parts_keeps_each_counter_whole(tmp_path):
    """Past 8 MiB a local read goes in parts while the next one is read; the branches of a counter
    stay in one part (one offsets array), whatever their order, and come back in the order asked."""
    rng = np.random.default_rng(5)
    entries = 400_000
    counts = {"Jet": rng.integers(0, 5, entries), "Muon": rng.integers(0, 3, entries)}
    columns = {}
    for name, n in counts.items():
        fields = {f: ak.unflatten(rng.normal(size=int(n.sum())).astype(np.float32), n) for f in ("pt", "eta")}
        columns[name] = ak.zip(fields)
    columns["x"] = rng.normal(size=entries)
    path = tmp_path / "large.root"
    with uproot.recreate(path, compression=None) as f:
        f.mktree("t", {k: v.type if isinstance(v, ak.Array) else v.dtype for k, v in columns.items()})
        f["t"].extend(columns)
    names = ["Jet_pt", "x", "Muon_eta", "nJet", "Jet_eta", "Muon_pt"]
    tree = cherenkov.open(path)["t"]
    assert sum(tree[n].compressed_bytes for n in names) > 8 << 20  # read in parts
    got = tree.arrays(names, library="np")
    assert list(got) == names
    assert got["Jet_pt"].offsets is got["Jet_eta"].offsets
    assert got["Muon_pt"].offsets is got["Muon_eta"].offsets
    expected = uproot.open(path)["t"].arrays(names, library="ak")
    for name in names:
        ours, theirs = got[name], expected[name]
        if isinstance(ours, cherenkov.Jagged):
            assert np.array_equal(np.diff(ours.offsets), ak.num(theirs).to_numpy()), name
            ours, theirs = ours.content, ak.flatten(theirs)
        assert np.array_equal(ours, ak.to_numpy(theirs)), name
