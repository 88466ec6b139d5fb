"""Branch types only ROOT writes (tests/data/branch-types.root, made by make_branch_types.py):
every branch cherenkov reads equals uproot's, value by value and form by form, in awkward and
numpy output; every branch it does not read is refused by name, never returned wrong."""

import math
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import form

uproot = pytest.importorskip("uproot")

FILE = Path(__file__).parent / "data" / "branch-types.root"

# What must be read (a refusal here is a regression).
MUST_READ = {
    "snapshot": ["n", "pt", "ids", "mass"],
    "objects": [
        "run",
        "weight",
        "scaled",
        "angle",
        "full",
        "bits14",
        "f16bits",
        "vals[2]",
        "adc[4]",
        "energies",
        "label",
        "hits.x",
        "hits.id",
        "hits.pos[3]",
        "hits.energy",
        "hits.plain",
        "hits.f16",
        "hits.f16r",
        "hits.d32bits",
        "tracks",
        "tracks.fUniqueID",
        "tracks.fBits",
        "tracks.fP[3]",
        "tracks.fCharge",
        "tracks.fMass",
        "link_lists",
        "names_by_id",
        "keys",
    ],
    "leaflist": ["x", "full", "bits", "arr", "f", "fr", "n", "var"],
}

# Packed numbers with a range: ROOT computes `raw / factor + min` with factor = 2**nbits /
# (max - min), or 0xffffffff / (max - min) for 32 bits (TBufferFile::ReadWithFactor,
# TStreamerElement::GetRange); uproot multiplies by (max - min) / 2**nbits, which differs in
# the last bits (and by 2**-32 relative at 32 bits). cherenkov follows ROOT: these are compared
# with ROOT's own reading bit for bit (test_packed_numbers_equal_root_s_reading) and with
# uproot's to its rounding.
RANGED = {
    "objects": {"scaled", "angle", "full", "vals[2]", "hits.energy", "hits.f16r", "tracks.fMass"},
    "leaflist": {"x", "full", "arr", "fr", "var"},
}

# uproot's reading is wrong here (denormal numbers: a fixed array of ranged Double32_t in a
# leaf list); compared with ROOT's reading only.
UPROOT_WRONG = {"leaflist": {"arr", "var"}}

# readback branch (ROOT's reading, as doubles) -> (tree, branch) cherenkov reads packed.
READBACK = {
    "scaled": ("objects", "scaled"),
    "angle": ("objects", "angle"),
    "full": ("objects", "full"),
    "bits14": ("objects", "bits14"),
    "f16bits": ("objects", "f16bits"),
    "x": ("leaflist", "x"),
    "leaf_full": ("leaflist", "full"),
    "leaf_bits": ("leaflist", "bits"),
    "f": ("leaflist", "f"),
    "fr": ("leaflist", "fr"),
    "hits_energy": ("objects", "hits.energy"),
    "hits_f16": ("objects", "hits.f16"),
    "hits_f16r": ("objects", "hits.f16r"),
    "hits_d32bits": ("objects", "hits.d32bits"),
    "arr": ("leaflist", "arr"),
    "var": ("leaflist", "var"),
}


def same(a, b, rel_tol=0.0) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=rel_tol, abs_tol=rel_tol) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y, rel_tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel_tol) for k in a)
    return a == b


def branches(tree_name):
    ours = cherenkov.open(FILE)[tree_name]
    theirs = uproot.open(FILE)[tree_name]
    return ours, theirs, [b for b in theirs.values(recursive=True)]


@pytest.mark.parametrize("tree_name", sorted(MUST_READ))
def test_every_branch_equals_uproot_or_is_refused_by_name(tree_name):
    ours, theirs, theirs_branches = branches(tree_name)
    read = set()
    for branch in theirs_branches:
        name = branch.name
        try:
            expected = theirs[name].array(library="ak")
        except Exception:  # uproot cannot read it (a split object with members of its own, a
            continue  # memberwise vector of classes): nothing to compare with
        info = ours[name]
        if name in UPROOT_WRONG.get(tree_name, ()):
            assert info.kind != "unsupported", name
            read.add(name)
            continue
        if info.kind == "unsupported":
            with pytest.raises(cherenkov.UnsupportedBranch, match=name.replace("[", r"\[").replace("]", r"\]")):
                ours.arrays([name], library="ak")
            continue
        got = ours.arrays([name], library="ak")[name]
        assert str(got.type) == str(expected.type), name
        assert form(got) == form(expected), name
        rel_tol = 1e-9 if name in RANGED.get(tree_name, ()) else 0.0
        assert same(ak.to_list(got), ak.to_list(expected), rel_tol), name
        read.add(name)
    missing = set(MUST_READ[tree_name]) - read
    assert not missing, f"refused: {sorted(missing)}"


@pytest.mark.parametrize("tree_name", sorted(MUST_READ))
def test_numpy_output_equals_uproot(tree_name):
    ours, theirs, _ = branches(tree_name)
    for name in MUST_READ[tree_name]:
        if name in UPROOT_WRONG.get(tree_name, ()):
            continue
        got = ours.arrays([name], library="np")[name]
        expected = theirs[name].array(library="np")
        if expected.dtype == object and "at 0x" in str(expected[1]):
            continue  # uproot's numpy output of classes: Model objects (awkward compared above)
        if isinstance(got, cherenkov.Jagged):
            entries = [np.asarray(x) for x in expected]
            assert got.counts.tolist() == [len(x) for x in entries], name
            flat = np.concatenate(entries)
            assert got.content.shape[1:] == flat.shape[1:], name
            assert got.content.dtype == flat.dtype.newbyteorder("="), name
            assert (
                np.allclose(got.content, flat, rtol=1e-9, atol=0)
                if name in RANGED.get(tree_name, ())
                else np.array_equal(got.content, flat)
            ), name
        elif got.dtype == object:
            if hasattr(expected[0], "keys"):  # uproot's STLMap: compare as (key, value) pairs
                expected = [list(zip(m.keys().tolist(), list(m.values()))) for m in expected]
                got = [[tuple(p) for p in x.tolist()] for x in got]
            assert [str(x) for x in got] == [str(x) for x in expected], name
        else:
            assert got.shape == expected.shape and got.dtype == expected.dtype.newbyteorder("="), name
            if name in RANGED.get(tree_name, ()):
                assert np.allclose(got, expected, rtol=1e-9, atol=0), name
            else:
                assert np.array_equal(got, expected), name


@pytest.mark.parametrize("readback", sorted(READBACK))
def test_packed_numbers_equal_root_s_reading(readback):
    """Double32_t/Float16_t with and without ranges and bit counts, as leaves, class members,
    members of vectors of classes and leaf lists: bit for bit what ROOT itself reads."""
    tree_name, name = READBACK[readback]
    got = ak.to_list(cherenkov.open(FILE)[tree_name].arrays([name], library="ak")[name])
    root = ak.to_list(uproot.open(FILE)["readback"][readback].array(library="ak"))
    assert got == root, name
    assert any(x != 0 for x in ak.flatten(root, axis=None)), "a test that cannot fail"


def test_packed_fixed_arrays_in_classes_equal_root_s_reading():
    got = cherenkov.open(FILE)["objects"].arrays(["vals[2]"], library="np")["vals[2]"]
    readback = uproot.open(FILE)["readback"].arrays(["vals0", "vals1"], library="np")
    assert got[:, 0].tolist() == readback["vals0"].tolist()
    assert got[:, 1].tolist() == readback["vals1"].tolist()


def test_a_repeated_branch_name_reads_the_first_branch():
    """Delphes writes `Particle_size` twice; uproot (and so cherenkov) read the first by the name."""
    got = cherenkov.open(FILE)["repeated"].arrays(["x"], library="np")["x"]
    expected = uproot.open(FILE)["repeated"]["x"].array(library="np")
    assert got.tolist() == expected.tolist() == list(range(40))


def test_empty_maps_of_strings_have_no_column_headers():
    """ROOT writes a map's columns of strings under one header each, and none when the map is
    empty (uproot expects them there and fails on this branch): compared with what the writer
    filled (make_branch_types.py: {j - i: 'a' + j repeated j + 1 times, j < i % 3})."""
    got = cherenkov.open(FILE)["objects"].arrays(["empty_or_not"], library="ak")["empty_or_not"]
    expected = [[(j - i, chr(ord("a") + j) * (j + 1)) for j in range(i % 3)] for i in range(40)]
    assert [[tuple(p) for p in entry] for entry in ak.to_list(got)] == expected
