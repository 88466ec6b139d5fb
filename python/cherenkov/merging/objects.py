"""The objects of a merge's inputs that are not tables: histograms (the TH1, TH2, TH3 and
TProfile families) summed over the inputs, every other object copied from the first input.

uproot (``pip install uproot``, needed only when the inputs hold such objects) decodes them,
reading through cherenkov's byte sources. A summed histogram is uproot's model of the first
input's, its bin contents and statistics replaced by the sums (so its class, axes, labels and
styles stay the first input's), streamed by uproot; a copied object keeps its key's stored bytes
as they are (compressed or not), which is exact whatever the class: its internal references count
from its key's start, so it is copied only where its key header keeps the same length.
"""

from __future__ import annotations

import io
import re

import numpy as np

HISTOGRAM = re.compile(r"^(TH[123][CSIFDL]?|TProfile(2D|3D)?)$")
# What adds up when histograms of the same binning are merged (ROOT's TH1::Merge): bin contents,
# sums of weights, the statistics' moments, a profile's bin entries and sums.
ADDITIVE = {
    "fEntries",
    "fTsumw",
    "fTsumw2",
    "fTsumwx",
    "fTsumwx2",
    "fTsumwy",
    "fTsumwy2",
    "fTsumwxy",
    "fTsumwz",
    "fTsumwz2",
    "fTsumwxz",
    "fTsumwyz",
    "fSumw2",
    "fBinEntries",
    "fBinSumw2",
    "fTsumwt",
    "fTsumwt2",
}
BINNING = ("fNbins", "fXmin", "fXmax")


def is_histogram(cls: str) -> bool:
    return bool(HISTOGRAM.match(cls))


def _uproot():
    try:
        import uproot
    except ImportError:
        raise ImportError("merging histograms and other objects needs uproot: pip install uproot") from None
    return uproot


def _open(replicas: tuple[str, ...]):
    from cherenkov.uproot import Source

    uproot = _uproot()
    return uproot.open(replicas[0] if len(replicas) == 1 else list(replicas), handler=Source)


def copy_objects(out, inputs, paths: dict[str, str], report) -> None:
    """Write into `out` (a `cherenkov.WritableFile`) each object of `paths` ({path: class}):
    histograms summed over `inputs` (their `FileSpec`s), others copied from the first input."""
    if not paths:
        return
    uproot = _uproot()
    summed = any(is_histogram(cls) for cls in paths.values())
    files = [_open(spec.replicas) for spec in (inputs if summed else inputs[:1])]  # copies need the first only
    try:
        first = files[0]
        for path, cls in paths.items():
            if is_histogram(cls):
                total = first[path]
                for f in files[1:]:
                    if path in f:
                        _add(total, f[path], f"{f.file_path}:{path}")
                _write_model(out, path, total, uproot)
                report.histograms.append(path)
            else:
                key = first.key(path)
                why = _write_key(out, path, key, first)
                if why is None:
                    report.copied.append(path)
                else:
                    report.skipped[path] = why
    finally:
        for f in files:
            f.close()


def _members(model):
    """(holder, member name) of every member of an uproot model and its bases."""
    for name in getattr(model, "_members", {}):
        yield model, name
    for base in getattr(model, "_bases", ()):
        yield from _members(base)


def _arrays(model):
    """The TArray bases of a model (a histogram's bin contents)."""
    for base in getattr(model, "_bases", ()):
        if hasattr(base, "_data") and type(base).__name__.startswith("Model_TArray"):
            yield base
        yield from _arrays(base)


def _add(total, other, where: str) -> None:
    """Add histogram `other` into `total` in place (same class and binning, else an error)."""
    if type(total) is not type(other):
        raise ValueError(f"{where}: a {other.classname}, summed into a {total.classname}")
    for axis in ("fXaxis", "fYaxis", "fZaxis"):
        a, b = _member(total, axis), _member(other, axis)
        if a is None:
            continue
        same = all(a.member(m) == b.member(m) for m in BINNING) and np.array_equal(
            np.asarray(a.member("fXbins")), np.asarray(b.member("fXbins"))
        )
        if not same:
            raise ValueError(f"{where}: {axis} has other bins than the first input's histogram")
    for (holder, name), (_, other_name) in zip(_members(total), _members(other), strict=True):
        if name not in ADDITIVE:
            continue
        value, add = holder._members[name], other.member(other_name)
        if hasattr(value, "_data"):
            value._data = _sum(value._data, add._data)
        else:
            holder._members[name] = value + add
    for a, b in zip(_arrays(total), _arrays(other), strict=True):
        a._data = _sum(a._data, b._data)


def _sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a + b` in `a`'s dtype (big-endian as read: uproot streams the bytes as they are)."""
    return (a + b).astype(a.dtype)


def _member(model, name):
    try:
        return model.member(name)
    except Exception:
        return None


def _write_model(out, path: str, model, uproot) -> None:
    """Stream `model` with uproot into a file in memory and copy its key's bytes into `out`."""
    directory, _, name = path.rpartition("/")
    buffer = _Kept()
    with uproot.recreate(buffer, compression=None) as scratch:
        scratch[name] = model
    buffer.seek(0)
    with uproot.open(buffer) as scratch:
        key = scratch.key(name)
        if _write_key(out, path, key, scratch) is not None:
            raise ValueError(f"{path}: the summed histogram's key header cannot be kept")


class _Kept(io.BytesIO):
    """A file in memory that uproot's writer may close and its reader read afterwards."""

    def close(self) -> None:
        pass


def _write_key(out, path: str, key, source) -> str | None:
    """Copy `key`'s stored bytes from `source` (an uproot file) to `out`; why not, when not."""
    directory, _, name = path.rpartition("/")
    cls, title = key.fClassName, key.fTitle
    if out._core.key_len(cls, name, title) != key.fKeylen:
        return f"its key header is {key.fKeylen} bytes, {out._core.key_len(cls, name, title)} in the output (its references would move)"
    start = key.fSeekKey + key.fKeylen
    stop = key.fSeekKey + key.fNbytes
    stored = source.file.source.chunk(start, stop).raw_data.tobytes()
    out._core.write_stored(directory, cls, name, title, stored, key.fObjlen)
    return None
