"""`cherenkov.dask` on RNTuples against ``uproot.dask`` (the oracle, which reads RNTuples too):
the same form, values and necessary columns; partitions of whole clusters; only the fields the
graph uses are read, each partition in one vector request, locally and over root:// and http://."""

import shutil
import stat
import tempfile
from pathlib import Path

import awkward as ak
import cherenkov
import dask
import pytest
from cherenkov.dask_arrays import _tree
from conftest import TESTDATA
from rntuple_support import ntuples_of, write_generated

dak = pytest.importorskip("dask_awkward")
uproot = pytest.importorskip("uproot")

DATA = Path(__file__).parent / "data"
NANO = DATA / "rntuple-root-nanolike.root"  # RNTupleImporter copy of the lab's TTree, 10 clusters
TYPES = DATA / "rntuple-root-types.root"  # every type ROOT writes, 3 cluster groups, 6 clusters
SHARED = sorted(TESTDATA.glob("*rntuple*.root")) if TESTDATA.is_dir() else []
pytestmark = pytest.mark.skipif(not NANO.exists(), reason=f"{NANO} is absent: run tests/data/make_rntuple_root.py")
# uproot cannot read the streamer field and takes a variant's per-cluster index as global.
TYPES_FIELDS_UPROOT_READS = [
    "i32", "u16", "flag", "str", "optional", "optvec", "uptr", "bits", "pair", "tuple", "atomic", "array",
    "arrays", "charge", "flavour", "particle", "particles", "set", "map", "nested", "rvec", "trunc", "quant",
    "half", "dtrunc", "unsplit", "proj_pt", "proj_pts", "late",
]  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """uproot-written RNTuples (every type its writer writes, 3 cluster groups) in two compressions."""
    where = tmp_path_factory.mktemp("dask-rntuple")
    return [write_generated(where, "zstd", uproot.ZSTD(3)), write_generated(where, "lz4", uproot.LZ4(1))]


@pytest.fixture(scope="module")
def nano_form():
    """uproot.dask's form of the whole NanoAOD-like RNTuple (uproot takes ~20 s to list its
    1313 fields, so the tests that are not about the form reuse it as `known_base_form`)."""
    return uproot.dask({str(NANO): "Events"}).form


def both(path, key, **kw):
    files = {str(path): key}
    return cherenkov.dask(files, **kw), uproot.dask(files, **kw)


def assert_same(ours, theirs, what):
    assert ours.form == theirs.form, what
    assert ours.fields == theirs.fields, what
    assert ak.array_equal(ours.compute(), theirs.compute(), equal_nan=True, dtype_exact=True), what


@pytest.mark.skipif(not SHARED, reason=f"no RNTuples in {TESTDATA}: set CHERENKOV_SHARED")
@pytest.mark.parametrize("path", SHARED, ids=[p.name for p in SHARED])
def test_shared_rntuples_equal_uproot_dask(path):
    for key in ntuples_of(path):
        assert_same(*both(path, key, step_size=100), (path.name, key))


def test_written_rntuples_equal_uproot_dask(written):
    for path in written:
        ours, theirs = both(path, "ntuple", step_size=100)
        assert ours.divisions == (0, 120, 197)  # clusters of 120, 2 and 75 entries, whole
        assert_same(ours, theirs, path.name)


def test_root_written_rntuples_equal_uproot_dask():
    assert_same(*both(NANO, "Events", filter_name=["Muon_*", "nMuon", "Jet_pt", "run", "HLT_IsoMu24"]), NANO.name)
    assert_same(*both(TYPES, "types", filter_name=TYPES_FIELDS_UPROOT_READS, step_size=1), TYPES.name)


def test_fields_with_some_subfields_selected_equal_uproot_dask(written):
    """A filter that selects some subfields keeps their records with only those (uproot's
    form); they are read alone and put back together, lists and options included."""
    picks = ["particles.pt", "particle.hits", "particle.charge", "nested", "optvec", "uptr.pt", "i32"]
    ours, theirs = both(TYPES, "types", filter_name=picks, step_size=1)
    assert str(theirs.form.content("particles").content) != str(
        cherenkov.open(TYPES)["types"].arrays(["particles"]).layout.form.content("particles").content
    )
    assert_same(ours, theirs, TYPES.name)
    picks = ["particles.charge", "record.b", "pair", "x_int8"]
    assert_same(*both(written[0], "ntuple", filter_name=picks, step_size=100), written[0].name)
    assert_same(*both(NANO, "Events", filter_name=["_collection15.Muon_pt", "_collection15.Muon_eta"], step_size=200), NANO.name)


def test_variants_equal_the_eager_read():
    """Variants, which uproot misreads after the first cluster, equal cherenkov's eager read
    (itself compared with ROOT's own values in test_rntuple_root_written.py)."""
    arr = cherenkov.dask({str(TYPES): "types"}, known_base_form=_form_of(TYPES, "types", ["variant", "i32"]), step_size=1)
    bounds = cherenkov.open(TYPES)["types"].cluster_boundaries.tolist()
    assert arr.npartitions == len(bounds) - 1 > 3
    eager = cherenkov.open(TYPES)["types"].arrays(["variant", "i32"])
    assert arr.form == eager.layout.form
    # partition by partition: concatenating them merges the union's int32 and float32 contents
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        assert ak.array_equal(arr.partitions[i].compute(), eager[lo:hi], dtype_exact=True), i


def _form_of(path, key, fields):
    return cherenkov.open(path)[key].arrays(fields, entry_stop=0).layout.form


def test_necessary_columns_equal_uproot_dask(written):
    ours, theirs = both(NANO, "Events", step_size=200)
    got = {}
    for arr, label in ((ours, "ours"), (theirs, "theirs")):
        result = ak.sum(arr.Muon_pt[arr.nMuon > 1], axis=1) + arr.MET_pt
        (got[label],) = dak.necessary_columns(result).values()
    assert got["ours"] == got["theirs"] == frozenset({"Muon_pt", "nMuon", "MET_pt"})
    # a subfield selects its top-level field, as in uproot
    ours, theirs = both(written[0], "ntuple")
    columns = [dak.necessary_columns(ak.num(a.particles.pt, axis=1) + a.record.a) for a in (ours, theirs)]
    assert [set(c.values()) for c in columns] == [{frozenset({"particles", "record"})}] * 2


def test_partitions_are_whole_clusters(nano_form):
    bounds = cherenkov.open(NANO)["Events"].cluster_boundaries.tolist()
    assert len(bounds) > 5
    files = {str(NANO): "Events"}
    assert list(cherenkov.dask(files, known_base_form=nano_form, step_size=1).divisions) == bounds
    step = bounds[2]  # two clusters: partitions of one or two clusters, never split
    divisions = list(cherenkov.dask(files, known_base_form=nano_form, step_size=step).divisions)
    assert set(divisions) <= set(bounds) and divisions[-1] == bounds[-1]
    assert len(bounds) // 2 <= len(divisions) < len(bounds)
    assert all(hi - lo <= step for lo, hi in zip(divisions, divisions[1:]))
    assert cherenkov.dask(files, known_base_form=nano_form).npartitions == 1


def test_only_the_fields_the_graph_uses_are_read(nano_form):
    """The whole file is offered (969 fields); a graph that uses two of them reads their pages
    and nothing else, one request per partition."""
    url = str(NANO)
    arr = cherenkov.dask({url: "Events"}, known_base_form=nano_form, step_size=130)
    assert len(arr.fields) > 900
    tree = _tree(url, "Events", {})
    used = tree["Muon_pt"].compressed_bytes + tree["nMuon"].compressed_bytes
    before = tree.file.source_counters()
    (total,) = dask.compute(ak.sum(arr.Muon_pt[arr.nMuon > 1]), scheduler="sync")
    after = tree.file.source_counters()
    assert after.requests - before.requests == arr.npartitions > 3
    assert 0 < after.bytes - before.bytes <= used < NANO.stat().st_size // 50
    eager = uproot.open(NANO)["Events"].arrays(["Muon_pt", "nMuon"])
    assert total == pytest.approx(ak.sum(eager.Muon_pt[eager.nMuon > 1]))


@pytest.fixture(scope="module")
def lab():
    if not (shutil.which("xrootd") and shutil.which("nginx")):
        pytest.skip("xrootd and nginx are not installed: run `make setup`")
    from cherenkov_lab import Lab

    where = Path(tempfile.mkdtemp(prefix="cherenkov-dask-rntuple-"))
    where.chmod(0o755)  # xrootd runs as nobody
    shutil.copyfile(NANO, where / NANO.name)
    (where / NANO.name).chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    with Lab(where) as lab:
        yield lab
    shutil.rmtree(where, ignore_errors=True)


@pytest.mark.parametrize("protocol", ["root", "http"])
def test_each_partition_is_one_vector_request_remotely(lab, nano_form, protocol):
    url = lab.url(protocol, NANO.name)
    arr = cherenkov.dask({url: "Events"}, known_base_form=nano_form, step_size=130)
    assert arr.npartitions > 3
    tree = _tree(url, "Events", {})
    before = tree.file.source_counters()
    (got,) = dask.compute(arr[["Muon_pt", "Jet_pt", "MET_pt", "event"]], scheduler="sync")
    after = tree.file.source_counters()
    assert after.round_trips - before.round_trips == arr.npartitions, protocol
    assert after.requests - before.requests == arr.npartitions, protocol
    expected = uproot.open(NANO)["Events"].arrays(["Muon_pt", "Jet_pt", "MET_pt", "event"])
    assert ak.array_equal(got, expected[got.fields], equal_nan=True, dtype_exact=True)
