"""TTrees written by cherenkov, read back by cherenkov, uproot and (where it imports) ROOT 6.40:
every number type and bool, fixed-size arrays, NanoAOD counted leaves (made or given counters),
std::vector, std::vector<std::vector>, std::string, std::vector<std::string>, records split into
prefixed branches; every compression, one and many clusters, no entries, empty lists, NaN and the
types' extremes; directories, titles, aliases, updates; errors naming the branch."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
import uproot
from conftest import form

NUMBERS = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]
CPP = {
    "bool": "bool",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "short",
    "uint16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "Long64_t",
    "uint64": "ULong64_t",
    "float32": "float",
    "float64": "double",
}
COMPRESSIONS = [0, 101, 109, 207, 404, 505, 509]


def extremes(dtype: str) -> np.ndarray:
    """The type's edge values (NaN, infinities, -0.0, limits)."""
    if dtype == "bool":
        return np.array([True, False, True])
    if dtype.startswith("float"):
        info = np.finfo(dtype)
        return np.array([0.0, -0.0, 1.5, np.nan, np.inf, -np.inf, info.max, info.min, info.tiny], dtype=dtype)
    info = np.iinfo(dtype)
    return np.array([info.min, info.max, 0, 1], dtype=dtype)


def values(dtype: str, n: int, shift: int = 0) -> np.ndarray:
    edge = extremes(dtype)
    return edge[(np.arange(n) + shift) % len(edge)]


def jagged(dtype: str, counts, shift: int = 0) -> ak.Array:
    counts = np.asarray(counts)
    return ak.unflatten(values(dtype, int(counts.sum()), shift), counts)


def counts(n: int, seed: int = 1) -> np.ndarray:
    """List lengths 0 to 4, many of them empty."""
    return np.random.default_rng(seed).integers(0, 5, n) * (np.arange(n) % 3 != 1)


def all_types(n: int) -> tuple[dict, dict]:
    """Types for `mktree` and arrays for `extend`: one column of each kind the writer holds."""
    types, data = {}, {}
    c = counts(n)
    for i, t in enumerate(NUMBERS):
        types[f"s_{t}"], data[f"s_{t}"] = t, values(t, n, i)
        types[f"a_{t}"], data[f"a_{t}"] = f"3 * {t}", values(t, 3 * n, i).reshape(n, 3)
        types[f"j_{t}"], data[f"j_{t}"] = f"var * {t}", jagged(t, c, i)
        types[f"v_{t}"], data[f"v_{t}"] = f"std::vector<{CPP[t]}>", jagged(t, c[::-1], i)
    types["a23"], data["a23"] = "2 * 3 * float32", values("float32", 6 * n).reshape(n, 2, 3)
    types["jfixed"], data["jfixed"] = "var * 3 * int16", ak.unflatten(values("int16", 3 * int(c.sum())).reshape(-1, 3), c)
    inner_counts = np.arange(int(c.sum())) % 3
    inner = ak.unflatten(values("float64", int(inner_counts.sum())), inner_counts)
    types["vv"], data["vv"] = "std::vector<std::vector<double>>", ak.unflatten(inner, c)
    inner_ints = ak.unflatten(values("int32", int(inner_counts.sum())), inner_counts)
    types["vvi"], data["vvi"] = "var * var * int32", ak.unflatten(inner_ints, c)
    words = ["", "a", "muon", "ü-ñ", "x" * 300]
    types["text"], data["text"] = "string", ak.Array([words[i % len(words)] for i in range(n)])
    flat_words = [words[i % len(words)] for i in range(int(c.sum()))]
    types["texts"], data["texts"] = "var * string", ak.unflatten(ak.Array(flat_words), c)
    muon_counts = counts(n, 2)
    types["Muon"] = "var * {pt: float32, charge: int32}"
    data["Muon"] = ak.zip({"pt": jagged("float32", muon_counts), "charge": jagged("int32", muon_counts, 1)})
    types["rec"], data["rec"] = (
        "{x: float64, y: 2 * int16}",
        ak.zip({"x": values("float64", n), "y": values("int16", 2 * n).reshape(n, 2)}, depth_limit=1),
    )
    jet_counts = counts(n, 3)
    types["nJet"], data["nJet"] = "uint32", jet_counts.astype(np.uint32)
    types["Jet_pt"], data["Jet_pt"] = "var * float32", jagged("float32", jet_counts)
    return types, data


def branches_of(data: dict) -> dict:
    """The branches a TTree holds for `data` and what each holds: records split by prefix,
    counters made for lists of numbers."""
    out = {}
    for name, array in data.items():
        array = ak.Array(array) if not isinstance(array, ak.Array) else array
        if name == "Muon":
            out["nMuon"] = ak.num(array)
            for f in ak.fields(array):
                out[f"Muon_{f}"] = array[f]
        elif name == "rec":
            for f in ak.fields(array):
                out[f"rec_{f}"] = array[f]
        else:
            if name.startswith("j_") or name == "jfixed":
                out[f"n{name}"] = ak.num(array)
            out[name] = array
    return out


def same(ours, theirs) -> bool:
    """Values equal, NaN equal to NaN, whatever the container."""
    a, b = ak.to_list(ours), ak.to_list(theirs)
    return _same(a, b)


def _same(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


def flat(x) -> list:
    return [y for v in x for y in flat(v)] if isinstance(x, list) else [x]


def is_flat(x) -> bool:
    return isinstance(x, list) and not any(isinstance(v, list) for v in x)


def write(path, types, chunks, **options) -> None:
    with cherenkov.recreate(path, compression=options.pop("compression", 505)) as f:
        tree = f.mktree("Events", types, **options)
        for chunk in chunks:
            tree.extend(chunk)


@pytest.fixture(scope="module")
def every_type(tmp_path_factory):
    n = 200
    types, data = all_types(n)
    path = tmp_path_factory.mktemp("write") / "types.root"
    half = {k: v[: n // 2] for k, v in data.items()}
    rest = {k: v[n // 2 :] for k, v in data.items()}
    write(path, types, [half, rest], title="all the types", titles={"s_float32": "a float"}, aliases={"twice": "2*s_float32"})
    return path, branches_of(data)


def test_every_type_reads_back_equal_with_cherenkov(every_type):
    path, expected = every_type
    tree = cherenkov.open(path)["Events"]
    assert tree.num_entries == 200
    read = tree.arrays(list(expected), library="ak")
    for name, want in expected.items():
        assert same(read[name], want), name


def test_every_type_reads_back_equal_with_uproot_and_in_cherenkov_s_forms(every_type):
    path, expected = every_type
    utree = uproot.open(path)["Events"]
    assert sorted(utree.keys()) == sorted(expected)
    theirs = utree.arrays(list(expected), library="ak")
    ours = cherenkov.open(path)["Events"].arrays(list(expected), library="ak")
    for name, want in expected.items():
        assert same(theirs[name], want), name
        assert form(ours[name]) == form(theirs[name]), name


def test_branch_layout_is_root_s(every_type):
    path, _ = every_type
    utree = uproot.open(path)["Events"]
    assert utree.title == "all the types"
    assert utree["s_float32"].title == "a float"
    assert utree["j_float32"].title == "j_float32[nj_float32]/F"
    assert utree["j_float32"].count_branch.name == "nj_float32"
    assert utree["Muon_pt"].count_branch.name == utree["Muon_charge"].count_branch.name == "nMuon"
    assert utree["Jet_pt"].count_branch.name == "nJet"
    assert utree["nJet"].interpretation.from_dtype == np.dtype(">u4")
    assert utree.aliases == {"twice": "2*s_float32"}
    assert utree["v_float32"].typename == "std::vector<float>"
    assert utree["vv"].typename == "std::vector<std::vector<double>>"
    assert utree["texts"].typename == "std::vector<std::string>"
    assert utree["text"].typename == "std::string"
    names = list(utree.keys())
    assert names.index("nJet") < names.index("Jet_pt") and names.index("nMuon") < names.index("Muon_pt")


ROOT_READER = Path(__file__).with_name("root_read_tree.py")


def root_available() -> bool:
    if importlib.util.find_spec("ROOT") is None:
        return False
    return subprocess.run([sys.executable, "-c", "import ROOT"], capture_output=True, timeout=120).returncode == 0


needs_root = pytest.mark.skipif(not root_available(), reason="ROOT does not import here (pip install root: ROOT 6.40 is the oracle)")


@needs_root
def test_every_type_reads_back_equal_with_root_without_a_warning(every_type):
    path, expected = every_type
    names = list(expected)
    run = subprocess.run([sys.executable, str(ROOT_READER), str(path), "Events", *names], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    problems = [line for line in run.stderr.splitlines() if line.startswith(("Error", "Warning"))]
    assert not problems, problems
    read = json.loads(run.stdout)
    for name, want in expected.items():
        # ROOT's TTreeReaderArray gives a leaf's numbers flat (fixed-size dimensions included).
        want = [flat(w) if is_flat(g) else w for w, g in zip(ak.to_list(want), read[name])]
        assert _same(read[name], want), name


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_compression_reads_back(tmp_path, compression):
    n = 500
    types = {"x": "float64", "j": "var * float32", "v": "std::vector<int16_t>", "s": "string"}
    data = {
        "x": values("float64", n),
        "j": jagged("float32", counts(n)),
        "v": jagged("int16", counts(n, 5)),
        "s": ak.Array([str(i) * (i % 7) for i in range(n)]),
    }
    path = tmp_path / f"c{compression}.root"
    write(path, types, [data], compression=compression)
    expected = branches_of(data)
    ours = cherenkov.open(path)["Events"]
    assert {b.compression for b in ours.branches} == {compression}
    read = ours.arrays(list(expected), library="ak")
    theirs = uproot.open(path)["Events"].arrays(list(expected), library="ak")
    for name, want in expected.items():
        assert same(read[name], want) and same(theirs[name], want), (compression, name)


def test_many_clusters_hold_one_basket_per_branch_each(tmp_path):
    n = 20_000
    types = {"x": "float64", "j": "var * float32", "s": "string"}
    data = {"x": values("float64", n), "j": jagged("float32", counts(n)), "s": ak.Array(["abc"[: i % 4] for i in range(n)])}
    path = tmp_path / "clusters.root"
    chunks = [{k: v[a:b] for k, v in data.items()} for a, b in [(0, 1), (1, 7_000), (7_000, n)]]
    write(path, types, chunks, cluster_bytes=50_000)
    tree = cherenkov.open(path)["Events"]
    bounds = list(tree.cluster_boundaries)
    assert len(bounds) > 6
    for b in tree.branches:
        assert [*b.basket_entry_starts, n] == bounds, b.name
    assert list(uproot.open(path)["Events"].common_entry_offsets()) == bounds
    read = tree.arrays(["x", "j", "s"], library="ak")
    assert all(same(read[k], v) for k, v in data.items())


def test_no_entries_and_empty_lists(tmp_path):
    path = tmp_path / "empty.root"
    types = {"x": "float32", "j": "var * float32", "v": "std::vector<double>", "s": "var * string"}
    write(path, types, [])
    for tree in (cherenkov.open(path)["Events"], uproot.open(path)["Events"]):
        assert tree.num_entries == 0
        assert len(tree.arrays(["x", "j", "v", "s"], library="ak")) == 0
    path = tmp_path / "empty-lists.root"
    data = {"x": np.zeros(3, np.float32), "j": ak.Array([[], [], []]), "v": ak.Array([[], [], []]), "s": ak.Array([[], [], []])}
    write(path, types, [data])
    for tree in (cherenkov.open(path)["Events"], uproot.open(path)["Events"]):
        read = tree.arrays(["j", "v", "s"], library="ak")
        assert all(read[k].tolist() == [[], [], []] for k in ["j", "v", "s"])


def test_setitem_writes_arrays_chunks_and_streams(tmp_path, every_type):
    source, expected = every_type
    path = tmp_path / "stream.root"
    names = ["s_float32", "nJet", "Jet_pt", "nMuon", "Muon_pt", "text"]
    with cherenkov.recreate(path) as f:
        f["copy"] = cherenkov.open(source)["Events"].arrays(names)
        f.mkdir("skims")["skim"] = (c[c.nJet > 0] for c in cherenkov.iterate(f"{source}:Events", names, step_size=40))
    mask = expected["nJet"] > 0
    copy = uproot.open(path)["copy"].arrays(names)
    skim = uproot.open(path)["skims/skim"].arrays(names)
    for n in names:
        assert same(copy[n], expected[n]), n
        assert same(skim[n], expected[n][mask]), n
    assert uproot.open(path)["skims/skim"]["Jet_pt"].count_branch.name == "nJet"


def test_update_adds_trees_to_an_existing_file(tmp_path):
    path = tmp_path / "update.root"
    with uproot.recreate(path) as f:
        f["first"] = {"x": np.arange(5.0)}
    with cherenkov.update(path) as f:
        f["second"] = {"y": np.arange(3, dtype=np.int32)}
        f.mkdir("d")["third"] = {"z": ak.Array([[1.0], [], [2.0, 3.0]])}
    u = uproot.open(path)
    assert u["first"]["x"].array().tolist() == [0, 1, 2, 3, 4]
    assert u["second"]["y"].array().tolist() == [0, 1, 2]
    assert cherenkov.open(path)["d/third"].arrays(["z"])["z"].tolist() == [[1.0], [], [2.0, 3.0]]


@pytest.mark.parametrize(
    "types, data, message",
    [
        ({"h": "float16"}, {"h": np.zeros(2, np.float16)}, "branch 'Events/h'"),
        ({"deep": "var * var * var * float32"}, None, "at most lists of lists"),
        (
            {"x": "float32", "y": "float32"},
            {"x": np.zeros(2, np.float32), "y": np.zeros(3, np.float32)},
            "'y' has 3 entries, but 'x' has 2",
        ),
        (
            {"nJet": "int32", "Jet_pt": "var * float32"},
            {"nJet": np.array([1, 1], np.int32), "Jet_pt": ak.Array([[1.0], []])},
            "'Jet_pt' has another number of items than its counter 'nJet' in entry 1",
        ),
        ({"x": "float32"}, {"x": np.zeros(2, np.complex64)}, "complex64"),
    ],
)
def test_what_a_ttree_cannot_hold_is_an_error_naming_the_branch(tmp_path, types, data, message):
    path = tmp_path / "bad.root"
    with pytest.raises((cherenkov.CherenkovError, ValueError, TypeError)) as raised:
        with cherenkov.recreate(path) as f:
            tree = f.mktree("Events", types)
            tree.extend(data)
    assert message in str(raised.value)
    assert not path.exists() and not [p for p in os.listdir(tmp_path) if p.endswith(".part")]


def test_a_failed_write_leaves_no_file(tmp_path):
    path = tmp_path / "failed.root"
    with pytest.raises(RuntimeError):
        with cherenkov.recreate(path) as f:
            f["Events"] = {"x": np.arange(10.0)}
            raise RuntimeError("the analysis failed")
    assert os.listdir(tmp_path) == []


FULL_DISK = r"""
import resource, signal, sys, numpy as np, cherenkov
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
rng = np.random.default_rng(1)
try:
    with cherenkov.recreate(sys.argv[1], compression=0) as f:
        f["Events"] = {"noise": rng.random(1_000_000)}
except OSError as e:
    print("OSError", e.errno, e)
"""


def test_a_disk_that_refuses_bytes_is_an_os_error_naming_file_tree_and_branch(tmp_path):
    path = tmp_path / "full.root"
    run = subprocess.run([sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True, timeout=120)
    assert run.stdout.startswith("OSError 27"), run.stdout + run.stderr  # EFBIG: past the size limit
    assert str(path) in run.stdout and "tree 'Events', branch 'noise'" in run.stdout
    assert os.listdir(tmp_path) == []


def test_numpy_reads_and_lazy_chunks_write_back(tmp_path, every_type):
    source, expected = every_type
    names = ["s_int16", "nj_float64", "j_float64", "a_uint8", "text"]
    path = tmp_path / "from-np.root"
    tree = cherenkov.open(source)["Events"]
    with cherenkov.recreate(path) as f:
        f["numpy"] = tree.arrays(names, library="np")  # jagged as cherenkov.Jagged, strings as objects
        f["lazy"] = tree.chunks(step_size=50)  # every readable branch of each chunk
    read = cherenkov.open(path)
    numpy = read["numpy"].arrays(names, library="ak")
    assert all(same(numpy[n], expected[n]) for n in names)
    lazy = read["lazy"]
    assert lazy.num_entries == 200 and same(lazy.arrays(["j_float64"])["j_float64"], expected["j_float64"])
