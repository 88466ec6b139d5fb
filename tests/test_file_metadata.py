"""`cherenkov.open(url, metadata=File.metadata())`: a file opened again from what an earlier open
learned reads none of its metadata again (request and byte counts over root:// and http:// through
the lab) and reads the same values; the metadata pickles and is small; damaged metadata and a file
changed since are refused, by name."""

import pickle
import shutil
from pathlib import Path

import cherenkov
import pytest
from conftest import TESTDATA, same_values

NANO = "nanolike-root6.40-zstd-4clusters.root"
BRANCHES = ["Muon_pt", "nMuon", "Jet_eta", "MET_pt", "run"]
pytestmark = pytest.mark.skipif(not (TESTDATA / NANO).exists(), reason=f"{TESTDATA} lacks {NANO}: set CHERENKOV_SHARED")


def test_a_file_opened_with_its_metadata_reads_the_same_values():
    first = cherenkov.open(TESTDATA / NANO)
    expected = first["Events"].arrays(BRANCHES, library="np")
    metadata = first.metadata()
    assert metadata.size == first.size and metadata.version
    assert 0 < metadata.nbytes < first.size / 10  # the tree's metadata, not the file
    for given in (metadata, pickle.loads(pickle.dumps(metadata)), bytes(metadata)):
        again = cherenkov.open(TESTDATA / NANO, metadata=given)
        got = again["Events"].arrays(BRANCHES, library="np")
        assert all(same_values(got[b], expected[b]) for b in BRANCHES)
        assert again.keys() == first.keys()


def test_damaged_metadata_is_refused():
    data = bytearray(bytes(cherenkov.open(TESTDATA / NANO).metadata()))
    data[len(data) // 2] ^= 1
    with pytest.raises(cherenkov.FormatError, match="metadata snapshot"):
        cherenkov.open(TESTDATA / NANO, metadata=bytes(data))
    with pytest.raises(cherenkov.FormatError, match="magic"):
        cherenkov.open(TESTDATA / NANO, metadata=b"not metadata at all")


def test_a_file_changed_since_its_metadata_was_learned_is_refused(tmp_path):
    path = tmp_path / NANO
    shutil.copyfile(TESTDATA / NANO, path)
    metadata = cherenkov.open(path).metadata()
    with open(path, "ab") as f:
        f.write(b"more")
    with pytest.raises(cherenkov.FileChangedError, match="when its metadata was learned") as e:
        cherenkov.open(path, metadata=metadata)
    assert isinstance(e.value, cherenkov.SourceError)


@pytest.fixture(scope="module")
def lab(folder):
    if not (shutil.which("xrootd") and shutil.which("nginx")):
        pytest.skip("xrootd and nginx are not installed: run `make setup`")
    from cherenkov_lab import Lab

    shutil.copyfile(TESTDATA / NANO, Path(folder) / NANO)
    (Path(folder) / NANO).chmod(0o644)
    with Lab(folder) as lab:
        lab.set_rtt(10)
        yield lab


@pytest.mark.parametrize("protocol", ["root", "http"])
def test_a_remote_file_opened_with_its_metadata_asks_only_for_data(lab, protocol):
    url = lab.url(protocol, NANO)
    first = cherenkov.open(url)
    expected = first["Events"].arrays(BRANCHES, library="np")
    opening = first.source_counters()
    again = cherenkov.open(url, metadata=first.metadata())
    tree = again["Events"]
    opened = again.source_counters()
    # HTTP's size probe asks for one byte, XRootD's open for none; the tree costs nothing.
    assert opened.bytes <= 1 and opened.requests <= 1, opened
    assert opening.bytes > 100_000  # the first open read the head and tail
    got = tree.arrays(BRANCHES, library="np")
    assert again.source_counters().requests == opened.requests + 1  # the data, in one request
    assert all(same_values(got[b], expected[b]) for b in BRANCHES)
