"""`cherenkov.merge` and `cherenkov merge`: many files into few, rewritten by cherenkov's writer.
Outputs are read back by cherenkov and uproot (ROOT too where it imports) and compared with the
concatenation of the inputs as uproot reads them; histograms are compared with their sums."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
from conftest import REPO, TESTDATA

uproot = pytest.importorskip("uproot")
hist = pytest.importorskip("hist")

TYPES = {
    "x": "float64",
    "i": "int32",
    "a": "3 * int16",
    "nMuon": "int32",
    "Muon_pt": "var * float32",
    "v": "std::vector<float>",
    "s": "string",
    "vs": "var * string",
}


def columns(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, n)
    return {
        "x": rng.normal(size=n),
        "i": np.arange(n, dtype=np.int32) + 1000 * seed,
        "a": rng.integers(-100, 100, (n, 3)).astype(np.int16),
        "nMuon": counts.astype(np.int32),
        "Muon_pt": ak.unflatten(rng.random(counts.sum()).astype(np.float32), counts),
        "v": ak.unflatten(rng.random(counts[::-1].sum()).astype(np.float32), counts[::-1]),
        "s": ak.Array([f"s{seed}-{k}" * (k % 4) for k in range(n)]),
        "vs": ak.Array([[f"{k}"] * (k % 3) for k in range(n)]),
    }


def write_input(path: Path, n: int, seed: int, *, types=TYPES, hists: bool = True) -> dict:
    """An input of `n` entries in many small clusters, with histograms and a TObjString."""
    data = {k: v for k, v in columns(n, seed).items() if k in types}
    with cherenkov.recreate(path) as f:
        tree = f.mktree("Events", types, cluster_bytes=4_000)
        for lo in range(0, n, 250):
            tree.extend({k: v[lo : lo + 250] for k, v in data.items()})
    if hists:
        rng = np.random.default_rng(seed)
        with uproot.update(path) as f:
            f["h1"] = hist.Hist.new.Reg(10, -3, 3).Weight().fill(rng.normal(size=500), weight=rng.random(500))
            f["dir/h2"] = hist.Hist.new.Reg(4, 0, 1).Reg(5, 0, 1).Double().fill(rng.random(300), rng.random(300))
            f["prof"] = hist.Hist.new.Reg(6, 0, 1).Mean().fill(rng.random(200), sample=rng.normal(size=200))
            f["note"] = f"written by seed {seed}"
    return data


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("merge-inputs")
    paths, datas = [], []
    for seed, n in enumerate([1200, 7, 3000, 1]):
        path = folder / f"in{seed}.root"
        datas.append(write_input(path, n, seed))
        paths.append(path)
    return paths, datas


def concatenated(paths, names) -> dict:
    parts = [uproot.open(p)["Events"].arrays(names, library="ak") for p in paths]
    return {n: ak.concatenate([p[n] for p in parts]) for n in names}


def assert_same(paths_out, paths_in, names):
    want = concatenated(paths_in, names)
    parts = [cherenkov.open(p)["Events"].arrays(names, library="ak") for p in paths_out]
    ours = {n: ak.concatenate([p[n] for p in parts]) for n in names}
    theirs = concatenated(paths_out, names)
    for n in names:
        assert ak.array_equal(ours[n], want[n], equal_nan=True), n
        assert ak.array_equal(theirs[n], want[n], equal_nan=True), n


def test_trees_concatenated_and_rewritten(inputs, tmp_path):
    paths, _ = inputs
    out = tmp_path / "merged.root"
    updates = []
    report = cherenkov.merge([str(p) for p in paths], out, progress=updates.append)
    assert report.outputs == [str(out)] and report.inputs == [[str(p) for p in paths]]
    assert len(updates) == 4 and updates[-1].tasks == {"Events": (4208, 4208)}  # one update per input moved
    assert_same([out], paths, list(TYPES))
    tree = cherenkov.open(out)["Events"]
    assert tree.num_entries == 1200 + 7 + 3000 + 1 == report.trees["Events"].entries
    assert report.trees["Events"].mode == "rewrite" and report.trees["Events"].columns == len(TYPES)
    # Stored as the output is: serialized entries moved, none decoded into arrays.
    assert report.trees["Events"].moved == 4 and not report.trees["Events"].decoded
    assert "serialized entries moved from 4 inputs" in report.table()
    # The writer's layout: few clusters of one basket per branch, not the inputs' many small ones.
    inputs_baskets = sum(b.num_baskets for p in paths for b in cherenkov.open(p)["Events"].branches)
    assert len(tree.cluster_boundaries) == 2
    assert all(b.num_baskets == 1 for b in tree.branches)
    assert inputs_baskets > 20 * len(tree.branches)
    # std::vector branches stay vectors, counted leaves stay counted.
    typenames = {b.name: b.typename for b in tree.branches}
    assert "vector" in typenames["v"] and "vector" not in typenames["Muon_pt"]


def test_each_input_tree_metadata_parsed_once(inputs, tmp_path, monkeypatch):
    """With the strict schema only the first input is described before writing; the others are
    described from the metadata parsed to move (or copy) their trees, in every mode."""
    import cherenkov.merging.schema as schema

    paths, _ = inputs
    described = []
    whole = schema._table_schema
    monkeypatch.setattr(schema, "_table_schema", lambda f, *a: described.append(f.path) or whole(f, *a))
    for mode in ("auto", "rewrite", "copy"):
        described.clear()
        report = cherenkov.merge(paths, tmp_path / f"{mode}.root", mode=mode, progress=False)
        assert described == [str(paths[0])], mode
        assert report.trees["Events"].entries == 4208, mode
        if mode == "auto":  # decided from the first input's clusters
            assert report.trees["Events"].reason.endswith("in the first input, under 10 MB: re-clustered")
        assert_same([tmp_path / f"{mode}.root"], paths, list(TYPES))


def test_inputs_opened_on_one_connection_unless_asked(inputs, tmp_path, monkeypatch):
    """Many inputs are read at once, each a little: they are opened on one connection each (not
    XRootD's two), unless the merge is given `connections`."""
    import cherenkov.merging.raw as raw

    paths, _ = inputs
    asked = []
    real = raw.open_file
    monkeypatch.setattr(raw, "open_file", lambda urls, **options: asked.append(options.get("connections")) or real(urls, **options))
    cherenkov.merge(paths, tmp_path / "one.root", mode="copy", progress=False)
    cherenkov.merge(paths, tmp_path / "three.root", mode="copy", progress=False, connections=3)
    assert asked == [1] * len(paths) + [3] * len(paths)
    assert_same([tmp_path / "one.root"], paths, list(TYPES))


def test_inputs_described_from_the_core_summary(inputs):
    """The summary computed in Rust names the columns and types the tree's branches list, and
    inputs with the same columns share one dict of them (what `combine` passes over)."""
    from cherenkov.dataset import file_specs
    from cherenkov.merging.schema import describe

    paths, datas = inputs
    infos = describe(file_specs([str(p) for p in paths]), {})
    for info, path, data in zip(infos, paths, datas):
        tree = cherenkov.open(path)["Events"]
        table = info.tables["Events"]
        assert table.columns == {b.name: b.typename for b in tree.branches if b.readable and b.parent is None}
        assert list(table.columns) == list(TYPES)
        assert table.entries == len(data["x"]) == tree.num_entries
        assert table.compressed == sum(b.compressed_bytes for b in tree.branches) > 0
        assert table.clusters == len(tree.cluster_boundaries) - 1 > 0
        assert table.columns is infos[0].tables["Events"].columns


def test_histograms_summed_other_objects_copied(inputs, tmp_path):
    paths, _ = inputs
    out = tmp_path / "merged.root"
    report = cherenkov.merge(paths, out, progress=False)
    assert sorted(report.histograms) == ["dir/h2", "h1", "prof"] and report.copied == ["note"] and not report.skipped
    merged = uproot.open(out)
    ins = [uproot.open(p) for p in paths]
    for name in ("h1", "dir/h2", "prof"):
        got = merged[name]
        assert got.classname == ins[0][name].classname
        assert np.allclose(got.values(flow=True), sum(f[name].values(flow=True) for f in ins) if name != "prof" else got.values(flow=True))
        for member in ("fEntries", "fTsumw", "fTsumw2", "fTsumwx", "fTsumwx2"):
            assert np.isclose(got.member(member), sum(f[name].member(member) for f in ins)), (name, member)
    assert np.allclose(merged["h1"].variances(flow=True), sum(f["h1"].variances(flow=True) for f in ins))
    # A profile's sums of weights and of weighted values add up; its means follow from them.
    assert np.allclose(merged["prof"].member("fBinEntries"), sum(np.asarray(f["prof"].member("fBinEntries")) for f in ins))
    sumwy = sum(f["prof"].values(flow=True) * np.asarray(f["prof"].member("fBinEntries")) for f in ins)
    entries = np.asarray(merged["prof"].member("fBinEntries"))
    assert np.allclose(merged["prof"].values(flow=True)[entries > 0], (sumwy / np.where(entries > 0, entries, 1))[entries > 0])
    assert str(merged["note"]) == "written by seed 0"


def test_max_size_splits_in_order(inputs, tmp_path):
    paths, _ = inputs
    sizes = [os.path.getsize(p) for p in paths]
    assert sizes[0] + sizes[1] + sizes[2] > max(sizes[0] + sizes[1], sizes[2] + sizes[3])  # so two outputs
    report = cherenkov.merge(paths, tmp_path / "part.root", max_size=max(sizes[0] + sizes[1], sizes[2] + sizes[3]), progress=False)
    assert report.outputs == [str(tmp_path / "part_0.root"), str(tmp_path / "part_1.root")]
    assert report.inputs == [[str(paths[0]), str(paths[1])], [str(paths[2]), str(paths[3])]]
    assert_same(report.outputs, paths, ["i", "s", "v"])
    # Each output sums its own inputs' histograms.
    h = uproot.open(report.outputs[1])["h1"].values(flow=True)
    assert np.allclose(h, uproot.open(paths[2])["h1"].values(flow=True) + uproot.open(paths[3])["h1"].values(flow=True))


def test_schema_strict_union_intersection(tmp_path):
    full = tmp_path / "full.root"
    less = tmp_path / "less.root"
    write_input(full, 500, 1, hists=False)
    write_input(less, 300, 2, types={k: v for k, v in TYPES.items() if k not in ("Muon_pt", "s")}, hists=False)
    with pytest.raises(ValueError, match=r"less\.root.*Events.*missing \['Muon_pt', 's'\]"):
        cherenkov.merge([full, less], tmp_path / "strict.root", progress=False)
    assert not (tmp_path / "strict.root").exists()

    report = cherenkov.merge([full, less], tmp_path / "union.root", schema="union", progress=False)
    assert report.trees["Events"].filled == {"Muon_pt": [str(less)], "s": [str(less)]}
    got = uproot.open(tmp_path / "union.root")["Events"].arrays(library="ak")
    first = uproot.open(full)["Events"].arrays(library="ak")
    second = uproot.open(less)["Events"].arrays(library="ak")
    assert ak.array_equal(got["Muon_pt"][:500], first["Muon_pt"])
    # Missing lists take their counter's lengths (zeros), missing strings are empty.
    assert ak.num(got["Muon_pt"][500:]).tolist() == second["nMuon"].tolist()
    assert ak.all(ak.flatten(got["Muon_pt"][500:]) == 0) and ak.all(got["s"][500:] == "")
    assert ak.array_equal(got["v"], ak.concatenate([first["v"], second["v"]]))

    report = cherenkov.merge([full, less], tmp_path / "inter.root", schema="intersection", progress=False)
    assert report.trees["Events"].dropped == ["Muon_pt", "s"]
    assert set(uproot.open(tmp_path / "inter.root")["Events"].keys()) == set(TYPES) - {"Muon_pt", "s"}


def test_copy_mode_checks_the_strict_schema_while_copying(tmp_path):
    """Copy mode reads each input's TTree metadata once, when copying it: an input with other
    branches or another type is refused there as ``strict`` says, naming it, and no output
    (nor temporary file) is left."""
    full, less, other = tmp_path / "full.root", tmp_path / "less.root", tmp_path / "other.root"
    write_input(full, 500, 1, hists=False)
    write_input(less, 300, 2, types={k: v for k, v in TYPES.items() if k not in ("Muon_pt", "s")}, hists=False)
    data = columns(300, 3)
    data["x"] = data["x"].astype(np.float32)
    with cherenkov.recreate(other) as f:
        f.mktree("Events", {**TYPES, "x": "float32"}).extend(data)
    (tmp_path / "out").mkdir()
    for bad, match in (
        (less, r"less\.root: tree 'Events' has other branches.*missing \['Muon_pt', 's'\]"),
        (other, r"other\.root: tree 'Events', branch 'x' is float"),
    ):
        with pytest.raises(ValueError, match=match):
            cherenkov.merge([full, full, bad], tmp_path / "out" / "merged.root", mode="copy", progress=False)
    assert list((tmp_path / "out").iterdir()) == []
    report = cherenkov.merge([full, full], tmp_path / "same.root", mode="copy", progress=False)
    assert report.trees["Events"].entries == 1000 and report.trees["Events"].mode == "copy"


def test_failed_merge_leaves_no_output(inputs, tmp_path):
    paths, _ = inputs
    broken = tmp_path / "broken.root"
    data = paths[2].read_bytes()
    quarter = len(data) // 4
    broken.write_bytes(data[:quarter] + bytes(quarter) + data[2 * quarter :])  # baskets zeroed, metadata kept
    out = tmp_path / "merged.root"
    with pytest.raises(cherenkov.CherenkovError):
        cherenkov.merge([paths[0], broken], out, progress=False)
    assert list(tmp_path.iterdir()) == [broken]  # neither the output nor its temporary file


# Runs a merge that kills itself (SIGKILL) once its second output's temporary file exists.
KILLED_AT_THE_SECOND_OUTPUT = """
import json, os, signal, sys
import cherenkov, cherenkov.merging as merging
made = []
def recreate(path, **options):
    made.append(path)
    f = cherenkov.recreate(path, **options)
    if len(made) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return f
merging.recreate = recreate
output, max_size, *paths = sys.argv[1:]
cherenkov.merge(paths, output, max_size=int(max_size), mode="copy", progress=False)
"""


def test_an_interrupted_merge_resumes_from_its_complete_outputs(inputs, tmp_path):
    """A merge killed while writing its second output leaves the first complete and the second
    as a temporary file; the rerun keeps the first (not written again: same inode and time),
    removes the abandoned temporary file and writes the rest. An input changed since (its
    modification time) has its output written again."""
    paths, _ = inputs
    sizes = [os.path.getsize(p) for p in paths]
    max_size = max(sizes[0] + sizes[1], sizes[2] + sizes[3])
    out = tmp_path / "out" / "part.root"
    out.parent.mkdir()
    first, second = out.parent / "part_0.root", out.parent / "part_1.root"

    def killed() -> None:
        run = subprocess.run(
            [sys.executable, "-c", KILLED_AT_THE_SECOND_OUTPUT, str(out), str(max_size), *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == -9, run.stderr[-3000:]
        assert [p.name for p in out.parent.iterdir() if p.name.endswith(".part")] != []  # the second, abandoned

    killed()
    assert first.exists() and not second.exists()
    before = os.stat(first)
    report = cherenkov.merge(paths, out, max_size=max_size, mode="copy", progress=False)
    assert report.outputs == [str(first), str(second)] and report.kept == [str(first)]
    assert (os.stat(first).st_ino, os.stat(first).st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in out.parent.iterdir()) == ["part_0.root", "part_1.root"]  # no journal, no temporary file
    assert report.trees["Events"].entries == 4208 and report.bytes_written == first.stat().st_size + second.stat().st_size
    assert_same(report.outputs, paths, list(TYPES))

    killed()  # the second output of the merge above stays as it was: the rerun writes it again
    before = os.stat(first)
    os.utime(paths[1], ns=(os.stat(paths[1]).st_atime_ns, os.stat(paths[1]).st_mtime_ns + 1_000_000_000))
    report = cherenkov.merge(paths, out, max_size=max_size, mode="copy", progress=False)
    assert report.kept == [] and os.stat(first).st_ino != before.st_ino
    assert_same(report.outputs, paths, list(TYPES))

    killed()  # the CLI's --no-resume writes the complete first output again
    before = os.stat(first)
    command = [sys.executable, "-m", "cherenkov.cli", "merge", str(out), *map(str, paths), "--max-size", str(max_size)]
    run = subprocess.run([*command, "--mode", "copy", "--no-resume", "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout)["kept"] == [] and os.stat(first).st_ino != before.st_ino
    assert sorted(p.name for p in out.parent.iterdir()) == ["part_0.root", "part_1.root"]
    assert_same([first, second], paths, list(TYPES))


def test_an_input_without_the_tree_is_refused_unless_union(inputs, tmp_path):
    paths, _ = inputs
    other = tmp_path / "other.root"
    with cherenkov.recreate(other) as f:
        f["Other"] = {"x": np.arange(3.0)}
    with pytest.raises(ValueError, match=r"other\.root has no tree 'Events'"):
        cherenkov.merge([paths[0], other], tmp_path / "out.root", progress=False)
    report = cherenkov.merge([paths[1], other], tmp_path / "out.root", schema="union", progress=False)
    assert report.trees["Events"].entries == 7 and report.trees["Events"].lacking == [str(other)]


def test_inputs_after_the_first_are_checked_as_they_are_written(inputs, tmp_path):
    """With the strict schema only the first input's trees are read before writing; the others
    are opened for their size and version alone, and a tree of another kind is refused, naming
    the file, when its turn comes."""
    from cherenkov.dataset import file_specs
    from cherenkov.merging.schema import describe

    paths, _ = inputs
    probed = describe(file_specs(paths), {}, trees=False)
    full = describe(file_specs(paths), {})
    assert [i.probed for i in probed] == [False] + [True] * (len(paths) - 1)
    assert [(i.size, i.version) for i in probed] == [(i.size, i.version) for i in full]
    assert all(i.tables["Events"].columns is None for i in probed[1:])
    ntuple = tmp_path / "ntuple.root"
    with cherenkov.recreate(ntuple) as f:
        f.mktree("Events", {"x": "float64"}, format="rntuple").extend({"x": np.arange(3.0)})
    with pytest.raises(ValueError, match=r"ntuple\.root: 'Events' is a RNTuple, a TTree in"):
        cherenkov.merge([paths[0], ntuple], tmp_path / "out.root", progress=False)
    assert not (tmp_path / "out.root").exists()


def test_ttrees_merged_into_an_rntuple(inputs, tmp_path):
    paths, _ = inputs
    out = tmp_path / "merged.root"
    report = cherenkov.merge(paths, out, format="rntuple", progress=False)
    assert report.trees["Events"].entries == 4208
    ntuple = cherenkov.open(out)["Events"]
    assert isinstance(ntuple, cherenkov.RNTuple)
    names = ["x", "i", "Muon_pt", "v", "s", "vs"]
    got = ntuple.arrays(names, library="ak")
    want = concatenated(paths, names)
    for n in names:
        assert ak.array_equal(got[n], want[n]), n


def test_copy_mode_over_more_inputs_than_one_call_takes(tmp_path):
    """More inputs than one copy call appends (`copy.COPIED_AT_ONCE`): the later calls' baskets
    follow the earlier ones' in entry order (each call orders only the baskets it added)."""
    from cherenkov.merging.copy import COPIED_AT_ONCE

    paths = []
    for seed in range(2 * COPIED_AT_ONCE + 3):
        paths.append(tmp_path / f"in{seed}.root")
        write_input(paths[-1], 40 + seed, seed, hists=False)
    out = tmp_path / "copied.root"
    report = cherenkov.merge(paths, out, mode="copy", progress=False)
    assert report.trees["Events"].mode == "copy" and report.trees["Events"].entries == sum(40 + k for k in range(len(paths)))
    assert_same([out], paths, list(TYPES))
    branch = uproot.open(out)["Events"]["x"]
    starts = list(branch.member("fBasketEntry")[: branch.num_baskets + 1])
    assert branch.num_baskets > 2 * COPIED_AT_ONCE and starts == sorted(starts) and starts[-1] == report.trees["Events"].entries


def test_copy_mode_copies_compressed_baskets(inputs, tmp_path):
    """Baskets copied as they are (same count, same compressed bytes), re-keyed into the output;
    the inputs' many clusters kept, shifted by the entries before them."""
    paths, _ = inputs
    out = tmp_path / "copied.root"
    report = cherenkov.merge(paths, out, mode="copy", progress=False)
    assert (report.trees["Events"].mode, report.trees["Events"].reason) == ("copy", "asked for")
    assert not report.trees["Events"].rewritten
    assert_same([out], paths, list(TYPES))
    tree = cherenkov.open(out)["Events"]
    ins = [cherenkov.open(p)["Events"] for p in paths]
    for b in tree.branches:
        theirs = [next(x for x in t.branches if x.name == b.name) for t in ins]
        assert b.num_baskets == sum(x.num_baskets for x in theirs) and b.num_baskets > 1, b.name
        assert b.compressed_bytes == sum(x.compressed_bytes for x in theirs), b.name
    starts = np.cumsum([0] + [t.num_entries for t in ins])
    want = np.unique(np.concatenate([t.cluster_boundaries + s for t, s in zip(ins, starts)]))
    assert len(want) > 20 and np.array_equal(tree.cluster_boundaries, want)


def test_auto_mode_copies_large_clusters_and_rewrites_small_ones(inputs, tmp_path, monkeypatch):
    import cherenkov.merging.copy as copy

    paths, _ = inputs
    report = cherenkov.merge(paths, tmp_path / "a.root", progress=False)
    assert report.trees["Events"].mode == "rewrite" and "under 10 MB" in report.trees["Events"].reason
    monkeypatch.setattr(copy, "COPY_MIN_CLUSTER_BYTES", 1_000)
    report = cherenkov.merge(paths, tmp_path / "b.root", progress=False)
    assert report.trees["Events"].mode == "copy" and "kept as they are" in report.trees["Events"].reason
    assert_same([tmp_path / "b.root"], paths, list(TYPES))


def with_uproot_input(inputs, tmp_path) -> list[Path]:
    """The first and third inputs with, between them, one written by uproot, whose Muon_pt is
    counted by nMuon_pt."""
    paths, datas = inputs
    other = tmp_path / "uproot.root"
    with uproot.recreate(other) as f:
        tree = f.mktree("Events", {"x": "float64", "i": "int32", "Muon_pt": "var * float32"})
        tree.extend({n: datas[0][n][:50] for n in ("x", "i", "Muon_pt")})
    return [paths[0], other, paths[2]]


def test_copy_mode_rewrites_inputs_stored_otherwise(inputs, tmp_path):
    """Inputs whose branches are stored otherwise than the output's are rewritten in their
    place within the copied tree, and reported; the values still follow input order. Here the
    output counts Muon_pt with nMuon_pt (uproot's name: nMuon is not in every input), which
    cherenkov's inputs lack."""
    paths, _ = inputs
    mixed = with_uproot_input(inputs, tmp_path)
    out = tmp_path / "m.root"
    report = cherenkov.merge(mixed, out, mode="copy", schema="intersection", progress=False)
    assert report.trees["Events"].mode == "copy"
    rewritten = report.trees["Events"].rewritten
    assert list(rewritten) == [str(paths[0]), str(paths[2])]
    assert all("no top-level branch 'nMuon_pt'" in why for why in rewritten.values())
    assert_same([out], mixed, ["x", "i", "Muon_pt"])


def test_rewrite_decodes_inputs_stored_otherwise_in_their_place(inputs, tmp_path):
    """Rewrite mode moves the serialized entries of inputs stored as the output is, and decodes
    the others into arrays in their place, reported. Here the output counts Muon_pt with
    nMuon_pt (uproot's input), which cherenkov's inputs lack; then an input lacking branches
    of a union has them filled with defaults."""
    paths, _ = inputs
    mixed = with_uproot_input(inputs, tmp_path)
    out = tmp_path / "m.root"
    report = cherenkov.merge(mixed, out, mode="rewrite", schema="intersection", progress=False)
    t = report.trees["Events"]
    assert t.moved == 1 and list(t.decoded) == [str(paths[0]), str(paths[2])]
    assert all("no top-level branch 'nMuon_pt'" in why for why in t.decoded.values())
    assert_same([out], mixed, ["x", "i", "Muon_pt"])
    less = tmp_path / "less.root"
    write_input(less, 300, 2, types={k: v for k, v in TYPES.items() if k not in ("Muon_pt", "s")}, hists=False)
    report = cherenkov.merge([paths[1], less], tmp_path / "u.root", mode="rewrite", schema="union", progress=False)
    t = report.trees["Events"]
    assert t.moved == 1 and list(t.decoded) == [str(less)] and "'Muon_pt'" in t.decoded[str(less)]
    assert_same([tmp_path / "u.root"], [paths[1], less], ["x", "i", "v", "vs"])


def test_copy_mode_is_refused_clearly_where_it_cannot_apply(inputs, tmp_path):
    with pytest.raises(ValueError, match="cannot be copied: converted to rntuple"):
        cherenkov.merge(inputs[0], tmp_path / "x.root", mode="copy", format="rntuple")


def test_cli_merge(inputs, tmp_path):
    paths, _ = inputs
    out = tmp_path / "cli.root"
    run = subprocess.run(
        [sys.executable, "-m", "cherenkov.cli", "merge", str(out), *map(str, paths), "--quiet"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""  # --quiet
    run = subprocess.run(
        [sys.executable, "-m", "cherenkov.cli", "merge", str(out), *map(str, paths), "--json"], capture_output=True, text=True, timeout=300
    )
    report = json.loads(run.stdout)
    assert report["outputs"] == [str(out)] and report["trees"]["Events"]["entries"] == 4208


@pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"{TESTDATA} is absent (the NanoAOD schema comes from it)")
@pytest.mark.parametrize("mode", ["rewrite", "copy"])
def test_nanoaod_like_files(tmp_path, mode):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import make_nanolike
    finally:
        sys.path.remove(str(REPO / "bench"))
    chunk, make_nanolike.CHUNK_ENTRIES = make_nanolike.CHUNK_ENTRIES, 100
    try:
        paths = [
            make_nanolike.ensure(tmp_path / f"nano{s}.root", entries=200, seed=s, writer="uproot", log=lambda *_: None) for s in (1, 2)
        ]
    finally:
        make_nanolike.CHUNK_ENTRIES = chunk
    out = tmp_path / "merged.root"
    report = cherenkov.merge(paths, out, mode=mode, progress=False)
    names = uproot.open(paths[0])["Events"].keys()
    assert report.trees["Events"].columns == len(names) > 900
    assert report.trees["Events"].mode == mode and not report.trees["Events"].rewritten
    if mode == "rewrite":
        assert report.trees["Events"].moved == 2 and not report.trees["Events"].decoded
    assert_same([out], paths, names)


# -- cherenkov layout ---------------------------------------------------------------------------


def test_layout_counts_clusters_baskets_and_metadata(inputs, tmp_path):
    from cherenkov.layout import layout

    paths, _ = inputs
    (before,) = layout(paths[2], branches=["Muon_pt", "nMuon"], rtt_ms=100)
    tree = cherenkov.open(paths[2])["Events"]
    assert before.clusters == len(tree.cluster_boundaries) - 1 > 10
    assert before.baskets == sum(b.num_baskets for b in tree.branches)
    assert all(b.baskets_per_cluster == 1 for b in before.branches)  # cherenkov's writer
    assert before.metadata["tree_at"] > 0.5 and before.opening_requests == 1  # metadata near the end
    cherenkov.merge(paths, tmp_path / "merged.root", progress=False)
    (after,) = layout(tmp_path / "merged.root", branches=["Muon_pt", "nMuon"], rtt_ms=100)
    assert after.clusters == 1 and after.baskets == len(after.branches) < before.baskets / 20
    run = subprocess.run(
        [sys.executable, "-m", "cherenkov.cli", "layout", str(paths[2]), "--json", "--rtt", "100"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(run.stdout)[0]["clusters"] == before.clusters


def test_layout_predicts_the_requests_a_remote_read_makes(inputs, folder):
    """The prediction against `stats()` over HTTP (nginx), before and after a merge."""
    import shutil

    from cherenkov.layout import layout
    from cherenkov_lab import NginxServer

    if not shutil.which("nginx"):
        pytest.skip("nginx is not installed: run `make setup`")
    served = folder
    data = columns(60_000, 7)
    with cherenkov.recreate(served / "before.root") as f:  # 6 MB in 30 clusters of small baskets
        f.mktree("Events", TYPES, cluster_bytes=100_000).extend(data)
    cherenkov.merge(served / "before.root", served / "after.root", progress=False)
    for p in served.iterdir():
        p.chmod(0o644)
    selection = ["Muon_pt", "nMuon", "x"]
    with NginxServer(served) as nginx:
        for name in ("before.root", "after.root"):
            (predicted,) = layout(nginx.url(name), branches=selection, step_size=1000)
            f = cherenkov.open(nginx.url(name))
            for _ in f["Events"].iterate(selection, step_size=1000, library="np"):
                pass
            measured = f.stats().requests
            assert abs(predicted.prediction.requests - measured) <= 0.2 * measured, (name, predicted.prediction.requests, measured)


ROOT_CHECK = """
import json, sys
import ROOT
ROOT.gErrorIgnoreLevel = ROOT.kWarning
f = ROOT.TFile.Open(sys.argv[1])
t = f.Get("Events")
h1, h2, prof, note = f.Get("h1"), f.Get("dir/h2"), f.Get("prof"), f.Get("note")
print(json.dumps({
    "entries": t.GetEntries(),
    "i": [int(v) for v in ROOT.RDataFrame(t).Take["int"]("i")],
    "s": [str(v) for v in ROOT.RDataFrame(t).Take["std::string"]("s")],
    "Muon_pt": [list(v) for v in ROOT.RDataFrame(t).Take["ROOT::RVec<float>"]("Muon_pt")],
    "v": [list(v) for v in ROOT.RDataFrame(t).Take["std::vector<float>"]("v")],
    "a": [list(v) for v in ROOT.RDataFrame(t).Take["ROOT::RVec<short>"]("a")],
    "vs": [[str(x) for x in v] for v in ROOT.RDataFrame(t).Take["std::vector<std::string>"]("vs")],
    "h1": [h1.GetBinContent(k) for k in range(h1.GetNcells())],
    "h1_entries": h1.GetEntries(),
    "h2": [h2.GetBinContent(k) for k in range(h2.GetNcells())],
    "prof_entries": [prof.GetBinEntries(k) for k in range(prof.GetNcells())],
    "note": str(note.GetString()),
}))
"""


@pytest.mark.skipif(
    importlib.util.find_spec("ROOT") is None, reason="ROOT does not import here (pip install root: ROOT 6.40 is the oracle)"
)
@pytest.mark.parametrize("mode", ["rewrite", "copy"])
def test_root_reads_the_merged_file_without_a_warning(inputs, tmp_path, mode):
    paths, _ = inputs
    out = tmp_path / "merged.root"
    cherenkov.merge(paths, out, mode=mode, progress=False)
    run = subprocess.run([sys.executable, "-c", ROOT_CHECK, str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    problems = [line for line in run.stderr.splitlines() if line.startswith(("Error", "Warning"))]
    assert not problems, problems
    got = json.loads(run.stdout)
    want = concatenated(paths, ["i", "s", "Muon_pt", "v", "a", "vs"])
    assert got["entries"] == 4208
    for name in ("i", "s", "Muon_pt", "v", "a", "vs"):
        assert got[name] == want[name].tolist(), name
    ins = [uproot.open(p) for p in paths]
    assert np.allclose(got["h1"], sum(f["h1"].values(flow=True) for f in ins))
    assert got["h1_entries"] == sum(f["h1"].member("fEntries") for f in ins)
    assert np.allclose(got["h2"], sum(f["dir/h2"].values(flow=True) for f in ins).T.ravel())
    assert np.allclose(got["prof_entries"], sum(np.asarray(f["prof"].member("fBinEntries")) for f in ins))
    assert got["note"] == "written by seed 0"


def served_copies(inputs, folder, server: str) -> list[Path]:
    """The `inputs` fixture's files copied into `folder`, for `server` (a program) to serve:
    skips when it is not installed."""
    import shutil

    if not shutil.which(server):
        pytest.skip(f"{server} is not installed: run `make setup`")
    paths, _ = inputs
    for p in paths:
        shutil.copy(p, folder / p.name)
        (folder / p.name).chmod(0o644)
    return paths


@pytest.mark.parametrize("mode", ["rewrite", "copy"])
def test_remote_inputs_over_http(inputs, folder, tmp_path, mode):
    """Inputs read from nginx: trees through the engine (copy mode: their baskets through the
    file's source), histograms and objects through uproot on cherenkov's source."""
    from cherenkov_lab import NginxServer

    paths = served_copies(inputs, folder, "nginx")
    with NginxServer(folder) as nginx:
        urls = [nginx.url(p.name) for p in paths]
        report = cherenkov.merge(urls, tmp_path / "merged.root", max_size=10**9, mode=mode, progress=False)
    assert report.trees["Events"].mode == mode and not report.trees["Events"].rewritten
    assert report.inputs == [urls] and sorted(report.histograms) == ["dir/h2", "h1", "prof"] and report.copied == ["note"]
    assert_same([tmp_path / "merged.root"], paths, list(TYPES))
    assert np.allclose(uproot.open(tmp_path / "merged.root")["h1"].values(), sum(uproot.open(p)["h1"].values() for p in paths))


def test_remote_inputs_in_one_xrootd_directory_are_sized_from_one_listing(inputs, folder, tmp_path, monkeypatch):
    """The inputs after the first share a root:// directory: their sizes and versions come from
    one kXR_dirlist, equal to what opening each reports, and none is probed (the first inputs
    are opened for writing meanwhile); one the listing lacks is probed, which names it; a
    listing refused has its inputs probed."""
    from cherenkov.dataset import file_specs
    from cherenkov.merging import schema
    from cherenkov_lab import XrootdServer

    paths = served_copies(inputs, folder, "xrootd")
    probed = []
    probe = schema._probe
    monkeypatch.setattr(schema, "_probe", lambda spec, options: probed.append(spec.url) or probe(spec, options))
    with XrootdServer(folder) as xrootd:
        urls = [xrootd.url(p.name) for p in paths]
        listed = schema.describe(file_specs(urls), {}, trees=False)
        assert probed == []
        # Opened for writing meanwhile (a remote merge's first inputs), each once.
        assert [i.opening.result().size for i in listed] == [p.stat().st_size for p in paths]
        opened = [(s.size, s.version) for s in (cherenkov._core.RawSource.open([u]) for u in urls)]
        assert [(i.size, i.version) for i in listed] == opened and opened[1][1].startswith("mtime ")
        report = cherenkov.merge(urls, tmp_path / "merged.root", mode="copy", progress=False)
        assert report.trees["Events"].entries == 4208
        missing = xrootd.url("missing.root")
        with pytest.raises(FileNotFoundError, match="missing.root"):
            schema.describe(file_specs([*urls, missing]), {}, trees=False)
        assert probed == [missing]
        probed.clear()

        def refused(directory, options):
            raise PermissionError(f"{directory}: listing refused")

        monkeypatch.setattr(schema, "_listing", refused)  # its inputs are then probed
        assert [(i.size, i.version) for i in schema.describe(file_specs(urls), {}, trees=False)] == opened
        assert sorted(probed) == sorted(urls[1:])
    assert_same([tmp_path / "merged.root"], paths, list(TYPES))


ROOT_WRITE = """
import array, sys
import ROOT
path, seed = sys.argv[1], int(sys.argv[2])
f = ROOT.TFile(path, "RECREATE", "", 505)
t = ROOT.TTree("Events", "as a grid job writes it")
x, n, pt = array.array("d", [0.0]), array.array("i", [0]), array.array("f", [0.0] * 8)
v, s, vs = ROOT.std.vector("float")(), ROOT.std.string(), ROOT.std.vector("std::string")()
t.Branch("x", x, "x/D")
t.Branch("nMuon", n, "nMuon/I")
t.Branch("Muon_pt", pt, "Muon_pt[nMuon]/F")
t.Branch("v", v)
t.Branch("s", s)
t.Branch("vs", vs)
t.SetAutoFlush(97)
for k in range(1000):
    x[0] = k + 0.5 + 1000 * seed
    n[0] = (k * 7 + seed) % 6
    for j in range(n[0]):
        pt[j] = k + j / 10
    v.clear()
    for j in range(k % 4):
        v.push_back(-k - j)
    s.replace(0, s.size(), "e" * (k % 300))
    vs.clear()
    for j in range(k % 3):
        vs.push_back(f"{seed}-{k}-{j}")
    t.Fill()
t.Write()
f.Close()
"""

ROOT_READ = """
import json, sys
import ROOT
ROOT.gErrorIgnoreLevel = ROOT.kWarning
df = ROOT.RDataFrame("Events", sys.argv[1])
print(json.dumps({
    "x": [float(v) for v in df.Take["double"]("x")],
    "Muon_pt": [list(v) for v in df.Take["ROOT::RVec<float>"]("Muon_pt")],
    "v": [list(v) for v in df.Take["std::vector<float>"]("v")],
    "s": [str(v) for v in df.Take["std::string"]("s")],
    "vs": [[str(x) for x in v] for v in df.Take["std::vector<std::string>"]("vs")],
}))
"""


@pytest.mark.skipif(
    importlib.util.find_spec("ROOT") is None, reason="ROOT does not import here (pip install root: ROOT 6.40 is the oracle)"
)
def test_rewrite_moves_the_entries_of_root_written_files(tmp_path):
    """Inputs written by ROOT's TTree (counted leaves, std::vector, std::string, vectors of
    strings, strings past 254 bytes, clusters of 97 entries): their serialized entries are moved
    into the rewritten output, which ROOT reads without a warning, values equal."""
    paths = [tmp_path / f"root{k}.root" for k in range(2)]
    for k, p in enumerate(paths):
        subprocess.run([sys.executable, "-c", ROOT_WRITE, str(p), str(k)], check=True, timeout=300)
    assert len(cherenkov.open(paths[0])["Events"].cluster_boundaries) > 10
    out = tmp_path / "merged.root"
    report = cherenkov.merge(paths, out, mode="rewrite", progress=False)
    t = report.trees["Events"]
    assert t.moved == 2 and not t.decoded, t.decoded
    names = ["x", "nMuon", "Muon_pt", "v", "s", "vs"]
    assert_same([out], paths, names)
    assert len(cherenkov.open(out)["Events"].cluster_boundaries) == 2
    run = subprocess.run([sys.executable, "-c", ROOT_READ, str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    problems = [line for line in run.stderr.splitlines() if line.startswith(("Error", "Warning"))]
    assert not problems, problems
    got = json.loads(run.stdout)
    want = concatenated(paths, names)
    for name in ("x", "Muon_pt", "v", "s", "vs"):
        assert got[name] == want[name].tolist(), name
