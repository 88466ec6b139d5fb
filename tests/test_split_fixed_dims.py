"""Fixed-size multi-dimensional members of split objects (tests/data/split-fixed-dims.root, made by
make_split_fixed_dims.py with ROOT): ``Float_t x[6][3]`` and ``Int_t k[2][3][4]`` in the class of a
split TClonesArray and of a split std::vector<Class> read as uproot reads them, flattened
(``var * 18 * float32``), and as split-object members outside collections with their dimensions;
``declared_dims=True`` keeps the class's dimensions everywhere."""

from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import form

uproot = pytest.importorskip("uproot")

FILE = Path(__file__).parent / "data" / "split-fixed-dims.root"
TREE = "cells"
# Members of the objects of split collections, with the dimensions their class declares.
COLLECTION_MEMBERS = {
    "clones.x[6][3]": (6, 3),
    "clones.k[2][3][4]": (2, 3, 4),
    "vec.x[6][3]": (6, 3),
    "vec.k[2][3][4]": (2, 3, 4),
}


@pytest.fixture(scope="module")
def theirs():
    return uproot.open(FILE)[TREE]


def test_every_branch_equals_uproot_in_form_and_values(theirs):
    ours = cherenkov.open(FILE)[TREE]
    names = [b.name for b in theirs.values(recursive=True)]
    assert set(COLLECTION_MEMBERS) <= set(names)
    for name in names:
        got = ours.arrays([name], library="ak")[name]
        expected = theirs[name].array(library="ak")
        assert str(got.type) == str(expected.type), name
        assert form(got) == form(expected), name
        assert ak.to_list(got) == ak.to_list(expected), name


@pytest.mark.parametrize("name", [*COLLECTION_MEMBERS, "clones.d[5]"])
def test_numpy_output_equals_uproot(theirs, name):
    """Jagged: offsets and a content of (items, 18); uproot's, an array per entry."""
    got = cherenkov.open(FILE)[TREE].arrays([name], library="np")[name]
    expected = theirs[name].array(library="np")
    assert len(got) == len(expected)
    for entry, theirs_entry in enumerate(expected):
        ours_entry = got.content[got.offsets[entry] : got.offsets[entry + 1]]
        assert ours_entry.dtype == theirs_entry.dtype and np.array_equal(ours_entry, theirs_entry), (name, entry)


def test_collection_members_are_flattened_as_uproot_reads_them(theirs):
    ours = cherenkov.open(FILE)[TREE]
    for name, dims in COLLECTION_MEMBERS.items():
        got = ours.arrays([name], library="ak")[name]
        assert str(got.type).split(" * ")[2] == str(int(np.prod(dims))), got.type


def test_declared_dims_keep_the_class_dimensions(theirs):
    ours = cherenkov.open(FILE, declared_dims=True)[TREE]
    for name, dims in COLLECTION_MEMBERS.items():
        got = ours.arrays([name], library="ak")[name]
        assert str(got.type) == f"12 * var * {' * '.join(map(str, dims))} * {str(got.type).split(' * ')[-1]}"
        # The same numbers, regrouped.
        flat = theirs[name].array(library="ak")
        assert ak.to_list(ak.flatten(got, axis=None)) == ak.to_list(ak.flatten(flat, axis=None))
        assert ak.to_list(got[7][2]) == np.reshape(ak.to_list(flat[7][2]), dims).tolist()
    # Members outside collections and other branches are as uproot reads them either way.
    for name in ["x[6][3]", "k[2][3][4]", "m[2][3]", "clones.d[5]", "clones.n"]:
        got = ours.arrays([name], library="ak")[name]
        assert form(got) == form(theirs[name].array(library="ak")), name
