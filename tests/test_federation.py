"""An XRootD federation on 127.0.0.1: a redirector (xrootd + cmsd, manager) and data servers holding
the same files. Opening through the redirector finds every data server (kXR_locate, sent with the
open) and reads from them as replicas; a data server killed mid-read costs no failed read."""

import shutil
import time

import numpy as np
import pytest

import cherenkov
from cherenkov.lab import XrootdFederation

NAME = "nanolike-root6.40-zstd-4clusters.root"
SERVERS = 2
pytestmark = pytest.mark.skipif(
    not (shutil.which("xrootd") and shutil.which("cmsd")), reason="xrootd and cmsd are not installed: run `make setup`"
)


def open_when_registered(url, timeout=60):
    """Open `url` once the redirector knows all data servers (they register within seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        f = cherenkov.open(url, timeout=10)
        if len(f.replicas() or []) == SERVERS or time.monotonic() > deadline:
            return f
        time.sleep(0.5)


@pytest.fixture()
def federation(testdata):
    with XrootdFederation(testdata, servers=SERVERS) as fed:
        yield fed


def assert_same(remote: dict, local: dict):
    for name, b in local.items():
        a = remote[name]
        if isinstance(b, cherenkov.Jagged):
            assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.content, b.content, equal_nan=True), name
        else:
            assert np.array_equal(a, b, equal_nan=True), name


def test_the_redirector_names_every_data_server_and_they_share_the_read(testdata, federation):
    f = open_when_registered(federation.url(NAME))
    assert sorted(r["name"] for r in f.replicas()) == sorted(s.url(NAME) for s in federation.servers)
    tree = f["Events"]
    names = [b.path for b in tree.branches if b.readable]
    local = cherenkov.open(testdata / NAME)["Events"].arrays(names, library="np")
    assert_same(tree.arrays(names, library="np"), local)
    used = [r for r in f.replicas() if r["bytes"] > 0]
    assert len(used) == SERVERS, f.replicas()


def test_discovery_can_be_switched_off(federation):
    open_when_registered(federation.url(NAME))
    f = cherenkov.open(federation.url(NAME), discover=False)
    assert f.replicas() is None
    assert f["Events"].num_entries > 0


def test_a_data_server_killed_mid_read_costs_no_failed_read(testdata, federation):
    f = open_when_registered(federation.url(NAME))
    assert len(f.replicas()) == SERVERS
    tree = f["Events"]
    names = [b.path for b in tree.branches if b.readable]
    local = cherenkov.open(testdata / NAME)["Events"].arrays(names, library="np")
    tree.arrays(["Muon_pt"], library="np")  # both replicas measured
    federation.kill(busiest_server(federation, f.replicas()))
    # One large read: split between the two replicas; the dead one's part goes to the other.
    assert_same(tree.arrays(names, library="np"), local)
    # The dead server's part of each read fails over to the other replica: no read fails.
    print("after the kill:", f.replicas())


def busiest_server(federation, replicas) -> int:
    """Index of the data server the reader prefers (the lowest measured latency)."""
    busiest = min(replicas, key=lambda r: r["latency_seconds"])
    return [s.url(NAME) for s in federation.servers].index(busiest["name"])
