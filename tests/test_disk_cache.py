"""The disk cache (`cherenkov.open(url, cache=DIR)`) on real xrootd and nginx servers: a second pass
reads the disk only and equals the first, a file replaced on the server is read anew, several
processes share one cache and fetch each range once, a process killed while filling it leaves a
cache that reads correctly, a cache that cannot be written reads through."""

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cherenkov
import numpy as np
import pytest
from cherenkov import _core
from cherenkov_lab import Lab
from conftest import same_values, shared_root_files

FILES = shared_root_files()
pytestmark = [
    pytest.mark.skipif(not FILES, reason="../shared/testdata is absent: set CHERENKOV_SHARED"),
    pytest.mark.skipif(
        not (shutil.which("xrootd") and shutil.which("nginx")),
        reason="xrootd and nginx are not installed: run `make setup`",
    ),
]
NANO = "nanolike-root6.40-zstd-4clusters.root"


@pytest.fixture(scope="module")
def served(testdata):
    """A served directory the tests may change: copies of the shared files, readable by the
    servers' unprivileged user."""
    root = Path(tempfile.mkdtemp(prefix="cherenkov-cache-served-"))
    root.chmod(0o755)
    for path in FILES:
        shutil.copy(path, root / path.name)
        (root / path.name).chmod(0o644)
    try:
        with Lab(root) as lab:
            yield lab, root
    finally:
        shutil.rmtree(root)


@pytest.fixture(params=["http", "root"])
def protocol(request):
    return request.param


def read_all(f) -> dict:
    out = {}
    for key, cls in f.classnames().items():
        if cls == "TTree":
            names = [b.path for b in f[key].branches if b.readable]
            for name, array in f[key].arrays(names, library="np").items():
                out[key, name] = array
    return out


def test_a_second_pass_reads_every_file_from_the_disk(served, protocol, tmp_path):
    lab, _ = served
    hits = 0
    for path in FILES:
        url = lab.url(protocol, path.name)
        read_all(cherenkov.open(url, cache=tmp_path))
        second = cherenkov.open(url, cache=tmp_path)
        opened = second.source_counters().requests
        again = read_all(second)
        counters = second.source_counters()
        assert counters.requests == opened, f"{path.name}: {counters.requests - opened} requests after opening"
        assert counters.disk_cache_misses == 0, (path.name, counters)
        hits += counters.disk_cache_hits
        local = read_all(cherenkov.open(path))
        assert again.keys() == local.keys()
        for key in local:
            assert same_values(again[key], local[key]), (protocol, path.name, key)
    assert _core.cache_summary(str(tmp_path))[0] == len(FILES)
    assert hits > 100  # small files come whole with the opening request (HTTP) and need no reads
    assert second.stats().disk_cache_hits == counters.disk_cache_hits


def write_random(path: Path, seed: int) -> None:
    """A 2.4 MB uncompressed tree: larger than what HTTP's opening request brings whole; files of
    two seeds have the same size and differ in content."""
    import uproot

    x = np.random.default_rng(seed).normal(size=300_000)
    with uproot.recreate(path, compression=None) as f:
        f["t"] = {"x": x}
    path.chmod(0o644)


def test_a_file_replaced_on_the_server_is_read_anew(served, protocol, tmp_path):
    lab, root = served
    name = f"replaced-{protocol}.root"
    write_random(root / name, 1)
    url = lab.url(protocol, name)
    first = cherenkov.open(url, cache=tmp_path)["t"].arrays(["x"], library="np")["x"]
    before = (root / name).stat().st_mtime
    write_random(root / name, 2)
    # XRootD gives the modification time in whole seconds: a file replaced later than the second
    # it was written in (HTTP's ETag and the file's head tell even a replacement within it).
    os.utime(root / name, (before + 2, before + 2))
    f = cherenkov.open(url, cache=tmp_path)
    got = f["t"].arrays(["x"], library="np")["x"]
    assert np.array_equal(got, np.random.default_rng(2).normal(size=300_000))
    assert not np.array_equal(got, first)
    assert f.source_counters().disk_cache_hits == 0


def read_in_process(url: str, cache: str, out) -> None:
    f = cherenkov.open(url, cache=cache)
    tree = f["Events"]
    names = [b.path for b in tree.branches if b.readable][:200]
    arrays = tree.arrays(names, library="np")
    total = sum(float(np.sum(a.content if isinstance(a, cherenkov.Jagged) else a)) for a in arrays.values())
    out.put((total, f.source_counters().disk_cache_misses, f.source_counters().disk_cache_hits))


def test_four_processes_share_one_cache_and_fetch_each_range_once(served, tmp_path):
    lab, _ = served
    url = lab.url("http", NANO)
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    workers = [context.Process(target=read_in_process, args=(url, str(tmp_path), out)) for _ in range(4)]
    for w in workers:
        w.start()
    results = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    totals = {r[0] for r in results}
    assert len(totals) == 1, totals
    # Alone, one process fetches every range it reads; together, the four fetch each once.
    alone = multiprocessing.get_context("spawn").Queue()
    read_in_process(url, str(tmp_path / "alone"), alone)
    _, ranges, _ = alone.get(timeout=10)
    fetched = sum(r[1] for r in results)
    print(f"4 processes: {fetched} ranges fetched in all, {ranges} for one process alone")
    assert fetched == ranges


KILLED_READER = """
import sys, cherenkov
f = cherenkov.open(sys.argv[1], cache=sys.argv[2])
tree = f["Events"]
for _ in tree.iterate([b.path for b in tree.branches if b.readable], step_size=1, steps_ahead=0, library="np", progress=False):
    pass
"""


def test_a_process_killed_while_filling_the_cache_leaves_it_usable(served, tmp_path):
    lab, _ = served
    url = lab.url("http", NANO)
    # One cluster at a time, slow enough to be killed in the middle of the file. The delay stays
    # for the read after it: toxiproxy may stall a new connection when a toxic is removed while
    # the killed reader's connection still holds delayed data.
    lab.set_rtt(300)
    try:
        reader = subprocess.Popen([sys.executable, "-c", KILLED_READER, url, str(tmp_path)])
        try:
            for _ in range(600):  # at most 60 s for its first entries to be written
                if _core.cache_summary(str(tmp_path))[1] > 0 or reader.poll() is not None:
                    break
                time.sleep(0.1)
        finally:
            reader.send_signal(signal.SIGKILL)
            reader.wait(timeout=30)
        assert reader.returncode == -signal.SIGKILL, "the reader ended before it was killed"
        files, cached, _ = _core.cache_summary(str(tmp_path))
        assert (files, cached > 0) == (1, True)
        f = cherenkov.open(url, cache=tmp_path)
        got = read_all(f)
    finally:
        lab.set_rtt(0)
    local = read_all(cherenkov.open(FILES[0].parent / NANO))
    assert got.keys() == local.keys()
    for key in local:
        assert same_values(got[key], local[key]), key
    counters = f.source_counters()
    assert counters.disk_cache_hits > 0 and counters.disk_cache_misses > 0, counters


def test_a_cache_that_cannot_be_written_reads_through(served, capfd, tmp_path):
    lab, _ = served
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory should be")
    f = cherenkov.open(lab.url("http", NANO), cache=blocked)
    tree = f["Events"]
    local = cherenkov.open(FILES[0].parent / NANO)["Events"]
    assert same_values(tree.arrays(["Muon_pt"], library="np")["Muon_pt"], local.arrays(["Muon_pt"], library="np")["Muon_pt"])
    assert "cannot be written" in capfd.readouterr().err


def test_the_cli_reports_prunes_and_clears(served, tmp_path, capsys):
    lab, _ = served
    # One cluster per request: one entry each, so that pruning to half the size keeps some.
    tree = cherenkov.open(lab.url("http", NANO), cache=tmp_path)["Events"]
    for _ in tree.iterate([b.path for b in tree.branches if b.readable], step_size=1, steps_ahead=0, library="np", progress=False):
        pass
    del tree
    files, entries, size = _core.cache_summary(str(tmp_path))
    assert (files, entries) == (1, entries) and entries > 0 and size > 0
    from cherenkov.cli import main

    assert main(["cache", "prune", "--dir", str(tmp_path), "--max-bytes", str(size // 2)]) == 0
    assert 0 < _core.cache_summary(str(tmp_path))[2] <= size // 2
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert _core.cache_summary(str(tmp_path)) == (0, 0, 0)
    assert "0 ranges" in capsys.readouterr().out


def test_direct_io_reads_the_same_values_locally_and_through_the_cache(served, tmp_path):
    """`direct_io=True` (O_DIRECT on ext4, xfs; read as usual where refused): the same values as
    a read through the page cache, from a local file and from the disk cache's entries."""
    lab, root = served
    path = root / NANO
    plain = read_all(cherenkov.open(path))
    direct = read_all(cherenkov.open(path, direct_io=True))
    url = lab.url("http", NANO)
    read_all(cherenkov.open(url, cache=tmp_path, direct_io=True))
    second = cherenkov.open(url, cache=tmp_path, direct_io=True)
    cached = read_all(second)
    counters = second.source_counters()
    assert counters.disk_cache_misses == 0 and counters.disk_cache_hits > 0, counters
    assert plain.keys() == direct.keys() == cached.keys() and plain
    for key in plain:
        assert same_values(direct[key], plain[key]), key
        assert same_values(cached[key], plain[key]), key
