"""`cherenkov.dask` against ``uproot.dask`` (the oracle): the same form, values and necessary
columns; cluster-aligned partitions read with one request each; picklable, tokenizable IO."""

import pickle

import awkward as ak
import cherenkov
import dask
import pytest
from conftest import TESTDATA

dak = pytest.importorskip("dask_awkward")
uproot = pytest.importorskip("uproot")

pytestmark = pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"{TESTDATA} is absent: set CHERENKOV_SHARED")
NANO = "nanolike-root6.40-zstd-4clusters.root"
CASES = [
    (NANO, "Events", ["Muon_*", "nMuon", "Jet_pt", "nJet", "run", "HLT_IsoMu24"]),
    ("uproot-HZZ.root", "events", None),
    ("uproot-Zmumu-zlib.root", "events", None),
    ("nanoAOD_2015_CMS_Open_Data_ttbar.root", "Events", ["Electron_*", "nElectron", "MET_pt", "luminosityBlock"]),
]


def both(name, tree, filter_name, **kw):
    files = {str(TESTDATA / name): tree}
    opts = {} if filter_name is None else {"filter_name": filter_name}
    return cherenkov.dask(files, **opts, **kw), uproot.dask(files, **opts, **kw)


@pytest.mark.parametrize("name, tree, filter_name", CASES, ids=[c[0] for c in CASES])
def test_forms_and_values_equal_uproot_dask(name, tree, filter_name):
    ours, theirs = both(name, tree, filter_name)
    assert ours.form == theirs.form
    assert ak.array_equal(ours.compute(), theirs.compute(), equal_nan=True)


def test_forms_with_documentation_and_full_paths_equal_uproot_dask():
    ours, theirs = both(NANO, "Events", ["Muon_pt", "Jet_*"], full_paths=True, ak_add_doc=True)
    assert ours.form == theirs.form


def test_necessary_columns_equal_uproot_dask():
    ours, theirs = both(NANO, "Events", None, step_size=500)
    for arr, label in ((ours, "ours"), (theirs, "theirs")):
        result = ak.sum(arr.Muon_pt[arr.nMuon > 1], axis=1) + arr.MET_pt
        cols = dak.necessary_columns(result)
        assert len(cols) == 1, label
        (arr_cols,) = cols.values()
        if label == "ours":
            ours_cols = arr_cols
        else:
            theirs_cols = arr_cols
    assert ours_cols == theirs_cols == frozenset({"Muon_pt", "nMuon", "MET_pt"})


def test_partitions_are_whole_clusters():
    tree = cherenkov.open(TESTDATA / NANO)["Events"]
    bounds = tree.cluster_boundaries.tolist()  # four clusters
    arr = cherenkov.dask({str(TESTDATA / NANO): "Events"}, filter_name="nMuon", step_size=1)
    assert list(arr.divisions) == bounds
    arr = cherenkov.dask({str(TESTDATA / NANO): "Events"}, filter_name="nMuon", step_size=bounds[2])
    assert list(arr.divisions) == [0, bounds[2], bounds[4]]
    whole = cherenkov.dask({str(TESTDATA / NANO): "Events"}, filter_name="nMuon")
    assert whole.npartitions == 1
    # A memory size, as uproot.dask takes it: the entries nMuon holds in it, in whole clusters.
    from cherenkov.dask_arrays import _cluster_steps

    entries = tree.entries_in(5_000, tree.select(["nMuon"]))
    sized = cherenkov.dask({str(TESTDATA / NANO): "Events"}, filter_name="nMuon", step_size="5 kB")
    assert 0 < entries < tree.num_entries and sized.npartitions > 1
    assert list(sized.divisions) == [0] + [stop for _, stop in _cluster_steps(tree, entries)]


def test_explicit_steps_as_coffea_gives_them():
    files = {str(TESTDATA / NANO): {"object_path": "Events", "steps": [[0, 700], [700, 2000]]}}
    ours, theirs = cherenkov.dask(files, filter_name="Jet_pt"), uproot.dask(files, filter_name="Jet_pt")
    assert ours.divisions == theirs.divisions == (0, 700, 2000)
    assert ak.array_equal(ours.compute(), theirs.compute())


def test_each_partition_is_one_request_for_the_projected_columns():
    from cherenkov.dask_arrays import _tree

    arr = cherenkov.dask({str(TESTDATA / NANO): "Events"}, step_size=1)
    tree = _tree(str(TESTDATA / NANO), "Events", {})
    before = tree.file.source_counters().requests
    (total,) = dask.compute(ak.sum(arr.Muon_pt, axis=None) + ak.sum(arr.Jet_eta, axis=None), scheduler="sync")
    assert tree.file.source_counters().requests - before == arr.npartitions == 4
    eager = tree.arrays(["Muon_pt", "Jet_eta"])
    assert total == pytest.approx(ak.sum(eager.Muon_pt, axis=None) + ak.sum(eager.Jet_eta, axis=None))


def test_io_function_pickles_and_tokenizes_by_what_it_reads():
    a = cherenkov.dask({str(TESTDATA / NANO): "Events"}, filter_name="Muon_pt")
    b = cherenkov.dask({str(TESTDATA / NANO): "Events"}, filter_name="Muon_pt")
    c = cherenkov.dask({str(TESTDATA / NANO): "Events"}, filter_name="Jet_pt")
    assert a.name == b.name != c.name
    layer = a.dask.layers[a.name]
    fn = layer.io_func if hasattr(layer, "io_func") else layer.mapping.func
    copy = pickle.loads(pickle.dumps(fn))
    assert dask.base.tokenize(copy) == dask.base.tokenize(fn)
    assert ak.array_equal(copy((0, 0, 100)), fn((0, 0, 100)))


def test_known_base_form_opens_no_file_with_uproot():
    files = {str(TESTDATA / NANO): "Events"}
    form = uproot.dask(files, filter_name=["Muon_pt", "nMuon"]).form
    ours = cherenkov.dask(files, known_base_form=form)
    assert ours.form == form
    assert ak.array_equal(ours.compute(), uproot.dask(files, filter_name=["Muon_pt", "nMuon"]).compute())


def test_distributed_workers_give_the_same_result():
    distributed = pytest.importorskip("distributed")
    files = {str(TESTDATA / NANO): "Events"}
    arr = cherenkov.dask(files, filter_name=["Jet_pt", "nJet"], step_size=500)
    with distributed.Client(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as client:
        got = client.compute(ak.sum(arr.Jet_pt, axis=1)).result(timeout=120)
    assert ak.array_equal(got, ak.sum(uproot.dask(files, filter_name=["Jet_pt", "nJet"]).compute().Jet_pt, axis=1))


def test_many_files_learn_the_form_from_one(tmp_path, monkeypatch):
    """Over eight files alike (links to one), uproot parses one of them (the form is learned once
    per layout; the others are opened at once by the engine), and the array has uproot.dask's
    form, divisions, values and necessary columns."""
    from cherenkov.uproot import Source

    files = {}
    for i in range(8):
        (tmp_path / f"f{i}.root").symlink_to(TESTDATA / NANO)
        files[str(tmp_path / f"f{i}.root")] = "Events"
    parsed = []
    init = Source.__init__

    def counted(self, file_path, **options):
        parsed.append(file_path)
        init(self, file_path, **options)

    monkeypatch.setattr(Source, "__init__", counted)
    names = ["Muon_pt", "nMuon", "MET_pt", "Jet_pt", "nJet"]
    ours = cherenkov.dask(files, filter_name=names, step_size=500)
    assert len(parsed) == 1, parsed
    theirs = uproot.dask(files, filter_name=names, step_size=500)
    assert ours.form == theirs.form
    assert ours.divisions[-1] == theirs.divisions[-1]
    results = [ak.sum(a.Muon_pt, axis=1) * (a.nMuon > 1) + a.MET_pt for a in (ours, theirs)]
    assert dak.necessary_columns(results[0]) == {ours.name: frozenset({"Muon_pt", "nMuon", "MET_pt"})}
    assert list(dak.necessary_columns(results[1]).values()) == list(dak.necessary_columns(results[0]).values())
    a, b = dask.compute(*results, scheduler="threads")
    assert len(a) == 8 * len(cherenkov.open(TESTDATA / NANO)["Events"]) and ak.array_equal(a, b, equal_nan=True)
