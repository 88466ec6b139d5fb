"""The fsspec filesystem ``cherenkov``: any file's bytes through cherenkov's sources, cat_ranges as
one vectored request per file, and the root/http protocols of other packages left alone."""

import shutil
import tempfile
from pathlib import Path

import cherenkov.fsspec_fs
import fsspec
import numpy as np
import pytest
from cherenkov_lab import Lab

needs_servers = pytest.mark.skipif(
    not (shutil.which("xrootd") and shutil.which("nginx")), reason="xrootd and nginx are not installed: run `make setup`"
)


@pytest.fixture(scope="module")
def data():
    folder = Path(tempfile.mkdtemp(prefix="cherenkov-fsspec-"))
    folder.chmod(0o755)  # the servers run as nobody
    payload = np.random.default_rng(7).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    (folder / "blob.bin").write_bytes(payload)  # not a ROOT file: any file reads
    (folder / "blob.bin").chmod(0o644)
    yield folder, payload
    shutil.rmtree(folder, ignore_errors=True)


def test_the_protocol_is_registered_and_others_are_left_alone():
    assert fsspec.get_filesystem_class("cherenkov") is cherenkov.fsspec_fs.CherenkovFileSystem
    for other in ("root", "http", "file"):
        try:
            cls = fsspec.get_filesystem_class(other)
        except ImportError:
            continue  # the package providing it is not installed: still not ours
        assert cls is not cherenkov.fsspec_fs.CherenkovFileSystem


def test_local_reads_and_ranges(data):
    folder, payload = data
    url = f"cherenkov://{folder / 'blob.bin'}"
    with fsspec.open(url, "rb") as f:
        assert f.read() == payload
        f.seek(1000)
        assert f.read(10) == payload[1000:1010]
    fs = fsspec.filesystem("cherenkov")
    assert fs.size(str(folder / "blob.bin")) == len(payload)
    assert fs.cat_file(str(folder / "blob.bin"), start=-5) == payload[-5:]
    with pytest.raises(FileNotFoundError):
        fs.info(str(folder / "absent.bin"))


@needs_servers
@pytest.mark.parametrize("protocol", ["root", "http"])
def test_cat_ranges_is_one_request_per_file(data, protocol):
    folder, payload = data
    with Lab(folder) as lab:
        url = lab.url(protocol, "blob.bin")
        fs = fsspec.filesystem("cherenkov")
        starts = list(range(0, 200_000, 10_000))
        ends = [s + 777 for s in starts]
        source = fs._file(url)
        before = source.source_counters().requests
        got = fs.cat_ranges([url] * len(starts), starts, ends)
        assert got == [payload[s:e] for s, e in zip(starts, ends)]
        assert source.source_counters().requests - before == 1
        assert fsspec.open(f"cherenkov::{url}" if protocol == "root" else f"cherenkov://{url}").open().read(5) == payload[:5]
