"""Code written for a TTree with flat NanoAOD-style names runs unchanged on the same data stored as
an RNTuple: `arrays`, `iterate`, lazy chunks and `cherenkov.process` give what they give on the
TTree; `cherenkov ls` and `cherenkov read` list and read RNTuples."""

import json

import awkward as ak
import cherenkov
import hist
import numpy as np
import pytest
from cherenkov.cli import main as cli
from conftest import TESTDATA
from rntuple_support import write_as_rntuple

uproot = pytest.importorskip("uproot")

NANO = TESTDATA / "nanolike-root6.40-zstd-4clusters.root"  # 2000 entries in 4 clusters of 500
pytestmark = pytest.mark.skipif(not NANO.exists(), reason=f"{NANO} is missing: set CHERENKOV_SHARED to the shared folder")
# A slice of the NanoAOD schema: counts, jagged numbers of several types, flat event data.
BRANCHES = ["run", "event", "nMuon", "Muon_*", "nJet", "Jet_pt", "Jet_eta", "MET_pt", "HLT_IsoMu24"]


@pytest.fixture(scope="module")
def as_rntuple(tmp_path_factory):
    return write_as_rntuple(NANO, tmp_path_factory.mktemp("nano-rntuple") / "nanolike-rntuple.root", BRANCHES)


def same(a: ak.Array, b: ak.Array) -> bool:
    return a.fields == b.fields and str(a.type) == str(b.type) and a.to_list() == b.to_list()


def test_reads_written_for_the_tree_run_unchanged_on_the_rntuple(as_rntuple):
    tree, ntuple = cherenkov.open(NANO)["Events"], cherenkov.open(as_rntuple)["Events"]
    assert isinstance(ntuple, cherenkov.RNTuple) and not isinstance(tree, cherenkov.RNTuple)
    assert ntuple.num_entries == tree.num_entries
    assert ntuple.cluster_boundaries.tolist() == tree.cluster_boundaries.tolist()
    assert ntuple.keys("Muon_*") == tree.keys("Muon_*")
    assert same(ntuple.arrays(["Muon_*", "nMuon"]), tree.arrays(["Muon_*", "nMuon"]))
    for lo, hi in [(0, 1), (499, 502), (1700, 2000)]:
        assert same(ntuple.arrays(["Jet_pt", "event"], lo, hi), tree.arrays(["Jet_pt", "event"], lo, hi))
    steps = zip(
        ntuple.iterate(["Jet_pt", "Jet_eta", "MET_pt"], step_size=600),
        tree.iterate(["Jet_pt", "Jet_eta", "MET_pt"], step_size=600),
        strict=True,
    )
    assert all(same(a, b) for a, b in steps)
    np_ours, np_theirs = ntuple.arrays(["Muon_pt", "run"], library="np"), tree.arrays(["Muon_pt", "run"], library="np")
    assert np.array_equal(np_ours["run"], np_theirs["run"])
    assert np.array_equal(np_ours["Muon_pt"].counts, np_theirs["Muon_pt"].counts)
    assert np.array_equal(np_ours["Muon_pt"].content, np_theirs["Muon_pt"].content)


class Analysis:
    """A NanoAOD-style analysis: it knows branch names, not whether they are a TTree's or an RNTuple's."""

    def __call__(self, chunk):
        pt = chunk["Muon_pt"]
        good = pt[(chunk["Muon_tightId"]) & (abs(chunk["Muon_eta"]) < 2.4)]
        h = hist.Hist(hist.axis.Regular(40, 0, 200, name="pt")).fill(ak.to_numpy(ak.flatten(good)))
        return {"pt": h, "events": len(chunk), "n": ak.to_numpy(chunk["nMuon"]).astype(np.int64), "met": float(ak.sum(chunk["MET_pt"]))}


@pytest.mark.parametrize("executor", ["in-process", "processes"])
def test_process_gives_the_same_result_on_the_rntuple(as_rntuple, executor):
    tree_out = cherenkov.process({"nano": [str(NANO)]}, Analysis(), executor="in-process", step_size=500, progress=False)
    ours, report = cherenkov.process(
        {"nano": [str(as_rntuple), str(as_rntuple)]},
        Analysis(),
        executor=executor,
        workers=2,
        step_size=500,
        progress=False,
        return_report=True,
    )
    tree, ntuple = tree_out["nano"], ours["nano"]
    assert report.entries == 4000 and not report.failures
    assert ntuple["events"] == 2 * tree["events"] == 4000
    assert np.array_equal(ntuple["pt"].values(), 2 * tree["pt"].values())
    assert ntuple["pt"].sum() > 0
    assert np.array_equal(ntuple["n"], np.concatenate([tree["n"], tree["n"]]))
    assert ntuple["met"] == pytest.approx(2 * tree["met"], rel=1e-12)


def test_cli_ls_lists_an_rntuple_and_its_fields(as_rntuple, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich fits its tables to the terminal
    assert cli(["ls", str(as_rntuple), "--all"]) == 0
    out = capsys.readouterr().out
    assert "ROOT::RNTuple" in out and "RNTuple 'Events'" in out
    assert "Muon_pt" in out and "std::vector<float>" in out and "pages" in out and "zstd (64 fields)" in out
    assert "4 (entries per cluster: 500..500)" in out
    assert cli(["ls", str(as_rntuple), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)["trees"]["Events"]
    assert listing["kind"] == "RNTuple" and listing["entries"] == 2000
    assert listing["clusters"] == [0, 500, 1000, 1500, 2000]
    fields = {b["path"]: b for b in listing["branches"]}
    assert fields["Muon_pt"]["typename"] == "std::vector<float>" and fields["Muon_pt"]["readable"]
    assert fields["Muon_pt"]["compressed_bytes"] > 0 and fields["Muon_pt"]["num_pages"] >= 4
    assert fields["Muon_pt"]["compression_name"].startswith("zstd")


def test_cli_read_reads_an_rntuple(as_rntuple, capsys):
    assert cli(["read", str(as_rntuple), "--branches", "Muon_pt", "Muon_eta", "--entries", "0:1000", "--stats", "--json"]) == 0
    out = capsys.readouterr().out
    assert "read 2 fields of 'Events' in 1 steps" in out
    stats = json.loads(out[out.index("{") :])
    # Muon_pt and Muon_eta: an offset column each and a value column each, in 2 clusters.
    assert stats["baskets"] == 8


def test_cli_read_names_the_rntuples_when_there_are_several(as_rntuple, tmp_path, capsys):
    path = tmp_path / "two.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("a", ak.Array({"x": np.arange(3)}))
        f.mkrntuple("b", ak.Array({"x": np.arange(3)}))
    assert cli(["read", str(path)]) == 1
    assert "the file has a, b" in capsys.readouterr().err
    assert cli(["read", str(path), "--tree", "b", "--quiet"]) == 0
