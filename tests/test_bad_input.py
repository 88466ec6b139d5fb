"""Bad input: empty, non-ROOT, truncated, bit-flipped and hostile files raise cherenkov exceptions
naming the file, the offset and what was expected; never a crash, a hang or another exception.

Damaged files are read in a child process with a time limit, so a crash or a hang fails its test
instead of taking the whole run down."""

import errno
import json
import random
import re
import struct
import subprocess
import sys

import cherenkov
import pytest

SOURCE = "uproot-sample-6.20.04-zlib.root"  # small, TTree 'sample'
COMPRESSED_SOURCE = "uproot-HZZ-zlib.root"  # TTree 'events', large zlib baskets (checksummed)
TIME_LIMIT = 120  # seconds per child process

READ_EVERYTHING = r"""
import json, sys
import cherenkov

def read_everything(path):
    try:
        f = cherenkov.open(path)
        for name, cls in f.classnames().items():
            if cls == "TTree":
                f[name].arrays(library="np")
        return {"ok": True}
    except Exception as e:
        return {"ok": False, "type": type(e).__name__,
                "bases": [c.__name__ for c in type(e).__mro__], "message": str(e)}

print(json.dumps([read_everything(p) for p in sys.argv[1:]]))
"""


def read_in_child(*paths) -> list[dict]:
    """Open each file and read every tree in it, in a child process; one outcome per file."""
    run = subprocess.run([sys.executable, "-c", READ_EVERYTHING, *map(str, paths)], capture_output=True, text=True, timeout=TIME_LIMIT)
    assert run.returncode == 0, f"the reader crashed (exit status {run.returncode}):\n{run.stderr[-3000:]}"
    return json.loads(run.stdout.splitlines()[-1])


def assert_clear_error(outcome: dict, path) -> None:
    assert not outcome["ok"], f"{path} was read without an error"
    assert "CherenkovError" in outcome["bases"] and outcome["type"] in ("FormatError", "SourceError"), outcome
    message = outcome["message"]
    assert str(path) in message, message
    assert "expected" in message, message
    assert re.search(r"\b(byte|offset) \d+", message), message


@pytest.fixture(scope="module")
def original(testdata) -> bytes:
    return (testdata / SOURCE).read_bytes()


class Layout:
    """Where the fields a hostile edit targets are (ROOT's small-file header format)."""

    def __init__(self, data: bytes):
        version, begin = struct.unpack(">ii", data[4:12])
        assert version < 1_000_000, "the edits below assume 4-byte seeks in the header"
        self.fend, self.fbegin, self.fnbytes_name = 12, 8, 28
        self.fseek_info, self.fnbytes_info = 37, 41
        top = begin + struct.unpack(">i", data[28:32])[0]
        seek_bytes = 8 if struct.unpack(">h", data[top : top + 2])[0] > 1000 else 4
        self.fnbytes_keys = top + 10
        self.fseek_keys = top + 18 + 2 * seek_bytes
        seek_keys = int.from_bytes(data[self.fseek_keys : self.fseek_keys + seek_bytes], "big")
        keys_keylen = struct.unpack(">h", data[seek_keys + 14 : seek_keys + 16])[0]
        self.nkeys = seek_keys + keys_keylen
        self.first_key = self.nkeys + 4  # the TTree's key in the keys list


def with_word(data: bytes, at: int, value: int) -> bytes:
    return data[:at] + struct.pack(">I", value & 0xFFFFFFFF) + data[at + 4 :]


def test_zero_length_file(tmp_path):
    path = tmp_path / "empty.root"
    path.write_bytes(b"")
    [outcome] = read_in_child(path)
    assert_clear_error(outcome, path)
    assert "at least 100 bytes" in outcome["message"]


@pytest.mark.parametrize("text", ["short text", "this is a text file, not a ROOT file\n" * 20])
def test_non_root_file(tmp_path, text):
    path = tmp_path / "notes.root"
    path.write_text(text)
    [outcome] = read_in_child(path)
    assert_clear_error(outcome, path)


def test_truncated_file(tmp_path, original):
    n = len(original)
    paths = []
    for cut in [1, 50, 99, 100, 400, n // 3, n // 2, n - 100, n - 1]:
        path = tmp_path / f"cut-at-{cut}.root"
        path.write_bytes(original[:cut])
        paths.append(path)
    for path, outcome in zip(paths, read_in_child(*paths)):
        assert_clear_error(outcome, path)
    # Cut after the header: the header's fEND says how long the file should be.
    assert "truncated" in read_in_child(paths[-1])[0]["message"]


def test_bit_flip_in_the_magic(tmp_path, original):
    path = tmp_path / "flipped-magic.root"
    path.write_bytes(bytes([original[0] ^ 0x01]) + original[1:])
    [outcome] = read_in_child(path)
    assert_clear_error(outcome, path)
    assert "magic" in outcome["message"]


def test_bit_flip_in_a_compressed_basket(tmp_path, testdata):
    """zlib's checksum catches what would otherwise be silently wrong values."""
    original = (testdata / COMPRESSED_SOURCE).read_bytes()
    seek, keylen, nbytes = next(
        (seek, keylen, nbytes)
        for branch in cherenkov.open(testdata / COMPRESSED_SOURCE)["events"].branches
        for seek in branch.basket_seeks
        for nbytes, keylen in [struct.unpack(">i10xh", original[seek : seek + 16])]
        if original[seek + keylen : seek + keylen + 2] == b"ZL" and nbytes - keylen > 1000
    )
    at = seek + (keylen + nbytes) // 2  # the middle of the deflate stream
    path = tmp_path / "flipped-basket.root"
    path.write_bytes(original[:at] + bytes([original[at] ^ 0x10]) + original[at + 1 :])
    [outcome] = read_in_child(path)
    assert_clear_error(outcome, path)
    assert f"basket at file offset {seek}" in outcome["message"] and "zlib" in outcome["message"]


def test_random_bit_flips_never_crash(tmp_path, original):
    """A flipped bit may go unnoticed (in a timestamp, or in the small baskets ROOT stores
    uncompressed) but never crashes or raises anything but a cherenkov error."""
    rng = random.Random(20240611)
    paths = []
    for i in range(150):
        data = bytearray(original)
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        path = tmp_path / f"flip-{i}.root"
        path.write_bytes(bytes(data))
        paths.append(path)
    outcomes = read_in_child(*paths)
    for path, outcome in zip(paths, outcomes):
        if not outcome["ok"]:
            assert "CherenkovError" in outcome["bases"], outcome
            assert str(path) in outcome["message"], outcome
    assert sum(not o["ok"] for o in outcomes) > 10  # many land in checked structure


HOSTILE_EDITS = {
    "fEND past the end": lambda lay, n: (lay.fend, n + 1000),
    "fBEGIN huge": lambda lay, n: (lay.fbegin, 0x7FFFFFFF),
    "fNbytesName huge": lambda lay, n: (lay.fnbytes_name, 0x7FFFFFFF),
    "fSeekInfo past the end": lambda lay, n: (lay.fseek_info, n + 10),
    "fNbytesInfo huge": lambda lay, n: (lay.fnbytes_info, 0x7FFFFFFF),
    "fSeekKeys past the end": lambda lay, n: (lay.fseek_keys, n + 10),
    "fNbytesKeys huge": lambda lay, n: (lay.fnbytes_keys, 0xFFFFFFFF),
    "number of keys huge": lambda lay, n: (lay.nkeys, 0x7FFFFFFF),
    "number of keys negative": lambda lay, n: (lay.nkeys, 0x80000000),
    "TTree key fNbytes huge": lambda lay, n: (lay.first_key, 0x7FFFFFFF),
    "TTree key fObjlen huge": lambda lay, n: (lay.first_key + 6, 0x7FFFFFFF),
    "TTree key fSeekKey past the end": lambda lay, n: (lay.first_key + 18, n + 10),
}


@pytest.mark.parametrize("edit", HOSTILE_EDITS)
def test_hostile_header_and_keys(tmp_path, original, edit):
    at, value = HOSTILE_EDITS[edit](Layout(original), len(original))
    path = tmp_path / "hostile.root"
    path.write_bytes(with_word(original, at, value))
    [outcome] = read_in_child(path)
    assert_clear_error(outcome, path)


@pytest.mark.parametrize("field, value", [(0, 0x7FFFFFFF), (6, 0x7FFFFFFF), (6, 0)])
def test_hostile_basket_key(tmp_path, original, testdata, field, value):
    """A basket's fNbytes or fObjlen lies: the read says which basket and what was expected."""
    seek = cherenkov.open(testdata / SOURCE)["sample"].branches[0].basket_seeks[0]
    path = tmp_path / "hostile-basket.root"
    path.write_bytes(with_word(original, seek + field, value))
    [outcome] = read_in_child(path)
    assert_clear_error(outcome, path)
    assert f"basket at file offset {seek}" in outcome["message"]


def test_missing_file_raises_source_error(tmp_path):
    path = tmp_path / "absent.root"
    with pytest.raises(cherenkov.SourceError, match=re.escape(str(path))) as raised:
        cherenkov.open(path)
    # The operating system's error is kept as the cause, errno included.
    assert isinstance(raised.value.__cause__, OSError) and raised.value.__cause__.errno == errno.ENOENT


def test_missing_tree_and_branch_raise_not_found(testdata):
    path = testdata / SOURCE
    f = cherenkov.open(path)
    with pytest.raises(cherenkov.NotFoundError, match=re.escape(str(path))):
        f["no_such_tree"]
    tree = f["sample"]
    with pytest.raises(cherenkov.NotFoundError, match="no_such_branch"):
        tree["no_such_branch"]
    with pytest.raises(cherenkov.NotFoundError, match="no_such_branch"):
        tree.arrays(["no_such_branch"], library="np")
