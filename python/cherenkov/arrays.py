"""Turn the core's arrays (nested dicts of numpy buffers in awkward's layout vocabulary) into
awkward and numpy arrays, without copying the data."""

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

        content = ak.to_layout(self.content, regulararray=True)
        return ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(self.offsets), content))

    def tolist(self) -> list:
        return [self[i].tolist() for i in range(len(self))]


def _numbers(node: dict) -> np.ndarray:
    data, inner_shape = node["data"], node["inner_shape"]
    return data.reshape((-1, *inner_shape)) if inner_shape else data


def _is_string(node: dict) -> bool:
    return node["class"] == "ListOffsetArray" and node["parameters"].get("__array__") == "string"


def _index(node: dict, key: str, narrowed: dict | None):
    """Offsets or index as awkward's Index64, or Index32 where the file's column is 32-bit
    (narrowed once per array in `narrowed`: a collection's fields share their offsets)."""
    import awkward as ak

    values = node[key]
    if node.get("index_type") != "i32":
        return ak.index.Index64(values)
    if narrowed is None:
        return ak.index.Index32(values.astype(np.int32))
    if id(values) not in narrowed:
        narrowed[id(values)] = (values, ak.index.Index32(values.astype(np.int32)))
    return narrowed[id(values)][1]


def to_layout(node: dict, narrowed: dict | None = None):
    """The awkward layout of one node (fixed dimensions become RegularArrays, as in uproot).
    `narrowed`: 32-bit offsets made so far, to share between the layouts of one read."""
    import awkward as ak

    cls, params = node["class"], node["parameters"] or None
    if cls == "EmptyArray":
        return ak.contents.EmptyArray(parameters=params)
    if cls == "NumpyArray":
        layout = ak.contents.NumpyArray(_numbers(node), parameters=params)
        return layout.to_RegularArray() if layout.data.ndim > 1 else layout
    if cls == "ListOffsetArray":
        return ak.contents.ListOffsetArray(_index(node, "offsets", narrowed), to_layout(node["content"], narrowed), parameters=params)
    if cls == "RegularArray":
        content = to_layout(node["content"], narrowed)
        return ak.contents.RegularArray(content, node["size"], zeros_length=node["length"], parameters=params)
    if cls == "RecordArray":
        contents = [to_layout(c, narrowed) for c in node["contents"]]
        return ak.contents.RecordArray(contents, node["fields"], length=node["length"], parameters=params)
    if cls == "IndexedOptionArray":
        return ak.contents.IndexedOptionArray(_index(node, "index", narrowed), to_layout(node["content"], narrowed), parameters=params)
    if cls == "UnmaskedArray":
        return ak.contents.UnmaskedArray(to_layout(node["content"], narrowed), parameters=params)
    if cls == "UnionArray":
        contents = [to_layout(c, narrowed) for c in node["contents"]]
        return ak.contents.UnionArray(ak.index.Index8(node["tags"]), ak.index.Index64(node["index"]), contents, parameters=params)
    raise ValueError(f"unknown layout class {cls!r}")


def to_numpy(branch: dict):
    """numpy: numbers as arrays (fixed dimensions, NumpyArray or RegularArray, as extra axes),
    jagged numbers as `Jagged`,
    strings as an object array of str, leaf lists as a structured array; anything else as an
    object array of one awkward value per entry."""
    node = branch["array"]
    cls = node["class"]
    if branch.get("kind") == "group":
        return _group_to_numpy(node)
    if cls == "NumpyArray":
        return _numbers(node)
    if cls == "RegularArray" and node["content"]["class"] in ("NumpyArray", "RegularArray") and not node["content"]["parameters"]:
        inner = to_numpy({"array": node["content"]})
        if isinstance(inner, np.ndarray) and inner.dtype != object:
            return inner.reshape((node["length"], node["size"]) + inner.shape[1:])
    if _is_string(node):
        raw = _numbers(node["content"]).tobytes()
        offsets = node["offsets"]
        return np.array(
            [raw[offsets[i] : offsets[i + 1]].decode("utf-8", "surrogateescape") for i in range(len(offsets) - 1)],
            dtype=object,
        )
    if cls == "ListOffsetArray" and node["content"]["class"] == "NumpyArray" and not node["content"]["parameters"]:
        return Jagged(node["offsets"], _numbers(node["content"]))
    if cls == "RecordArray" and node["fields"] and all(c["class"] == "NumpyArray" for c in node["contents"]):
        fields = [(name, np.dtype(c["dtype"]), tuple(c["inner_shape"])) for name, c in zip(node["fields"], node["contents"])]
        out = np.empty(node["length"], dtype=fields)
        for name, c in zip(node["fields"], node["contents"]):
            out[name] = _numbers(c)
        return out
    import awkward as ak

    values = ak.Array(to_layout(node))
    out = np.empty(len(values), dtype=object)
    for i in range(len(values)):
        out[i] = values[i]
    return out


def _group_to_numpy(node: dict) -> dict:
    """A split object read whole, as uproot gives it: a dict of its members' arrays (records
    without a class name are nested split objects)."""
    out = {}
    for name, child in zip(node["fields"], node["contents"]):
        nested = child["class"] == "RecordArray" and "__record__" not in (child["parameters"] or {})
        out[name] = _group_to_numpy(child) if nested else to_numpy({"array": child})
    return out


def to_awkward_layout(branch: dict, narrowed: dict | None = None):
    return to_layout(branch["array"], narrowed)
