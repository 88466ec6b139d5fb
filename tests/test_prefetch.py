"""Prefetched iteration: same values as a plain read, straddling baskets read once, bounded memory,
early exit cancels, and the read-ahead deepens while the consumer waits for the network (real
nginx and xrootd behind toxiproxy on 127.0.0.1)."""

import shutil
import tempfile
import time
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
import uproot
from cherenkov.arrays import to_awkward_layout
from cherenkov_lab import Lab


@pytest.fixture()
def nanolike(testdata):
    return cherenkov.open(testdata / "nanolike-root6.40-zstd-4clusters.root")["Events"]


def readable(tree, n=None):
    return [b.path for b in tree.branches if b.readable][:n]


@pytest.mark.parametrize("steps_ahead,budget", [(0, 256 << 20), (3, 256 << 20), (7, 1)])
def test_iterate_equals_full_read(nanolike, steps_ahead, budget):
    names = readable(nanolike, 200)
    full = nanolike.arrays(names)
    steps = list(nanolike.iterate(names, step_size=400, steps_ahead=steps_ahead, memory_budget=budget))
    assert len(steps) == 4  # four clusters of 500 entries
    assert ak.to_list(ak.concatenate(steps)) == ak.to_list(full)


def test_baskets_straddling_steps_are_fetched_once(testdata):
    tree = cherenkov.open(testdata / "uproot-HZZ.root")["events"]
    names = readable(tree)
    indices = [tree[n].index for n in names]
    steps = [(0, 7), (7, 500), (500, 1201), (1201, 2421)]  # not aligned with any basket
    got = list(tree._core.iterate(indices, steps, 1 << 30, 3))
    assert [(lo, hi) for lo, hi, _, _ in got] == steps
    _, single = tree.read(names)
    assert sum(stats.compressed_bytes for *_, stats in got) == single.compressed_bytes
    for i, name in enumerate(names):
        pieces = [ak.Array(to_awkward_layout(branches[i])) for _, _, branches, _ in got]
        assert ak.to_list(ak.concatenate(pieces)) == ak.to_list(tree.arrays([name])[name]), name


def test_leaving_early_cancels_and_the_tree_stays_usable(nanolike):
    names = readable(nanolike, 50)
    for i, _chunk in enumerate(nanolike.iterate(names, step_size=100)):
        if i == 1:
            break
    assert len(nanolike.arrays(names[:3], library="np")[names[0]]) == nanolike.num_entries


def test_unsupported_branch_fails_before_reading(testdata):
    tree = cherenkov.open(testdata / "uproot-mc10events.root")["Events"]
    with pytest.raises(cherenkov.UnsupportedBranch, match="triggerBits"):
        next(iter(tree.iterate(["Info/triggerBits"])))


def test_progress_callback_sees_every_step(nanolike):
    updates = []
    for _ in nanolike.iterate(["Muon_pt"], step_size=500, progress=updates.append):
        pass
    assert [u.entries for u in updates] == [500, 1000, 1500, 2000]
    assert updates[-1].total_entries == 2000 and updates[-1].bytes > 0
    assert updates[-1].eta_seconds == 0 and updates[-1].entries_per_second > 0


STEPS, STEP = 16, 40_000
MANY = 64  # clusters of STEP // 4 entries in "many.root"


@pytest.fixture(scope="module")
def remote_steps():
    """10 MB files of 16 clusters ("steps.root") and of 64 ("many.root", and a copy), two branches
    each, on nginx and xrootd, 60 ms away."""
    if not (shutil.which("xrootd") and shutil.which("nginx")):
        pytest.skip("xrootd and nginx are not installed: run `make setup`")
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-deepen-"))
    folder.chmod(0o755)
    rng = np.random.default_rng(3)
    for name, clusters, size in (("steps.root", STEPS, STEP), ("many.root", MANY, STEP // 4)):
        with uproot.recreate(folder / name, compression=uproot.ZLIB(1)) as f:
            f.mktree("Events", {"a": "f8", "b": "f8"})
            for _ in range(clusters):
                f["Events"].extend({"a": rng.normal(size=size), "b": rng.normal(size=size)})
        (folder / name).chmod(0o644)
    shutil.copy(folder / "many.root", folder / "many-copy.root")
    with Lab(folder) as lab:
        lab.set_rtt(60)
        yield lab, folder / "steps.root"
    shutil.rmtree(folder, ignore_errors=True)


def most_requests_in_flight(trace) -> int:
    spans = {int(r): (float(s), float(a)) for r, s, a in zip(trace["request"], trace["sent"], trace["answered"])}
    # answers sort before sends at the same instant: a request sent as another ends is not overlap
    events = sorted([(s, 1) for s, _ in spans.values()] + [(a, -1) for _, a in spans.values()])
    in_flight = most = 0
    for _, change in events:
        in_flight += change
        most = max(most, in_flight)
    return most


def read_many_traced(lab, local, protocol, steps_ahead):
    """Iterate over "many.root" one cluster a step, check the values against uproot's, and return
    the requests after the opening's: their numbers, when each was sent and when answered."""
    many = local.parent / "many.root"
    with cherenkov.open(lab.url(protocol, many.name), trace=True) as f:
        tree = f["Events"]
        opening = len(set(f.trace()["request"].tolist()))
        got = list(tree.iterate(["a"], step_size=STEP // 4, steps_ahead=steps_ahead, library="np", progress=False))
        trace = f.trace()
    np.testing.assert_array_equal(np.concatenate([g["a"] for g in got]), uproot.open(many)["Events"]["a"].array(library="np"))
    data = trace["request"] >= opening
    return trace["request"][data], trace["sent"][data], trace["answered"][data]


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_read_ahead_deepens_only_while_the_consumer_waits_for_the_network(remote_steps, protocol):
    lab, local = remote_steps
    expected = uproot.open(local)["Events"].arrays(["a", "b"], library="np")
    for pause, most in ((0.0, range(4, STEPS + 1)), (0.25, range(1, 3))):
        with cherenkov.open(lab.url(protocol, local.name), trace=True) as f:
            steps = []
            for arrays in f["Events"].iterate(["a", "b"], step_size=STEP, steps_ahead=1, library="np", progress=False):
                steps.append(arrays)
                time.sleep(pause)  # a consumer slower than the link: one step ahead covers the round trip
            in_flight = most_requests_in_flight(f.trace())
        assert in_flight in most, (protocol, pause, in_flight)
        for name in ("a", "b"):
            np.testing.assert_array_equal(np.concatenate([s[name] for s in steps]), expected[name])


def test_a_fast_consumer_has_every_step_asked_for_once_the_first_came(remote_steps):
    """The first step's bytes took a round trip and the consumer uses steps in far less: from the
    second step on, the read-ahead covers two round trips of its pace (here every step), instead
    of doubling at each wait (a round trip each). Over XRootD, which takes every request at once
    (HTTP's requests in flight follow the adaptive stream count)."""
    lab, local = remote_steps
    requests, sent, answered = read_many_traced(lab, local, "root", steps_ahead=1)
    first_answer = answered.min()
    late = sent > first_answer + 0.03  # half the round trip after the first step's bytes came
    assert len(set(requests.tolist())) == MANY
    assert not late.any(), f"{late.sum()} of {MANY} steps asked for later"


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_by_default_a_far_file_starts_twice_as_deep(remote_steps, protocol):
    """Without `steps_ahead`, where two round trips of the link outlast decoding the steps read
    ahead (here a step decodes in well under a millisecond), the first wave asks for 8 steps, not
    4, so a fast consumer waits less for a second wave. A depth asked for is where it starts."""
    lab, local = remote_steps
    for steps_ahead, first_wave in ((None, 8), (3, 4)):
        requests, sent, answered = read_many_traced(lab, local, protocol, steps_ahead)
        asked_before_bytes = set(requests[sent < answered.min()].tolist())
        assert len(asked_before_bytes) == first_wave, (steps_ahead, len(asked_before_bytes))


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_steps_read_ahead_are_asked_for_in_the_order_they_are_used(remote_steps, protocol):
    """Where a server takes few requests at once, the step needed first must not wait behind later
    ones: the read-ahead sends them in order."""
    lab, local = remote_steps
    with cherenkov.open(lab.url(protocol, local.name), trace=True) as f:
        tree = f["Events"]
        opening = len(set(f.trace()["request"].tolist()))
        for _ in tree.iterate(["a", "b"], step_size=STEP, steps_ahead=3, progress=False):
            pass
        trace = f.trace()
    first = {}
    for request, offset in zip(trace["request"].tolist(), trace["offset"].tolist()):
        first[request] = min(offset, first.get(request, offset))
    offsets = [first[r] for r in sorted(first)][opening:]
    assert len(offsets) >= STEPS // 2
    assert offsets == sorted(offsets), offsets


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_lazy_chunks_read_ahead_deepens_for_a_reader_that_outpaces_it(remote_steps, protocol):
    """The learned set's read-ahead of lazy chunks grows as `iterate`'s does: a reader faster than
    the round trip has more chunks in flight than the depth asked for (1), a slow one does not."""
    lab, local = remote_steps
    expected = uproot.open(local)["Events"]["a"].array(library="np")
    for pause, most in ((0.0, range(4, STEPS + 1)), (0.25, range(1, 3))):
        with cherenkov.open(lab.url(protocol, local.name), trace=True) as f:
            seen = []
            chunks = f["Events"].chunks(step_size=STEP, steps_ahead=1, profile=cherenkov.AccessProfile())
            for chunk in chunks:
                seen.append(ak.to_numpy(chunk["a"]))
                time.sleep(pause)
            trace = f.trace()
        opening = int(np.argmax(trace["offset"] == int(uproot.open(local)["Events"]["a"].member("fBasketSeek")[1])))
        later = {k: v[opening:] for k, v in trace.items()}
        assert most_requests_in_flight(later) in most, (protocol, pause)
        np.testing.assert_array_equal(np.concatenate(seen), expected)


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_the_read_ahead_starts_as_deep_as_the_training_chunk_says_a_round_trip_needs(remote_steps, protocol):
    """The training chunk takes a few ms, its startup read a round trip (60 ms): the learned set's
    read-ahead starts that many chunks deep, not at the 1 asked for, to grow by a wait each time."""
    lab, local = remote_steps
    seeks = uproot.open(local.parent / "many.root")["Events"]["a"].member("fBasketSeek")[:MANY]
    with cherenkov.open(lab.url(protocol, "many.root"), trace=True) as f:
        chunks = iter(f["Events"].chunks(step_size=1, steps_ahead=1, profile=cherenkov.AccessProfile()))
        next(chunks)["a"]  # training
        next(chunks)  # the read-ahead starts
        time.sleep(1.0)  # and sends its requests in the background
        asked = set(f.trace()["offset"].tolist())
    # 1 asked for, and the chunk in use: 3 chunks at most would be asked for
    assert sum(int(seek) in asked for seek in seeks) >= 6


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_the_next_file_reads_ahead_as_deep_as_the_last_one_got(remote_steps, protocol):
    """A dataset's next file starts its learned set's read-ahead at the depth the profile carries
    from the last file: a fast reader does not wait for it to grow again."""
    lab, local = remote_steps
    profile = cherenkov.AccessProfile()
    with cherenkov.open(lab.url(protocol, "many.root")) as f:
        for chunk in f["Events"].chunks(step_size=1, steps_ahead=1, profile=profile):
            chunk["a"]
    assert profile.depth >= 4  # it deepened from the 1 asked for
    seeks = uproot.open(local.parent / "many-copy.root")["Events"]["a"].member("fBasketSeek")[:MANY]
    with cherenkov.open(lab.url(protocol, "many-copy.root"), trace=True) as f:
        chunks = iter(f["Events"].chunks(step_size=1, steps_ahead=1, profile=profile))
        next(chunks)  # (held: dropping the chunks cancels their read-ahead)
        time.sleep(1.0)  # the read-ahead sends its requests in the background
        asked = set(f.trace()["offset"].tolist())
    assert sum(int(seek) in asked for seek in seeks) >= min(profile.depth + 1, MANY)


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_a_deep_read_ahead_guesses_no_far_chunk_when_a_set_joins(remote_steps, protocol):
    """A fast reader has the learned set ("a") read far ahead. When "b" is used and speculated, its
    guesses go no further than the depth asked for (1) past the chunk in use, plus one chunk: they
    ride on read-aheads of their own, not on the learned set's far chunks."""
    lab, local = remote_steps
    many = local.parent / "many.root"
    seeks = {name: uproot.open(many)["Events"][name].member("fBasketSeek")[:MANY] for name in "ab"}
    joined = 9  # the chunk that uses "b"; its read-aheads start as chunk 10 begins
    with cherenkov.open(lab.url(protocol, many.name), trace=True) as f:
        chunks = f["Events"].chunks(step_size=1, steps_ahead=1, profile=cherenkov.AccessProfile())
        for i, chunk in enumerate(chunks):
            chunk["a"]
            if i == joined:
                used = ak.to_numpy(chunk["b"])
            if i == joined + 1:
                time.sleep(1.0)  # the read-aheads send their requests in the background
                asked = set(f.trace()["offset"].tolist())
    size = STEP // 4
    expected = uproot.open(many)["Events"]["b"].array(library="np")
    np.testing.assert_array_equal(used, expected[joined * size : (joined + 1) * size])
    far = {name: max(c for c in range(MANY) if int(seeks[name][c]) in asked) for name in "ab"}
    # chunks 11..12 on a guess as chunk 10 begins (and 13 if chunk 11 begins meanwhile)
    assert far["b"] <= joined + 4, far
    assert far["a"] >= joined + 6, far  # the learned set's read-ahead had deepened
