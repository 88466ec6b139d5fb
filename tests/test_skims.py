"""Event outputs of cherenkov.process: a skim (events with at least two muons, 50 branches kept and a
derived column) written by the workers equals, event for event, uproot's selection of the same events
from the inputs, on every executor, across reruns, and after a worker killed mid-write; the returned
cherenkov.Dataset and its JSON manifest are read back by cherenkov and uproot."""

import os
import shutil
import time
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
import uproot
from cherenkov.processing import Dask, LocalProcesses
from cherenkov.processing.outputs import Part, Parts
from conftest import TESTDATA

NANO = "nanolike-root6.40-zstd-4clusters.root"  # 2000 entries in 4 clusters of 500, NanoAOD's schema
FILES = 3
STEP = 500
pytestmark = pytest.mark.skipif(not (TESTDATA / NANO).exists(), reason=f"{TESTDATA} lacks {NANO}: set CHERENKOV_SHARED")


def kept_branches() -> list[str]:
    names = uproot.open(TESTDATA / NANO)["Events"].keys()
    muons = [n for n in names if n.startswith("Muon_") and not n.endswith(("Idx", "cleanmask"))]
    return (["run", "luminosityBlock", "event", "nMuon", "MET_pt"] + muons)[:50]


KEEP = kept_branches() if (TESTDATA / NANO).exists() else []


def select(arrays):
    """The skim: events with at least two muons, the kept branches and the two leading muons' pt sum."""
    mask = arrays["nMuon"] >= 2
    out = {name: arrays[name][mask] for name in KEEP}
    out["Dimuon_ptsum"] = ak.sum(out["Muon_pt"][:, :2], axis=1)
    return out


class Skim:
    def __call__(self, chunk):
        selected = select({name: chunk[name] for name in KEEP})
        return {"skim": cherenkov.Events(selected), "events": len(chunk), "selected": len(selected["run"])}


class KillMidWrite(Skim):
    """Kills its worker process (os._exit) once per job, while a packet's output file is being
    written: at a chunk after the first of a packet, when the writer's temporary file exists."""

    def __init__(self, flag: str, folder: str):
        self.flag, self.folder = flag, folder

    def __call__(self, chunk):
        writing = os.path.isdir(self.folder) and any(n.endswith(".part") for n in os.listdir(self.folder))
        if writing and not os.path.exists(self.flag):
            Path(self.flag).touch()
            os._exit(17)
        return super().__call__(chunk)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("skim-inputs")
    files = []
    for i in range(FILES):
        shutil.copyfile(TESTDATA / NANO, folder / f"nano-{i}.root")
        files.append(str(folder / f"nano-{i}.root"))
    return files


@pytest.fixture(scope="module")
def expected(inputs):
    """uproot's selection of the same events, file after file."""
    return select(uproot.concatenate([{f: "Events"} for f in inputs], KEEP, library="ak"))


def assert_equal_events(got, expected):
    assert set(ak.fields(got)) == set(expected), sorted(set(ak.fields(got)) ^ set(expected))
    for name, array in expected.items():
        assert ak.array_equal(got[name], array), name


def assert_only_the_dataset(ds, folder: Path):
    """The folder holds the dataset's files and its manifest, nothing else (no leftovers, no temporaries)."""
    assert sorted(os.listdir(folder)) == sorted([Path(f).name for f in ds.files] + ["dataset.json"])


@pytest.mark.parametrize("executor", ["in-process", "processes", "dask", "client"])
def test_a_skim_equals_uproots_selection_on_every_executor(inputs, expected, tmp_path, executor, request):
    if executor == "dask":
        pytest.importorskip("distributed")
        executor = Dask(workers=2, processes=False)  # a LocalCluster made for the call, threads here: quick to start
    elif executor == "client":
        executor = request.getfixturevalue("client")  # an existing distributed.Client
    elif executor == "processes":
        executor = LocalProcesses(2)
    out, report = cherenkov.process({"nano": inputs}, Skim(), executor=executor, step_size=STEP, output_dir=tmp_path, return_report=True)
    ds = out["nano"]["skim"]
    assert isinstance(ds, cherenkov.Dataset)
    assert out["nano"]["events"] == FILES * 2000
    assert ds.num_entries == out["nano"]["selected"] == len(expected["run"])
    assert report.total.events_written == ds.num_entries + report.discarded.events_written  # copies near the end write twice
    assert ds.tree == "Events" and ds.format == "ttree" and len(ds.files) >= FILES
    assert ds.provenance["inputs"] == inputs and ds.provenance["processor"].endswith("test_skims.Skim")
    # uproot reads the dataset as a list of {file: tree}; so do cherenkov's readers
    assert_equal_events(uproot.concatenate(ds, library="ak"), expected)
    assert_equal_events(cherenkov.concatenate(ds, library="ak"), expected)
    assert [uproot.open(f)["Events"].num_entries for f in ds.files] == ds.entries
    # the manifest beside the files gives the same dataset
    folder = tmp_path / "nano" / "skim"
    assert Path(ds.manifest) == folder / "dataset.json"
    assert cherenkov.Dataset.load(folder) == ds
    assert_only_the_dataset(ds, folder)
    # the input ranges of the files cover every input entry once, in order
    ranges = [tuple(r) for rs in ds.inputs for r in rs]
    assert ranges == [(f, start, start + STEP) for f in inputs for start in range(0, 2000, STEP)]


def test_process_reads_the_dataset_it_wrote(inputs, expected, tmp_path):
    ds = cherenkov.process({"nano": inputs}, Skim(), executor="in-process", step_size=STEP, output_dir=tmp_path)["nano"]["skim"]
    again = cherenkov.Dataset.load(ds.manifest)

    def pt_sum(chunk):
        return {"entries": len(chunk), "sum": float(ak.sum(chunk["Dimuon_ptsum"]))}

    for spec in (again, {"x": again}):
        out = cherenkov.process(spec, pt_sum, executor="in-process")
        (result,) = out.values()
        assert result["entries"] == len(expected["run"])
        assert np.isclose(result["sum"], float(ak.sum(expected["Dimuon_ptsum"])))
    assert list(out) == ["x"] and list(cherenkov.process(again, pt_sum, executor="in-process")) == ["nano/skim"]
    steps = list(cherenkov.iterate(again, ["Dimuon_ptsum"], step_size=10_000))
    assert sum(len(s) for s in steps) == len(expected["run"])
    assert sum(len(c) for c in cherenkov.chunks(again)) == len(expected["run"])
    pytest.importorskip("dask_awkward")
    for lazy in (cherenkov.dask(again, filter_name=["Dimuon_ptsum"]), uproot.dask(again, filter_name=["Dimuon_ptsum"])):
        assert ak.array_equal(lazy.compute()["Dimuon_ptsum"], expected["Dimuon_ptsum"])


def test_a_rerun_cut_into_other_packets_replaces_the_files_without_duplicates(inputs, expected, tmp_path):
    first = cherenkov.process({"nano": inputs}, Skim(), executor="in-process", step_size=STEP, output_dir=tmp_path)["nano"]["skim"]
    # chunks of two clusters now: other packets, other names, which must replace the first run's
    second = cherenkov.process({"nano": inputs}, Skim(), executor=LocalProcesses(2), step_size=2 * STEP, output_dir=tmp_path)["nano"][
        "skim"
    ]
    again = cherenkov.process({"nano": inputs}, Skim(), executor=LocalProcesses(2), step_size=2 * STEP, output_dir=tmp_path)["nano"]["skim"]
    assert set(first.files) != set(second.files)
    assert again.num_entries == second.num_entries == first.num_entries
    assert_only_the_dataset(again, tmp_path / "nano" / "skim")
    assert_equal_events(uproot.concatenate(again, library="ak"), expected)


def test_a_worker_killed_mid_write_leaves_no_partial_or_duplicate_events(inputs, expected, tmp_path):
    folder = tmp_path / "out" / "nano" / "skim"
    flag = tmp_path / "killed"
    # one worker: after its first packet (one chunk) it gets a file's other chunks as one packet
    out, report = cherenkov.process(
        {"nano": inputs},
        KillMidWrite(str(flag), str(folder)),
        executor=LocalProcesses(1),
        step_size=STEP,
        output_dir=tmp_path / "out",
        return_report=True,
    )
    assert flag.exists() and len(report.lost_workers) == 1 and report.retries == len(report.failures) >= 1  # the packets it held
    ds = out["nano"]["skim"]
    assert ds.num_entries == len(expected["run"])
    assert_equal_events(uproot.concatenate(ds, library="ak"), expected)
    assert_only_the_dataset(ds, folder)


class StraggleOnce(Skim):
    """The first run of the last chunk of the last file (its packet's last) waits until that packet's
    file exists, written by a copy of the packet an idle worker got (bounded: 60 s), then writes it
    again: a straggler ending after its copy, same name, same events."""

    def __init__(self, flag: str, last_file: str, folder: str):
        self.flag, self.last_file, self.folder = flag, last_file, folder

    def __call__(self, chunk):
        if chunk.metadata["file"] == self.last_file and chunk.entry_stop == 2000:
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass  # the copy
            else:
                deadline = time.monotonic() + 60
                while not list(Path(self.folder).glob(f"part-{FILES - 1:06d}-*-000004.root")) and time.monotonic() < deadline:
                    time.sleep(0.05)
        return super().__call__(chunk)


def test_a_straggler_and_its_copy_write_one_file(inputs, expected, tmp_path):
    folder = tmp_path / "out" / "nano" / "skim"
    out, report = cherenkov.process(
        {"nano": inputs},
        StraggleOnce(str(tmp_path / "slept"), inputs[-1], str(folder)),
        executor=LocalProcesses(2),
        step_size=STEP,
        output_dir=tmp_path / "out",
        return_report=True,
    )
    ds = out["nano"]["skim"]
    assert report.copies >= 1 and report.copies_won >= 1, (report.copies, report.copies_won)
    # the original ended after its copy: it wrote the same events under the same name, not merged
    assert report.discarded.events_written > 0 and report.total.events_written == ds.num_entries + report.discarded.events_written
    assert ds.num_entries == len(expected["run"])
    assert_equal_events(uproot.concatenate(ds, library="ak"), expected)
    assert_only_the_dataset(ds, folder)


def test_rntuple_outputs(inputs, expected, tmp_path):
    out = cherenkov.process(
        {"nano": inputs[:1]}, Skim(), executor="in-process", step_size=STEP, output_dir=tmp_path, output_format="rntuple"
    )
    ds = out["nano"]["skim"]
    assert ds.format == "rntuple"
    assert all(isinstance(cherenkov.open(f)["Events"], cherenkov.RNTuple) for f in ds.files)
    one_file = {name: array[: ds.num_entries] for name, array in expected.items()}
    assert_equal_events(cherenkov.concatenate(ds, library="ak"), one_file)


def test_events_need_an_output_dir_and_one_tree_per_output(inputs, tmp_path):
    with pytest.raises(cherenkov.processing.ProcessingError, match="output_dir"):
        cherenkov.process({"nano": inputs[:1]}, Skim(), executor="in-process", retries=0)
    with pytest.raises(TypeError, match="tree"):
        Parts("Events", "ttree", [Part("a", 1)]) + Parts("Muons", "ttree", [Part("b", 1)])


def test_parts_of_one_packet_add_up_to_one_file():
    a = Parts("Events", "ttree", [Part("p1", 3, [["f", 0, 10]])])
    b = Parts("Events", "ttree", [Part("p1", 2, [["f", 10, 20]]), Part("p2", 0, [["f", 20, 30]])])
    total = a + b
    assert [(p.path, p.entries, p.inputs) for p in total.items] == [("p1", 5, [["f", 0, 10], ["f", 10, 20]]), ("p2", 0, [["f", 20, 30]])]


@pytest.mark.parametrize("executor", ["in-process", "processes", "client"])
def test_workers_merge_the_packets_files_into_files_of_the_target_size(inputs, expected, tmp_path, executor, request):
    one = cherenkov.process({"nano": inputs}, Skim(), executor="in-process", step_size=STEP, output_dir=tmp_path / "parts")["nano"]["skim"]
    sizes = [os.path.getsize(f) for f in one.files]
    target = 2 * max(sizes)  # two or three packet files per merged file
    if executor == "processes":
        executor = LocalProcesses(2)
    elif executor == "client":
        executor = request.getfixturevalue("client")  # the merges run as Dask tasks too
    for _ in range(2):  # a rerun makes the same files again, and leaves nothing else
        out, report = cherenkov.process(
            {"nano": inputs}, Skim(), executor=executor, step_size=STEP, output_dir=tmp_path, output_max_size=target, return_report=True
        )
        ds = out["nano"]["skim"]
        assert report.merges >= 1 and 1 < len(ds.files) < len(one.files)
        assert [uproot.open(f)["Events"].num_entries for f in ds.files] == ds.entries
        assert_equal_events(uproot.concatenate(ds, library="ak"), expected)
        assert_only_the_dataset(ds, tmp_path / "nano" / "skim")
        assert [tuple(r) for rs in ds.inputs for r in rs] == [tuple(r) for rs in one.inputs for r in rs]
    # a target above the whole output: one file; progress tells events written, then merges done
    updates = []
    ds = cherenkov.process(
        {"nano": inputs},
        Skim(),
        executor="in-process",
        step_size=STEP,
        output_dir=tmp_path,
        output_max_size=1 << 30,
        callback=updates.append,
    )
    ds = ds["nano"]["skim"]
    written = [u.events_written for u in updates if "nano" in u.tasks]
    assert written == sorted(written) and written[-1] == ds.num_entries
    assert [u.tasks for u in updates if "merging" in u.tasks] == [{"merging": (1, 1)}]
    # named by (file position, chunk) of its first chunk and of the end of its last file's
    assert [Path(f).name for f in ds.files] == [f"merged-000000-000000-{FILES - 1:06d}-000004.root"]
    assert_equal_events(uproot.concatenate(ds, library="ak"), expected)
    assert_only_the_dataset(ds, tmp_path / "nano" / "skim")


class SkimNothing(Skim):
    def __call__(self, chunk):
        out = super().__call__(chunk)
        out["skim"].arrays = {name: array[:0] for name, array in out["skim"].arrays.items()}
        return out


def test_packets_that_select_nothing_write_no_files(inputs, tmp_path):
    ds = cherenkov.process({"nano": inputs[:2]}, SkimNothing(), executor="in-process", step_size=STEP, output_dir=tmp_path)["nano"]["skim"]
    assert (ds.files, ds.num_entries) == ([], 0)
    assert os.listdir(tmp_path / "nano" / "skim") == ["dataset.json"]
    assert cherenkov.Dataset.load(ds.manifest) == ds
