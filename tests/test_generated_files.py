"""Files written here by uproot's writer (no ../shared needed), read by cherenkov and compared value
by value with uproot reading the same file: every numeric type, fixed-size and jagged arrays,
every compression, several baskets per branch, entry ranges across basket boundaries, iteration."""

import awkward as ak
import cherenkov
import numpy as np
import pytest

uproot = pytest.importorskip("uproot")

DTYPES = [np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")]
# Entries per `extend` call; each call writes one basket per branch. The 1-entry chunk and the
# chunk of empty lists make boundaries that are easy to get wrong.
CHUNKS = [137, 300, 1, 62, 200, 300]
ENTRIES = sum(CHUNKS)  # 1000
BASKET_STARTS = np.cumsum([0] + CHUNKS)[:-1].tolist()  # 0, 137, 437, 438, 500, 700
EMPTY_LISTS_CHUNK = 3  # in this chunk every jagged entry is empty
COMPRESSIONS = {
    "zlib": uproot.ZLIB(4),
    "lzma": uproot.LZMA(2),
    "lz4": uproot.LZ4(1),
    "zstd": uproot.ZSTD(3),
    "uncompressed": None,
}
TREE = "tree"


# ---------------------------------------------------------------- writing the files


def random_values(rng: np.random.Generator, dtype: np.dtype, size: int) -> np.ndarray:
    """Random values over the type's whole range, with its extremes (and NaN, infinities, -0.0 and
    subnormals for floats) among them."""
    if dtype.kind == "b":
        return rng.integers(0, 2, size).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
        specials = np.array([info.min, info.max, 0, 1], dtype=dtype)
    else:
        info = np.finfo(dtype)
        values = (rng.standard_normal(size) * 1000).astype(dtype)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, info.max, info.min, info.tiny, info.smallest_subnormal], dtype=dtype)
    k = min(size, len(specials))
    values[rng.choice(size, k, replace=False)] = specials[:k]
    return values


def jagged(rng, dtype, counts) -> ak.Array:
    return ak.unflatten(random_values(rng, dtype, int(counts.sum())), counts)


def make_chunk(rng: np.random.Generator, n: int, empty_lists: bool) -> dict:
    """67 branches: for each dtype a scalar, a (3,) and a (2, 3) array, a jagged array with its own
    counter, and a field of the record `particle`, whose jagged fields share the counter nparticle."""

    def counts():
        return np.zeros(n, dtype=np.int64) if empty_lists else rng.integers(0, 6, n)

    shared = counts()
    chunk, particle = {}, {}
    for dtype in DTYPES:
        chunk[f"scalar_{dtype.name}"] = random_values(rng, dtype, n)
        chunk[f"vec3_{dtype.name}"] = random_values(rng, dtype, 3 * n).reshape(n, 3)
        chunk[f"mat23_{dtype.name}"] = random_values(rng, dtype, 6 * n).reshape(n, 2, 3)
        chunk[f"jagged_{dtype.name}"] = jagged(rng, dtype, counts())
        particle[dtype.name] = jagged(rng, dtype, shared)
    chunk["particle"] = ak.zip(particle)
    return chunk


def branch_types(chunk: dict) -> dict:
    return {k: v.type.content if isinstance(v, ak.Array) else np.dtype((v.dtype, v.shape[1:])) for k, v in chunk.items()}


def write_file(path, compression, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    with uproot.recreate(path, compression=compression) as out:
        for i, n in enumerate(CHUNKS):
            chunk = make_chunk(rng, n, empty_lists=i == EMPTY_LISTS_CHUNK)
            if i == 0:
                out.mktree(TREE, branch_types(chunk))
            out[TREE].extend(chunk)


@pytest.fixture(scope="session", params=list(COMPRESSIONS))
def generated(request, tmp_path_factory):
    """(path, uproot's reading of the whole tree as awkward arrays) for each compression."""
    path = tmp_path_factory.mktemp("generated") / f"all-types-{request.param}.root"
    write_file(path, COMPRESSIONS[request.param])
    return path, uproot.open(path)[TREE].arrays(library="ak")


@pytest.fixture(scope="session")
def zstd_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("generated") / "all-types-zstd.root"
    write_file(path, uproot.ZSTD(3))
    return path


# ---------------------------------------------------------------- comparing


def assert_numpy_equal(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    assert ours.dtype == theirs.dtype.newbyteorder("="), (what, ours.dtype, theirs.dtype)
    assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
    assert np.array_equal(ours, theirs, equal_nan=ours.dtype.kind == "f"), what


def assert_same_as_uproot_np(ours, theirs: ak.Array, name: str) -> None:
    """One branch read with library="np" against uproot's awkward array of it."""
    if theirs.ndim > 1 and isinstance(theirs.type.content, ak.types.ListType):  # var * ...
        assert isinstance(ours, cherenkov.Jagged), (name, type(ours))
        assert ours.counts.tolist() == ak.num(theirs, axis=1).tolist(), name
        assert_numpy_equal(ours.content[ours.offsets[0] : ours.offsets[-1]], ak.to_numpy(ak.flatten(theirs)), name)
    else:
        assert isinstance(ours, np.ndarray), (name, type(ours))
        assert_numpy_equal(ours, ak.to_numpy(theirs), name)


def assert_same_awkward(ours: ak.Array, theirs: ak.Array, name: str) -> None:
    assert str(ours.type) == str(theirs.type), (name, str(ours.type), str(theirs.type))
    if theirs.ndim > 1 and isinstance(theirs.type.content, ak.types.ListType):
        assert ak.num(ours, axis=1).tolist() == ak.num(theirs, axis=1).tolist(), name
    assert_numpy_equal(ak.to_numpy(ak.flatten(ours, axis=None)), ak.to_numpy(ak.flatten(theirs, axis=None)), name)


def branch_names(path) -> list[str]:
    return [b.name for b in cherenkov.open(path)[TREE].branches]


# ---------------------------------------------------------------- tests


def test_branches_are_listed_like_uproot(generated):
    path, _ = generated
    tree = cherenkov.open(path)[TREE]
    theirs = uproot.open(path)[TREE]
    assert tree.num_entries == ENTRIES
    assert [b.name for b in tree.branches] == theirs.keys()
    assert len(tree.branches) == 67
    for b in tree.branches:
        assert b.readable, (b.name, b.unsupported)
        assert b.num_baskets == theirs[b.name].num_baskets == len(CHUNKS), b.name
    kinds = {b.name: b.kind for b in tree.branches}
    assert kinds["scalar_float64"] == kinds["mat23_uint16"] == kinds["nparticle"] == "fixed"
    assert kinds["jagged_int8"] == kinds["particle_bool"] == "jagged"


def test_every_branch_equals_uproot_numpy(generated):
    path, theirs = generated
    ours = cherenkov.open(path)[TREE].arrays(library="np")
    assert sorted(ours) == sorted(theirs.fields)
    for name in theirs.fields:
        assert_same_as_uproot_np(ours[name], theirs[name], name)


def test_every_branch_equals_uproot_awkward(generated):
    path, theirs = generated
    ours = cherenkov.open(path)[TREE].arrays(library="ak")
    assert ours.fields == theirs.fields
    assert len(ours) == ENTRIES
    for name in theirs.fields:
        assert_same_awkward(ours[name], theirs[name], name)


@pytest.mark.parametrize(
    "start, stop",
    [
        (0, 1),
        (136, 138),  # the first basket's last entry and the second's first
        (437, 438),  # the one-entry basket alone
        (430, 520),  # four baskets, one of them with only empty lists
        (100, 900),
        (999, 1000),
        (700, 700),  # nothing
        (-50, None),  # counted from the end
    ],
)
def test_entry_ranges_equal_uproot(zstd_file, start, stop):
    ours = cherenkov.open(zstd_file)[TREE].arrays(entry_start=start, entry_stop=stop, library="np")
    theirs = uproot.open(zstd_file)[TREE].arrays(entry_start=start, entry_stop=stop, library="ak")
    for name in theirs.fields:
        assert len(ours[name]) == len(theirs), name
        assert_same_as_uproot_np(ours[name], theirs[name], name)


def test_entry_ranges_in_awkward_equal_uproot(zstd_file):
    ours = cherenkov.open(zstd_file)[TREE].arrays(entry_start=130, entry_stop=560, library="ak")
    theirs = uproot.open(zstd_file)[TREE].arrays(entry_start=130, entry_stop=560, library="ak")
    for name in theirs.fields:
        assert_same_awkward(ours[name], theirs[name], name)


@pytest.mark.parametrize("step_size", [1, 150, 400, 10_000])
def test_iterate_concatenated_equals_full_read(zstd_file, step_size):
    tree = cherenkov.open(zstd_file)[TREE]
    full = tree.arrays(library="ak")
    steps = list(tree.iterate(step_size=step_size, library="ak"))
    assert sum(len(s) for s in steps) == ENTRIES
    joined = ak.concatenate(steps)
    for name in full.fields:
        assert_same_awkward(joined[name], full[name], name)


def test_iterate_over_an_entry_range_equals_reading_it(zstd_file):
    tree = cherenkov.open(zstd_file)[TREE]
    names = ["jagged_float32", "particle_int64", "mat23_bool", "scalar_uint64"]
    joined = ak.concatenate(list(tree.iterate(names, step_size=100, entry_start=120, entry_stop=810, library="ak")))
    direct = tree.arrays(names, entry_start=120, entry_stop=810, library="ak")
    for name in names:
        assert_same_awkward(joined[name], direct[name], name)


def test_iterate_in_numpy_equals_full_read(zstd_file):
    tree = cherenkov.open(zstd_file)[TREE]
    name = "jagged_uint32"
    full = tree.arrays([name], library="np")[name]
    pieces = [step[name] for step in tree.iterate([name], step_size=200, library="np")]
    counts = np.concatenate([p.counts for p in pieces])
    content = np.concatenate([p.content[p.offsets[0] : p.offsets[-1]] for p in pieces])
    assert counts.tolist() == full.counts.tolist()
    assert_numpy_equal(content, full.content[full.offsets[0] : full.offsets[-1]], name)


def test_cluster_boundaries_cover_the_tree(generated):
    path, _ = generated
    tree = cherenkov.open(path)[TREE]
    bounds = tree.cluster_boundaries
    assert bounds[0] == 0
    assert bounds[-1] == tree.num_entries == ENTRIES
    assert np.all(np.diff(bounds) > 0), bounds.tolist()


def test_steps_are_made_of_whole_clusters(zstd_file):
    tree = cherenkov.open(zstd_file)[TREE]
    bounds = set(tree.cluster_boundaries.tolist())
    steps = tree.steps(150)
    assert steps[0][0] == 0 and steps[-1][1] == ENTRIES
    assert all(a[1] == b[0] for a, b in zip(steps, steps[1:]))
    assert all(lo in bounds and hi in bounds for lo, hi in steps)
