"""cherenkov.process: one histogram-filling analysis over a multi-file dataset gives the same result
in-process, in local processes and on Dask, over local files and through the lab's proxies; a worker
killed mid-job and corrupt files are handled; merging and packet sizing behave as documented."""

import os
import random
import shutil
import stat
import struct
import tempfile
from pathlib import Path

import awkward as ak
import cherenkov
import hist
import numpy as np
import pytest
from cherenkov.processing import Dask, LocalProcesses, ProcessingError
from cherenkov.processing.dataset import normalize
from cherenkov.processing.merge import BlockFolder, TreeMerge, merge
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
        assert sum(s.entries for s in report.workers.values()) == report.entries
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


def test_a_worker_killed_mid_job_loses_and_double_counts_nothing(dataset, sequential, tmp_path):
    first, report = cherenkov.process(dataset, Analysis(), executor="in-process", step_size=STEP, return_report=True)
    result, report = cherenkov.process(
        dataset, KillOnce(str(tmp_path / "killed")), executor=LocalProcesses(2), step_size=STEP, return_report=True
    )
    assert (tmp_path / "killed").exists()
    assert len(report.lost_workers) == 1 and report.retries == 1
    assert "BrokenProcessPool" in report.failures[0].error
    assert report.entries == 3 * 2000 + 3 * 2421
    assert report.packets == sum(s.packets for s in report.workers.values())
    assert_identical(result, first)
    assert_matches_sequential(result, sequential)


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


def fake_files(sizes):
    out, first = [], 0
    for i, n in enumerate(sizes):
        chunks = [(lo, min(lo + 100, n)) for lo in range(0, n, 100)]
        spec = normalize({"d": [f"f{i}.root"]})[0]
        out.append(FileInfo(spec, n, chunks, first_chunk=first))
        first += len(chunks)
    return out


def test_packets_follow_worker_speed_and_shrink_at_the_end():
    files = fake_files([20_000, 15_000, 30_000])
    packetizer = Packetizer(files, target_seconds=2.0)
    speed = {"fast": 1000.0, "slow": 100.0}  # entries per simulated second
    clock = dict.fromkeys(speed, 0.0)
    given = {w: [] for w in speed}
    while True:
        worker = min(clock, key=clock.get)  # the worker that finishes first asks next
        packet = packetizer.next_packet(worker, list(speed))
        if packet is None:
            break
        seconds = packet.num_entries / speed[worker]
        clock[worker] += seconds
        packetizer.completed(worker, packet, seconds)
        given[worker].append(packet)
    every = sorted((p.url, c) for ps in given.values() for p in ps for c in p.chunks)
    assert every == sorted((f.url, c) for f in files for c in f.chunks)  # each chunk once
    for p in given["fast"] + given["slow"]:  # runs of consecutive chunks, numbered as in their file
        f = files[p.file_index]
        lo = p.first_chunk - f.first_chunk
        assert p.chunks == f.chunks[lo : lo + len(p.chunks)]
    mean = {w: np.mean([p.num_entries for p in ps]) for w, ps in given.items()}
    assert mean["fast"] > 5 * mean["slow"]
    assert max(p.num_entries for p in given["fast"]) > 5 * given["fast"][-1].num_entries
    assert abs(clock["fast"] - clock["slow"]) <= 2.0  # neither waits long for the other at the end


def test_workers_open_the_files_they_are_told_they_read_next():
    packetizer = Packetizer(fake_files([100] * 8), open_ahead=2)
    a = packetizer.next_packet("a", ["a", "b"])
    b = packetizer.next_packet("b", ["a", "b"])
    assert len(a.open_ahead) == len(b.open_ahead) == 2
    assert len({a.url, b.url, *a.open_ahead, *b.open_ahead}) == 6  # nobody is told another's file
    told = {a.url, b.url, *a.open_ahead, *b.open_ahead}
    assert packetizer.next_packet("c", ["a", "b", "c"]).url not in told  # files were left for others
    assert packetizer.next_packet("a", ["a", "b"]).url == a.open_ahead[0]


def test_a_failed_packet_waits_for_another_worker():
    packetizer = Packetizer(fake_files([300]))
    first = packetizer.next_packet("a", ["a", "b"])
    packetizer.failed("a", first)
    again = packetizer.next_packet("a", ["a", "b"])
    assert again is not None and again.id != first.id  # "a" gets fresh work, not its failure
    assert packetizer.next_packet("b", ["a", "b"]) is first
    packetizer.failed("b", first)
    assert packetizer.next_packet("a", ["a", "b"]) is first and first.attempts == 2  # everyone failed it


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
