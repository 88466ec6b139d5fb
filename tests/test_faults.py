"""Faults that happen in production, on real servers (xrootd and nginx, behind toxiproxy) and on a
small test server (tests/fault_server.py) for what they cannot be made to do on demand: each case
gives uproot's values or a clear error naming the file and the cause, in bounded time.

Every read runs under `bounded()`: a read still running after its bound fails the test as a hang
(the bounds are generous; the time taken is printed, never asserted)."""

import os
import shutil
import socket
import stat
import tempfile
import threading
import warnings
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
import uproot
from cherenkov_lab import Lab, NginxServer, Toxiproxy, XrootdServer
from conftest import TESTDATA, bounded, wait_for
from fault_server import FaultServer

NAME = "nanolike-root6.40-zstd-4clusters.root"
pytestmark = [
    pytest.mark.skipif(not (TESTDATA / NAME).exists(), reason=f"{TESTDATA / NAME} is absent: set CHERENKOV_SHARED"),
    pytest.mark.skipif(
        not (shutil.which("xrootd") and shutil.which("nginx")), reason="xrootd and nginx are not installed: run `make setup`"
    ),
]
PROTOCOLS = ["http", "root"]


_UPROOT = {}


def uproot_arrays(path: Path, names: list[str], tree: str = "Events"):
    key = (str(path), tuple(names))
    if key not in _UPROOT:
        _UPROOT[key] = uproot.open(path)[tree].arrays(names, library="ak")
    return _UPROOT[key]


def assert_same_as_uproot(arrays, path: Path, names: list[str], tree: str = "Events"):
    theirs = uproot_arrays(path, names, tree)
    for n in names:
        assert ak.array_equal(arrays[n], theirs[n]), n


def some_branches(tree, count: int = 60) -> list[str]:
    """Readable branches spread over the tree (flat and jagged, several kinds)."""
    names = [b.path for b in tree.branches if b.readable]
    return names[:: max(1, len(names) // count)][:count]


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.fixture(scope="module")
def lab(testdata):
    with Lab(testdata) as lab:
        yield lab


# Fault 4: a blip of half a second in the middle of a read (retries back off over seconds).


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("fault", ["link cut", "connections reset"])
def test_a_half_second_outage_mid_read_loses_nothing(lab, protocol, fault):
    f = cherenkov.open(lab.url(protocol, NAME), timeout=5)
    tree = f["Events"]
    names = some_branches(tree)
    proxy = lab.proxy_name(protocol)
    # The read starts while the link is down: its first attempts must fail, and the outage ends
    # 0.5 s later, while the read is retrying.
    if fault == "link cut":
        lab.toxiproxy.enable(proxy, False)
        heal = threading.Timer(0.5, lab.toxiproxy.enable, (proxy, True))
    else:
        lab.toxiproxy.toxic(proxy, "reset", "reset_peer", stream="upstream", timeout=0)
        heal = threading.Timer(0.5, lab.toxiproxy.remove_toxic, (proxy, "reset"))
    heal.start()
    try:
        arrays = bounded(lambda: tree.arrays(names), 60)
    finally:
        heal.join()
    assert_same_as_uproot(arrays, TESTDATA / NAME, names)


def test_retries_give_up_within_their_window_naming_the_file(lab):
    """A server that stays down: a clear error once the window (1 s here) is spent."""
    url = lab.url("http", NAME)
    f = cherenkov.open(url, timeout=2, retry_window=1)
    tree = f["Events"]
    lab.toxiproxy.enable("nginx", False)
    try:
        with pytest.raises(cherenkov.SourceError, match="gave up after") as err:
            bounded(lambda: tree.arrays(["nMuon"]), 60)
    finally:
        lab.toxiproxy.enable("nginx", True)
    assert url in str(err.value)


# Fault 5: a server that drips its answer (a minimum transfer rate bounds every request).


def test_a_dripping_server_fails_the_read_in_bounded_time_naming_the_file(testdata):
    with FaultServer({NAME: (testdata / NAME).read_bytes()}) as server:
        url = server.url(NAME)
        # timeout 1 s, 4 KiB/s at least: a request receiving fewer than 4096 bytes in a second
        # is abandoned.
        f = cherenkov.open(url, timeout=1, retries=1, min_rate=4096)
        tree = f["Events"]
        # every answer from now on at 4 bytes a second, far below the 4 KiB/s accepted: each
        # attempt is abandoned after a second, and the read fails as a timeout
        server.drip_rate = 4
        with pytest.raises(TimeoutError, match="slowest transfer accepted") as err:
            bounded(lambda: tree.arrays(["nMuon"]), 120)
        assert isinstance(err.value, cherenkov.SourceError)
        assert url in str(err.value)


def test_a_dripping_replica_is_left_for_the_other(testdata):
    data = (testdata / NAME).read_bytes()
    with FaultServer({NAME: data}) as slow, NginxServer(testdata) as nginx:
        urls = [slow.url(NAME), nginx.url(NAME)]
        f = cherenkov.open(urls, timeout=1, min_rate=4096)
        wait_for(lambda: all(r.state == "in use" for r in f.replicas()), 20, "both replicas joining")
        tree = f["Events"]
        slow.drip_rate = 1
        names = some_branches(tree)
        arrays = bounded(lambda: tree.arrays(names), 120)
        assert_same_as_uproot(arrays, testdata / NAME, names)


# Fault 1: a replica down at open (refused, missing, silent) does not stop the read.


def bad_url(lab, protocol: str, fault: str, silent_port: int) -> str:
    if fault == "refused":
        return lab.url(protocol, NAME, direct=True).replace(
            str(lab.xrootd.port if protocol == "root" else lab.nginx.port), str(refused_port())
        )
    if fault == "missing":
        return lab.url(protocol, "no-such-file.root", direct=True)
    return f"{protocol}://127.0.0.1:{silent_port}/{'/' if protocol == 'root' else ''}{NAME}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("fault", ["refused", "missing", "stalled"])
@pytest.mark.parametrize("position", ["first", "second"])
def test_a_replica_down_at_open_does_not_stop_the_read(lab, silent_port, protocol, fault, position):
    good, bad = lab.url(protocol, NAME, direct=True), bad_url(lab, protocol, fault, silent_port)
    urls = [bad, good] if position == "first" else [good, bad]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replica found down at open says so
        f = bounded(lambda: cherenkov.open(urls, timeout=3), 60, "the open")
    tree = f["Events"]
    names = some_branches(tree, 20)
    assert_same_as_uproot(bounded(lambda: tree.arrays(names), 60), TESTDATA / NAME, names)
    report = {r.name: r for r in f.replicas()}
    assert report[good].state == "in use"
    if fault == "stalled":
        assert report[bad].state in ("opening", "dropped")
    else:
        wait_for(lambda: {r.name: r for r in f.replicas()}[bad].state == "dropped", 30, "the bad replica being dropped")
        error = {r.name: r for r in f.replicas()}[bad].last_error
        assert bad.split("//")[1].split("/")[0] in error, error
        print(f"{bad}: {error}")


def test_no_replica_opening_is_an_error_naming_each(lab, silent_port):
    urls = [bad_url(lab, "http", fault, silent_port) for fault in ("refused", "missing")]
    with pytest.raises(cherenkov.SourceError, match="no replica could be opened") as err:
        bounded(lambda: cherenkov.open(urls, timeout=2), 60, "the open")
    for url in urls:
        assert url in str(err.value)


# Fault 2: a file replaced on the server during a read.


def altered(data: bytes) -> bytes:
    """Same size, other bytes in the middle (where baskets are)."""
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 4096]) + data[middle + 4096 :]


def test_a_file_replaced_during_a_read_is_an_error_naming_it(testdata):
    data = (testdata / NAME).read_bytes()
    with FaultServer({NAME: data}) as server:
        url = server.url(NAME)
        f = cherenkov.open(url, timeout=5)
        tree = f["Events"]
        names = some_branches(tree)
        assert_same_as_uproot(tree.arrays(names[:5]), testdata / NAME, names[:5])
        server.replace(NAME, altered(data))
        with pytest.raises(cherenkov.SourceError, match="changed on the server") as err:
            bounded(lambda: tree.arrays(names[5:]), 60)
        assert url in str(err.value) and "ETag" in str(err.value)


def test_a_replica_replaced_during_a_read_is_dropped(testdata):
    data = (testdata / NAME).read_bytes()
    with FaultServer({NAME: data}) as server, NginxServer(testdata) as nginx:
        urls = [server.url(NAME), nginx.url(NAME)]
        f = cherenkov.open(urls, timeout=5)
        wait_for(lambda: all(r.state == "in use" for r in f.replicas()), 20, "both replicas joining")
        tree = f["Events"]
        names = [b.path for b in tree.branches if b.readable]
        server.replace(NAME, altered(data))
        # Reads large enough to be shared by both replicas, until the changed one is asked.
        for k in range(0, len(names), 200):
            part = names[k : k + 200]
            assert_same_as_uproot(bounded(lambda part=part: tree.arrays(part), 60), testdata / NAME, part)
        report = {r.name: r for r in f.replicas()}
        assert report[urls[0]].state == "dropped" and "changed on the server" in report[urls[0]].last_error
        assert report[urls[1]].state == "in use"


# Fault 3: replicas of the same size holding different bytes: the first listed one that opens is
# the file, whatever order they answer in.

VARIANTS = {"same": "replica-a.root", "one-basket": "replica-b.root", "other-file": "replica-c.root"}


@pytest.fixture(scope="module")
def variants():
    """Files written by uproot, uncompressed, with names of one length (so of equal sizes):
    `replica-a.root`; `replica-b.root`, the same but for one value in the third of five baskets
    (written apart: its own UUID); and `replica-c.root`, another branch and other values. Served
    by xrootd and nginx."""
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-variants-"))
    os.chmod(folder, 0o755)  # xrootd runs as nobody
    rng = np.random.default_rng(14)
    baskets = [rng.normal(size=100_000) for _ in range(5)]
    changed = [b.copy() for b in baskets]
    changed[2][500] += 1.0

    def write(path: Path, branch: str, parts):
        with uproot.recreate(path, compression=None) as out:
            out.mktree("Events", {branch: "f8"})
            for part in parts:
                out["Events"].extend({branch: part})
        os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)

    write(folder / VARIANTS["same"], "x", baskets)
    write(folder / VARIANTS["one-basket"], "x", changed)
    write(folder / VARIANTS["other-file"], "y", [b * 2 for b in baskets])
    sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
    assert len(set(sizes.values())) == 1, sizes  # the point: sizes cannot tell them apart
    with XrootdServer(folder) as xrootd, NginxServer(folder) as nginx, Toxiproxy() as toxiproxy:
        yield folder, {"root": xrootd, "http": nginx}, toxiproxy
    shutil.rmtree(folder, ignore_errors=True)


OPENS = 20


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("variant", ["one-basket", "other-file"])
@pytest.mark.parametrize("listed_first", ["same", "variant"])
def test_the_first_listed_replica_is_read_every_time_whoever_answers_first(variants, protocol, variant, listed_first):
    """The first listed replica slowed down (toxiproxy, 50 ms each way) and a file of the same size
    with other bytes listed second: every open reads the first one's values, the second is
    dropped naming both; with the files listed the other way round, likewise. Before, the one
    that answered first was read."""
    folder, servers, toxiproxy = variants
    names = [VARIANTS["same"], VARIANTS[variant]]
    if listed_first == "variant":
        names.reverse()
    proxy = toxiproxy.proxy(f"slow-{protocol}-{variant}-{listed_first}", servers[protocol].port)
    toxiproxy.set_rtt(f"slow-{protocol}-{variant}-{listed_first}", 100)
    urls = [servers[protocol].url(names[0], port=proxy), servers[protocol].url(names[1])]
    branch = "y" if names[0] == VARIANTS["other-file"] else "x"
    for _ in range(OPENS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            f = bounded(lambda: cherenkov.open(urls, timeout=5), 60, "the open")
        arrays = bounded(lambda f=f: f["Events"].arrays([branch]), 60)
        assert_same_as_uproot(arrays, folder / names[0], [branch])
        wait_for(lambda f=f: all(r.state != "opening" for r in f.replicas()), 20, "both replicas answering")
        states = {r.name: (r.state, r.last_error) for r in f.replicas()}
        assert states[urls[0]][0] == "in use", states
        assert states[urls[1]][0] == "dropped" and "not the same file as" in states[urls[1]][1], states
        assert urls[0] in states[urls[1]][1], states
    print(f"{urls[1]}: {states[urls[1]][1]}")
