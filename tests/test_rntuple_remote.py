"""RNTuples over root:// and http:// from real servers on 127.0.0.1 (xrootd, nginx, through
toxiproxy): every field reads as it does locally; opening reads anchor, header, footer and the
first page list with the speculative head/tail read; a step's pages come in one vector read."""

import shutil
import stat
import tempfile
from pathlib import Path

import cherenkov
import pytest
from cherenkov_lab import Lab
from conftest import TESTDATA
from rntuple_support import assert_same_array, ntuples_of, write_as_rntuple, write_generated

uproot = pytest.importorskip("uproot")

NANO = TESTDATA / "nanolike-root6.40-zstd-4clusters.root"
SHARED = sorted(TESTDATA.glob("*rntuple*.root")) if TESTDATA.is_dir() else []
COMMITTED = sorted((Path(__file__).parent / "data").glob("rntuple*.root"))
pytestmark = [
    pytest.mark.skipif(not SHARED or not NANO.exists(), reason=f"no RNTuples or {NANO.name} in {TESTDATA}: set CHERENKOV_SHARED"),
    pytest.mark.skipif(
        not (shutil.which("xrootd") and shutil.which("nginx")), reason="xrootd and nginx are not installed: run `make setup`"
    ),
]
PROTOCOLS = ["http", "root"]


@pytest.fixture(scope="module")
def folder():
    """The shared RNTuples, the committed ROOT-written ones, uproot-written ones in every
    compression and the NanoAOD-like one, in a folder every server (xrootd runs as nobody) reads."""
    where = Path(tempfile.mkdtemp(prefix="cherenkov-rntuple-remote-"))
    where.chmod(0o755)
    for path in SHARED + COMMITTED:
        shutil.copyfile(path, where / path.name)
    compressions = {"zlib": uproot.ZLIB(4), "lzma": uproot.LZMA(2), "lz4": uproot.LZ4(1), "zstd": uproot.ZSTD(3), "uncompressed": None}
    for name, compression in compressions.items():
        write_generated(where, name, compression)
    write_as_rntuple(NANO, where / "nanolike-rntuple.root")  # four cluster groups, 7 MB
    write_with_cherenkov(NANO, where / "cherenkov-nanolike.root")
    for path in where.iterdir():
        path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def lab(folder):
    with Lab(folder) as lab:
        yield lab


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_rntuple_reads_the_same_as_locally(lab, folder, protocol):
    names = sorted(p.name for p in folder.iterdir() if p.name != "nanolike-rntuple.root")
    assert len(names) >= len(SHARED) + 5
    for name in names:
        local, remote = cherenkov.open(folder / name), cherenkov.open(lab.url(protocol, name))
        for key in ntuples_of(folder / name):
            ours, theirs = remote[key], local[key]
            assert ours.keys() == theirs.keys()
            readable = [f.path for f in theirs.fields if f.readable and "." not in f.path]
            remote_all, local_all = ours.arrays(readable), theirs.arrays(readable)
            for field in readable:
                assert_same_array(remote_all[field], local_all[field], (protocol, name, key, field))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_nanoaod_like_rntuple_reads_the_same_step_by_step(lab, folder, protocol):
    local = cherenkov.open(folder / "nanolike-rntuple.root")["Events"]
    remote = cherenkov.open(lab.url(protocol, "nanolike-rntuple.root"))["Events"]
    whole = local.arrays(["Jet_*", "Muon_*", "nJet", "event"])
    steps = list(remote.iterate(["Jet_*", "Muon_*", "nJet", "event"], step_size=500))
    assert [len(s) for s in steps] == [500] * 4
    for name in whole.fields:
        for i, step in enumerate(steps):
            assert_same_array(step[name], whole[name][500 * i : 500 * (i + 1)], (protocol, name, i))


def write_with_cherenkov(tree_path: Path, path: Path) -> None:
    """The `Events` TTree as an RNTuple written by cherenkov, in clusters of 1.5 MB."""
    events = cherenkov.open(tree_path)["Events"]
    names = [b.name for b in events.branches if b.readable and b.parent is None]
    data = events.arrays(names)
    with cherenkov.recreate(path) as f:
        ntuple = f.mktree("Events", {n: data[n].type.content for n in names}, format="rntuple", cluster_bytes=1_500_000)
        ntuple.extend({n: data[n] for n in names})


# Requests an RNTuple costs beyond its file's opening, until its fields and clusters are known.
OPENING = {
    # ROOT: the header in the opening's head, the anchor, footer and the one page list in its tail.
    "rntuple-root-nanolike.root": 0,
    # uproot: the header just before the anchor's key (read with it), then the page lists, which
    # it writes between the clusters (all in one read).
    "nanolike-rntuple.root": 2,
    # cherenkov: page list, header, footer and anchor at the end, in the opening's tail read.
    "cherenkov-nanolike.root": 0,
}


@pytest.mark.skipif(not COMMITTED, reason="tests/data has no RNTuples: run tests/data/make_rntuple_root.py")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_opening_an_rntuple_takes_the_speculative_read_and_what_the_layout_forces(lab, folder, protocol):
    for name, expected in OPENING.items():
        assert (folder / name).stat().st_size > 1 << 20  # larger than the opening's head and tail
        f = cherenkov.open(lab.url(protocol, name))
        opened = f._core.requests_since_open
        ntuple = f["Events"]
        assert len(ntuple.fields) > 900 and len(ntuple.cluster_boundaries) > 4
        assert f._core.requests_since_open - opened == expected, (protocol, name)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_steps_pages_come_in_one_vector_read(lab, protocol):
    """Each step reads every page of its clusters (1291 pages of 947 fields) in one vector read:
    one round trip per step, split into requests only by the server's limits (xrootd: 1024
    ranges per readv), whether the reader runs a step ahead or not."""
    for steps_ahead in (0, 3):
        f = cherenkov.open(lab.url(protocol, "nanolike-rntuple.root"))
        ntuple = f["Events"]
        names = [x.path for x in ntuple.fields if "." not in x.path]
        before = f.source_counters()
        pages = [stats.baskets for _, _, _, stats in ntuple.iterate_raw(names, step_size=500, steps_ahead=steps_ahead)]
        after = f.source_counters()
        assert len(pages) == 4 and min(pages) > 1000
        assert after.round_trips - before.round_trips == len(pages), (protocol, steps_ahead)
        assert after.requests - before.requests <= sum(p // 1024 + 1 for p in pages), (protocol, steps_ahead)
        assert after.ranges - before.ranges <= sum(pages)
