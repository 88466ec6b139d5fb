"""cherenkov.iterate / concatenate / chunks over many files: file lists as uproot takes them, values
equal to uproot's, and the next files opened while the current one is read (real nginx, toxiproxy
latency)."""

import shutil
import tempfile
import time
from pathlib import Path

import awkward as ak
import cherenkov
import numpy as np
import pytest
import uproot
from cherenkov.dataset import file_specs, split_tree
from conftest import TESTDATA

NANO = "nanolike-root6.40-zstd-4clusters.root"
HZZ = ["uproot-HZZ.root", "uproot-HZZ-zlib.root", "uproot-HZZ-lz4.root", "uproot-HZZ-zstd.root"]
NANO_BRANCHES = ["nMuon", "Muon_pt", "Muon_eta", "run", "event"]

needs_testdata = pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"{TESTDATA} is absent: set CHERENKOV_SHARED")


@pytest.fixture(scope="module")
def nano_copies():
    """Four copies of the 4-cluster NanoAOD-like file, in a folder every server (xrootd runs as
    nobody) can read."""
    if not TESTDATA.is_dir():
        pytest.skip(f"{TESTDATA} is absent: set CHERENKOV_SHARED")
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-dataset-"))
    folder.chmod(0o755)
    for k in range(4):
        shutil.copyfile(TESTDATA / NANO, folder / f"nano-{k}.root")
        (folder / f"nano-{k}.root").chmod(0o644)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_file_lists_are_read_as_uproot_reads_them(tmp_path):
    assert split_tree("a.root:Events", None) == ("a.root", "Events")
    assert split_tree("a.root:dir/tree", None) == ("a.root", "dir/tree")
    assert split_tree("root://host:1094//store/a.root", "T") == ("root://host:1094//store/a.root", "T")
    assert split_tree("root://host:1094//store/a.root:Events", None) == ("root://host:1094//store/a.root", "Events")
    assert split_tree("http://host:8080/a.root", None) == ("http://host:8080/a.root", None)
    assert split_tree("C:/data/a.root", None) == ("C:/data/a.root", None)
    for name in ["b.root", "a.root", "c.txt"]:
        (tmp_path / name).write_bytes(b"")
    specs = file_specs(
        [
            f"{tmp_path}/*.root:Events",
            {"x.root": "T", "y.root": None},
            ["http://one/r.root", "root://two//r.root"],
        ],
        tree="Default",
    )
    assert [(s.replicas, s.tree) for s in specs] == [
        ((str(tmp_path / "a.root"),), "Events"),
        ((str(tmp_path / "b.root"),), "Events"),
        (("x.root",), "T"),
        (("y.root",), "Default"),
        (("http://one/r.root", "root://two//r.root"), "Default"),
    ]
    assert specs[-1].url == ("http://one/r.root", "root://two//r.root")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        file_specs(f"{tmp_path}/*.none")
    with pytest.raises(ValueError, match="no files"):
        file_specs([])


@needs_testdata
def test_iterate_equals_uproot_iterate_over_files_of_two_kinds(nano_copies):
    nano = sorted(str(p) for p in nano_copies.glob("*.root"))[:2]
    for files, tree, expressions in [
        ([f"{TESTDATA}/{name}" for name in HZZ], "events", ["NMuon", "Muon_Px", "Muon_E", "MET_px"]),
        (nano, "Events", NANO_BRANCHES),
    ]:
        theirs = ak.concatenate(list(uproot.iterate({f: tree for f in files}, expressions, library="ak")))
        it = cherenkov.iterate([f"{f}:{tree}" for f in files], expressions, step_size=500, report=True)
        steps = list(it)
        ours = ak.concatenate([arrays for arrays, _ in steps])
        assert ours.fields == theirs.fields
        assert ak.array_equal(ours, theirs), files
        reports = [r for _, r in steps]
        assert reports[0].global_entry_start == 0 and reports[-1].global_entry_stop == len(theirs)
        assert all(a.global_entry_stop == b.global_entry_start for a, b in zip(reports, reports[1:]))
        assert [r.file_path for r in reports][-1] == files[-1]
        assert [t.path for t in it.timings] == files


def test_a_step_size_in_bytes_makes_steps_of_that_size_as_uproot_does(nano_copies):
    """``step_size="20 kB"`` (uproot's spelling of a memory size): steps of whole clusters
    holding about that many uncompressed bytes of the selected branches, the same values as
    uproot's iterate with the same step_size."""
    files = sorted(str(p) for p in nano_copies.glob("*.root"))[:2]
    tree = cherenkov.open(files[0])["Events"]
    selected = tree.select(NANO_BRANCHES)
    per_entry = sum(info.uncompressed_bytes for _, info in selected) / tree.num_entries
    entries = tree.entries_in(20_000, selected)
    assert entries == int(20_000 / per_entry) > 0
    assert tree.steps("20 kB", selected=selected) == tree.steps(entries)
    theirs = ak.concatenate(list(uproot.iterate({f: "Events" for f in files}, NANO_BRANCHES, step_size="20 kB", library="ak")))
    chunks = list(cherenkov.iterate([f"{f}:Events" for f in files], NANO_BRANCHES, step_size="20 kB"))
    assert ak.array_equal(ak.concatenate(chunks), theirs)
    assert len(chunks) == 2 * len(tree.steps(entries)) > 2
    assert len(list(tree.iterate(NANO_BRANCHES, step_size="20 kB", progress=False))) == len(tree.steps(entries))
    # A whole tree's worth per step, and sizes that are not sizes.
    assert tree.steps("1 TB") == [(0, tree.num_entries)]
    for bad in ("100 parsecs", "MB", "-1 MB"):
        with pytest.raises(ValueError, match="is not a size"):
            cherenkov.iterate(files, NANO_BRANCHES, tree="Events", step_size=bad)


@needs_testdata
def test_concatenate_equals_uproot_concatenate_in_both_libraries():
    files = f"{TESTDATA}/uproot-HZZ-z*.root:events"  # zlib and zstd
    theirs = uproot.concatenate(files, filter_name="Muon_*", library="ak")
    ours = cherenkov.concatenate(files, filter_name="Muon_*", library="ak")
    assert ak.array_equal(ours, theirs)
    numpy = cherenkov.concatenate(files, filter_name="Muon_*", library="np")
    assert sorted(numpy) == sorted(theirs.fields)
    assert ak.array_equal(numpy["Muon_Px"].to_awkward(), theirs["Muon_Px"])
    assert np.array_equal(numpy["Muon_Px"].offsets, np.concatenate([[0], np.cumsum(ak.num(theirs["Muon_Px"]))]))


@needs_testdata
def test_a_missing_file_is_named_or_skipped():
    files = [f"{TESTDATA}/uproot-HZZ.root", f"{TESTDATA}/absent.root", f"{TESTDATA}/uproot-HZZ-zlib.root"]
    with pytest.raises(cherenkov.SourceError, match="absent.root"):
        list(cherenkov.iterate(files, ["NMuon"], tree="events"))
    got = cherenkov.concatenate(files, ["NMuon"], tree="events", allow_missing=True)
    assert len(got) == 2 * 2421
    with pytest.raises(cherenkov.NotFoundError, match="name the tree"):
        list(cherenkov.iterate(f"{TESTDATA}/uproot-nesteddirs.root"))


@needs_testdata
def test_leaving_early_stops_the_files_read_ahead(nano_copies):
    it = cherenkov.iterate(sorted(nano_copies.glob("*.root")), NANO_BRANCHES, step_size=500)
    first = next(it)
    assert len(first) == 500
    it.close()
    assert it.timings == []  # no file was finished
    with pytest.raises(StopIteration):
        next(it)


@needs_testdata
def test_chunks_share_one_profile_across_files(nano_copies):
    files = sorted(str(p) for p in nano_copies.glob("*.root"))
    profile = cherenkov.AccessProfile()
    seen, files_seen = [], []
    it = cherenkov.chunks(files, step_size=500, profile=profile)
    for chunk in it:
        seen.append(chunk.arrays(["Muon_pt", "nMuon"]))
        files_seen.append(chunk.tree.file.path)
        time.sleep(0.1)  # an analysis' work per chunk: the next file's opening has time to end
    assert files_seen == [f for f in files for _ in range(4)]
    assert sorted(profile.learned) == ["Muon_pt", "nMuon"]
    theirs = uproot.concatenate({f: "Events" for f in files}, ["Muon_pt", "nMuon"], library="ak")
    assert ak.array_equal(ak.concatenate(seen), theirs)
    # later files need no training: their chunks came from the learned set's read-ahead
    assert chunk.tree.last_chunk_stats.startup_fetches == 0
    assert chunk.tree.last_chunk_stats.misses == 0
    # the second file, opened before the profile was trained, started its first chunk as soon as
    # it was: before the first file was done
    assert it.timings[1].first_step_started < it.timings[0].finished


@pytest.fixture(scope="module")
def lab(nano_copies):
    if not (shutil.which("xrootd") and shutil.which("nginx")):
        pytest.skip("xrootd and nginx are not installed: run `make setup`")
    from cherenkov_lab import Lab

    with Lab(nano_copies) as lab:
        yield lab


def test_a_root_url_glob_matches_the_file_names_of_one_listing(lab):
    """``root://.../nano-*.root`` expands from one kXR_dirlist of the directory, sorted, as a
    local glob does; a pattern in a directory is refused, one that matches nothing is an error."""
    names = sorted(p.name for p in lab.data_dir.glob("nano-*.root"))
    assert len(names) > 1
    pattern = lab.url("root", "nano-[0-9]*.root")
    specs = file_specs(pattern + ":Events")
    assert [(s.url, s.tree) for s in specs] == [(lab.url("root", n), "Events") for n in names]
    got = cherenkov.concatenate(pattern, NANO_BRANCHES, library="ak")
    assert ak.array_equal(got, uproot.concatenate({str(lab.data_dir / n): "Events" for n in names}, NANO_BRANCHES, library="ak"))
    with pytest.raises(FileNotFoundError, match="no file matches"):
        file_specs(lab.url("root", "none-*.root"))
    with pytest.raises(ValueError, match="not directories"):
        file_specs(lab.url("root", "d*/nano-0.root"))


def read_with_work(urls, files_ahead, work_seconds):
    """Iterate as an analysis does: some work per step (sleep: the test measures overlap, not speed)."""
    it = cherenkov.iterate(urls, NANO_BRANCHES, step_size=500, files_ahead=files_ahead)
    steps = []
    for arrays in it:
        steps.append(arrays)
        time.sleep(work_seconds)
    return ak.concatenate(steps), it.timings


def test_next_files_open_while_the_current_one_is_read(lab):
    rtt = 0.1
    urls = [lab.url("http", f"nano-{k}.root") for k in range(4)]
    lab.set_rtt(rtt * 1000)
    try:
        ahead, timings = read_with_work(urls, files_ahead=2, work_seconds=rtt)
        default, default_timings = read_with_work(urls, files_ahead=None, work_seconds=rtt)
        serial, serial_timings = read_with_work(urls, files_ahead=0, work_seconds=rtt)
    finally:
        lab.set_rtt(0)
    local = uproot.concatenate({str(p): "Events" for p in sorted(lab.data_dir.glob("*.root"))}, NANO_BRANCHES, library="ak")
    for arrays in (ahead, default, serial):
        assert ak.array_equal(arrays, local)
    assert [t.path for t in timings] == urls
    for run in (timings, default_timings):
        for before, after in zip(run, run[1:]):
            # file k+1 was open, and its first steps asked for, before file k's last step was handed over
            assert after.opened < before.finished, (before, after)
            assert after.first_step_started < before.finished
    # the default opens every file of a short list at once (a fixed 2 opens the 4th only once the
    # reader is on the 2nd)
    assert max(t.open_started for t in default_timings) < default_timings[0].opened
    assert timings[3].open_started > timings[0].finished
    for before, after in zip(serial_timings, serial_timings[1:]):
        # the control: without files ahead each file is opened only after the previous one is done
        assert after.open_started >= before.finished
    print(
        f"4 files at {rtt * 1000:.0f} ms RTT: files ahead {timings[-1].finished - timings[0].open_started:.2f} s, "
        f"one after another {serial_timings[-1].finished - serial_timings[0].open_started:.2f} s"
    )


def test_the_next_files_read_ahead_from_when_the_training_chunk_ends(lab):
    """The files opened ahead start their learned set's read-ahead when the first file's training
    chunk ends, not a round trip later when its next chunk has come."""
    rtt = 0.3
    urls = [lab.url("http", f"nano-{k}.root") for k in range(2)]
    lab.set_rtt(rtt * 1000)
    try:
        it = cherenkov.chunks(urls, step_size=500, profile=cherenkov.AccessProfile())
        seen, handed = [], []
        for chunk in it:
            handed.append(time.perf_counter())
            # a column at a time: the learned set is known only when the training chunk ends
            seen.append(ak.zip({b: chunk[b] for b in ["Muon_pt", "nMuon"]}, depth_limit=1))
            if len(handed) == 1:
                training_ended = time.perf_counter()
    finally:
        lab.set_rtt(0)
    theirs = uproot.concatenate({str(lab.data_dir / f"nano-{k}.root"): "Events" for k in range(2)}, ["Muon_pt", "nMuon"], library="ak")
    assert ak.array_equal(ak.concatenate(seen), theirs)
    second_started = it.timings[1].first_step_started
    # after the training chunk ended, and well before the first file's next chunk came (which
    # takes a round trip from then: its read-ahead needed the learned set too)
    assert training_ended <= second_started < handed[1] - rtt / 2, (training_ended, second_started, handed[1])
