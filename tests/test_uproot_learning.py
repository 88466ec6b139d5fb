"""What `cherenkov.uproot.Source` learns of the baskets uproot asks for (`engine/raw` in the core),
counted in requests: columns touched one at a time (coffea's virtual arrays) cost one request per
collection in the first file and none beyond the one on its way in the next file alike; a set read
step by step (uproot.iterate) is read ahead; uproot's metadata reads cost no request; values equal
uproot's own source's; ``speculate=False`` reads exactly what uproot asks for."""

import threading

import awkward as ak
import cherenkov
import cherenkov.uproot
import numpy as np
import pytest

uproot = pytest.importorskip("uproot")

ENTRIES, CLUSTERS = 3000, 3
COLUMNS = ["nMuon", "Muon_pt", "Muon_eta", "Muon_phi", "Muon_charge", "nJet", "Jet_pt", "MET_pt"]


def write(path, seed):
    """A NanoAOD-shaped tree written by uproot in three clusters: collections Muon, Jet and
    Electron (a counter and five members each), a flat record MET, and run."""
    rng = np.random.default_rng(seed)
    with uproot.recreate(path) as f:
        for c in range(CLUSTERS):
            n = ENTRIES // CLUSTERS
            data = {"run": np.full(n, 1, np.int32), "MET_pt": rng.exponential(30, n), "MET_phi": rng.uniform(-3, 3, n)}
            for name in ("Muon", "Jet", "Electron"):
                counts = rng.poisson(2, n)
                fields = {x: ak.unflatten(rng.normal(size=counts.sum()), counts) for x in ("pt", "eta", "phi", "mass", "charge")}
                data[name] = ak.zip(fields)
            if c == 0:
                f.mktree("Events", {k: v.type.content if isinstance(v, ak.Array) else v.dtype for k, v in data.items()})
            f["Events"].extend(data)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("learning")
    return [str(write(folder / f"events{i}.root", i)) for i in range(3)]


@pytest.fixture(autouse=True)
def fresh():
    cherenkov.uproot.forget_learned()  # every test starts as a new analysis would
    yield
    cherenkov.uproot.forget_learned()


def data_requests(path, read, **options):
    """Requests the file's source made once uproot had the tree, while `read(tree)` ran."""
    with uproot.open(path, handler=cherenkov.uproot.Source, **options) as f:
        tree = f["Events"]
        before = f.file.source.file.source_counters().requests
        out = read(tree)
        return f.file.source.file.source_counters().requests - before, out


def one_at_a_time(tree):
    return {name: tree[name].array(library="ak") for name in COLUMNS}


def test_the_layout_is_three_clusters(files):
    tree = cherenkov.open(files[0])["Events"]
    assert len(tree.cluster_boundaries) == CLUSTERS + 1


def test_columns_one_at_a_time_cost_a_request_per_collection_then_none(files):
    """A first miss brings its collection (Muon with nMuon, Jet with nJet, MET_pt with MET_phi):
    3 requests for 8 columns. The next files alike have their used set fetched while uproot
    reads the tree, in one request: uproot's reads of the columns cost none."""
    counts = []
    for path in files:
        n, got = data_requests(path, one_at_a_time)
        counts.append(n)
        with uproot.open(path) as theirs:
            for name in COLUMNS:
                assert ak.array_equal(got[name], theirs["Events"][name].array(library="ak")), name
    plain = [data_requests(p, one_at_a_time, speculate=False)[0] for p in files]
    assert plain == [len(COLUMNS)] * 3  # one request per column without learning
    assert counts[0] == 3, counts
    assert counts[1:] == [0, 0], counts  # their one request went while uproot read the tree


def test_the_next_file_costs_one_request_from_open_to_values(files):
    """From `uproot.open` to the last column: opening (head and tail, one request for a local
    file), uproot's metadata (the keys list, streamers and tree fetched together when not in the
    tail) and the used set on its way: at most three requests."""
    data_requests(files[0], one_at_a_time)
    with uproot.open(files[1], handler=cherenkov.uproot.Source) as f:
        one_at_a_time(f["Events"])
        assert f.file.source.file.source_counters().requests <= 3
        assert f.file.source.num_requests > 3  # uproot asked many times


def test_a_set_read_step_by_step_is_read_ahead(files):
    """uproot.iterate-like: the same branches cluster after cluster, each step one `arrays` call.
    The first step asks for its set (one request) and the next steps are read ahead (one more
    request for both): the reader never waits for them."""

    def steps(tree):
        bounds = cherenkov.open(files[0])["Events"].cluster_boundaries
        return [tree.arrays(COLUMNS, entry_start=a, entry_stop=b) for a, b in zip(bounds[:-1], bounds[1:])]

    n, got = data_requests(files[0], steps)
    assert n == 2, n
    with uproot.open(files[0]) as theirs:
        assert ak.array_equal(ak.concatenate(got), theirs["Events"].arrays(COLUMNS))


def test_uproots_metadata_reads_cost_no_request(files):
    """uproot reads the keys list, the streamer infos and the tree's key, each once or more: the
    engine fetched them once, with what opening needed, and serves uproot's reads from memory."""
    with uproot.open(files[0], handler=cherenkov.uproot.Source) as f:
        tree = f["Events"]
        assert set(COLUMNS) <= set(tree.keys())
        source = f.file.source
        assert source.num_requests >= 3
        assert source.file.source_counters().requests <= 2  # opening, then what uproot reads


def test_guesses_are_counted_and_settled(files):
    """Collection members guessed and never read are wasted bytes in the file's counters; the
    used ones are counted used."""
    with uproot.open(files[0], handler=cherenkov.uproot.Source) as f:
        one_at_a_time(f["Events"])
        core = f.file.source.file
    engine = core.stats().engine
    assert engine.speculative_used_bytes > 0
    assert engine.speculative_wasted_bytes > 0  # Muon_mass, Jet_eta, ... were never read
    assert engine.speculative_bytes == engine.speculative_used_bytes + engine.speculative_wasted_bytes


def test_learning_follows_speculate(files):
    """``speculate=False``: uproot's requests go out as asked, one per `chunks` call."""
    n, _ = data_requests(files[0], one_at_a_time, speculate=False)
    assert n == len(COLUMNS)
    n, _ = data_requests(files[1], one_at_a_time, speculate=False)
    assert n == len(COLUMNS)


def test_files_opened_ahead_are_taken_however_early(files):
    """`open_ahead` then uproot at once, again and again: a Source that asks for its file before the
    opening thread took it up gets it all the same (never waits forever), with uproot's values."""
    got = []

    def read_all():
        for _ in range(20):
            cherenkov.uproot.open_ahead(files)
            got.append([uproot.open(p, handler=cherenkov.uproot.Source)["Events"].num_entries for p in files])

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(120)
    assert not reader.is_alive(), "a Source waited for a file opened ahead"
    assert got == [[ENTRIES] * len(files)] * 20


def test_a_file_that_failed_to_open_ahead_is_not_opened_again(tmp_path, monkeypatch):
    """The error of opening ahead is the Source's error: a silent server would otherwise cost its
    timeout twice (once ahead, once again when uproot opens the file)."""
    missing = str(tmp_path / "nothing-here.root")
    opened = []
    real = cherenkov.File

    def counting(*args, **kwargs):
        opened.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(cherenkov, "File", counting)
    cherenkov.uproot.open_ahead([missing])
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        uproot.open(missing, handler=cherenkov.uproot.Source)
    assert len(opened) == 1
