"""Lazy chunks that learn: startup cache, prefetch of the learned set, miss (trigger) cache, and a
profile that carries over to the next file. Round trips come from the file's byte source: on the
local disk, and on real servers (nginx, xrootd) behind toxiproxy, where a vectored read may be
split into several requests sent together (one round trip)."""

import shutil

import awkward as ak
import cherenkov
import pytest
from cherenkov_lab import Lab
from conftest import wait_for

USED = ["Muon_pt", "Muon_eta", "nMuon"]
TRIGGER = ["Jet_pt", "Jet_eta", "Electron_pt"]


NAME = "nanolike-root6.40-zstd-4clusters.root"


@pytest.fixture(scope="module")
def lab(testdata):
    if not (shutil.which("xrootd") and shutil.which("nginx")):
        pytest.skip("xrootd and nginx are not installed: run `make setup`")
    with Lab(testdata) as lab:
        yield lab


@pytest.fixture(params=["local", "http", "root"])
def nanolike_path(request, testdata):
    """The file as a path, or as an http:// or root:// URL."""
    if request.param == "local":
        return testdata / NAME
    return request.getfixturevalue("lab").url(request.param, NAME)


def round_trips(f):
    return f.source_counters().round_trips


def run(tree, profile, **options):
    """Touch USED in every chunk and TRIGGER in every other chunk; return the values read."""
    seen = {n: [] for n in USED + TRIGGER}
    for i, chunk in enumerate(tree.chunks(step_size=500, profile=profile, **options)):
        names = USED + (TRIGGER if i % 2 == 1 else [])
        for n in names:
            seen[n].append(chunk[n])
    return seen


def assert_chunks_equal(seen, full):
    """Each branch of USED, concatenated over the chunks `seen`, equals the plain read `full`."""
    for n in USED:
        assert ak.to_list(ak.concatenate([s[n] for s in seen])) == ak.to_list(full[n]), n


def test_chunks_give_the_same_values_as_a_plain_read(nanolike_path):
    tree = cherenkov.open(nanolike_path)["Events"]
    seen = run(tree, cherenkov.AccessProfile())
    full = tree.arrays(USED + TRIGGER)
    for n in USED:
        assert ak.to_list(ak.concatenate(seen[n])) == ak.to_list(full[n]), n
    odd = [full[n][500:1000] for n in TRIGGER] + [full[n][1500:2000] for n in TRIGGER]
    assert [ak.to_list(x) for x in seen["Jet_pt"]] == [ak.to_list(odd[0]), ak.to_list(odd[3])]


def test_training_startup_and_miss_caches(nanolike_path):
    """(The miss cache alone: with speculation the trigger set, after its first chunk, is fetched
    ahead; see test_speculation.py.)"""
    f = cherenkov.open(nanolike_path, speculate=False)
    tree = f["Events"]
    profile = cherenkov.AccessProfile()
    before = round_trips(f)
    run(tree, profile)
    stats = tree.last_chunk_stats
    assert profile.trained and sorted(profile.learned) == sorted(USED)
    assert sorted(profile.missed) == sorted(TRIGGER)
    assert stats.startup_fetches == 1
    # chunk 1: the first trigger branch reads every unread branch of the chunk in one request;
    # chunk 3: the learned miss set in one request
    assert stats.miss_fetches == 2
    # 1 startup + 3 prefetched chunks + 2 miss fetches
    assert round_trips(f) - before == 6


def test_a_second_file_needs_no_training(nanolike_path):
    """(The miss cache alone: speculation, which could fetch the trigger set ahead, is off; see
    test_speculation.py.)"""
    profile = cherenkov.AccessProfile()
    run(cherenkov.open(nanolike_path, speculate=False)["Events"], profile)
    f = cherenkov.open(nanolike_path, speculate=False)
    tree = f["Events"]
    before = round_trips(f)
    run(tree, profile)
    stats = tree.last_chunk_stats
    assert stats.startup_fetches == 0
    assert stats.miss_fetches == 2  # one per trigger chunk, all three branches together
    assert round_trips(f) - before == 4 + 2


def test_switches_turn_parts_off(nanolike_path):
    f = cherenkov.open(nanolike_path, speculate=False)
    tree = f["Events"]
    before = round_trips(f)
    run(tree, cherenkov.AccessProfile(), learning=False)
    stats = tree.last_chunk_stats
    assert stats.startup_fetches == 0 and stats.hits == 0
    assert stats.miss_fetches == 4 * len(USED) + 2 * len(TRIGGER)
    assert round_trips(f) - before == stats.miss_fetches
    profile = cherenkov.AccessProfile()
    run(tree, profile)
    before = round_trips(f)
    run(tree, profile, steps_ahead=0)  # trained, nothing read ahead: the learned set on first use
    stats = tree.last_chunk_stats
    assert (stats.learned_fetches, stats.miss_fetches, stats.startup_fetches) == (4, 2, 0)
    assert round_trips(f) - before == 4 + 2


def test_a_training_chunk_that_asks_for_its_set_at_once_reads_the_next_chunks_meanwhile(nanolike_path):
    """`arrays(names)` in the training chunk names the learned set before its first read is back:
    the next chunks' read-ahead goes out with that read, not a round trip after the chunk ends."""
    f = cherenkov.open(nanolike_path, speculate=False)
    tree = f["Events"]
    full = tree.arrays(USED)
    before = round_trips(f)
    chunks = tree.chunks(step_size=500, profile=cherenkov.AccessProfile())
    seen = []
    for i, chunk in enumerate(chunks):
        seen.append(chunk.arrays(USED))
        if i == 0:  # the startup read and chunks 1..3 of the set, before the training chunk ends
            wait_for(lambda: round_trips(f) - before >= 4, 10, "the read-ahead of chunks 1..3")
    assert round_trips(f) - before == 4  # nothing asked for twice
    stats = tree.last_chunk_stats
    assert (stats.startup_fetches, stats.learned_fetches, stats.misses) == (1, 0, 0)
    assert_chunks_equal(seen, full)


def test_a_set_named_in_part_gets_what_the_chunk_used_beyond_it(nanolike_path):
    """Training names two branches, then uses a third: the third joins the read-ahead, no chunk
    misses, nothing is asked for twice, and every value is right."""
    f = cherenkov.open(nanolike_path, speculate=False)
    tree = f["Events"]
    full = tree.arrays(USED)
    before = round_trips(f)
    seen = []
    for chunk in tree.chunks(step_size=500, profile=cherenkov.AccessProfile()):
        got = chunk.arrays(USED[:2])
        seen.append({n: got[n] for n in USED[:2]} | {USED[2]: chunk[USED[2]]})
    stats = tree.last_chunk_stats
    assert (stats.startup_fetches, stats.misses) == (1, 0)
    # The read-ahead of the two had begun k of chunks 1..3 when the set grew (k depends on timing):
    # the third is read for those k (chunk 1 on use, the rest ahead), all three for the others.
    # So startup + 3 chunks + k, nothing asked for twice.
    k = round_trips(f) - before - (1 + 3)
    assert 0 <= k <= 3
    assert stats.learned_fetches == (k > 0)
    assert_chunks_equal(seen, full)
