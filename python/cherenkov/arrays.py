"""Turn the core's column buffers into numpy and awkward arrays, without copying the data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Jagged:
    """Variable-length entries as numpy arrays: entry ``i`` is ``content[offsets[i]:offsets[i+1]]``."""

    offsets: np.ndarray
    content: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.content[self.offsets[i] : self.offsets[i + 1]]

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def to_awkward(self):
        import awkward as ak

        return ak.Array(_list_offset(self.offsets, ak.contents.NumpyArray(self.content)))

    def tolist(self) -> list:
        return [self[i].tolist() for i in range(len(self))]


def _content(col: dict) -> np.ndarray:
    raw = col["words"].view(np.uint8)[: col["nbytes"]]
    return raw.view(np.dtype(col["dtype"])).reshape((-1,) + tuple(col["inner_shape"]))


def _list_offset(offsets, content, parameters=None):
    import awkward as ak

    return ak.contents.ListOffsetArray(ak.index.Index64(offsets), content, parameters=parameters)


def _strings_layout(col: dict):
    import awkward as ak

    chars = ak.contents.NumpyArray(_content(col), parameters={"__array__": "char"})
    return _list_offset(col["offsets"], chars, parameters={"__array__": "string"})


def to_numpy(branch: dict):
    """numpy: flat data as arrays, fixed dimensions as extra axes, jagged data as `Jagged`,
    strings as an object array of str, leaf lists as a structured array."""
    cols = branch["columns"]
    if branch["kind"] == "record":
        n = branch["entries"]
        out = np.empty(n, dtype=[(c["name"], np.dtype(c["dtype"]), tuple(c["inner_shape"])) for c in cols])
        for c in cols:
            out[c["name"]] = _content(c)
        return out
    col = cols[0]
    if col["is_string"]:
        raw = _content(col).tobytes()
        offsets = col["offsets"]
        return np.array(
            [raw[offsets[i] : offsets[i + 1]].decode("utf-8", "surrogateescape") for i in range(len(offsets) - 1)],
            dtype=object,
        )
    if col["offsets"] is not None:
        return Jagged(col["offsets"], _content(col))
    return _content(col)


def _layout(col: dict):
    import awkward as ak

    if col["is_string"]:
        return _strings_layout(col)
    content = ak.to_layout(_content(col), regulararray=True)
    if col["offsets"] is not None:
        return _list_offset(col["offsets"], content)
    return content


def to_awkward_layout(branch: dict):
    import awkward as ak

    cols = branch["columns"]
    if branch["kind"] == "record":
        return ak.contents.RecordArray([_layout(c) for c in cols], [c["name"] for c in cols], length=branch["entries"])
    return _layout(cols[0])


def to_awkward(branch: dict):
    import awkward as ak

    return ak.Array(to_awkward_layout(branch))
