"""Trees written by g4tools, the writer inside Geant4's analysis manager, which lays ROOT files out
itself (ROOT 3's layout: TTree 5, TBranch 8) and writes its std::vector columns as TBranchElements
of class version 1. `data/g4tools-ntuples.root` was written by g4tools itself
(`data/make_g4tools_ntuples.cpp`); its values are a function of the row number, checked here
without any reader, and equal to uproot's."""

from pathlib import Path

import awkward as ak
import cherenkov
import pytest
import uproot

FILE = Path(__file__).parent / "data" / "g4tools-ntuples.root"
ROWS = 2000


def expected() -> dict:
    """The values make_g4tools_ntuples.cpp wrote."""
    rows = range(ROWS)
    return {
        "row": list(rows),
        "energy": [0.5 * i for i in rows],
        "x": [i * 0.125 - 100.0 for i in rows],
        "volume": [f"vol{i % 11}" for i in rows],
        "hits": [[i + 0.5 * k for k in range(i % 6)] for i in rows],
        "times": [[0.25 * i - k for k in range(i % 3)] for i in rows],
        "ids": [[i * 10 + k for k in range((i // 7) % 4)] for i in rows],
    }


def test_a_column_wise_g4tools_ntuple_reads_its_values_and_uproots():
    tree = cherenkov.open(FILE)["column_wise"]
    assert tree.num_entries == ROWS
    types = {b.name: b.typename for b in tree.branches}
    assert types["hits"] == "std::vector<double>" and types["ids"] == "std::vector<int32_t>", types
    got = tree.arrays(library="ak")
    want = expected()
    assert sorted(got.fields) == sorted(want)
    for name, values in want.items():
        assert got[name].tolist() == values, name
    theirs = uproot.open(FILE)["column_wise"].arrays(library="ak")
    for name in want:
        assert ak.array_equal(got[name], theirs[name]), name


def test_a_row_wise_g4tools_ntuple_is_refused_by_name():
    """Row-wise, g4tools writes every column as one leaf list mixing numbers, a string and
    counted arrays, which neither cherenkov nor uproot interprets: refused, never read wrong."""
    tree = cherenkov.open(FILE)["row_wise"]
    assert tree.num_entries == ROWS
    with pytest.raises(cherenkov.UnsupportedBranch, match="row_wise_branch"):
        tree.arrays(["row_wise_branch"])
