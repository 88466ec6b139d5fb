"""cherenkov.process: one histogram-filling analysis over a multi-file dataset gives the same result
in-process, in local processes and on Dask, over local files and through the lab's proxies; a worker
killed mid-job and corrupt files are handled; merging and packet sizing behave as documented."""

import multiprocessing
import os
import random
import shutil
import stat
import struct
import tempfile
import time
from pathlib import Path

import awkward as ak
import cherenkov
import hist
import numpy as np
import psutil
import pytest
from cherenkov.processing import Dask, LocalProcesses, ProcessingError, close_workers, driver, executors
from cherenkov.processing.dataset import normalize
from cherenkov.processing.merge import BlockFolder, TreeMerge, merge
from cherenkov.processing.metadata import FileMeta
from cherenkov.processing.packets import FileInfo, Packetizer
from conftest import TESTDATA

NANO = "nanolike-root6.40-zstd-4clusters.root"  # 2000 entries in 4 clusters of 500
HZZ = ["uproot-HZZ.root", "uproot-HZZ-zstd.root", "uproot-HZZ-lz4.root"]  # 2421 entries, tree "events"
STEP = 500
pytestmark = pytest.mark.skipif(
    not all((TESTDATA / n).exists() for n in [NANO] + HZZ),
    reason=f"{TESTDATA} lacks {NANO} or the uproot-HZZ files: set CHERENKOV_SHARED to the shared folder",
)


class Analysis:
    """Muon pt with float weights, muons per event, event count, a float sum and one value per event."""

    def __call__(self, chunk):
        if chunk.metadata["tree"] == "Events":
            pt = chunk["Muon_pt"]
        else:
            pt = np.hypot(chunk["Muon_Px"], chunk["Muon_Py"])
        flat = ak.to_numpy(ak.flatten(pt)).astype(np.float64)
        weighted = hist.Hist(hist.axis.Regular(40, 0, 200, name="pt"), storage=hist.storage.Weight())
        weighted.fill(flat, weight=flat / 7.0)
        muons = hist.Hist(hist.axis.Integer(0, 10, name="n")).fill(ak.to_numpy(ak.num(pt)))
        leading = ak.to_numpy(ak.fill_none(ak.max(pt, axis=1), -1.0)).astype(np.float64)
        return {"pt": weighted, "muons": muons, "events": len(chunk), "sum_pt": float(flat.sum()), "leading": leading}


class KillOnce(Analysis):
    """Kills the worker process that calls it first (os._exit), once per job (a flag file decides)."""

    def __init__(self, flag: str):
        self.flag = flag

    def __call__(self, chunk):
        try:
            fd = os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return super().__call__(chunk)
        os.close(fd)
        os._exit(17)


@pytest.fixture(scope="module")
def data_dir():
    """Copies of the test files in a folder every server (xrootd runs as nobody) can read."""
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-process-"))
    folder.chmod(0o755)
    names = {f"nano-{i}.root": NANO for i in range(3)} | {f"hzz-{i}.root": n for i, n in enumerate(HZZ)}
    for copy, original in names.items():
        shutil.copyfile(TESTDATA / original, folder / copy)
        (folder / copy).chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def make_dataset(where) -> dict:
    """`where(name)` gives the path or URL of a file of data_dir."""
    return {
        "nano": [where(f"nano-{i}.root") for i in range(3)],
        "hzz": {"files": [where(f"hzz-{i}.root") for i in range(3)], "tree": "events"},
    }


@pytest.fixture(scope="module")
def dataset(data_dir):
    return make_dataset(lambda name: str(data_dir / name))


@pytest.fixture(scope="module")
def sequential(dataset):
    """The reference: every chunk of every file in order, outputs merged left to right."""
    out = {}
    for spec in normalize(dataset):
        tree = cherenkov.open(spec.url)[spec.tree]
        for chunk in tree.chunks(STEP):
            chunk.metadata = {"dataset": spec.dataset, "file": spec.url, "tree": spec.tree}
            out[spec.dataset] = merge(out.get(spec.dataset), Analysis()(chunk))
    return out


def assert_identical(a, b, path="result"):
    """Equal bit for bit, recursively."""
    assert type(a) is type(b), path
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            assert_identical(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, hist.Hist):
        assert a.axes == b.axes, path
        assert np.array_equal(a.values(flow=True), b.values(flow=True)), path
        assert np.array_equal(a.variances(flow=True), b.variances(flow=True)), path
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), path
    else:
        assert a == b, path


def assert_matches_sequential(result, sequential):
    """Counts and arrays exactly; float sums too, up to the order of additions."""
    assert list(result) == list(sequential)
    for name, seq in sequential.items():
        got = result[name]
        assert got["events"] == seq["events"]
        assert np.array_equal(got["muons"].values(flow=True), seq["muons"].values(flow=True))
        assert np.array_equal(got["leading"], seq["leading"])
        assert got["sum_pt"] == pytest.approx(seq["sum_pt"], rel=1e-12)
        assert np.allclose(got["pt"].values(flow=True), seq["pt"].values(flow=True), rtol=1e-12, atol=0)


def test_the_dataset_is_what_the_tests_think(sequential):
    assert sequential["nano"]["events"] == 3 * 2000
    assert sequential["hzz"]["events"] == 3 * 2421
    assert len(sequential["nano"]["leading"]) == 6000
    assert sequential["nano"]["muons"].sum() == 6000


def test_all_executors_give_the_same_result_over_local_files(dataset, sequential, client):
    results = {}
    for name, executor in [("in-process", "in-process"), ("processes", LocalProcesses(2)), ("dask", client)]:
        result, report = cherenkov.process(dataset, Analysis(), executor=executor, step_size=STEP, return_report=True)
        assert report.entries == 3 * 2000 + 3 * 2421
        assert report.total.entries == report.entries + report.discarded.entries  # copies near the end do it twice
        assert report.failures == [] and report.bad_files == {}
        results[name] = result
    assert_matches_sequential(results["in-process"], sequential)
    assert_identical(results["processes"], results["in-process"])
    assert_identical(results["dask"], results["in-process"])


@pytest.fixture(scope="module")
def lab(data_dir):
    if not (shutil.which("xrootd") and shutil.which("nginx")):
        pytest.skip("xrootd and nginx are not installed: run `make setup`")
    from cherenkov_lab import Lab

    with Lab(data_dir) as lab:
        lab.set_rtt(10)
        yield lab


@pytest.mark.parametrize("protocol", ["http", "root"])
def test_all_executors_give_the_same_result_through_the_lab_proxy(lab, protocol, sequential):
    remote = make_dataset(lambda name: lab.url(protocol, name))
    local_result = None
    for executor in ["in-process", LocalProcesses(2), Dask(workers=2, processes=False)]:
        result, report = cherenkov.process(remote, Analysis(), executor=executor, step_size=STEP, return_report=True)
        assert report.total.requests > 0 and report.total.bytes > 0
        assert report.bad_files == {}
        if local_result is None:
            assert_matches_sequential(result, sequential)
            local_result = result
        assert_identical(result, local_result)


@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_a_file_ten_times_farther_and_a_worker_killed_mid_job_change_nothing(lab, executor, dataset, sequential, tmp_path):
    far = lab.toxiproxy.proxy(f"xrootd-far-{executor}", lab.xrootd.port)
    lab.toxiproxy.set_rtt(f"xrootd-far-{executor}", 100)  # the others are 10 ms away
    remote = make_dataset(lambda name: lab.xrootd.url(name, far) if name == "nano-1.root" else lab.url("root", name))
    chosen = LocalProcesses(2) if executor == "processes" else Dask(workers=2, processes=True)
    result, report = cherenkov.process(
        remote, KillOnce(str(tmp_path / "killed")), executor=chosen, step_size=STEP, retries=3, return_report=True
    )
    assert (tmp_path / "killed").exists()
    assert report.entries == 3 * 2000 + 3 * 2421 and report.bad_files == {}
    if executor == "processes":  # Dask re-runs a dead worker's tasks itself
        assert len(report.lost_workers) == 1
    assert_identical(result, cherenkov.process(dataset, Analysis(), executor="in-process", step_size=STEP))
    assert_matches_sequential(result, sequential)


def test_a_worker_killed_mid_job_loses_and_double_counts_nothing(dataset, sequential, tmp_path):
    first, report = cherenkov.process(dataset, Analysis(), executor="in-process", step_size=STEP, return_report=True)
    result, report = cherenkov.process(
        dataset, KillOnce(str(tmp_path / "killed")), executor=LocalProcesses(2), step_size=STEP, return_report=True
    )
    assert (tmp_path / "killed").exists()
    assert len(report.lost_workers) == 1 and report.retries == len(report.failures) >= 1  # the packets it held
    assert all("BrokenProcessPool" in f.error for f in report.failures)
    assert report.entries == 3 * 2000 + 3 * 2421
    assert report.packets + report.discarded.packets == report.total.packets
    assert_identical(result, first)
    assert_matches_sequential(result, sequential)


class WhereFrom:
    """The parent of the worker process that read each chunk."""

    def __call__(self, chunk):
        return {"parents": [os.getppid()], "entries": len(chunk)}


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork server on this platform")
def test_local_worker_processes_are_forked_from_a_server_that_imported_the_reader(dataset):
    # Not spawned by the driver, each importing numpy, awkward and the extension again.
    result = cherenkov.process(dataset, WhereFrom(), executor=LocalProcesses(2), step_size=STEP)
    parents = {p for out in result.values() for p in out["parents"]}
    assert parents and os.getpid() not in parents
    server = psutil.Process(parents.pop())
    assert server.ppid() == os.getpid() and "forkserver" in " ".join(server.cmdline())
    assert sum(out["entries"] for out in result.values()) == 3 * 2000 + 3 * 2421


class WhichProcess:
    """The worker process that read each chunk."""

    def __call__(self, chunk):
        return {"pids": [os.getpid()], "entries": len(chunk)}


def both_kept() -> None:
    """Wait until both processes are back: one may still run a copy whose twin answered first."""
    deadline = time.monotonic() + 30
    while len(executors._KEPT_POOLS) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_worker_processes_are_kept_for_the_next_call(dataset, tmp_path):
    close_workers()  # none left by other tests
    first, report = cherenkov.process(dataset, WhichProcess(), executor="processes", workers=2, step_size=STEP, return_report=True)
    assert report.reused_workers == 0
    both_kept()
    started = time.time()
    second, report = cherenkov.process(dataset, WhichProcess(), executor="processes", workers=2, step_size=STEP, return_report=True)
    assert report.reused_workers == 2
    both_kept()
    pids = {p for out in second.values() for p in out["pids"]}
    assert all(psutil.Process(p).create_time() < started for p in pids)  # none started for this call
    # A kept process that dies is replaced, and the next call takes up the replacement.
    killed, report = cherenkov.process(
        dataset, KillOnce(str(tmp_path / "killed")), executor="processes", workers=2, step_size=STEP, return_report=True
    )
    assert len(report.lost_workers) == 1 and report.reused_workers == 2
    both_kept()
    third, report = cherenkov.process(dataset, WhichProcess(), executor="processes", workers=2, step_size=STEP, return_report=True)
    assert report.reused_workers == 2 and report.failures == []
    for out in (second, third):
        assert sum(o["entries"] for o in out.values()) == 3 * 2000 + 3 * 2421
    kept = {p for out in third.values() for p in out["pids"]}
    close_workers()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in kept)


@pytest.fixture
def own_dataset(data_dir, tmp_path):
    """The dataset's files copied under new paths: nothing is known of them yet."""
    folder = tmp_path / "own"
    folder.mkdir()
    for f in data_dir.iterdir():
        shutil.copyfile(f, folder / f.name)
    return make_dataset(lambda name: str(folder / name))


def test_a_second_job_opens_no_file_for_metadata_and_workers_read_none(own_dataset, sequential):
    first, report = cherenkov.process(own_dataset, Analysis(), executor=LocalProcesses(2), step_size=STEP, return_report=True)
    assert report.metadata_opened == 6 and report.metadata_requests > 0
    assert report.total.files_opened >= 6 and report.total.metadata_reads == 0  # the workers were given it
    second, report = cherenkov.process(own_dataset, Analysis(), executor=LocalProcesses(2), step_size=STEP, return_report=True)
    assert (report.metadata_opened, report.metadata_requests, report.total.metadata_reads) == (0, 0, 0)
    assert report.first_output_seconds is not None and report.first_output_seconds < report.elapsed_seconds
    assert_identical(second, first)
    assert_matches_sequential(first, sequential)


COUNT_IN_A_NEW_PROCESS = """
import json, sys, cherenkov
out, report = cherenkov.process(json.loads(sys.argv[1]), len, executor="in-process", step_size=500,
                                open_options={"cache": sys.argv[2]}, return_report=True)
print(json.dumps({"out": out, "opened": report.metadata_opened, "reads": report.total.metadata_reads}))
"""


def test_metadata_kept_in_the_disk_cache_serves_a_new_process(own_dataset, tmp_path):
    import json
    import subprocess
    import sys

    cache = str(tmp_path / "cache")
    out, report = cherenkov.process(
        own_dataset, len, executor="in-process", step_size=STEP, open_options={"cache": cache}, return_report=True
    )
    assert report.metadata_opened == 6
    done = subprocess.run([sys.executable, "-c", COUNT_IN_A_NEW_PROCESS, json.dumps(own_dataset), cache], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout.splitlines()[-1])
    assert again == {"out": out, "opened": 0, "reads": 0}
    assert out == {"nano": 3 * 2000, "hzz": 3 * 2421}


def write_events(path, entries: int) -> None:
    import uproot

    with uproot.recreate(path) as f:
        f["Events"] = {"Muon_pt": ak.Array([[float(i % 50)] * (i % 3) for i in range(entries)])}


def test_a_file_changed_since_its_metadata_was_learned_is_read_as_it_is(own_dataset, sequential):
    pytest.importorskip("uproot")
    cherenkov.process(own_dataset, Analysis(), executor="in-process", step_size=STEP)
    path = own_dataset["nano"][1]
    later = os.stat(path).st_mtime + 10
    os.utime(path, (later, later))  # the same bytes, touched: read, and learned again next time
    result, report = cherenkov.process(own_dataset, Analysis(), executor=LocalProcesses(2), step_size=STEP, return_report=True)
    assert report.changed_files == [path] and report.total.metadata_reads >= 1
    assert_matches_sequential(result, sequential)
    _, report = cherenkov.process(own_dataset, Analysis(), executor="in-process", step_size=STEP, return_report=True)
    assert report.metadata_opened == 1 and report.changed_files == []

    write_events(path, 700)  # another file in its place: its packets no longer fit it
    with pytest.raises(ProcessingError, match="changed on its server since its metadata was learned"):
        cherenkov.process(own_dataset, Analysis(), executor="in-process", step_size=STEP)
    result, report = cherenkov.process(own_dataset, Analysis(), executor="in-process", step_size=STEP, return_report=True)
    assert report.metadata_opened == 1 and result["nano"]["events"] == 2 * 2000 + 700


def test_an_access_profile_travels_with_what_it_learned():
    import pickle

    profile = cherenkov.AccessProfile()
    assert not profile.trained and cherenkov.AccessProfile(profile.state()).state() == profile.state()
    state = {"trained": True, "learned": ["Muon_pt", "nMuon"], "missed": ["Jet_pt"], "rates": {"Jet_pt": 0.5}}
    state |= {"speculated": ["Jet_pt"], "stopped": [], "depth": 4, "first_window": (0.25, 0.5)}  # raw reads' first window
    copy = pickle.loads(pickle.dumps(cherenkov.AccessProfile(state)))
    assert copy.trained and copy.learned == ["Muon_pt", "nMuon"] and copy.speculated == ["Jet_pt"] and copy.depth == 4
    assert copy.state() == cherenkov.AccessProfile(state).state() and copy.state()["first_window"] == (0.25, 0.5)
    with pytest.raises(KeyError, match="learned"):
        cherenkov.AccessProfile({"trained": True})


def test_an_unreadable_file_is_reported_by_name_or_skipped(dataset, data_dir, sequential, tmp_path):
    truncated = tmp_path / "truncated.root"
    truncated.write_bytes((data_dir / "nano-0.root").read_bytes()[:3_000_000])
    broken = {"nano": dataset["nano"] + [str(truncated)], "hzz": dataset["hzz"]}
    with pytest.raises(ProcessingError, match="truncated.root"):
        cherenkov.process(broken, Analysis(), executor="in-process", step_size=STEP)
    result, report = cherenkov.process(broken, Analysis(), executor="in-process", step_size=STEP, skip_bad_files=True, return_report=True)
    assert list(report.bad_files) == [str(truncated)]
    assert_matches_sequential(result, sequential)


def corrupt_a_basket(path: Path, branch: str, basket: int) -> None:
    """Overwrite the compression header of one basket of `branch` with junk."""
    import uproot

    seek = int(uproot.open(path)["Events"][branch].member("fBasketSeek")[basket])
    data = bytearray(path.read_bytes())
    (key_length,) = struct.unpack(">h", data[seek + 14 : seek + 16])
    data[seek + key_length : seek + key_length + 9] = b"\xff" * 9
    path.write_bytes(bytes(data))


def test_a_file_failing_mid_read_is_retried_elsewhere_then_skipped(dataset, data_dir, tmp_path):
    pytest.importorskip("uproot")
    corrupt = tmp_path / "corrupt.root"
    shutil.copyfile(data_dir / "nano-0.root", corrupt)
    corrupt_a_basket(corrupt, "Muon_pt", 2)  # entries 1000..1500
    broken = {"nano": [str(corrupt)] + dataset["nano"][1:]}
    with pytest.raises(ProcessingError, match="corrupt.root"):
        cherenkov.process(broken, Analysis(), executor="in-process", step_size=STEP, retries=1)

    result, report = cherenkov.process(
        broken, Analysis(), executor=LocalProcesses(2), step_size=STEP, retries=2, skip_bad_files=True, return_report=True
    )
    assert list(report.bad_files) == [str(corrupt)]
    failed = [f for f in report.failures if f.url == str(corrupt)]
    assert len(failed) == 3 and len({f.worker for f in failed}) == 2  # the retries went to the other worker
    assert {f.packet for f in failed} == {failed[0].packet}
    assert failed[0].entries[0] <= 1000 and failed[0].entries[1] >= 1500
    assert report.skipped_entries >= 500
    assert report.entries + report.skipped_entries == 3 * 2000
    assert result["nano"]["events"] == report.entries
    assert result["nano"]["muons"].sum() == report.entries


def test_progress_callback_sees_partial_results(dataset, capsys):
    updates = []

    def watch(update):
        updates.append((update.entries, update.total_entries, update.partial()["nano"]))

    result = cherenkov.process(dataset, Analysis(), executor="in-process", step_size=STEP, callback=watch, progress=True)
    entries = [u[0] for u in updates]
    assert entries == sorted(entries) and entries[-1] == updates[-1][1] == 3 * 2000 + 3 * 2421
    partial_events = [p["events"] if p else 0 for _, _, p in updates]
    assert any(0 < n < 6000 for n in partial_events) and partial_events[-1] == 6000
    assert_identical(updates[-1][2], result["nano"])
    assert capsys.readouterr().out == ""  # bars go to stderr, never into the output


# ---- merging and splitting, without files ------------------------------------------------------------


def test_merge_rules():
    h1 = hist.Hist(hist.axis.Regular(4, 0, 4)).fill([0.5, 1.5])
    h2 = hist.Hist(hist.axis.Regular(4, 0, 4)).fill([1.5])
    merged = merge(
        {"h": h1, "n": 2, "a": np.array([1, 2]), "d": {"x": 1.5}}, {"h": h2, "n": 3, "a": np.array([3]), "d": {"x": 1.0, "y": 2}}
    )
    assert list(merged["h"].values()) == [1, 2, 0, 0] and list(h1.values()) == [1, 1, 0, 0]
    assert merged["n"] == 5 and list(merged["a"]) == [1, 2, 3] and merged["d"] == {"x": 2.5, "y": 2}
    assert ak.to_list(merge(ak.Array([[1], []]), ak.Array([[2, 3]]))) == [[1], [], [2, 3]]
    assert merge(None, [1]) == [1] and merge([1], None) == [1]
    with pytest.raises(TypeError, match="cannot merge"):
        merge({"a": 1}, "text")


def test_tree_merge_is_the_same_for_any_packets_and_arrival_order():
    rng = np.random.default_rng(5)
    values = [{"x": float(v), "a": np.array([i])} for i, v in enumerate(rng.normal(size=37) * 1e6)]

    def run(cuts, order):
        tree = TreeMerge(len(values))
        packets = list(zip([0] + cuts, cuts + [len(values)]))
        for lo, hi in [packets[i] for i in order]:
            folder = BlockFolder(lo)
            for v in values[lo:hi]:
                folder.add(v)
            for level, index, value in folder.blocks:
                tree.add(level, index, value)
            assert len(tree.waiting) <= 7 * len(packets)  # only blocks waiting for a sibling: log2(37) per gap
        assert tree.done
        return tree.result

    reference = run([], [0])
    assert list(reference["a"]) == list(range(37))
    for trial in range(30):
        cuts = sorted(random.Random(trial).sample(range(1, 37), trial % 12 + 1))
        order = list(range(len(cuts) + 1))
        random.Random(trial).shuffle(order)
        result = run(cuts, order)
        assert result["x"] == reference["x"]  # bit for bit, though the floats are large and mixed
        assert np.array_equal(result["a"], reference["a"])


def test_a_skipped_range_merges_as_nothing():
    tree = TreeMerge(10)
    tree.skip(3, 7)
    for i in [0, 1, 2, 7, 8, 9]:
        tree.add(0, i, [i])
    assert tree.done and tree.result == [0, 1, 2, 7, 8, 9]


def fake_files(sizes, learn_seconds=None):
    out = []
    for i, n in enumerate(sizes):
        chunks = [(lo, min(lo + 100, n)) for lo in range(0, n, 100)]
        spec = normalize({"d": [f"f{i}.root"]})[0]
        seconds = learn_seconds[i] if learn_seconds else 0.3
        meta = FileMeta(n, [lo for lo, _ in chunks] + [n], 1000 * n, seconds)
        out.append(FileInfo(spec, i, i, meta, chunks))
    return out


def packetizer_of(files, trained=True, **options) -> Packetizer:
    packetizer = Packetizer(**options)
    for info in files:
        packetizer.add_file(info)
    if trained:  # as if a first packet had trained the access profile
        packetizer.profiles[("d", "Events")] = {"trained": True}
    return packetizer


def simulate(packetizer, speed: dict, profile=None):
    """Workers of `speed` (entries per simulated second) ask for packets as they finish; returns
    the packets each ran and when each finished its last one."""
    clock = dict.fromkeys(speed, 0.0)
    running, given = {}, {w: [] for w in speed}
    while True:
        for worker in speed:
            if worker not in running:
                packet = packetizer.next_packet(worker, list(speed))
                if packet is not None:
                    running[worker] = (packet, clock[worker] + packet.num_entries / speed[worker])
                    given[worker].append(packet)
        if not running:
            return given, clock
        worker = min(running, key=lambda w: running[w][1])  # the next to finish
        packet, end = running.pop(worker)
        for idle in speed:  # workers that waited meanwhile wait until now
            clock[idle] = max(clock[idle], end) if idle not in running else clock[idle]
        packetizer.completed(worker, packet, packet.num_entries / speed[worker], profile)


def test_packets_follow_worker_speed_and_shrink_at_the_end():
    files = fake_files([20_000, 15_000, 30_000])
    packetizer = packetizer_of(files, target_seconds=2.0)
    speed = {"fast": 1000.0, "slow": 100.0}  # entries per simulated second
    given, clock = simulate(packetizer, speed)
    every = sorted((p.url, c) for ps in given.values() for p in ps for c in p.chunks)
    assert every == sorted((f.url, c) for f in files for c in f.chunks)  # each chunk once
    for p in given["fast"] + given["slow"]:  # runs of consecutive chunks, numbered as in their file
        f = files[p.file_index]
        assert p.chunks == f.chunks[p.first_chunk : p.first_chunk + len(p.chunks)]
    mean = {w: np.mean([p.num_entries for p in ps]) for w, ps in given.items()}
    assert mean["fast"] > 5 * mean["slow"]
    assert max(p.num_entries for p in given["fast"]) > 5 * given["fast"][-1].num_entries
    assert abs(clock["fast"] - clock["slow"]) <= 2.0  # neither waits long for the other at the end


def test_the_first_packet_trains_and_the_others_wait_for_its_profile():
    packetizer = packetizer_of(fake_files([1000] * 4), trained=False)
    workers = ["a", "b", "c"]
    first = packetizer.next_packet("a", workers)
    assert len(first.chunks) == 1  # one chunk teaches the profile
    assert packetizer.next_packet("b", workers) is None  # waits for it
    packetizer.failed("a", first)  # a training packet that fails lets the next one train
    retried = packetizer.next_packet("b", workers)
    assert retried.id == first.id and packetizer.next_packet("c", workers) is not None
    profile = {"trained": True, "learned": ["Muon_pt"]}
    packetizer.completed("b", retried, 1.0, profile)
    a, c = packetizer.next_packet("a", workers), packetizer.next_packet("c", workers)
    assert a.profile == profile and packetizer.next_packet("b", workers).profile is None  # b trained it
    packetizer.completed("a", a, 1.0)
    assert packetizer.next_packet("a", workers).profile is None  # sent once per worker
    assert c is not None


def test_a_far_file_starts_first_and_its_metadata_is_sent_once():
    files = fake_files([1000] * 6, learn_seconds=[0.3, 0.3, 3.0, 0.3, 0.3, 0.3])
    packetizer = packetizer_of(files, metadata=lambda info: f"metadata of {info.index}".encode())
    packet = packetizer.next_packet("a", ["a", "b"])
    assert packet.file_index == 2  # ten times farther: counts as ten times the work
    assert packet.metadata == b"metadata of 2"
    packetizer.completed("a", packet, 1.0)
    again = packetizer.next_packet("a", ["a", "b"])
    assert again.file_index == 2 and again.metadata is None  # the worker has it


def test_workers_read_ahead_the_packet_they_get_next_and_open_the_files_after():
    packetizer = packetizer_of(fake_files([100] * 10), open_ahead=2, metadata=lambda info: b"m")
    a = packetizer.next_packet("a", ["a", "b"])
    b = packetizer.next_packet("b", ["a", "b"])
    for p in (a, b):
        assert len(p.then) == 1  # promised: its start is read ahead
        sent = dict(p.open_ahead)
        assert p.then[0].url in sent and sent[p.then[0].url] == b"m"  # its file opened meanwhile, with its metadata

    def told(p):
        return {p.url, p.then[0].url, *(u for u, _ in p.open_ahead), *(u for u, _ in p.then[0].open_ahead)}

    assert not told(a) & told(b)  # nobody is told another's file
    assert packetizer.next_packet("c", ["a", "b", "c"]).url not in told(a) | told(b)  # files were left for others
    packetizer.completed("a", a, 1.0, waited=0.5)  # it waited for its start: read further ahead
    following = packetizer.next_packet("a", ["a", "b"])
    assert following.id == a.then[0].id and following.metadata is None  # sent with the promise
    assert len(following.then) == 2 and a.then[0].id not in {p.id for p in following.then}


def test_a_worker_with_nothing_left_takes_a_packet_promised_to_another():
    packetizer = packetizer_of(fake_files([300]))
    a = packetizer.next_packet("a", ["a", "b"])  # chunk 0, and chunk 1 promised
    b = packetizer.next_packet("b", ["a", "b"])  # chunk 2
    assert len(a.then) == 1 and b.then == ()
    stolen = packetizer.next_packet("b", ["a", "b"])
    assert stolen.id == a.then[0].id and packetizer.exhausted()
    assert packetizer.next_packet("a", ["a", "b"]) is None


def test_no_worker_holds_or_is_promised_more_than_its_share_of_what_is_left():
    packetizer = packetizer_of(fake_files([200] * 16))
    workers = ["a", "b", "c", "d"]
    for _ in range(4):  # "a" waited for its packets and their starts: it asks to hold and be promised more
        packetizer.completed("a", packetizer.next_packet("a", workers), 1.0, waited=0.9, gap=0.9)
    assert packetizer.held["a"] == 8 and packetizer.depth["a"] == 8
    left = packetizer.remaining_entries
    held = []
    while len(held) < packetizer.holds("a", held, len(workers)):
        held.append(packetizer.next_packet("a", workers, held))
    promised = list(packetizer.promised["a"])
    assert 2 < len(held) <= 8  # it takes up what was promised to it: no more than its share in all
    assert sum(p.num_entries for p in held + promised) <= left / len(workers) + 2 * 100  # two chunks over its share
    for worker in "bcd":  # the others find work of their own, not only packets promised to "a"
        assert packetizer.next_packet(worker, workers).id not in {p.id for p in promised}


def test_handing_out_does_not_scan_every_file_for_every_packet():
    """With thousands of files, the work per packet stays the same (a scan of all files per packet
    made 2000 files cost the driver 5.7 CPU seconds): counted as the files looked at."""
    looked_at = []

    def per_packet(files: int) -> float:
        packetizer = packetizer_of(fake_files([200] * files))
        available = packetizer._available
        packetizer._available = lambda i: looked_at.append(i) or available(i)
        looked_at.clear()
        workers = [f"w{i}" for i in range(8)]
        packets = 0
        while not packetizer.exhausted():
            for worker in workers:
                packet = packetizer.next_packet(worker, workers)
                if packet is not None:
                    packets += 1
                    packetizer.completed(worker, packet, 1.0)
        return len(looked_at) / packets

    assert per_packet(2000) < 1.5 * per_packet(250)


def test_a_job_whose_handing_out_is_stuck_fails_with_what_is_left(dataset, monkeypatch):
    # A bug that leaves every worker idle while work is left ends in an error that says what
    # waits, not in a job that waits for ever.
    monkeypatch.setattr(driver, "STALL_SECONDS", 0.5)
    monkeypatch.setattr(Packetizer, "next_packet", lambda self, worker, workers, held=(): None)
    t0 = time.monotonic()
    with pytest.raises(ProcessingError, match=r"internal error: 1 workers idle .* 6 files with chunks not handed out"):
        cherenkov.process(dataset, Analysis(), executor="in-process", step_size=STEP)
    assert time.monotonic() - t0 < 30


def test_a_failed_packet_waits_for_another_worker():
    packetizer = packetizer_of(fake_files([200]))
    first = packetizer.next_packet("a", ["a", "b"])
    packetizer.failed("a", first)
    again = packetizer.next_packet("a", ["a", "b"])
    assert again is not None and again.id != first.id  # "a" gets fresh work, not its failure
    retried = packetizer.next_packet("b", ["a", "b"])
    assert retried.id == first.id
    packetizer.failed("b", retried)
    assert packetizer.next_packet("a", ["a", "b"]).id == first.id and retried.attempts == 2  # everyone failed it


def test_near_the_end_an_idle_worker_copies_the_straggler():
    packetizer = packetizer_of(fake_files([1000]))
    packetizer.rate.update(quick=1000.0, slow=100.0)  # entries per second, as measured
    straggling = packetizer.next_packet("slow", ["quick", "slow"])
    while packetizer.next_packet("quick", ["quick", "slow"]) is not None:
        pass  # the quick worker takes the rest
    assert packetizer.exhausted()
    running = [("slow", straggling, 0.0)]  # started at 0: expected to take 1 s for its 100 entries
    # A copy takes the file's open (0.3 s) and 0.1 s: worth it early, not once the original is nearly done.
    assert packetizer.straggler("quick", running, now=0.6) is None
    copy = packetizer.straggler("quick", running, now=0.01)
    assert copy is not None and copy.id == straggling.id and copy.copy and copy.chunks == straggling.chunks
    assert packetizer.straggler("quick", running, now=0.02) is None  # one copy at most
    assert packetizer.straggler("slow", [("quick", copy, 0.0)], now=5.0) is None


def test_dataset_specs():
    specs = normalize({"a": ["x.root", ["r1.root", "r2.root"]], "b": {"files": ["y.root"], "tree": "t"}})
    # a file with replicas is opened as a replica set
    assert [(s.dataset, s.url, s.tree) for s in specs] == [
        ("a", "x.root", "Events"),
        ("a", ("r1.root", "r2.root"), "Events"),
        ("b", "y.root", "t"),
    ]
    assert specs[1].replicas == ("r1.root", "r2.root")
    with pytest.raises(TypeError):
        normalize({"a": "x.root"})
    with pytest.raises(ValueError):
        normalize({"a": {"tree": "t"}})
