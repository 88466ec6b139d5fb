"""Branches uproot reads through their layout (tests/data/branch-layouts.root, made by
make_branch_layouts.py): split objects read whole, STL and object members of split collections,
version-0 classes, strings without entry offsets. Every branch cherenkov reads equals uproot's,
value by value and form by form, in awkward and numpy output; the others are refused by name."""

import math
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import form

uproot = pytest.importorskip("uproot")

FILE = Path(__file__).parent / "data" / "branch-layouts.root"
TREE = "layouts"

# Split objects read whole (records of their members), members of split collections stored whole.
GROUPS = ["vertex.", "vertex.where", "vertex_nodot", "where", "info", "TObject", "hits"]
MEMBERS = ["hits.usr", "hits.names", "hits.label", "hits.pos", "tracks.usr", "tracks.dir"]
OTHERS = ["fits", "str", "tag", "hits.e", "tracks.pt"]
# Filled for half of the tree's entries: uproot gives 15 entries of a 30-entry tree.
REFUSED = {"late": "holds 15 entries where its tree holds 30"}
# uproot reads these wrong; tested against the values written instead.
UPROOT_MISREADS = {"tracks.fBits"}


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@pytest.fixture(scope="module")
def trees():
    return cherenkov.open(FILE)[TREE], uproot.open(FILE)[TREE]


@pytest.mark.parametrize("name", GROUPS + MEMBERS + OTHERS)
def test_awkward_output_equals_uproot(trees, name):
    ours, theirs = trees
    got = ours.arrays([name], library="ak")[name]
    expected = theirs[name].array(library="ak")
    assert str(got.type) == str(expected.type)
    assert form(got) == form(expected)
    assert same(ak.to_list(got), ak.to_list(expected))


def plain(x):
    """Python values of numpy output, ours (awkward values in object arrays) or uproot's (its
    STL containers and object models)."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, ak.Array | ak.Record):
        return ak.to_list(x)
    if hasattr(x, "all_members"):  # uproot's models of classes (TVector3): their data members
        skip = ("fUniqueID", "fBits")
        return {k: plain(v) for k, v in x.all_members.items() if not k.startswith("@") and k not in skip}
    if isinstance(x, cherenkov.Jagged):
        return [plain(v) for v in x]
    if hasattr(x, "tolist"):
        return plain(x.tolist())
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x


def same_numpy(got, expected) -> bool:
    if isinstance(expected, dict):
        return isinstance(got, dict) and list(got) == list(expected) and all(same_numpy(got[k], expected[k]) for k in expected)
    if isinstance(got, np.ndarray) and got.dtype != object:
        return got.dtype == expected.dtype.newbyteorder("=") and np.array_equal(got, expected)
    return same(plain(got), plain(expected))


@pytest.mark.parametrize("name", GROUPS + MEMBERS + OTHERS)
def test_numpy_output_equals_uproot(trees, name):
    ours, theirs = trees
    got = ours.arrays([name], library="np")[name]
    expected = theirs[name].array(library="np")
    assert same_numpy(got, expected)


def test_every_branch_is_read_equal_or_refused_by_name(trees):
    """No branch of the file comes back different from uproot's, or fails otherwise."""
    ours, theirs = trees
    for branch in theirs.values(recursive=True):
        name = branch.name
        if name in UPROOT_MISREADS:
            continue
        if name in REFUSED:
            with pytest.raises(cherenkov.UnsupportedBranch, match=REFUSED[name]):
                ours.arrays([name], library="ak")
            continue
        got = ours.arrays([name], library="ak")[name]
        expected = theirs[name].array(library="ak")
        assert form(got) == form(expected), name
        assert same(ak.to_list(got), ak.to_list(expected)), name


def test_fbits_of_referenced_objects_skip_their_process_id(trees):
    """fBits of an object a TRef points to (kIsReferenced, 0x10) is followed by a 2-byte process
    id. uproot reads the member as 4-byte items and goes wrong from the first such object on
    (three items for two objects in entry 5); the values are the ones the writer set."""
    ours, theirs = trees
    got = ak.to_list(ours.arrays(["tracks.fBits"], library="ak")["tracks.fBits"])
    written = [[0, 0x10][: i % 3] for i in range(30)]
    assert got == written
    assert ak.to_list(theirs["tracks.fBits"].array(library="ak")) != written


def test_patterns_select_members_not_their_groups(trees):
    """As uproot: a group is a record when named, and patterns pick its members instead."""
    ours, theirs = trees
    got = ours.arrays("vertex.*", library="ak")
    expected = theirs.arrays(filter_name="vertex.*", library="ak")
    assert got.fields == expected.fields
    assert "vertex.where" not in got.fields
