"""root:// and http:// against real servers on 127.0.0.1 (xrootd, nginx), with latency and faults
injected by toxiproxy: remote reads equal local reads, and cost the round trips they should."""

import shutil
import time

import cherenkov
import pytest
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
PROTOCOLS = ["http", "root"]


@pytest.fixture(scope="module")
def lab(testdata):
    with Lab(testdata) as lab:
        yield lab


@pytest.fixture(params=PROTOCOLS)
def protocol(request):
    return request.param


def test_every_file_reads_the_same_as_locally(lab, protocol):
    for path in FILES:
        local = cherenkov.open(path)
        remote = cherenkov.open(lab.url(protocol, path.name))
        assert remote.keys() == local.keys(), path.name
        for key, cls in local.classnames().items():
            if cls != "TTree":
                continue
            names = [b.path for b in local[key].branches if b.readable]
            ours, theirs = remote[key].arrays(names, library="np"), local[key].arrays(names, library="np")
            for n in names:
                assert same_values(ours[n], theirs[n]), (protocol, path.name, key, n)


def test_open_and_list_a_tree_in_two_round_trips(lab, protocol):
    lab.set_rtt(50)
    try:
        t0 = time.perf_counter()
        f = cherenkov.open(lab.url(protocol, "nanolike-root6.40-zstd-4clusters.root"))
        tree = f["Events"]
        elapsed = time.perf_counter() - t0
        assert len(tree.branches) == 947
        assert f._core.requests_since_open <= 2
        print(f"{protocol}: open and list at 50 ms RTT in {elapsed:.3f} s, {f._core.requests_since_open} requests after connecting")
    finally:
        lab.set_rtt(0)


def test_a_read_of_many_baskets_is_one_round_trip(lab, protocol):
    """3878 baskets: one vectored read, split by the server's limits (xrootd: 1024 ranges per
    readv) into requests that are all sent together."""
    f = cherenkov.open(lab.url(protocol, "nanolike-root6.40-zstd-4clusters.root"))
    tree = f["Events"]
    names = [b.path for b in tree.branches if b.readable]
    before = f.source_counters()
    _, stats = tree.read(names)
    after = f.source_counters()
    assert stats.baskets > 2000
    assert after.round_trips - before.round_trips <= 2
    assert after.requests - before.requests <= stats.baskets // 1000 + 2


def test_a_dead_server_is_a_clear_error_within_bounded_time(lab, protocol):
    # A file larger than what opening reads (small files come whole with the first HTTP answer).
    f = cherenkov.open(lab.url(protocol, "nanolike-root6.40-zstd-4clusters.root"), timeout=2, retries=1)
    tree = f["Events"]
    proxy = lab.proxy_name(protocol)
    lab.toxiproxy.enable(proxy, False)
    try:
        t0 = time.perf_counter()
        with pytest.raises(cherenkov.SourceError, match="127.0.0.1"):
            tree.arrays(["Muon_pt"])
        assert time.perf_counter() - t0 < 30
    finally:
        lab.toxiproxy.enable(proxy, True)
    assert len(tree.arrays(["Muon_pt"], library="np")["Muon_pt"]) == tree.num_entries  # and it recovers


def test_a_silent_server_times_out(lab, protocol):
    f = cherenkov.open(lab.url(protocol, "nanolike-root6.40-zstd-4clusters.root"), timeout=1, retries=0)
    tree = f["Events"]
    proxy = lab.proxy_name(protocol)
    lab.toxiproxy.toxic(proxy, "silence", "timeout", stream="downstream", timeout=0)
    try:
        t0 = time.perf_counter()
        with pytest.raises(cherenkov.SourceError):
            tree.arrays(["Muon_pt"])
        assert time.perf_counter() - t0 < 20
    finally:
        lab.toxiproxy.remove_toxic(proxy, "silence")


def test_cli_on_remote_urls_and_wrong_inputs(lab, protocol, capsys):
    from cherenkov.cli import main as cli

    url = lab.url(protocol, "uproot-HZZ.root")
    assert cli(["ls", url]) == 0
    assert "Muon_Px" in capsys.readouterr().out
    assert cli(["stats", url, "--branches", "Muon_*", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"requests"' in out and '"per_source"' in out
    bad = url.replace(str(lab.ports[protocol]), "1")  # nothing listens on port 1
    assert cli(["ls", bad]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cherenkov: error:") and "127.0.0.1:1" in err and "Traceback" not in err
    assert cli(["read", url, "--tree", "nope"]) == 1
    assert "no object named 'nope'" in capsys.readouterr().err


def test_a_file_that_opening_brought_whole_reads_with_no_request_more(lab, protocol):
    """A file no larger than the opening's head and tail (here 218 kB) came whole with the
    opening's read: its baskets are taken from there."""
    name = "uproot-HZZ.root"
    f = cherenkov.open(lab.url(protocol, name))
    tree = f["events"]
    names = [b.path for b in tree.branches if b.readable]
    before = f.source_counters()
    remote, stats = tree.arrays(names, library="np"), tree.read(names)[1]
    assert f.source_counters().requests == before.requests
    assert stats.baskets > 50 and stats.compressed_bytes > 100_000
    local = cherenkov.open(next(p for p in FILES if p.name == name))["events"].arrays(names, library="np")
    for n in names:
        assert same_values(remote[n], local[n]), (protocol, n)
