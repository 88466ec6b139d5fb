"""RNTuples written by ROOT 6.40 (tests/data/make_rntuple_root.py): the types uproot's writer
cannot write (variants, options, unique_ptr, bitsets, pairs, tuples, atomics, arrays, enums, user
classes with inheritance, sets, maps, projected fields, Real32Trunc/Real32Quant/Real16 columns, a
field added after writing began, a streamer field) in three cluster groups, and a NanoAOD-like
RNTuple made by ROOT's RNTupleImporter. Every field equals uproot's reading of it (forms and
values), and ROOT's own reading where uproot misreads; what cannot be read is refused by name."""

import json
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import TESTDATA
from rntuple_support import assert_same_array, same_values

uproot = pytest.importorskip("uproot")

DATA = Path(__file__).parent / "data"
TYPES = DATA / "rntuple-root-types.root"
NANO = DATA / "rntuple-root-nanolike.root"
LAB_TREE = TESTDATA / "nanolike-root6.40-zstd-4clusters.root"
pytestmark = pytest.mark.skipif(not TYPES.exists() or not NANO.exists(), reason="run tests/data/make_rntuple_root.py")
# Entries per cluster, clusters per cluster group, as the generator writes them.
LAYOUT = [[40, 25], [7], [30, 30, 18]]
# uproot 5.7 takes a variant's index, which counts within its cluster, as global: it misreads
# variants after the first cluster. ROOT's reading is the reference there.
UPROOT_MISREADS = {"variant"}
REFUSED = {"streamed": "Streamed"}  # streamer fields: ROOT's streamer serialization


@pytest.fixture(scope="module")
def types():
    return cherenkov.open(TYPES)["types"], uproot.open(TYPES)["types"]


def test_clusters_and_cluster_groups(types):
    ours, _ = types
    assert ours.cluster_boundaries.tolist() == np.cumsum([0] + [n for g in LAYOUT for n in g]).tolist()
    assert ours.writer.startswith("ROOT") and ours.format_version.startswith("1.0.")


def test_every_field_equals_uproot(types):
    ours, theirs = types
    assert ours.keys() == theirs.keys()
    checked = 0
    for field in ours.fields:
        top = field.path.split(".")[0]
        if top in UPROOT_MISREADS or top in REFUSED:
            continue
        assert field.readable, field.path
        assert_same_array(ours.arrays([field.path])[field.path], theirs[field.path].array(), field.path)
        checked += 1
    assert checked >= 45
    whole = ours.arrays()  # every readable top-level field at once
    assert set(whole.fields) == {f.path for f in ours.fields if "." not in f.path} - set(REFUSED)


def test_every_field_equals_root_where_it_wrote_a_reference(types):
    """ROOT's RNTupleReader values (written beside the file) for the types that matter most."""
    ours, _ = types
    reference = json.loads((DATA / "rntuple-root-types.json").read_text())
    read = ours.arrays(list(reference)).to_list()
    for name, values in reference.items():
        mine = [entry[name] for entry in read]
        if name == "uptr":  # an option as uproot reads it: a list of zero or one record
            mine = [x[0] if x else None for x in mine]
        if name == "map":  # (key, value) pairs
            mine = [[list(p) for p in x] for x in mine]
        if name in ("trunc", "quant", "half", "dtrunc"):  # ROOT hands them as doubles
            assert np.array_equal(np.asarray(mine, dtype=np.float64), np.asarray(values, dtype=np.float64)), name
            continue
        assert same_values(mine, values), name


def test_variants_across_clusters_equal_root(types):
    ours, _ = types
    reference = json.loads((DATA / "rntuple-root-types.json").read_text())["variant"]
    whole = ours.arrays(["variant"])["variant"]
    assert str(whole.type) == "150 * union[?unknown, ?int32, ?float32, ?string]" or "union" in str(whole.type)
    assert whole.to_list() == reference
    for lo, hi in [(39, 41), (64, 73), (100, 150)]:
        assert ours.arrays(["variant"], entry_start=lo, entry_stop=hi)["variant"].to_list() == reference[lo:hi]


def test_the_reduced_precision_columns_hold_what_root_wrote(types):
    """Real32Trunc keeps 14 bits of float (sign, exponent, 5 mantissa bits), Real32Quant 12 bits
    over [-10, 10], Real16 is IEEE half: the values differ from the ones written by at most that."""
    ours, _ = types
    a = ours.arrays(["trunc", "quant", "half", "dtrunc", "i32"])
    n = np.arange(len(a), dtype=np.float64)
    assert ak.to_numpy(a["half"]).dtype == np.float16
    assert np.allclose(ak.to_numpy(a["trunc"]), n * 0.3 - 7.7, rtol=2**-5)
    assert np.allclose(ak.to_numpy(a["quant"]), -10 + (n % 41) * 0.5, atol=20 / 2**12)
    assert np.allclose(ak.to_numpy(a["half"]).astype(np.float64), n * 0.1 - 3, rtol=2**-10, atol=2**-10)
    assert np.allclose(ak.to_numpy(a["dtrunc"]), n * 0.3 - 7.7, rtol=2**-11)
    assert ak.to_numpy(a["i32"]).tolist() == (np.arange(len(a)) * 7 - 300).tolist()


def test_a_streamer_field_is_refused_by_name_and_type(types):
    ours, _ = types
    for name, typename in REFUSED.items():
        assert not ours[name].readable and ours[name].typename == typename
        with pytest.raises(cherenkov.UnsupportedBranch, match=f"'{name}' of type '{typename}'"):
            ours.arrays([name])
    assert name not in ours.arrays("*").fields  # patterns skip what cannot be read


def test_the_importers_nanoaod_like_rntuple_equals_uproot():
    ours, theirs = cherenkov.open(NANO)["Events"], uproot.open(NANO)["Events"]
    assert ours.keys() == theirs.keys()
    assert len(ours.cluster_boundaries) > 5  # several clusters in one cluster group
    ours_all, theirs_all = ours.arrays(), theirs.arrays()
    assert ours_all.fields == theirs_all.fields
    for name in theirs_all.fields:
        assert_same_array(ours_all[name], theirs_all[name], name)


@pytest.mark.skipif(not LAB_TREE.exists(), reason=f"{LAB_TREE} is missing: set CHERENKOV_SHARED")
def test_the_importers_flat_names_read_as_the_ttree_they_came_from():
    """The importer stores Muon_pt as a subfield of a collection (_collectionN.Muon_pt) and
    projects it back to a field named Muon_pt: NanoAOD code reads it unchanged."""
    ntuple, tree = cherenkov.open(NANO)["Events"], cherenkov.open(LAB_TREE)["Events"]
    names = [b.name for b in tree.branches if b.readable and b.name in ntuple]
    assert len(names) > 900
    ours, theirs = ntuple.arrays(names), tree.arrays(names, entry_stop=ntuple.num_entries)
    for name in names:
        assert ours[name].to_list() == theirs[name].to_list(), name
    muons = [ak.to_numpy(ak.num(c["Muon_pt"])) for c in ntuple.chunks(step_size=100)]
    assert np.concatenate(muons).tolist() == ak.to_numpy(theirs["nMuon"]).tolist()
