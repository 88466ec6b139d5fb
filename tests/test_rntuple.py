"""RNTuples read by cherenkov equal uproot's reading of them, forms and values: every field of
every RNTuple in ../shared/testdata and of files written here with uproot's RNTuple writer (every
type it writes, every compression, several cluster groups), whole, by subfield, over entry ranges,
step by step and lazily; as numpy too; and the TTree surface (keys, names, patterns) on them."""

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import TESTDATA
from rntuple_support import CHUNKS, assert_same_array, chunk, ntuples_of, same_values, write_generated

uproot = pytest.importorskip("uproot")

SHARED = sorted(TESTDATA.glob("*rntuple*.root")) if TESTDATA.is_dir() else []
COMPRESSIONS = {
    "zlib": uproot.ZLIB(4),
    "lzma": uproot.LZMA(2),
    "lz4": uproot.LZ4(1),
    "zstd": uproot.ZSTD(3),
    "uncompressed": None,
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    directory = tmp_path_factory.mktemp("rntuple")
    return {name: write_generated(directory, name, c) for name, c in COMPRESSIONS.items()}


def compare_file(path):
    """Every RNTuple of `path`: keys, top-level fields and every subfield equal uproot's."""
    ours_file = cherenkov.open(path)
    with uproot.open(path) as theirs_file:
        for key in ntuples_of(path):
            ours, theirs = ours_file[key], theirs_file[key]
            assert ours.num_entries == theirs.num_entries
            assert ours.keys() == theirs.keys(), key
            ours_all, theirs_all = ours.arrays(), theirs.arrays()
            assert ours_all.fields == theirs_all.fields
            for name in theirs_all.fields:
                assert_same_array(ours_all[name], theirs_all[name], (path.name, key, name))
            for field in ours.fields:
                if "." not in field.path:
                    continue
                if not field.readable:
                    with pytest.raises(cherenkov.UnsupportedBranch, match=field.path):
                        ours.arrays([field.path])
                    continue
                theirs_field = theirs[field.path].array()
                assert_same_array(ours.arrays([field.path])[field.path], theirs_field, (path.name, key, field.path))


@pytest.mark.skipif(not SHARED, reason=f"no RNTuples in {TESTDATA}: set CHERENKOV_SHARED")
@pytest.mark.parametrize("path", SHARED, ids=[p.name for p in SHARED])
def test_every_field_of_the_shared_rntuples_equals_uproot(path):
    compare_file(path)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_type_uproot_writes_in_every_compression_equals_uproot(generated, compression):
    path = generated[compression]
    ntuple = cherenkov.open(path)["ntuple"]
    assert ntuple.cluster_boundaries.tolist() == np.cumsum([0] + CHUNKS).tolist()
    assert all(f.readable for f in ntuple.fields)
    compare_file(path)


def test_entry_ranges_across_clusters_equal_the_data_written(generated):
    """Values against the data written (uproot misreads variants in ranges that start after the
    first cluster: it takes a variant's index, which counts within its cluster, as global)."""
    path = generated["lz4"]
    ours, theirs = cherenkov.open(path)["ntuple"], uproot.open(path)["ntuple"]
    written = ak.concatenate([chunk(n, seed) for seed, n in enumerate(CHUNKS)])
    for start, stop in [(0, 1), (119, 122), (121, 197), (50, 60), (196, 197), (5, 5)]:
        a = ours.arrays(entry_start=start, entry_stop=stop)
        b = theirs.arrays(entry_start=start, entry_stop=stop)
        assert len(a) == stop - start
        for name in b.fields:
            assert a[name].layout.form == b[name].layout.form, name
            assert same_values(a[name].to_list(), written[name][start:stop].to_list()), (start, stop, name)


def test_steps_and_lazy_chunks_join_to_the_whole(generated):
    ntuple = cherenkov.open(generated["zstd"])["ntuple"]
    whole = ntuple.arrays()
    steps = list(ntuple.iterate(step_size=1, steps_ahead=1, memory_budget=1 << 16))
    assert [len(s) for s in steps] == CHUNKS
    bounds = np.cumsum([0] + CHUNKS)
    for name in whole.fields:
        for step, lo, hi in zip(steps, bounds, bounds[1:]):
            assert_same_array(step[name], whole[name][lo:hi], (name, lo))
    profile = cherenkov.AccessProfile()
    pieces = [(c["jagged"], c["particles.pt"]) for c in ntuple.chunks(step_size=100, profile=profile)]
    assert profile.learned == ["jagged", "particles.pt"]
    assert_same_array(ak.concatenate([p[0] for p in pieces]), whole["jagged"], "jagged")
    assert_same_array(ak.concatenate([p[1] for p in pieces]), whole["particles"]["pt"], "particles.pt")


def test_numpy_output_as_for_trees(generated):
    ntuple = cherenkov.open(generated["zlib"])["ntuple"]
    np_ = ntuple.arrays(["x_int16", "jagged", "fixed", "text"], library="np")
    ak_ = ntuple.arrays(["x_int16", "jagged", "fixed", "text"])
    assert np_["x_int16"].dtype == np.int16 and np.array_equal(np_["x_int16"], ak_["x_int16"].to_numpy())
    assert isinstance(np_["jagged"], cherenkov.Jagged)
    assert np_["jagged"].counts.tolist() == ak.num(ak_["jagged"]).tolist()
    assert np_["fixed"].shape == (sum(CHUNKS), 3)
    assert np_["text"].tolist() == ak_["text"].to_list()


def test_an_option_whose_values_were_written_unpacked_is_refused(tmp_path):
    """uproot 5.7 writes a masked array's values whole (12 values for 8 present): uproot then
    reads the wrong values; the column holding more elements than its offsets say is an error."""
    path = tmp_path / "unpacked-option.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("n", ak.Array({"o": ak.mask(np.arange(12, dtype=np.int32), np.arange(12) % 3 != 0)}))
    with pytest.raises(cherenkov.FormatError, match="expected 8 elements"):
        cherenkov.open(path)["n"].arrays()


def test_tree_surface_names_and_patterns(generated):
    ntuple = cherenkov.open(generated["zstd"])["ntuple"]
    assert isinstance(ntuple, cherenkov.RNTuple) and isinstance(ntuple, cherenkov.Tree)
    assert ntuple.keys("particles.*") == ["particles.pt", "particles.charge"]
    assert set(ntuple.arrays(["x_int*"]).fields) == {f"x_int{n}" for n in (8, 16, 32, 64)}
    assert ntuple["particles.pt"].typename == "double"
    assert ntuple["jagged"].compressed_bytes > 0
    with pytest.raises(cherenkov.NotFoundError):
        ntuple.arrays(["no_such_field"])


def test_a_damaged_page_is_named_by_its_file_offset(generated, tmp_path):
    """A page whose compression header (checked before decoding) or compressed bytes (found
    in decompressing) are damaged fails the read with an error naming the RNTuple, the
    column's field, the page's file offset and the block in it."""
    ntuple = cherenkov.open(generated["zstd"])["ntuple"]
    items = [info.index for _, info in ntuple.resolve(["record.a"])]
    offset, length = sorted(ntuple._core.stored_ranges(items, 0, ntuple.num_entries))[0]
    original = generated["zstd"].read_bytes()
    assert original[offset : offset + 2] == b"ZS"
    for at, damage, expected in [
        (offset, b"QQ", "a compression header starting with ZL, XZ, L4, ZS or CS"),
        (offset + length // 2, b"\xff\xff", "a valid zstd block"),
    ]:
        data = bytearray(original)
        data[at : at + 2] = bytes(b ^ d for b, d in zip(data[at : at + 2], damage))
        damaged = tmp_path / "damaged.root"
        damaged.write_bytes(bytes(data))
        with pytest.raises(cherenkov.FormatError) as err:
            cherenkov.open(damaged)["ntuple"].arrays(["record.a"])
        message = str(err.value)
        assert f"(field 'a') cluster 0 page at file offset {offset} compressed byte 0: expected {expected}" in message
