"""Branch types only ROOT writes (tests/data/branch-types.root, made by make_branch_types.py):
every branch cherenkov reads equals uproot's, value by value and form by form, in awkward and
numpy output; every branch it does not read is refused by name, never returned wrong."""

import math
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest

uproot = pytest.importorskip("uproot")

FILE = Path(__file__).parent / "data" / "branch-types.root"

# What must be read (a refusal here is a regression): the cases of issue 16 read so far.
# Double32_t/Float16_t with a range or bit count are refused for now (their decoding gave wrong
# values on real files, see format/packed.rs); the test then checks they are refused by name.
MUST_READ = {
    "snapshot": ["n", "pt", "ids", "mass"],
    "objects": [
        "run",
        "weight",
        "adc[4]",
        "energies",
        "label",
        "hits.x",
        "hits.id",
        "hits.pos[3]",
        "hits.plain",
        "tracks",
        "tracks.fUniqueID",
        "tracks.fBits",
        "tracks.fP[3]",
        "tracks.fCharge",
    ],
}


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def form(array) -> dict:
    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k != "form_key"}
        return [strip(x) for x in d] if isinstance(d, list) else d

    return strip(array.layout.form.to_dict(verbose=False))


def branches(tree_name):
    ours = cherenkov.open(FILE)[tree_name]
    theirs = uproot.open(FILE)[tree_name]
    return ours, theirs, [b for b in theirs.values(recursive=True)]


@pytest.mark.parametrize("tree_name", sorted(MUST_READ))
def test_every_branch_equals_uproot_or_is_refused_by_name(tree_name):
    ours, theirs, theirs_branches = branches(tree_name)
    read = set()
    for branch in theirs_branches:
        name = branch.name
        try:
            expected = theirs[name].array(library="ak")
        except Exception:  # uproot cannot read it (a split object with members of its own, a
            continue  # memberwise vector of classes): nothing to compare with
        info = ours[name]
        if info.kind == "unsupported":
            with pytest.raises(cherenkov.UnsupportedBranch, match=name.replace("[", r"\[").replace("]", r"\]")):
                ours.arrays([name], library="ak")
            continue
        got = ours.arrays([name], library="ak")[name]
        assert str(got.type) == str(expected.type), name
        assert form(got) == form(expected), name
        assert same(ak.to_list(got), ak.to_list(expected)), name
        read.add(name)
    missing = set(MUST_READ[tree_name]) - read
    assert not missing, f"refused: {sorted(missing)}"


@pytest.mark.parametrize("tree_name", sorted(MUST_READ))
def test_numpy_output_equals_uproot(tree_name):
    ours, theirs, _ = branches(tree_name)
    for name in MUST_READ[tree_name]:
        got = ours.arrays([name], library="np")[name]
        expected = theirs[name].array(library="np")
        if isinstance(got, cherenkov.Jagged):
            entries = [np.asarray(x) for x in expected]
            assert got.counts.tolist() == [len(x) for x in entries], name
            flat = np.concatenate(entries)
            assert got.content.shape[1:] == flat.shape[1:], name
            assert got.content.dtype == flat.dtype.newbyteorder("="), name
            assert np.array_equal(got.content, flat), name
        elif got.dtype == object:
            assert [str(x) for x in got] == [str(x) for x in expected], name
        else:
            assert got.shape == expected.shape and got.dtype == expected.dtype.newbyteorder("="), name
            assert np.array_equal(got, expected), name


def test_a_repeated_branch_name_reads_the_first_branch():
    """Delphes writes `Particle_size` twice; uproot (and so cherenkov) read the first by the name."""
    got = cherenkov.open(FILE)["repeated"].arrays(["x"], library="np")["x"]
    expected = uproot.open(FILE)["repeated"]["x"].array(library="np")
    assert got.tolist() == expected.tolist() == list(range(40))
