"""Staging a dataset to a local directory: copies equal to their originals (and read the same),
checked against the server's checksum where it has one, and an interrupted stage resumed without
copying again what it had copied. Files written here with uproot; servers started here."""

import filecmp
import os
import shutil
import stat
import subprocess
import sys

import cherenkov
import numpy as np
import pytest
import uproot
from cherenkov_lab import Lab
from conftest import same_values, wait_for

N_FILES = 3


@pytest.fixture(scope="module")
def served(folder):
    """Three files of random numbers (incompressible: about 800 kB each) in the served folder."""
    rng = np.random.default_rng(7)
    for i in range(N_FILES):
        path = folder / f"part{i}.root"
        with uproot.recreate(path, compression=None) as f:
            f["Events"] = {"x": rng.normal(size=50_000 + 1000 * i), "n": rng.integers(0, 9, size=50_000 + 1000 * i)}
        path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    return folder


def names():
    return [f"part{i}.root" for i in range(N_FILES)]


def assert_copies(staged, source_dir):
    for s in staged:
        original = source_dir / os.path.basename(s.path)
        assert filecmp.cmp(s.path, original, shallow=False), s.path
        ours, theirs = cherenkov.open(s.path)["Events"], cherenkov.open(original)["Events"]
        got, want = ours.arrays(["x", "n"], library="np"), theirs.arrays(["x", "n"], library="np")
        assert all(same_values(got[k], want[k]) for k in ("x", "n"))


def test_a_local_glob_is_staged_and_a_second_stage_copies_nothing(served, tmp_path):
    staged = cherenkov.stage(str(served / "part*.root:Events"), tmp_path, progress=False)
    assert [os.path.basename(s.path) for s in staged] == names()
    assert [s.copied for s in staged] == [s.bytes for s in staged]
    assert all(s.verified == "size" for s in staged)  # local files have no checksum to ask for
    assert_copies(staged, served)
    again = cherenkov.stage(str(served / "part*.root"), tmp_path, progress=False)
    assert [(s.copied, s.verified) for s in again] == [(0, "earlier")] * N_FILES
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


@pytest.mark.parametrize("protocol", ["root", "http"])
def test_remote_files_are_staged_and_verified(served, tmp_path, protocol):
    with Lab(served) as lab:
        lab.set_rtt(10)
        urls = [lab.url(protocol, n) for n in names()]
        staged = cherenkov.stage(urls, tmp_path, files_at_once=2, progress=False, chunk_bytes=128 << 10)
    assert [os.path.basename(s.path) for s in staged] == names()
    # XRootD keeps an adler32 of each file (the lab's server computes it); nginx has none to ask.
    assert {s.verified for s in staged} == ({"adler32"} if protocol == "root" else {"size"})
    assert_copies(staged, served)


def test_an_interrupted_stage_resumes_without_copying_again(served, tmp_path):
    """A stage cut after the first file and part of the second: run again, it skips the first,
    continues the second from where it stopped and copies the third."""
    sizes = [(served / n).stat().st_size for n in names()]
    with Lab(served, link="narrow", rate=1.0) as lab:  # 1 MB/s: about a second per file
        urls = [[lab.url("http", n)] for n in names()]
        jobs = [(u, str(tmp_path / n)) for u, n in zip(urls, names())]
        job = cherenkov._core.stage(jobs, 1, 64 << 10, 2, True, None)
        wait_for(lambda: job.progress()[0] > sizes[0] + 150_000, 30, "a second file under way")
        job.cancel()
        wait_for(lambda: job.wait(0.1), 10, "the stage stopping")
        partials = [p for p in os.listdir(tmp_path) if p.startswith(".part1.root.")]
        assert (tmp_path / "part0.root").exists() and len(partials) == 1
        kept = (tmp_path / partials[0]).stat().st_size
        assert 0 < kept < sizes[1] and not (tmp_path / "part1.root").exists()
        staged = cherenkov.stage(urls, tmp_path, files_at_once=1, progress=False, chunk_bytes=64 << 10)
    assert [(s.copied, s.resumed_from, s.verified) for s in staged] == [
        (0, 0, "earlier"),
        (sizes[1] - kept, kept, "size"),
        (sizes[2], 0, "size"),
    ]
    assert_copies(staged, served)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_the_command_stages_and_says_what_it_did(served, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "cherenkov.cli", "stage", str(served / "part0.root"), str(served / "part1.root"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "2 files in" in out and "verified by size" in out
    assert filecmp.cmp(tmp_path / "part1.root", served / "part1.root", shallow=False)


def test_files_that_would_share_a_name_are_refused(served, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.copy(served / "part0.root", other / "part0.root")
    with pytest.raises(ValueError, match="part0.root"):
        cherenkov.stage([str(served / "part0.root"), str(other / "part0.root")], tmp_path / "out", progress=False)


def test_a_checksum_the_server_fails_to_give_at_first_is_asked_again(served, tmp_path):
    """The server's checksum is asked for beside the first reads; a server that fails that query
    (XRootD's "Program failed": a checksum program that failed, or a computation still running
    for a client killed mid-stage) is asked once more when the copy is done, and the copy is
    verified by it."""
    tools = served / "checksum-tool"
    tools.mkdir(mode=0o777)
    tools.chmod(0o777)  # xrootd runs as nobody
    program = tools / "adler32.sh"
    # xrootd runs it as nobody, who may not reach the venv's interpreter: the system's if it can.
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    program.write_text(
        "#!/bin/sh\n"
        f'echo "$1" >> {tools}/asked\n'
        f"if [ ! -e {tools}/failed ]; then touch {tools}/failed; exit 1; fi\n"
        f"exec {python} -c \"import sys, zlib; print('%08x' % zlib.adler32(open(sys.argv[1], 'rb').read()))\" {served}\"$1\"\n"
    )
    program.chmod(0o755)
    from cherenkov_lab.servers import XrootdServer

    with XrootdServer(served, extra_config=f"xrootd.chksum adler32 {program}") as server:
        try:
            (staged,) = cherenkov.stage([server.url("part0.root")], tmp_path, progress=False)
        except cherenkov.SourceError as e:
            raise AssertionError(f"{e}\nxrootd's log:\n{server.log.read_text()[-3000:]}") from e
    assert (tools / "asked").read_text().split() == ["/part0.root", "/part0.root"]
    assert staged.verified == "adler32"
    assert filecmp.cmp(staged.path, served / "part0.root", shallow=False)
