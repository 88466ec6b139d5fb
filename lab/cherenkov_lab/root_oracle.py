"""ROOT as the oracle, for tests and surveys where PyROOT imports: a branch's numbers entry by
entry as ROOT evaluates them (TTreeFormula, the engine of ``TTree::Draw`` and ``Scan``), flattened
within each entry, and the same flattening of what cherenkov read. Used where uproot cannot be the
judge: ROOT 3 to 5.21 archives ("CS" compression, TTree versions 6 to 15), files never closed."""

from __future__ import annotations

import math

import awkward as ak
import numpy as np


def flat_entries(array: ak.Array) -> list[list[float]] | None:
    """Each entry's numbers in order, collections of collections flattened; None when the array
    holds other things than numbers (strings, records)."""
    layout = ak.to_layout(array)
    content = layout
    while hasattr(content, "content"):
        if content.parameter("__array__") in ("string", "bytestring"):
            return None
        content = content.content
    if not isinstance(content, ak.contents.NumpyArray):
        return None
    entries = array
    while entries.ndim > 2:  # inner collections merge into each entry's list
        entries = ak.flatten(entries, axis=2)
    counts = np.asarray(ak.num(entries, axis=1)) if entries.ndim == 2 else np.ones(len(array), dtype=np.int64)
    values = np.asarray(ak.flatten(array, axis=None), dtype=np.float64)
    out, at = [], 0
    for n in counts:
        out.append(values[at : at + n].tolist())
        at += n
    return out


class RootTree:
    """A TTree opened with ROOT 6 (its own reading: emulated classes, old class versions, CS)."""

    def __init__(self, path: str, tree: str):
        import ROOT

        ROOT.gErrorIgnoreLevel = ROOT.kFatal
        self._root = ROOT
        self._file = ROOT.TFile.Open(str(path))
        if not self._file or self._file.IsZombie():
            raise OSError(f"ROOT cannot open {path}")
        self.tree = self._file.Get(tree)
        if not self.tree:
            raise KeyError(f"ROOT finds no {tree} in {path}")

    def values(self, branch: str, entry_stop: int | None = None) -> list[list[float]] | None:
        """The branch's numbers per entry, or None when ROOT cannot evaluate it by name."""
        formula = self._root.TTreeFormula("oracle", branch, self.tree)
        if not formula.GetTree() or formula.GetNdim() == 0:
            return None
        stop = self.tree.GetEntries() if entry_stop is None else min(entry_stop, self.tree.GetEntries())
        out = []
        for entry in range(stop):
            self.tree.LoadTree(entry)
            n = formula.GetNdata()
            out.append([formula.EvalInstance(i) for i in range(n)])
        return out


def same_numbers(ours: list[list[float]], roots: list[list[float]]) -> bool:
    """Entry by entry, the same numbers (NaN equal to NaN)."""
    if len(ours) != len(roots):
        return False
    for a, b in zip(ours, roots):
        if len(a) != len(b):
            return False
        if any(x != y and not (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b)):
            return False
    return True
