"""A coffea NanoAOD analysis (dimuon mass and jet pT with NanoAODSchema) gives identical
histograms with uproot's default source, with `cherenkov.uproot.Source` in coffea's eager,
virtual and dask modes, and with `cherenkov.dask`; a replica failing mid-run loses nothing."""

import base64
import gzip
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import awkward as ak
import cherenkov
import cherenkov.uproot
import dask
import hist
import pytest
from cherenkov_lab import Lab
from conftest import REPO, TESTDATA

coffea_nanoevents = pytest.importorskip("coffea.nanoevents")
uproot = pytest.importorskip("uproot")
NanoEventsFactory, NanoAODSchema = coffea_nanoevents.NanoEventsFactory, coffea_nanoevents.NanoAODSchema

pytestmark = pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"{TESTDATA} is absent (the NanoAOD schema comes from it)")


@pytest.fixture(scope="module")
def nano_dir():
    """Two NanoAOD-like files (3000 entries, 3 clusters each), from the lab's generator."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import make_nanolike
    finally:
        sys.path.remove(str(REPO / "bench"))
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-nano-"))
    folder.chmod(0o755)  # the servers run as nobody
    entries_per_cluster, make_nanolike.CHUNK_ENTRIES = make_nanolike.CHUNK_ENTRIES, 1000
    try:
        for seed in (1, 2):
            make_nanolike.ensure(folder / f"nano{seed}.root", entries=3000, seed=seed, writer="uproot", log=lambda *_: None)
    finally:
        make_nanolike.CHUNK_ENTRIES = entries_per_cluster
    for path in folder.iterdir():
        path.chmod(0o644)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def columns(events):
    """The analysis: opposite-charge dimuon mass of the two leading muons, and every jet's pT."""
    muons = events.Muon[ak.num(events.Muon) >= 2]
    first, second = muons[:, 0], muons[:, 1]
    mass = (first + second).mass[first.charge != second.charge]
    return mass, ak.flatten(events.Jet.pt)


def histograms(mass, jet_pt):
    h_mass = hist.Hist.new.Reg(60, 0, 300, name="mass").Double().fill(ak.to_numpy(mass))
    h_jet = hist.Hist.new.Reg(50, 0, 500, name="pt").Double().fill(ak.to_numpy(jet_pt))
    return h_mass, h_jet


def run(paths, mode, uproot_options=None):
    """Histograms over all files, NanoEvents built by coffea in ``mode``."""
    totals = None
    for path in paths:
        events = NanoEventsFactory.from_root(
            {str(path): "Events"}, schemaclass=NanoAODSchema, mode=mode, uproot_options=uproot_options or {}
        ).events()
        mass, jet_pt = columns(events)
        if mode == "dask":
            mass, jet_pt = dask.compute(mass, jet_pt, scheduler="threads")
        hs = histograms(mass, jet_pt)
        totals = hs if totals is None else tuple(a + b for a, b in zip(totals, hs))
    return totals


def assert_same(ours, theirs):
    assert ours[1].sum() > 0  # jets in every file (muon pairs may be few)
    for a, b in zip(ours, theirs):
        assert (a.values() == b.values()).all()


@pytest.fixture(scope="module")
def reference(nano_dir):
    """coffea's defaults: virtual mode over uproot's own source."""
    return run(sorted(nano_dir.glob("*.root")), "virtual")


def test_eager_mode_gives_the_same_histograms():
    """Eager mode builds every collection, cross-references included, which takes real NanoAOD
    (the generated files' resampled indices make it crawl): the CMS sample of the shared files."""
    path = TESTDATA / "nanoAOD_2015_CMS_Open_Data_ttbar.root"
    ours = run([path], "eager", {"handler": cherenkov.uproot.Source})
    assert_same(ours, run([path], "eager"))


@pytest.mark.parametrize("mode", ["virtual", "dask"])
def test_the_handler_gives_the_same_histograms(nano_dir, reference, mode):
    ours = run(sorted(nano_dir.glob("*.root")), mode, {"handler": cherenkov.uproot.Source})
    assert_same(ours, reference)


def test_cherenkov_dask_gives_the_same_histograms(nano_dir, reference):
    from cherenkov.dask_arrays import replacing_uproot_dask

    with replacing_uproot_dask():
        ours = run(sorted(nano_dir.glob("*.root")), "dask")
    assert_same(ours, reference)


def test_the_analysis_costs_a_request_per_collection_then_one_per_file(nano_dir):
    """coffea's virtual mode asks uproot for one column at a time. Through the handler, the first
    file's first miss of a collection brings the collection (muons, jets): two requests for the
    analysis' eight columns instead of eight; the next file alike has its used set on its way when
    uproot has read its tree: no request of uproot's own for the columns. (`speculate=False`:
    one request per column.)"""
    paths = [str(p) for p in sorted(nano_dir.glob("*.root"))]
    counts = {}
    for options in ({}, {"speculate": False}):
        cherenkov.uproot.forget_learned()
        counts[bool(options)] = []
        for path in paths:
            CountingSource.opened.clear()
            events = NanoEventsFactory.from_root(
                {path: "Events"}, schemaclass=NanoAODSchema, mode="virtual", uproot_options={"handler": CountingSource, **options}
            ).events()
            (source,) = CountingSource.sources
            CountingSource.sources.clear()
            before = source.file.source_counters().requests
            histograms(*columns(events))
            counts[bool(options)].append(source.file.source_counters().requests - before)
    cherenkov.uproot.forget_learned()
    assert counts[True] == [8, 8], counts  # nMuon, 5 muon members, nJet, Jet_pt
    assert counts[False] == [2, 0], counts


@pytest.mark.skipif(not (shutil.which("xrootd") and shutil.which("nginx")), reason="xrootd and nginx are not installed")
def test_a_replica_cut_mid_run_loses_nothing(nano_dir, reference):
    """Two replicas (XRootD and HTTP, each behind toxiproxy); the XRootD link is cut while coffea
    reads: every chunk still arrives (from the other replica), the histograms are the same, and
    nothing waits beyond the timeout (the test ends by itself)."""
    paths = sorted(nano_dir.glob("*.root"))
    with Lab(nano_dir) as lab:
        lab.set_rtt(20)
        replicas = {lab.url("root", p.name): [lab.url("http", p.name)] for p in paths}
        options = {"handler": cherenkov.uproot.Source, "replicas": replicas, "timeout": 5}
        cut = threading.Timer(0.5, lab.toxiproxy.enable, args=(lab.proxy_name("root"), False))
        cut.start()
        try:
            totals = None
            for url in replicas:
                events = NanoEventsFactory.from_root(
                    {url: "Events"}, schemaclass=NanoAODSchema, mode="virtual", uproot_options=options
                ).events()
                hs = histograms(*columns(events))
                totals = hs if totals is None else tuple(a + b for a, b in zip(totals, hs))
        finally:
            cut.cancel()
    assert_same(totals, reference)


class CountingSource(cherenkov.uproot.Source):
    """The handler, counting the files opened through it (at module level: coffea pickles the
    options, and a class defined in a test would be copied with its list)."""

    opened: list = []
    sources: list = []

    def __init__(self, file_path, **options):
        CountingSource.opened.append(file_path)
        super().__init__(file_path, **options)
        CountingSource.sources.append(self)


def test_runner_and_apply_to_fileset_take_the_handler(nano_dir, reference):
    """coffea's two ways to run a processor over a fileset, `processor.Runner` (chunks of 1000
    entries, iterative executor) and `dataset_tools.apply_to_fileset` (after `preprocess`, with
    Dask), both with ``uproot_options={"handler": cherenkov.uproot.Source}``."""
    from coffea import processor
    from coffea.dataset_tools import apply_to_fileset, preprocess

    paths = [str(p) for p in sorted(nano_dir.glob("*.root"))]
    opened = CountingSource.opened
    options = {"handler": CountingSource}

    class Dimuons(processor.ProcessorABC):
        def process(self, events):
            mass, jet_pt = histograms(*columns(events))
            return {"mass": mass, "jet_pt": jet_pt}

        def postprocess(self, accumulator):
            return accumulator

    runner = processor.Runner(executor=processor.IterativeExecutor(), schema=NanoAODSchema, chunksize=1000)
    out = runner({"nano": paths}, Dimuons(), treename="Events", uproot_options=options)
    assert_same((out["mass"], out["jet_pt"]), reference)
    assert set(opened) == set(paths)
    opened.clear()

    fileset = {"nano": {"files": {p: "Events" for p in paths}}}
    available, _ = preprocess(fileset, step_size=1000, uproot_options=options)
    graphs = apply_to_fileset(columns, available, schemaclass=NanoAODSchema, uproot_options=options)
    (computed,) = dask.compute(graphs, scheduler="threads")
    assert_same(histograms(*computed["nano"]), reference)
    assert set(opened) == set(paths)


def test_preprocess_takes_the_files_opened_ahead(nano_dir, monkeypatch):
    """`cherenkov.uproot.open_ahead(fileset)` opens every file of the fileset at once, in the
    background; coffea's `preprocess` through the handler then opens none of them itself (each
    file opened once, by the opening threads), and gives what it gives with uproot's source."""
    import cherenkov.uproot.source as source
    from coffea.dataset_tools import preprocess

    opened_in = []

    class Recorded(cherenkov.File):
        def __init__(self, urls, **options):
            opened_in.append(threading.current_thread().name)
            super().__init__(urls, **options)

    monkeypatch.setattr(source.cherenkov, "File", Recorded)
    paths = [str(p) for p in sorted(nano_dir.glob("*.root"))]
    fileset = {"nano": {"files": {p: "Events" for p in paths}}}
    assert cherenkov.uproot.open_ahead(fileset) == len(paths)
    ours, _ = preprocess(fileset, step_size=1000, uproot_options={"handler": cherenkov.uproot.Source})
    theirs, _ = preprocess(fileset, step_size=1000)
    assert len(opened_in) == len(paths), opened_in
    assert all(name.startswith("cherenkov-open") for name in opened_in), opened_in
    assert form_of(ours["nano"]) == form_of(theirs["nano"])
    for p in paths:
        a, b = ours["nano"]["files"][p], theirs["nano"]["files"][p]
        assert (a["num_entries"], a["steps"], a["uuid"]) == (b["num_entries"], b["steps"], b["uuid"])
        assert a["steps"] == [[0, 1000], [1000, 2000], [2000, 3000]]


def form_of(dataset):
    """A preprocessed dataset's form (compressed with gzip, whose header has the time)."""
    return gzip.decompress(base64.b64decode(dataset["compressed_form"]))
