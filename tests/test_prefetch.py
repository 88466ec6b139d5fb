"""Prefetched iteration: same values as a plain read, straddling baskets read once, bounded memory,
early exit cancels."""

import awkward as ak
import cherenkov
import pytest
from cherenkov.arrays import to_awkward_layout


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
