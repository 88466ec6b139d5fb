"""Shared fixtures. Tests that need ../shared/testdata skip with a clear reason when it is absent."""

import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CHERENKOV_SHARED", REPO.parent / "shared"))
TESTDATA = SHARED / "testdata"


def shared_root_files() -> list[Path]:
    return sorted(TESTDATA.glob("*.root")) if TESTDATA.is_dir() else []


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"{TESTDATA} is absent: set CHERENKOV_SHARED to the shared folder to run these tests")
    return TESTDATA


@pytest.fixture(scope="module")
def folder():
    """A folder for a module's servers that xrootd (run as nobody) can reach, unlike pytest's
    private temporary folders."""
    path = Path(tempfile.mkdtemp(prefix="cherenkov-served-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def silent_port():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


def plain(x):
    """Python values of an array of objects (awkward arrays inside numpy object arrays too)."""
    if isinstance(x, (ak.Array, ak.Record)):
        return x.tolist()
    if isinstance(x, np.ndarray):
        return [plain(v) for v in x] if x.dtype == object else x.tolist()
    return x


def flat(array) -> np.ndarray:
    """The values of an array read with `library="np"`: a `cherenkov.Jagged`'s content."""
    return array.content if isinstance(array, cherenkov.Jagged) else array


def same_values(a, b) -> bool:
    """Whether two arrays read with `library="np"` hold the same values (NaN equal to NaN); split
    objects read whole come as dicts of their members' arrays."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    if isinstance(a, ak.Array) or (isinstance(a, np.ndarray) and a.dtype == object):  # objects
        return plain(a) == plain(b)
    if isinstance(a, cherenkov.Jagged):
        return same_values(a.offsets, b.offsets) and same_values(a.content, b.content)
    if a.dtype.names:
        return a.tolist() == b.tolist()
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def assert_reads_like_local(remote, local_path):
    """Every readable branch of every TTree of `remote` (an open `cherenkov.File`) equals a local
    read of the same file."""
    local = cherenkov.open(local_path)
    for key, cls in local.classnames().items():
        if cls != "TTree":
            continue
        names = [b.path for b in local[key].branches if b.readable]
        ours, theirs = remote[key].arrays(names, library="np"), local[key].arrays(names, library="np")
        assert names and all(same_values(ours[n], theirs[n]) for n in names), key


def everything_shown(f):
    """All a user can see of an open file (path, repr, stats, trace, counters): for secret checks."""
    return "\n".join([f.path, repr(f), repr(f.stats()), str(f.trace()), repr(f.source_counters())])


def form(array) -> dict:
    """An awkward array's form as a dict, without form keys (they differ between readers)."""

    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k != "form_key"}
        return [strip(x) for x in d] if isinstance(d, list) else d

    return strip(array.layout.form.to_dict(verbose=False))


def wait_for(condition, seconds: float, what: str):
    """Poll `condition()` every 50 ms for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {seconds} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def client():
    """A distributed.Client of a LocalCluster of 2 worker threads in this process (quick to start)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def bounded(work, seconds: float, what: str = "the read"):
    """Run `work()` in a thread; its result, or its exception raised here. Still running after
    `seconds` fails the test: that is a hang."""
    outcome = {}

    def run():
        try:
            outcome["value"] = work()
        except BaseException as e:  # handed to the test's thread
            outcome["error"] = e

    t0 = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{what} was still running after {seconds} s: a hang")
    print(f"{what}: {time.perf_counter() - t0:.2f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
