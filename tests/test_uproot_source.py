"""`cherenkov.uproot.Source` as uproot's handler: every TTree of ../shared/testdata reads the same
as with uproot's default source, locally and over root:// and http://; the Source contract
(notifications, counters, pickling, closing, errors delivered through the chunks)."""

import os
import pickle
import queue
import shutil

import awkward as ak
import cherenkov
import cherenkov.uproot
import pytest
from cherenkov_lab import Lab
from conftest import shared_root_files

uproot = pytest.importorskip("uproot")

FILES = shared_root_files()
needs_files = pytest.mark.skipif(not FILES, reason="../shared/testdata is absent: set CHERENKOV_SHARED")
needs_servers = pytest.mark.skipif(
    not (shutil.which("xrootd") and shutil.which("nginx")), reason="xrootd and nginx are not installed: run `make setup`"
)
NANO = "nanolike-root6.40-zstd-4clusters.root"


@pytest.fixture(scope="module")
def lab(testdata):
    with Lab(testdata) as lab:
        yield lab


def branch_arrays(tree):
    """Every branch uproot can read, as awkward arrays; what it cannot read, as its error type."""
    out = {}
    for name in tree.keys(recursive=True):
        try:
            out[name] = tree[name].array(library="ak")
        except Exception as e:  # uproot's own limits: both readers must hit them alike
            out[name] = type(e).__name__
    return out


def assert_same_file(path_or_url, local_path, **options):
    with uproot.open(local_path) as theirs, uproot.open(path_or_url, handler=cherenkov.uproot.Source, **options) as ours:
        assert ours.keys() == theirs.keys()
        trees = [k for k, cls in theirs.classnames().items() if cls in ("TTree", "TNtuple")]
        for key in trees:
            a, b = branch_arrays(ours[key]), branch_arrays(theirs[key])
            assert a.keys() == b.keys(), (local_path.name, key)
            for name in a:
                if isinstance(b[name], str):
                    assert a[name] == b[name], (local_path.name, key, name)
                else:
                    assert ak.array_equal(a[name], b[name], equal_nan=True), (local_path.name, key, name)
        return len(trees)


@needs_files
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_tree_reads_as_with_uproots_source(path):
    assert_same_file(path, path)


@needs_files
@needs_servers
@pytest.mark.parametrize("protocol", ["root", "http"])
def test_every_tree_reads_the_same_remotely(lab, protocol):
    trees = sum(assert_same_file(lab.url(protocol, p.name), p) for p in FILES)
    assert trees > 30


@needs_files
@needs_servers
def test_replicas_serve_one_file(lab, testdata):
    """A list of replicas (here the same file over both protocols) is read as one file."""
    url = lab.url("root", NANO)
    with uproot.open(url, handler=cherenkov.uproot.Source, replicas=[lab.url("http", NANO)]) as f:
        pt = f["Events"]["Muon_pt"].array(library="ak")
        assert len(f.file.source.file.replicas()) == 2
    assert ak.array_equal(pt, uproot.open(testdata / NANO)["Events"]["Muon_pt"].array(library="ak"))


@needs_files
def test_opening_is_answered_from_the_speculative_read(testdata):
    """uproot's opening reads (header, directory, keys, streamers, the TTree) come from the head
    and tail cherenkov read while opening: reaching a tree's branches costs no further request (in
    a process that has read no file alike: one that has sends the used set on its way there)."""
    cherenkov.uproot.forget_learned()
    with uproot.open(testdata / NANO, handler=cherenkov.uproot.Source) as f:
        source = f.file.source
        opened = source.file.source_counters().requests
        tree = f["Events"]
        assert len(tree.keys()) == 947
        assert source.file.source_counters().requests == opened
        assert source.num_requests >= 3  # uproot asked for several metadata objects


@needs_files
def test_chunks_are_one_request_and_all_notified(testdata):
    source = cherenkov.uproot.Source(str(testdata / NANO))
    ranges = [(i * 1000, i * 1000 + 100) for i in range(50)]
    before = source.file.source_counters().requests
    notes = queue.Queue()
    chunks = source.chunks(ranges, notes)
    delivered = {id(notes.get(timeout=30)) for _ in ranges}
    assert delivered == {id(c) for c in chunks}
    assert source.file.source_counters().requests - before <= 1
    raw = (testdata / NANO).read_bytes()
    for c, (start, stop) in zip(chunks, ranges):
        assert c.raw_data.tobytes() == raw[start:stop]
        assert not c.raw_data.flags.writeable
    assert (source.num_requests, source.num_requested_chunks, source.num_requested_bytes) == (1, 50, 5000)


@needs_files
def test_errors_reach_every_chunk(testdata):
    """A range past the end fails the whole request: each chunk is still notified, and reading
    it raises the error naming the file."""
    source = cherenkov.uproot.Source(str(testdata / NANO))
    notes = queue.Queue()
    chunks = source.chunks([(0, 10), (source.num_bytes - 5, source.num_bytes + 5)], notes)
    for _ in chunks:
        notes.get(timeout=30)
    for c in chunks:
        with pytest.raises(Exception, match=NANO):
            c.wait()


@needs_files
def test_pickled_sources_reopen_lazily_and_close(testdata):
    source = cherenkov.uproot.Source(str(testdata / NANO))
    copy = pickle.loads(pickle.dumps(source))
    assert copy._file is None  # not reopened until used
    assert copy.chunk(0, 4).raw_data.tobytes() == b"root"
    assert copy.num_bytes == source.num_bytes
    with source:
        assert not source.closed
    assert source.closed
    with pytest.raises(OSError, match="closed"):
        source.chunk(0, 4)


def test_a_missing_file_raises_what_uproot_raises(tmp_path):
    """uproot's own source raises FileNotFoundError for a missing local file (what coffea and
    callers of uproot.iterate catch): the same through the handler."""
    missing = tmp_path / "nothing-here.root"
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        uproot.open(missing, handler=cherenkov.uproot.Source)
    with pytest.raises(FileNotFoundError):
        uproot.open(missing)
    for handler in (None, cherenkov.uproot.Source):  # as coffea's and uproot.iterate's callers see it
        with pytest.raises(FileNotFoundError):
            list(uproot.iterate({str(missing): "Events"}, handler=handler))


def path_forms(folder, name):
    """Every way of naming a local file that uproot's default source (fsspec) accepts."""
    absolute = str(folder / name)
    relative = os.path.relpath(absolute)
    return [absolute, relative, f"file:{absolute}", f"file://{absolute}", f"file://{relative}", f"file:{relative}", folder / name]


@pytest.mark.parametrize("name", ["file.root", "my%20file.root", "my file.root", "file%2Eroot", "my%E2%80%92file.root"])
def test_paths_as_uproots_default_source_takes_them(tmp_path, monkeypatch, name):
    """Relative paths, ``file:`` URIs with one slash, two or three, names with percent signs
    (read literally, as fsspec reads them): the handler opens what uproot opens."""
    folder = tmp_path / "some path"
    folder.mkdir()
    with uproot.recreate(folder / name) as f:
        f.mktree("tree", {"x": "int64"})
        f["tree"].extend({"x": [1, 2, 3]})
    monkeypatch.chdir(tmp_path)
    for form in path_forms(folder, name):
        assert uproot.open(form)["tree"]["x"].array().tolist() == [1, 2, 3], form
        with uproot.open(form, handler=cherenkov.uproot.Source) as f:
            assert f["tree"]["x"].array().tolist() == [1, 2, 3], form
            assert f.file.source.file is not None, form  # read by cherenkov


def test_other_protocols_are_read_as_uproot_reads_them(tmp_path):
    """fsspec's protocols that cherenkov does not speak (here a file inside a zip archive, and a
    chained URL) are read as uproot's default source reads them."""
    import zipfile

    with uproot.recreate(tmp_path / "inner.root") as f:
        f.mktree("tree", {"x": "int64"})
        f["tree"].extend({"x": [4, 5]})
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as z:
        z.write(tmp_path / "inner.root", "inner.root")
    for url in (f"zip://inner.root::file://{tmp_path / 'a.zip'}", f"simplecache::file://{tmp_path / 'inner.root'}"):
        with uproot.open(url, handler=cherenkov.uproot.Source) as f:
            assert f["tree"]["x"].array().tolist() == [4, 5]
            assert f.file.source.file is None


def test_earlier_options_are_accepted_with_a_warning(testdata):
    with pytest.warns(DeprecationWarning, match="tree_aware"):
        with uproot.open(testdata / NANO, handler=cherenkov.uproot.Source, tree_aware=True) as f:
            assert f["Events"].num_entries > 0


@needs_files
@needs_servers
def test_every_open_option_reaches_the_source(lab, testdata, tmp_path):
    """uproot's handler takes all of `cherenkov.open`'s options: here a disk cache, whose second
    pass reads the branches without a request to the server."""
    url = lab.url("http", NANO)
    for _ in range(2):
        with uproot.open(url, handler=cherenkov.uproot.Source, cache=tmp_path, timeout=10) as f:
            pt = f["Events"]["Muon_pt"].array(library="ak")
            counters = f.file.source.file.source_counters()
    assert counters.disk_cache_hits > 0 and counters.disk_cache_misses == 0, counters
    assert ak.array_equal(pt, uproot.open(testdata / NANO)["Events"]["Muon_pt"].array(library="ak"))
    with pytest.raises(TypeError, match="unexpected option 'cache_size'"):
        cherenkov._core.RootFile.open([str(testdata / NANO)], cache_size=1)


@needs_files
def test_a_file_open_in_cherenkov_is_not_opened_again(testdata):
    """``opened=``: uproot reads through a file cherenkov already opened (as `cherenkov.dask`
    does to learn the forms) instead of opening it again."""
    f = cherenkov.open(testdata / NANO)
    with uproot.open(testdata / NANO, handler=cherenkov.uproot.Source, opened=f) as theirs:
        assert theirs.file.source.file is f
        pt = theirs["Events"]["Muon_pt"].array(library="ak")
    assert ak.array_equal(pt, uproot.open(testdata / NANO)["Events"]["Muon_pt"].array(library="ak"))
    source = pickle.loads(pickle.dumps(theirs.file.source))
    assert source.file is not f  # a pickled source opens the file itself
