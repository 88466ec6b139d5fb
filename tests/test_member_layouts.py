"""Member layouts that depend on the class's own streamer or on how a member is declared
(tests/data/member-layouts.root, made by make_member_layouts.py with ROOT): a ``TClonesArray *``
member of a split class is the record of its members' branches, as uproot reads it (a
``TClonesArray`` branch of the tree is the number of objects); ``TDatime`` members are read bare
(TDatime::Streamer writes 4 bytes, no byte count or version) in split and unsplit classes; packed
leaf-list arrays (``x[2][3]/d[0,1,10]``) keep the dimensions of their leaf's title and take their
range from the type after the slash; ``TString`` members of the objects of a split collection
(streamer type 65) are each entry's list of strings; fixed arrays of objects (streamer types 81
and 82), each object with its header, are each entry's list of arrays (one outside collections,
as uproot reads them); TArrays (TArray::Streamer writes fN and the numbers bare) are lists of
numbers."""

from pathlib import Path

import awkward as ak
import cherenkov
import pytest
from conftest import form

uproot = pytest.importorskip("uproot")

FILE = Path(__file__).parent / "data" / "member-layouts.root"
TREE = "layouts"
ENTRIES = 9
# Branches uproot cannot read: the split Event whole and its vector<Tag> (IndexErrors on the
# TString member), and the Float16_t leaf list (an UnboundLocalError on its title); and ones it
# misreads: the Double32_t leaf list, as 4-byte floats (denormal numbers; ROOT reads the values
# written, as cherenkov), and the TString member of the Labels, as one string per entry (the
# objects' strings run together, length bytes included).
# It fails on arrays of objects not TObjects (Pt q[3], whose headers it does not expect) and on
# the TArrayF of the TClonesArray's Tracks, and misreads the unsplit Track (one Mom and one Pt,
# not arrays: numbers from the wrong bytes).
UPROOT_FAILS = {"tracks.w", "event", "tags", "tags.name", "f", "x", "labels.text", "track", "q[3]", "tracks.q[3]", "track0"}


def datime(year, month, day, hour, minute, second):
    """TDatime's packed form (TDatime::Set)."""
    return (year - 1995) << 26 | month << 22 | day << 17 | hour << 12 | minute << 6 | second


@pytest.fixture(scope="module")
def theirs():
    return uproot.open(FILE)[TREE]


@pytest.fixture(scope="module")
def ours():
    return cherenkov.open(FILE)[TREE]


def test_every_branch_uproot_reads_equals_uproot_in_form_and_values(theirs, ours):
    names = [b.name for b in theirs.values(recursive=True)]
    assert {"hits", "clones", "stamp", "x"} <= set(names)
    for name in names:
        if name in UPROOT_FAILS:
            continue
        got = ours.arrays([name], library="ak")[name]
        expected = theirs[name].array(library="ak")
        assert str(got.type) == str(expected.type), name
        assert form(got) == form(expected), name
        assert ak.to_list(got) == ak.to_list(expected), name


def test_a_clones_array_pointer_member_is_the_record_of_its_members(ours):
    hits = ours.arrays(["hits"], library="ak")["hits"]
    assert hits.fields == ["hits.fUniqueID", "hits.fBits", "hits.e", "hits.cell"]
    assert ak.to_list(ak.num(hits["hits.e"])) == [i % 4 for i in range(ENTRIES)]
    assert ak.to_list(hits["hits.cell"][7]) == [700, 701, 702]
    # The tree's own TClonesArray branch is the number of objects, as uproot reads it.
    assert ak.to_list(ours.arrays(["clones"], library="ak")["clones"]) == [i % 4 for i in range(ENTRIES)]


def test_datime_members_are_read_bare(ours):
    stamp = ours.arrays(["stamp"], library="ak")["stamp"]
    assert ak.to_list(stamp.when.fDatime) == [datime(1999, 12, 31, 23, 59, i) for i in range(ENTRIES)]
    assert ak.to_list(stamp.run) == [1000 + i for i in range(ENTRIES)]
    event = ours.arrays(["event"], library="ak")["event"]
    expected = [datime(2020 + i, 1 + i, 2 + i, 3 + i, 4 + i, 5 + i) for i in range(ENTRIES)]
    assert ak.to_list(event.when.fDatime) == expected
    assert ak.to_list(event.n) == list(range(ENTRIES))


def test_packed_leaf_lists_keep_the_dimensions_of_their_leaf_titles(ours):
    got = ours.arrays(["x", "f"], library="ak")
    assert str(got.x.type) == f"{ENTRIES} * 2 * 3 * float64"
    assert str(got.f.type) == f"{ENTRIES} * 2 * 3 * float32"
    # The values written fit the packing exactly: ROOT reads them back (SetBranchAddress).
    for i in range(ENTRIES):
        assert ak.to_list(got.x[i]) == [[(i * 6 + a * 3 + b) / 64 for b in range(3)] for a in range(2)]
        assert ak.to_list(got.f[i]) == [[1.5 * (i - 4) + 0.25 * (a * 3 + b) for b in range(3)] for a in range(2)]


def test_tstring_members_of_collection_objects_are_lists_of_strings(ours):
    # As make_member_layouts.py wrote them: a TClonesArray of Label, a split vector<Tag>.
    labels = ours.arrays(["labels.text", "labels.k"], library="ak")
    assert str(labels["labels.text"].type) == f"{ENTRIES} * var * string"
    expected = [[chr(ord("a") + j) * (300 + i if j == 1 else i) for j in range(i % 3)] for i in range(ENTRIES)]
    assert ak.to_list(labels["labels.text"]) == expected
    assert ak.to_list(labels["labels.k"]) == [[10 * i + j for j in range(i % 3)] for i in range(ENTRIES)]
    tags = ours.arrays(["tags"], library="ak")["tags"]
    assert ak.to_list(tags["tags.name"]) == [[f"tag{i}.{j}" for j in range((i + 1) % 3)] for i in range(ENTRIES)]
    assert ak.to_list(tags["tags.id"]) == [[10 * i + j for j in range((i + 1) % 3)] for i in range(ENTRIES)]
    event = ours.arrays(["event"], library="ak")["event"]
    assert ak.to_list(event.tags["tags.name"]) == ak.to_list(tags["tags.name"])


def moms(i):
    return [{"px": i + 0.5 * k, "pz": -i - 0.25 * k} for k in range(2)]


def pts(i):
    return [{"x": 10 * i + k, "y": 0.5 * k - i} for k in range(3)]


def test_fixed_arrays_of_objects_are_lists_of_arrays(ours, theirs):
    # As make_member_layouts.py wrote them (Track::Set): in a TClonesArray, one array per object.
    tracks = ours.arrays(["tracks.m[2]", "tracks.q[3]"], library="ak")
    assert str(tracks["tracks.m[2]"].type) == f"{ENTRIES} * var * 2 * Mom[px: float64, pz: float64]"
    assert ak.to_list(tracks["tracks.m[2]"]) == [[moms(10 * i + j) for j in range(i % 3)] for i in range(ENTRIES)]
    assert ak.to_list(tracks["tracks.q[3]"]) == [[pts(10 * i + j) for j in range(i % 3)] for i in range(ENTRIES)]
    # Split alone and unsplit: one array per entry (uproot's form: a list of one).
    track = ours.arrays(["track"], library="ak")["track"]
    assert ak.to_list(track["m[2]"]) == [[moms(i)] for i in range(ENTRIES)]
    assert ak.to_list(track["q[3]"]) == [[pts(i)] for i in range(ENTRIES)]
    assert ak.to_list(ours.arrays(["track0"], library="ak")["track0"]) == [
        {"id": -i, "m": moms(-i), "q": pts(-i), "w": []} for i in range(ENTRIES)
    ]
    # uproot reads the arrays of TObjects (Mom m[2]) alike.
    expected = theirs["track"]["m[2]"].array(library="ak")
    assert str(track["m[2]"].type) == str(expected.type)
    assert ak.to_list(track["m[2]"]) == ak.to_list(expected)


def test_tarrays_are_lists_of_numbers(ours, theirs):
    # As make_member_layouts.py wrote them: a TArrayD branch, Track's TArrayF w (Track::Set).
    arr = ours.arrays(["arr"], library="ak")["arr"]
    assert str(arr.type) == f"{ENTRIES} * var * float64"
    assert ak.to_list(arr) == [[i - 0.125 * k for k in range(i)] for i in range(ENTRIES)]
    assert ak.to_list(arr) == ak.to_list(theirs["arr"].array(library="ak"))

    def w(i):
        # C++'s i % 4 is negative for negative ids, which TArray::Set ignores: w stays empty.
        return [0.5 * i + k for k in range(i % 4 if i >= 0 else 0)]

    assert ak.to_list(ours.arrays(["track"], library="ak")["track"]["w"]) == [w(i) for i in range(ENTRIES)]
    tracks_w = ours.arrays(["tracks.w"], library="ak")["tracks.w"]
    assert ak.to_list(tracks_w) == [[w(10 * i + j) for j in range(i % 3)] for i in range(ENTRIES)]
    assert [t["w"] for t in ak.to_list(ours.arrays(["track0"], library="ak")["track0"])] == [w(-i) for i in range(ENTRIES)]
