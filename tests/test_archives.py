"""Archives of ROOT 3 to 5.21, which uproot refuses: the old "CS" compression (ROOT's own deflate:
a raw deflate stream behind ROOT's 9-byte block header), TTree versions 6 to 15 and
TBranchElement 7, read as ROOT 6.40 reads them.

- A ROOT 6 file (branch-types.root) with every zlib block rewritten as a CS block (the deflate
  stream without zlib's 2-byte header and checksum, in place): cherenkov reads it as the
  original, ROOT reads it as cherenkov does, uproot refuses it. Runs everywhere.
- Real archive files (ROOT's own test files, written by ROOT 3.03 to 5.10), which this repository
  does not carry: in ../shared/testdata/archive, or the folder named by CHERENKOV_ARCHIVES; every
  branch cherenkov reads is compared with ROOT's reading where ROOT imports.
"""

import os
import struct
import zlib
from pathlib import Path

import awkward as ak
import cherenkov
import pytest
from cherenkov_lab.root_oracle import flat_entries, root_values, same_numbers
from conftest import TESTDATA, form

ORIGINAL = Path(__file__).parent / "data" / "branch-types.root"
ARCHIVES = Path(os.environ.get("CHERENKOV_ARCHIVES", TESTDATA / "archive"))
ARCHIVE_FILES = sorted(ARCHIVES.glob("*.root")) if ARCHIVES.is_dir() else []
TREES = ("TTree", "TNtuple", "TNtupleD")


def zlib_to_cs(data: bytes) -> tuple[bytes, int]:
    """The file with every zlib block of every record (walked from fBEGIN, as ROOT recovers
    keys) made a CS block of the same size: "CS", the deflate stream, and the 6 bytes zlib
    wrapped it in as padding after its end, which inflaters do not read. Returns the new bytes
    and the number of blocks rewritten."""
    out = bytearray(data)
    begin, end = struct.unpack(">ii", data[8:16])
    if struct.unpack(">i", data[4:8])[0] >= 1_000_000:
        end = struct.unpack(">q", data[12:20])[0]
    pos, blocks = begin, 0
    while pos + 18 <= min(end, len(data)):
        nbytes, _version, objlen, _time, keylen = struct.unpack(">ihiIh", data[pos : pos + 16])
        if nbytes == 0:
            break
        if nbytes < 0:  # a free gap
            pos -= nbytes
            continue
        at, stop = pos + keylen, pos + nbytes
        if objlen > nbytes - keylen:
            while at + 9 <= stop:
                size = int.from_bytes(data[at + 3 : at + 6], "little")
                if data[at : at + 2] == b"ZL":
                    stream = data[at + 9 : at + 9 + size]
                    zlib.decompress(stream)  # a whole zlib stream
                    out[at : at + 2] = b"CS"
                    out[at + 9 : at + 9 + size] = stream[2:-4] + bytes(6)
                    blocks += 1
                at += 9 + size
        pos = stop
    return bytes(out), blocks


@pytest.fixture(scope="module")
def cs_file(tmp_path_factory) -> Path:
    data, blocks = zlib_to_cs(ORIGINAL.read_bytes())
    assert blocks > 50 and b"ZL\x08" not in data[100:]
    path = tmp_path_factory.mktemp("archive") / "branch-types-cs.root"
    path.write_bytes(data)
    return path


def readable(tree) -> list[str]:
    names = []
    for b in tree.branches:
        try:
            tree.arrays([b.name], library="ak", entry_stop=1)
            names.append(b.name)
        except cherenkov.UnsupportedBranch:
            pass
    return list(dict.fromkeys(names))


def test_cs_blocks_read_as_the_zlib_original(cs_file):
    original, cs = cherenkov.open(ORIGINAL), cherenkov.open(cs_file)
    assert cs.classnames() == original.classnames()
    judged = 0
    for key, cls in original.classnames().items():
        if cls not in TREES:
            continue
        names = readable(original[key])
        ours, expected = cs[key].arrays(names, library="ak"), original[key].arrays(names, library="ak")
        assert form(ours) == form(expected), key
        assert ak.to_list(ours) == ak.to_list(expected), key
        judged += len(names)
    assert judged > 20


def test_uproot_refuses_cs_blocks(cs_file):
    uproot = pytest.importorskip("uproot")
    with pytest.raises(Exception, match="(?i)compression"):
        f = uproot.open(cs_file)
        for key, cls in f.classnames().items():
            if cls in TREES:
                f[key].arrays(library="ak")


def assert_equal_to_roots_reading(path: Path, entry_stop: int | None = None) -> int:
    """Every branch cherenkov reads whose values ROOT can evaluate by name equals ROOT's reading
    (numbers only: ROOT's formulas on some emulated objects crash it); returns how many were
    compared."""
    pytest.importorskip("ROOT")
    f = cherenkov.open(path)
    judged = 0
    for key, cls in f.classnames().items():
        if cls not in TREES:
            continue
        tree = f[key]
        ours = {name: flat_entries(tree.arrays([name], library="ak", entry_stop=entry_stop)[name]) for name in readable(tree)}
        ours = {name: values for name, values in ours.items() if values is not None}
        roots = root_values(path, key.rsplit(";", 1)[0], list(ours), entry_stop=entry_stop)
        for name, values in ours.items():
            if roots[name] is not None:
                assert same_numbers(values, roots[name]), f"{path.name}:{key}:{name}"
                judged += 1
    return judged


def test_root_reads_the_cs_file_as_cherenkov(cs_file):
    assert assert_equal_to_roots_reading(cs_file) > 20


@pytest.mark.skipif(not ARCHIVE_FILES, reason=f"no archive files in {ARCHIVES} (set CHERENKOV_ARCHIVES)")
@pytest.mark.parametrize("path", ARCHIVE_FILES, ids=[p.name for p in ARCHIVE_FILES])
def test_archives_equal_roots_reading(path):
    assert assert_equal_to_roots_reading(path, entry_stop=200) > 0
