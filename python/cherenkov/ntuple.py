"""RNTuples: the same surface as trees (`keys`, `arrays`, `iterate`, `chunks`, ...), so that code
written for a TTree with flat NanoAOD-style names runs unchanged on the same data as an RNTuple."""

from __future__ import annotations

import fnmatch
import re

import numpy as np

from cherenkov import _core
from cherenkov._core import FieldInfo
from cherenkov.tree import Tree


class RNTuple(Tree):
    """An RNTuple. Fields are named by their paths (``"jets.pt"``, as uproot's ``keys()`` lists
    them); a field reads with the collections that enclose it. ``arrays()`` without names reads
    every readable top-level field, with forms equal to uproot's."""

    def __init__(self, core: _core.Ntuple, file=None):
        self._core = core
        self.file = file
        self.fields: list[FieldInfo] = core.fields()
        self.branches = self.fields  # the TTree word, for code written for trees
        self._by_name = {f.path: f for f in self.fields}
        self._bounds = None

    @property
    def title(self) -> str:
        return self._core.description

    @property
    def writer(self) -> str:
        return self._core.writer

    @property
    def format_version(self) -> str:
        return self._core.format_version

    @property
    def cluster_boundaries(self) -> np.ndarray:
        """Entry numbers where clusters start, plus `num_entries` at the end."""
        if self._bounds is None:
            self._bounds = np.asarray(self._core.cluster_boundaries(), dtype=np.int64)
        return self._bounds

    def __repr__(self) -> str:
        return f"<cherenkov.RNTuple {self.name!r} ({self.num_entries} entries, {len(self.fields)} fields)>"

    def _where(self) -> str:
        return f"{self.file.path if self.file else '?'}: RNTuple {self.name!r}"

    def __getitem__(self, name: str) -> FieldInfo:
        try:
            return self._by_name[name]
        except KeyError:
            raise _core.NotFoundError(f"{self._where()}: no field named {name!r}") from None

    @staticmethod
    def _matches(pattern: str, info: FieldInfo) -> bool:
        # Paths only: a subfield's bare name would select its parent's whole collection.
        if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
            return bool(re.search(pattern[1:-1], info.path))
        return fnmatch.fnmatchcase(info.path, pattern)

    @staticmethod
    def _selected_by_default(info: FieldInfo) -> bool:
        return "." not in info.path
