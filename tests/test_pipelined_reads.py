"""A local read of more than 8 MB of stored bytes goes in parts decoded two at once
(`engine/table.rs`, `read_pipelined`): its values are those of each item read alone (too small
to go in parts) and uproot's, the branches of one counter stay in one part and share their
offsets, and its stats count every byte once, decoding and fetching within the read's
time; a damaged basket in a later part fails the read naming file, offset and branch. TTree
(written by uproot: baskets of its own sizes) and RNTuple (written by cherenkov)."""

import time

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import flat

uproot = pytest.importorskip("uproot")

N = 150_000
WIDE = 12  # branches of random float64: 14 MB that zstd cannot shrink


def sample() -> dict:
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 6, N)
    data = {f"x{i}": rng.normal(size=N) for i in range(WIDE)}
    data["nJet"] = counts.astype(np.int32)
    for field in ("pt", "eta"):
        data[f"Jet_{field}"] = ak.unflatten(rng.normal(size=int(counts.sum())).astype(np.float32), counts)
    return data


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    data = sample()
    tree = tmp_path_factory.mktemp("pipelined") / "tree.root"
    columns = {k: v for k, v in data.items() if k.startswith("x")}
    columns["Jet"] = ak.zip({"pt": data["Jet_pt"], "eta": data["Jet_eta"]})  # nJet, Jet_pt, Jet_eta
    with uproot.recreate(tree, compression=uproot.ZSTD(1)) as f:
        # (mktree: uproot 5.7's `f[name] = arrays` writes an RNTuple)
        t = f.mktree("t", {k: v.type.content if isinstance(v, ak.Array) else v.dtype for k, v in columns.items()})
        t.extend(columns)
    ntuple = tree.with_name("ntuple.root")
    types = {k: "float64" for k in data if k.startswith("x")} | {"Jet_pt": "var * float32", "Jet_eta": "var * float32"}
    with cherenkov.recreate(ntuple) as f:
        t = f.mktree("t", types, format="rntuple")
        t.extend({k: data[k] for k in types})
    return {"TTree": tree, "RNTuple": ntuple}, data


@pytest.mark.parametrize("kind", ["TTree", "RNTuple"])
def test_a_read_in_parts_equals_its_items_read_alone_and_uproot(files, kind):
    paths, data = files
    table = cherenkov.open(paths[kind])["t"]
    names = [k for k in table.keys() if k.startswith(("x", "Jet_"))]
    assert len(names) == WIDE + 2
    assert sum(table[n].compressed_bytes for n in names) > 8 << 20, "the read must go in parts"
    wall = time.perf_counter()
    pairs, stats = table.read(names)
    wall = time.perf_counter() - wall
    together = cherenkov.tree._convert(pairs, "np")
    for name in names:
        alone = table.arrays([name], library="np")[name]
        assert np.array_equal(flat(together[name]), flat(alone)), name
        expected = data[name]
        written = ak.to_numpy(ak.flatten(expected)) if name.startswith("Jet_") else expected
        assert np.array_equal(flat(together[name]), written), name
    if kind == "TTree":  # the branches of one counter (nJet) share one offsets buffer
        assert np.shares_memory(together["Jet_pt"].offsets, together["Jet_eta"].offsets)
    assert np.array_equal(together["Jet_pt"].offsets, np.concatenate([[0], np.cumsum(data["nJet"])]))
    assert stats.compressed_bytes == sum(table.read([n])[1].compressed_bytes for n in names)
    assert 0 < stats.decode_seconds and 0 <= stats.fetch_seconds
    assert stats.decode_seconds + stats.fetch_seconds <= wall


@pytest.mark.parametrize("kind", ["TTree", "RNTuple"])
def test_a_read_in_parts_equals_uproot_in_awkward(files, kind):
    paths, _ = files
    table = cherenkov.open(paths[kind])["t"]
    names = [k for k in table.keys() if k.startswith(("x", "Jet_"))]
    ours = table.arrays(names, library="ak")
    theirs = uproot.open(paths[kind])["t"].arrays(names, library="ak")
    for name in names:
        assert ak.array_equal(ours[name], theirs[name]), name


def test_a_damaged_basket_in_a_later_part_fails_the_read_by_name_and_the_file_reads_on(files, tmp_path):
    paths, data = files
    damaged = tmp_path / "damaged.root"
    damaged.write_bytes(paths["TTree"].read_bytes())
    late = uproot.open(damaged)["t"]["x11"]  # in one of the read's later parts
    seek = int(late.member("fBasketSeek")[0])
    with open(damaged, "r+b") as f:
        f.seek(seek)
        head = f.read(256)
        keylen = int.from_bytes(head[14:16], "big")  # the basket's compression blocks start there
        assert head[keylen : keylen + 2] == b"ZS"
        f.seek(seek + keylen)
        f.write(b"XX")  # no compression algorithm ROOT knows
    table = cherenkov.open(damaged)["t"]
    names = [k for k in table.keys() if k.startswith(("x", "Jet_"))]
    with pytest.raises(cherenkov.FormatError) as caught:
        table.arrays(names, library="np")
    message = str(caught.value)
    assert str(damaged) in message and str(seek) in message and "x11" in message, message
    # Nothing left running or held: the same file's other branches read, and equal.
    again = table.arrays(names[:3], library="np")
    for name in names[:3]:
        assert np.array_equal(flat(again[name]), data[name]), name
