"""Merging RNTuples in copy mode: the inputs' pages copied without decompression (each column
keeping its compression), read back equal to the concatenation of the inputs by cherenkov, uproot
and ROOT's RNTupleReader (where ROOT imports); inputs laid out otherwise are rewritten in their
place and reported."""

from __future__ import annotations

import awkward as ak
import cherenkov
import pytest
from rntuple_support import assert_same_array, same_values
from test_write_rntuple import _plain, _root_values, sample, write

uproot = pytest.importorskip("uproot")

# (entries, seed, compression): several clusters each, zstd and lz4 inputs, one without entries.
INPUTS = [(700, 1, 505), (0, 2, 505), (450, 3, 404), (1, 4, 505)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rntuple-inputs")
    paths, datas = [], []
    for n, seed, compression in INPUTS:
        path = folder / f"in{seed}.root"
        data = sample(max(n, 5), seed)[:n]  # types known with no entries too
        write(path, data, compression=compression, chunks=3, cluster_bytes=20_000)
        paths.append(path)
        datas.append(data)
    return paths, ak.concatenate(datas)


def pages_and_clusters(path) -> tuple[int, int]:
    ntuple = cherenkov.open(path)["Events"]
    return sum(f.num_pages for f in ntuple.fields if not f.has_children), len(ntuple.cluster_boundaries) - 1


def test_copy_mode_copies_every_page(inputs, tmp_path):
    paths, data = inputs
    out = tmp_path / "copied.root"
    report = cherenkov.merge(paths, out, mode="copy", progress=False)
    table = report.trees["Events"]
    assert (table.mode, table.reason, table.rewritten, table.entries) == ("copy", "asked for", {}, len(data))
    ours = cherenkov.open(out)["Events"].arrays()
    theirs = uproot.open(out)["Events"].arrays()
    assert ours.fields == theirs.fields == data.fields
    for name in data.fields:
        assert_same_array(ours[name], theirs[name], name)
        assert same_values(ours[name].to_list(), data[name].to_list()), name
    # Pages and clusters as they were, each column keeping its compression per cluster.
    counted = [pages_and_clusters(p) for p in paths]
    assert pages_and_clusters(out) == (sum(p for p, _ in counted), sum(c for _, c in counted))
    bounds = [0]
    for p in paths:
        bounds += [bounds[-1] + b for b in cherenkov.open(p)["Events"].cluster_boundaries[1:].tolist()]
    assert cherenkov.open(out)["Events"].cluster_boundaries.tolist() == bounds


def test_root_reads_the_copied_pages(inputs, tmp_path):
    ROOT = pytest.importorskip("ROOT", reason="ROOT does not import here (pip install root): no ROOT read-back")
    paths, data = inputs
    out = tmp_path / "copied.root"
    cherenkov.merge(paths, out, mode="copy", progress=False)
    assert ROOT.RNTupleReader.Open("Events", str(out)).GetNEntries() == len(data)
    frame = ROOT.RDataFrame("Events", str(out))
    columns = [str(c) for c in frame.GetColumnNames() if not str(c).startswith("R_rdf")]
    values = _root_values(ROOT, frame, columns)
    for column in columns:
        expected = data
        for part in column.split("."):
            expected = expected[part]
        assert same_values(values[column], _plain(expected.to_list())), column


def test_an_input_laid_out_otherwise_is_rewritten_in_its_place(inputs, tmp_path):
    """An uncompressed RNTuple stores floats unsplit: its pages cannot join an output of split
    columns, so its entries are rewritten there, between the copied inputs, and reported."""
    paths, data = inputs
    plain = tmp_path / "plain.root"
    extra = sample(40, seed=9)
    write(plain, extra, compression=0)
    out = tmp_path / "mixed.root"
    report = cherenkov.merge([paths[0], plain, paths[2]], out, mode="copy", progress=False)
    why = report.trees["Events"].rewritten
    assert list(why) == [str(plain)] and "stored as" in why[str(plain)], why
    want = ak.concatenate([sample(700, 1), extra, sample(450, 3)])
    got = cherenkov.open(out)["Events"].arrays()
    for name in want.fields:
        assert same_values(got[name].to_list(), want[name].to_list()), name


def test_auto_mode_measures_the_clusters_of_rntuples(inputs, tmp_path):
    """Small clusters are re-clustered: the rule sees what an RNTuple's pages take on disk."""
    paths, _ = inputs
    report = cherenkov.merge(paths, tmp_path / "auto.root", progress=False)
    stored = sum(cherenkov.open(p)["Events"]._core.stored_bytes() for p in paths)
    clusters = sum(pages_and_clusters(p)[1] for p in paths)
    assert 0 < stored < sum(p.stat().st_size for p in paths)
    table = report.trees["Events"]
    assert table.mode == "rewrite" and f"clusters average {stored / clusters / 1e6:.2f} MB" in table.reason, table.reason


def shared_rntuples() -> list:
    from conftest import TESTDATA

    return sorted(TESTDATA.glob("*rntuple*.root")) if TESTDATA.is_dir() else []


@pytest.mark.parametrize("path", shared_rntuples(), ids=lambda p: p.name)
def test_rntuples_written_by_root_and_others_are_copied_twice_over(path, tmp_path):
    """RNTuples cherenkov's writer would lay out otherwise (ROOT's importer's collections with
    projected fields, std::map, variants, several cluster groups): the output takes the first
    input's layout and the pages are copied; cherenkov and uproot read the inputs twice over."""
    out = tmp_path / "twice.root"
    report = cherenkov.merge([path, path], out, mode="copy", progress=False)
    for name, table in report.trees.items():
        assert table.mode == "copy" and not table.rewritten, (name, table)
        once, twice = cherenkov.open(path)[name], cherenkov.open(out)[name]
        assert twice.num_entries == 2 * once.num_entries
        a, b = once.arrays(), twice.arrays()
        assert a.fields == b.fields
        for field in a.fields:
            assert same_values(b[field].to_list(), a[field].to_list() * 2), (name, field)
        try:
            a = uproot.open(path)[name].arrays()
        except Exception:  # uproot cannot read the input: nothing to compare with
            continue
        b = uproot.open(out)[name].arrays()
        for field in a.fields:
            assert same_values(b[field].to_list(), a[field].to_list() * 2), (name, field)


def test_root_reads_pages_copied_from_an_rntuple_root_imported(tmp_path):
    ROOT = pytest.importorskip("ROOT", reason="ROOT does not import here (pip install root): no ROOT read-back")
    found = [p for p in shared_rntuples() if "RNTupleImporter" in p.name]
    if not found:
        pytest.skip("no RNTuple of ROOT's importer in the shared test data")
    out = tmp_path / "twice.root"
    cherenkov.merge([found[0], found[0]], out, mode="copy", progress=False)
    once = cherenkov.open(found[0])["Events"]
    assert ROOT.RNTupleReader.Open("Events", str(out)).GetNEntries() == 2 * once.num_entries
    columns = ["nMuon", "Muon_pt", "Jet_eta", "run"]
    values = _root_values(ROOT, ROOT.RDataFrame("Events", str(out)), columns)
    for column in columns:
        assert same_values(values[column], _plain(once.arrays([column])[column].to_list()) * 2), column


def test_rewritten_rntuples_keep_their_pages_compression(tmp_path):
    """ROOT writes RNTuple pages with ZSTD in files whose TFile setting says zlib: the default
    compression of a merge is the pages' (zlib level 1 made outputs 2.7x larger)."""
    found = [p for p in shared_rntuples() if cherenkov.open(p)._core.compression == 101]
    if not found:
        pytest.skip("no RNTuple in a file whose own setting differs from its pages' in the shared test data")
    name = next(k.split(";")[0] for k in cherenkov.open(found[0]).keys())
    pages = {f.compression for f in cherenkov.open(found[0])[name].fields if f.num_pages}
    assert pages == {505}
    out = tmp_path / "rewritten.root"
    cherenkov.merge([found[0]], out, mode="rewrite", progress=False)
    assert {f.compression for f in cherenkov.open(out)[name].fields if f.num_pages} == pages
