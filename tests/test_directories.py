"""Directory records whose fSeekKeys is 0 (tests/data/directories.root and unclosed.root, made by
make_directories.py with ROOT): a directory made with mkdir and left empty has no keys list, and
lists nothing (as ROOT and uproot); a file never closed has no keys list in its top directory, and
its objects are found by walking the records, as ROOT's TFile::Recover finds them (uproot lists
nothing)."""

from pathlib import Path

import awkward as ak
import cherenkov
import pytest
from conftest import form

uproot = pytest.importorskip("uproot")

DATA = Path(__file__).parent / "data"
DIRECTORIES = DATA / "directories.root"
UNCLOSED = DATA / "unclosed.root"
ENTRIES = 20


def written(scale: float) -> dict:
    """The values make_directories.py filled."""
    return {
        "i": list(range(ENTRIES)),
        "x": [k * scale for k in range(ENTRIES)],
        "v": [[k + 0.25 * j for j in range(k % 4)] for k in range(ENTRIES)],
    }


def test_empty_directories_list_nothing_as_uproot():
    ours, theirs = cherenkov.open(DIRECTORIES), uproot.open(DIRECTORIES)
    assert ours.keys() == theirs.keys()
    assert ours.classnames() == theirs.classnames()
    for empty in ["empty", "full/inner_empty"]:
        assert ours[empty].keys() == theirs[empty].keys() == []


@pytest.mark.parametrize(("tree", "scale"), [("top", 1.5), ("full/inner", -2.0)])
def test_trees_beside_empty_directories_equal_uproot(tree, scale):
    ours = cherenkov.open(DIRECTORIES)[tree].arrays(["i", "x", "v"], library="ak")
    theirs = uproot.open(DIRECTORIES)[tree].arrays(["i", "x", "v"], library="ak")
    assert form(ours) == form(theirs)
    assert ak.to_list(ours) == ak.to_list(theirs)
    assert {k: ak.to_list(ours[k]) for k in ["i", "x", "v"]} == written(scale)


def test_a_file_never_closed_has_its_objects_recovered():
    f = cherenkov.open(UNCLOSED)
    assert f.classnames() == {"events;1": "TTree", "h;1": "TH1D"}
    assert uproot.open(UNCLOSED).keys() == []  # uproot reads no keys where fSeekKeys is 0
    got = f["events"].arrays(["i", "x", "v"], library="ak")
    assert {k: ak.to_list(got[k]) for k in ["i", "x", "v"]} == written(0.5)


def test_recovered_objects_equal_what_root_recovers():
    ROOT = pytest.importorskip("ROOT")
    from cherenkov_lab.root_oracle import RootTree, flat_entries

    ROOT.gErrorIgnoreLevel = ROOT.kFatal
    root_file = ROOT.TFile.Open(str(UNCLOSED))
    assert sorted((k.GetName(), k.GetClassName(), k.GetCycle()) for k in root_file.GetListOfKeys()) == [
        ("events", "TTree", 1),
        ("h", "TH1D", 1),
    ]
    tree = RootTree(UNCLOSED, "events")
    ours = cherenkov.open(UNCLOSED)["events"]
    for name in ["i", "x", "n", "v"]:
        assert flat_entries(ours.arrays([name], library="ak")[name]) == tree.values(name), name
