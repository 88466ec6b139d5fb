"""One answer dripping at a byte a second, over HTTP (tests/fault_server.py drips its next answer)
and XRootD (a real xrootd behind `DripRelay`, whose connections open at the drip's start crawl
while new ones go at full speed): the transfer's rate stays below `min_rate` for `timeout`
seconds, so it is abandoned then, whatever its size, and read again on a new connection; the read
ends with the right values within `timeout` plus the retry schedule, for a request of a few KB
and for a 20 MB vector read. Before, a request of `b` bytes was allowed `timeout + b / min_rate`:
ten minutes for the 20 MB read."""

import os
import shutil
import stat

import awkward as ak
import cherenkov
import numpy as np
import pytest
import uproot
from cherenkov_lab import XrootdServer
from conftest import bounded
from fault_server import DripRelay, FaultServer

NAME = "twenty-megabytes.root"
BRANCHES = [f"x{i}" for i in range(10)]
TIMEOUT = 2
# timeout, then the retry schedule (at most 5 s of waits), then the read itself on a busy machine
BOUND = TIMEOUT + 5 + 20

pytestmark = pytest.mark.skipif(not shutil.which("xrootd"), reason="xrootd is not installed: run `make setup`")


@pytest.fixture(scope="module")
def big(folder):
    """A 20 MB file (10 uncompressed double branches of 262144 entries, 4 baskets each), written by
    uproot, readable by xrootd (which runs as nobody)."""
    path = folder / NAME
    rng = np.random.default_rng(32)
    with uproot.recreate(path, compression=None) as out:
        out.mktree("Events", {name: "f8" for name in BRANCHES})
        for _ in range(4):
            out["Events"].extend({name: rng.normal(size=65536) for name in BRANCHES})
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    assert path.stat().st_size > 20_000_000
    return path


def a_few_kilobytes(f, path):
    """4 KiB in the middle of the file (not in the head and tail that opening read): raw bytes."""
    offset = path.stat().st_size // 2
    [got] = f._core.read_ranges([(offset, offset + 4096)])
    with open(path, "rb") as local:
        local.seek(offset)
        assert bytes(got) == local.read(4096)


def twenty_megabytes(f, path):
    """Every branch: one vector read of 20 MB, compared with uproot."""
    ours = f["Events"].arrays(BRANCHES)
    theirs = uproot.open(path)["Events"].arrays(BRANCHES, library="ak")
    for name in BRANCHES:
        assert ak.array_equal(ours[name], theirs[name]), name


READS = {"a few KB": a_few_kilobytes, "20 MB": twenty_megabytes}


@pytest.mark.parametrize("size", READS)
def test_a_dripping_http_answer_is_read_again_in_time(big, size):
    with FaultServer({NAME: big.read_bytes()}) as server:
        f = cherenkov.open(server.url(NAME), timeout=TIMEOUT)
        server.drip_next(1, rate=1)
        bounded(lambda: READS[size](f, big), BOUND)
        assert server.dripped == 1  # the read met the drip, and went on without it


@pytest.mark.parametrize("size", READS)
def test_a_dripping_xrootd_connection_is_left_for_a_new_one_in_time(big, size):
    with XrootdServer(big.parent) as xrootd, DripRelay(xrootd.port) as relay:
        f = cherenkov.open(xrootd.url(NAME, port=relay.port), timeout=TIMEOUT)
        assert relay.drip(rate=1) >= 1  # the connections the file was opened on
        bounded(lambda: READS[size](f, big), BOUND)
        assert relay.dripped > 0  # the read met the drip, and went on without it
