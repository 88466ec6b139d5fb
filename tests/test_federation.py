"""An XRootD federation on one machine: a redirector (xrootd + cmsd, manager) and data servers holding
the same files (`cherenkov_lab.XrootdFederation`). Opening through the redirector finds every data
server (kXR_locate, sent with the open) and reads from them as replicas; a data server killed
mid-read costs no failed read. Behind toxiproxy (`proxied=True`, the redirector then names the
proxies), a replica whose connections break costs no failed read, a slow replica gets little of
the work and two capped ones share it.

The measured ratios are printed (`pytest -s`), never asserted: time depends on the machine."""

import os
import shutil
import tempfile
import time
import zlib
from pathlib import Path

import cherenkov
import numpy as np
import pytest
from cherenkov_lab import NginxServer, XrootdFederation, XrootdServer

NAME = "nanolike-root6.40-zstd-4clusters.root"
SERVERS = 2
pytestmark = pytest.mark.skipif(XrootdFederation.missing() is not None, reason=str(XrootdFederation.missing()))


def open_replicas(url, count=SERVERS, timeout=10, **options):
    """Open `url` through the redirector and wait until its replica set has `count` replicas: the
    redirector may answer the first time before every data server has told it, and is asked again
    a second later."""
    f = cherenkov.open(url, timeout=10, **options)
    deadline = time.monotonic() + timeout
    while len(f.replicas() or []) < count:
        assert time.monotonic() < deadline, f.replicas()
        time.sleep(0.1)
    return f


@pytest.fixture()
def federation(testdata):
    with XrootdFederation(testdata, servers=SERVERS) as fed:
        yield fed


@pytest.fixture()
def proxied(testdata):
    reason = XrootdFederation.missing(proxied=True)
    if reason:
        pytest.skip(reason)
    with XrootdFederation(testdata, servers=SERVERS, proxied=True) as fed:
        yield fed


def assert_same(remote: dict, local: dict):
    for name, b in local.items():
        a = remote[name]
        if isinstance(b, cherenkov.Jagged):
            assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.content, b.content, equal_nan=True), name
        else:
            assert np.array_equal(a, b, equal_nan=True), name


def branch_names(f) -> list[str]:
    return [b.path for b in f["Events"].branches if b.readable]


def test_the_redirector_names_every_data_server_and_they_share_the_read(testdata, federation):
    f = open_replicas(federation.url(NAME))
    assert sorted(r.name for r in f.replicas()) == sorted(s.url(NAME) for s in federation.servers)
    tree = f["Events"]
    names = branch_names(f)
    local = cherenkov.open(testdata / NAME)["Events"].arrays(names, library="np")
    assert_same(tree.arrays(names, library="np"), local)
    used = [r for r in f.replicas() if r.bytes > 0]
    assert len(used) == SERVERS, f.replicas()


def test_discovery_can_be_switched_off(federation):
    f = cherenkov.open(federation.url(NAME), discover=False)
    assert f.replicas() is None
    assert f["Events"].num_entries > 0


def replicas_measured(testdata, fed):
    """The file through `fed`'s redirector (no retries on one replica: failures show), after a
    first read that measured both replicas; its tree, every readable branch and their local values."""
    f = open_replicas(fed.url(NAME), retries=0)
    tree = f["Events"]
    names = branch_names(f)
    local = cherenkov.open(testdata / NAME)["Events"].arrays(names, library="np")
    tree.arrays(["Muon_pt"], library="np")
    return f, tree, names, local


def test_a_data_server_killed_mid_read_costs_no_failed_read(testdata, federation):
    f, tree, names, local = replicas_measured(testdata, federation)
    busiest = min(f.replicas(), key=lambda r: r.quality.latency)  # the one the reader prefers
    federation.kill(federation.index(busiest.name))
    # One large read: split between the two replicas; the dead one's part goes to the other.
    assert_same(tree.arrays(names, library="np"), local)
    report = {r.name: r for r in f.replicas()}
    assert report[busiest.name].errors >= 1, f.replicas()


def test_a_replica_whose_connections_break_costs_no_failed_read(testdata, proxied):
    f, tree, names, local = replicas_measured(testdata, proxied)
    # Every connection to the first data server is closed after 200 kB (and its reconnections too).
    lossy = proxied.servers[0]
    proxied.toxiproxy.toxic(lossy.proxy, "lossy", "limit_data", bytes=200_000)
    for _ in range(2):
        assert_same(tree.arrays(names, library="np"), local)
    report = {r.name: r for r in f.replicas()}
    assert report[lossy.url(NAME)].errors >= 1, f.replicas()


def test_a_data_servers_checksum_is_the_files_adler32(testdata):
    expected = f"adler32 {zlib.adler32((testdata / NAME).read_bytes()):08x}"
    with XrootdServer(testdata) as server:
        assert cherenkov.open(server.url(NAME)).checksum() == expected
    assert cherenkov.open(testdata / NAME).checksum() is None  # a local file: no server to ask


@pytest.fixture()
def shared_dir():
    """A folder the xrootd servers (running as nobody) can read, unlike pytest's tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="cherenkov-replicas-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


def test_replicas_whose_checksums_differ_are_refused_when_verified(testdata, shared_dir):
    # Two copies of the same size; the second has one byte changed in the middle.
    for folder in ("same", "changed"):
        (shared_dir / folder).mkdir(mode=0o755)
        shutil.copyfile(testdata / NAME, shared_dir / folder / NAME)
    changed = shared_dir / "changed" / NAME
    data = bytearray(changed.read_bytes())
    data[len(data) // 2] ^= 0xFF
    changed.write_bytes(data)
    with XrootdServer(testdata) as a, XrootdServer(shared_dir / "same") as b, XrootdServer(shared_dir / "changed") as c:
        good, copy, bad = a.url(NAME), b.url(NAME), c.url(NAME)
        assert cherenkov.open([good, copy], verify_checksums=True).checksum() == cherenkov.open(good).checksum()
        with pytest.raises(cherenkov.SourceError, match="differ in checksum") as err:
            cherenkov.open([good, bad], verify_checksums=True)
        assert good in str(err.value) and bad in str(err.value)
        assert cherenkov.open([good, bad]).replicas() is not None  # unverified, only the sizes are compared


def test_a_replica_that_cannot_give_a_checksum_fails_verification(testdata):
    with XrootdServer(testdata) as x, NginxServer(testdata) as h:
        http = h.url(NAME)
        with pytest.raises(cherenkov.SourceError, match="cannot verify") as err:
            cherenkov.open([x.url(NAME), http], verify_checksums=True)
        assert http in str(err.value)


def test_replicas_found_through_the_redirector_are_verified(testdata, federation):
    f = open_replicas(federation.url(NAME), verify_checksums=True)
    assert f.checksum() == f"adler32 {zlib.adler32((testdata / NAME).read_bytes()):08x}"
    assert len(f["Events"].arrays(["Muon_pt"], library="np")["Muon_pt"]) == f["Events"].num_entries


def timed_read(f, names, warmups=1) -> tuple[float, dict]:
    """Seconds to read `names` after `warmups` reads, and the part of those bytes each replica
    served (by name). The first reads are where the replicas' qualities are learned (and TCP
    windows grow), as in the first requests of a long job."""
    for _ in range(warmups):
        f["Events"].arrays(names, library="np")
    before = {r.name: r.bytes for r in f.replicas() or []}
    start = time.perf_counter()
    f["Events"].arrays(names, library="np")
    seconds = time.perf_counter() - start
    served = {r.name: r.bytes - before[r.name] for r in f.replicas() or []}
    return seconds, {name: b / max(1, sum(served.values())) for name, b in served.items()}


def test_a_ten_times_slower_replica_serves_a_small_share(testdata, proxied):
    slow, fast = (s.url(NAME) for s in proxied.servers)
    proxied.toxiproxy.set_rtt("server0", 100)
    proxied.toxiproxy.set_rtt("server1", 10)
    names = branch_names(cherenkov.open(testdata / NAME))
    alone, _ = timed_read(cherenkov.open(fast, discover=False), names)
    both, shares = timed_read(open_replicas(proxied.url(NAME)), names)
    print(f"\none replica 10x slower: both {both:.3f} s / fast alone {alone:.3f} s = {both / alone:.2f}")
    print("slow replica's share of the bytes:", round(shares[slow], 3))
    assert shares[slow] < 0.1, shares


def test_two_capped_replicas_share_the_work_evenly(testdata, proxied):
    for server in proxied.servers:
        proxied.toxiproxy.toxic(server.proxy, "cap", "bandwidth", rate=4000)  # KB/s
    names = branch_names(cherenkov.open(testdata / NAME))
    # toxiproxy caps each connection, not the server: one connection per replica (not adapted),
    # so that the cap is the server's.
    one = {"connections": 1, "adaptive_streams": False}
    alone, _ = timed_read(cherenkov.open(proxied.servers[0].url(NAME), discover=False, **one), names)
    both, shares = timed_read(open_replicas(proxied.url(NAME), **one), names, warmups=2)
    print(f"\ntwo replicas capped at 4 MB/s: throughput of the pair / of one = {alone / both:.2f}")
    print("shares of the bytes:", {name[-60:]: round(x, 3) for name, x in shares.items()})
    assert all(0.3 < x < 0.7 for x in shares.values()), shares
