"""ROOT as the oracle, for tests and surveys where PyROOT imports: a branch's numbers entry by
entry as ROOT evaluates them (TTreeFormula, the engine of ``TTree::Draw`` and ``Scan``), flattened
within each entry, and the same flattening of what cherenkov read. Used where uproot cannot be the
judge: ROOT 3 to 5.21 archives ("CS" compression, TTree versions 6 to 15), files never closed."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

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
        """The branch's numbers per entry, or None where ROOT cannot be the judge: a formula
        ROOT cannot make of the name, TObject's fBits (ROOT sets kIsOnHeap and kNotDeleted as it
        reads; readers report the bits written), char arrays (ROOT reads them as strings), a
        collection's own branch (its size: the lengths of its members' values show it).
        Dimensions in a branch's name (``x[6][3]``) are not indices."""
        expression = re.sub(r"\[[^\]]*\]", "", branch)
        if expression.split(".")[-1] == "fBits" or self._is_char_array(branch):
            return None
        if self.tree.GetLeaf(expression + "_"):
            return None  # a collection's size, which its members' lengths show
        formula = self._root.TTreeFormula("oracle", expression, self.tree)
        if not formula.GetTree() or formula.GetNdim() == 0:
            return None
        stop = self.tree.GetEntries() if entry_stop is None else min(entry_stop, self.tree.GetEntries())
        out = []
        for entry in range(stop):
            self.tree.LoadTree(entry)
            n = formula.GetNdata()
            out.append([formula.EvalInstance(i) for i in range(n)])
        return out

    def _is_char_array(self, branch: str) -> bool:
        found = self.tree.GetBranch(branch)
        leaves = list(found.GetListOfLeaves()) if found else []
        return len(leaves) == 1 and (
            leaves[0].GetTypeName() in ("Char_t", "UChar_t", "char", "unsigned char")
            and (leaves[0].GetLenStatic() > 1 or bool(leaves[0].GetLeafCount()) or "[" in leaves[0].GetTitle())
        )


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


def root_values(path, tree: str, branches: list[str], entry_stop: int | None = None, timeout: float = 600) -> dict:
    """ROOT's values of `branches` of `tree` (`RootTree.values`), evaluated in a child process:
    ROOT's formulas on some emulated objects crash it. Returns {branch: values or None}; raises
    RuntimeError naming the file when ROOT died."""
    done = subprocess.run(
        [sys.executable, "-m", "cherenkov_lab.root_oracle", str(path), tree, str(-1 if entry_stop is None else entry_stop)],
        input=json.dumps(branches),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"ROOT could not evaluate {tree} of {path} (exit {done.returncode}): {done.stderr[-500:]}")
    return json.loads(lines[-1])


def _main() -> None:
    path, tree, stop = sys.argv[1], sys.argv[2], int(sys.argv[3])
    roots = RootTree(path, tree)
    branches = json.loads(sys.stdin.read())
    print(json.dumps({b: roots.values(b, entry_stop=None if stop < 0 else stop) for b in branches}))


if __name__ == "__main__":
    _main()
