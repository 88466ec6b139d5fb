"""Local read benchmark: cherenkov, uproot and ROOT (when `import ROOT` works) side by side on the
NanoAOD-like file from make_nanolike.py, as a TTree and (with ROOT) as the RNTuple ROOT's
RNTupleImporter makes of it (same branch names, as projected fields; made once, beside the file).

Two selections: every readable branch, and about 30 % of the branches by compressed volume (a
fixed, name-hashed choice, plus the counters of the jagged branches chosen, which every tool then
reads). The page cache is warmed first, so this measures CPU work, not the disk. Each repetition
runs every tool once (interleaved); a fresh file handle is opened before the clock starts.

    python bench/local_read.py                      # 40 000 entries, 5 repetitions
    python bench/local_read.py --entries 4000 --repeat 3 --json results.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from statistics import median

import awkward as ak
import cherenkov
import numpy as np
import uproot
from make_nanolike import TREE, default_output, ensure, import_root
from rich.console import Console
from rich.table import Table

SELECTED_FRACTION = 0.30
CHECKED_BRANCHES = 6  # branches whose sums are compared between the tools

_ROOT_LOOP = r"""
#include <TTree.h>
#include <ROOT/RNTupleReader.hxx>
#include <ROOT/RNTupleView.hxx>
namespace cherenkov_bench {
// Read every entry of the active branches; returns the bytes of values read (ROOT's GetEntry sum).
long long read_entries(TTree *tree) {
  long long bytes = 0;
  for (Long64_t i = 0, n = tree->GetEntries(); i < n; ++i) bytes += tree->GetEntry(i);
  return bytes;
}
// Read every entry of the named RNTuple fields through untyped views; returns the entries read.
long long read_fields(const std::string &path, const std::vector<std::string> &names) {
  auto reader = ROOT::RNTupleReader::Open("Events", path);
  std::vector<ROOT::RNTupleView<void>> views;
  for (const auto &n : names) views.emplace_back(reader->GetView<void>(n));
  const long long entries = reader->GetNEntries();
  for (long long i = 0; i < entries; ++i)
    for (auto &v : views) v(i);
  return entries;
}
}
"""


# ---------------------------------------------------------------- selections


def counters_of(path: Path, tree: str) -> dict[str, str]:
    """Jagged branch name -> its counter branch name."""
    utree = uproot.open(path)[tree]
    return {b.name: b.count_branch.name for b in utree.branches if b.count_branch is not None}


def stable_order(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def selections(tree: cherenkov.Tree, counters: dict[str, str]) -> dict[str, list[str]]:
    readable = [b for b in tree.branches if b.readable and not b.has_children]
    total = sum(b.compressed_bytes for b in readable)
    chosen, volume = set(), 0
    for b in sorted(readable, key=lambda b: stable_order(b.name)):
        if volume >= SELECTED_FRACTION * total:
            break
        chosen.add(b.name)
        volume += b.compressed_bytes
    chosen |= {counters[name] for name in chosen if name in counters}
    names = [b.name for b in readable]
    return {"all": names, "30% by volume": [n for n in names if n in chosen]}


# ---------------------------------------------------------------- the tools
# Each tool: open(path) -> handle (untimed), read(handle, names) (timed), and
# values(handle, names) -> {branch: flat numpy values} for checking (untimed).


def value_bytes(values: dict[str, np.ndarray]) -> int:
    return sum(v.nbytes for v in values.values())


class Cherenkov:
    def __init__(self, library: str):
        self.library = library
        self.name = f"cherenkov {cherenkov.__version__} {library}"

    def open(self, path):
        return cherenkov.open(path)[TREE]

    def read(self, tree, names):
        return tree.arrays(names, library=self.library)

    def values(self, tree, names):
        arrays = tree.arrays(names, library="np")
        return {n: (a.content if isinstance(a, cherenkov.Jagged) else a).reshape(-1) for n, a in arrays.items()}


class Uproot:
    name = f"uproot {uproot.__version__} ak"

    def open(self, path):
        return uproot.open(path, array_cache=None, object_cache=None)[TREE]  # measure reading, not caches

    def read(self, tree, names):
        return tree.arrays(names, library="ak")

    def values(self, tree, names):
        arrays = tree.arrays(names, library="ak")
        return {n: ak.to_numpy(ak.flatten(arrays[n], axis=None)) for n in names}


class Root:
    """TTree::GetEntry over all entries with only the selected branches active, in compiled
    C++, single-threaded (implicit multi-threading stays off)."""

    def __init__(self, ROOT):
        self.ROOT = ROOT
        self.name = f"ROOT {ROOT.gROOT.GetVersion()} GetEntry"
        ROOT.gInterpreter.Declare(_ROOT_LOOP)
        self.bytes_read = {}

    def open(self, path):
        handle = self.ROOT.TFile.Open(str(path))
        return handle, handle.Get(TREE)

    def read(self, handle, names):
        _, tree = handle
        tree.SetBranchStatus("*", 0)
        for n in names:
            tree.SetBranchStatus(n, 1)
        self.bytes_read[tuple(names)] = int(self.ROOT.cherenkov_bench.read_entries(tree))

    def sums(self, handle, names) -> dict[str, float]:
        """Sums of the named branches, with RDataFrame (float64 accumulation)."""
        _, tree = handle
        tree.SetBranchStatus("*", 1)
        frame = self.ROOT.RDataFrame(tree)
        results = {n: frame.Sum(n) for n in names}
        return {n: float(r.GetValue()) for n, r in results.items()}


class RootNtuple:
    """RNTupleReader over all entries of the selected fields (untyped views, compiled C++), one
    thread; opening the reader is part of the timed read (it is cheap: the metadata only)."""

    def __init__(self, ROOT):
        self.ROOT = ROOT
        self.name = f"ROOT {ROOT.gROOT.GetVersion()} RNTupleReader"
        self.entries_read = {}

    def open(self, path):
        return str(path)

    def read(self, path, names):
        vector = self.ROOT.std.vector["std::string"](names)
        self.entries_read[tuple(names)] = int(self.ROOT.cherenkov_bench.read_fields(path, vector))


def make_rntuple(tree_path: Path, ROOT, log=print) -> Path:
    """The TTree as an RNTuple by ROOT's RNTupleImporter (zstd 5, like the TTree), made once."""
    path = tree_path.with_name(tree_path.stem + "-rntuple.root")
    if path.exists() and path.stat().st_mtime > tree_path.stat().st_mtime:
        return path
    log(f"importing {tree_path} into an RNTuple with ROOT's RNTupleImporter")
    path.unlink(missing_ok=True)
    importer = ROOT.Experimental.RNTupleImporter.Create(str(tree_path), TREE, str(path))
    options = ROOT.RNTupleWriteOptions()
    options.SetCompression(505)
    options.SetPageBufferBudget(1 << 30)  # a page buffer per column of ~1300 columns
    importer.SetWriteOptions(options)
    importer.SetIsQuiet(True)
    importer.Import()
    return path


# ---------------------------------------------------------------- measuring


def warm_page_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def timed(tool, path, names) -> tuple[float, float]:
    handle = tool.open(path)
    wall, cpu = time.perf_counter(), time.process_time()
    tool.read(handle, names)
    return time.perf_counter() - wall, time.process_time() - cpu


def checked_branches(tree: cherenkov.Tree, names: list[str]) -> list[str]:
    """A few branches of the selection, largest first, to compare sums over."""
    return sorted(names, key=lambda n: -tree[n].compressed_bytes)[:CHECKED_BRANCHES]


def verify(path, ours, theirs, root, names, checked) -> list[str]:
    """Same data in every tool: cherenkov and uproot equal branch by branch; ROOT read as many
    bytes of values, and its sums of the `checked` branches agree."""
    problems = []
    reference = ours.values(ours.open(path), names)
    values = theirs.values(theirs.open(path), names)
    for n in names:
        if not np.array_equal(values[n], reference[n], equal_nan=values[n].dtype.kind == "f"):
            problems.append(f"branch {n}: {theirs.name} and {ours.name} read different values")
    if root is not None:
        got, want = root.bytes_read.get(tuple(names)), value_bytes(reference)
        if got != want:
            problems.append(f"{root.name} read {got} bytes of values, {ours.name} {want}")
        for n, total in root.sums(root.open(path), checked).items():
            ref = float(np.sum(reference[n], dtype=np.float64))
            if not np.isclose(total, ref, rtol=1e-9, atol=0, equal_nan=True):
                problems.append(f"branch {n}: {root.name} sums to {total!r}, {ours.name} to {ref!r}")
    return problems


def run(path: Path, repeat: int, rntuple: bool = True) -> dict:
    tree = cherenkov.open(path)[TREE]
    chosen = selections(tree, counters_of(path, TREE))
    ROOT = import_root()
    ours, ours_ak, theirs = Cherenkov("np"), Cherenkov("ak"), Uproot()
    root = Root(ROOT) if ROOT else None
    tools = [ours, ours_ak, theirs] + ([root] if root else [])
    warm_page_cache(path)
    report = {
        "file": str(path),
        "file_bytes": path.stat().st_size,
        "entries": tree.num_entries,
        "branches": len(tree.branches),
        "clusters": len(tree.cluster_boundaries) - 1,
        "repeat": repeat,
        "cores": os.cpu_count(),
        "page_cache": "warm (file read once before timing)",
        "selections": [measure(path, tree, label, names, tools, ours, ours_ak, theirs, root, repeat) for label, names in chosen.items()],
    }
    if rntuple and ROOT:
        npath = make_rntuple(path, ROOT)
        ntuple = cherenkov.open(npath)[TREE]
        warm_page_cache(npath)
        root_ntuple = RootNtuple(ROOT)
        tools = [ours, ours_ak, theirs, root_ntuple]
        report["rntuple"] = {
            "file": str(npath),
            "file_bytes": npath.stat().st_size,
            "clusters": len(ntuple.cluster_boundaries) - 1,
            "selections": [
                measure(npath, ntuple, f"RNTuple, {label}", names, tools, ours, ours_ak, theirs, None, repeat)
                for label, names in chosen.items()
            ],
        }
    return report


def measure(path, table, label, names, tools, ours, ours_ak, theirs, root, repeat) -> dict:
    """Every tool reads `names` of `path` once untimed, then `repeat` times interleaved."""
    _, stats = table.read(names)
    for tool in tools:  # one untimed run each: imports, JIT, first-touch allocations
        timed(tool, path, names)
    times = {tool.name: [] for tool in tools}
    for _ in range(repeat):
        for tool in tools:
            times[tool.name].append(timed(tool, path, names))
    problems = verify(path, ours, theirs, root, names, checked_branches(table, names))
    for tool in tools:
        if isinstance(tool, RootNtuple) and tool.entries_read.get(tuple(names)) != table.num_entries:
            problems.append(f"{tool.name} read {tool.entries_read.get(tuple(names))} entries, not {table.num_entries}")
    unzipped = stats.uncompressed_bytes
    medians = {name: median(wall for wall, _ in runs) for name, runs in times.items()}
    results = [
        {
            "tool": name,
            "median_seconds": medians[name],
            "median_cpu_seconds": median(cpu for _, cpu in runs),
            "seconds": [wall for wall, _ in runs],
            "unzipped_mb_per_s": unzipped / 1e6 / medians[name],
            "cherenkov_speedup": medians[name] / medians[ours.name],
        }
        for name, runs in times.items()
    ]
    return {
        "selection": label,
        "branches": len(names),
        "compressed_bytes": stats.compressed_bytes,
        "uncompressed_bytes": unzipped,
        "baskets": stats.baskets,
        "results": results,
        "awkward_vs_awkward_speedup": medians[theirs.name] / medians[ours_ak.name],
        "verified": not problems,
        "checked_with_root": root is not None,
        "problems": problems,
    }


def print_report(report: dict, console: Console) -> None:
    console.print(
        f"[bold]{report['file']}[/bold]: {report['file_bytes'] / 1e6:.1f} MB, {report['entries']:,} entries, "
        f"{report['branches']} branches, {report['clusters']} clusters; {report['cores']} cores; page cache warm "
        f"(file read once first), so this measures CPU work; medians of {report['repeat']} interleaved runs"
    )
    if "rntuple" in report:
        r = report["rntuple"]
        console.print(f"and as an RNTuple (ROOT's RNTupleImporter): {r['file']}: {r['file_bytes'] / 1e6:.1f} MB, {r['clusters']} clusters")
    for sel in report["selections"] + report.get("rntuple", {}).get("selections", []):
        table = Table(
            title=f"{sel['selection']}: {sel['branches']} branches, {sel['baskets']} baskets, "
            f"{sel['compressed_bytes'] / 1e6:.1f} MB zipped, {sel['uncompressed_bytes'] / 1e6:.1f} MB unzipped",
            title_justify="left",
        )
        for col in ("tool", "seconds", "cpu seconds", "unzipped MB/s", "cherenkov np faster by"):
            table.add_column(col, justify="left" if col == "tool" else "right")
        for r in sel["results"]:
            table.add_row(
                r["tool"],
                f"{r['median_seconds']:.3f}",
                f"{r['median_cpu_seconds']:.3f}",
                f"{r['unzipped_mb_per_s']:.0f}",
                f"{r['cherenkov_speedup']:.2f}x",
            )
        table.caption = f"both making awkward arrays, cherenkov is faster than uproot by {sel['awkward_vs_awkward_speedup']:.2f}x"
        console.print(table)
        if sel["verified"]:
            console.print(
                "  [green]verified[/green]: cherenkov and uproot equal branch by branch"
                + ("; ROOT read as many bytes of values and its sums agree" if sel["checked_with_root"] else "")
            )
        else:
            for p in sel["problems"]:
                console.print(f"  [red]MISMATCH[/red] {p}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=40_000, help="entries of the generated file (default 40000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per tool (default 5)")
    parser.add_argument("--file", type=Path, help="an existing ROOT file with an Events tree (default: the generated one)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--no-rntuple", action="store_true", help="the TTree only (the RNTuple rows need ROOT)")
    args = parser.parse_args(argv)
    console = Console(width=120)  # wide enough for the tables when piped to a file
    path = (
        args.file
        if args.file and args.file.exists()
        else ensure(args.file or default_output(args.entries), args.entries, log=console.print)
    )
    report = run(path, args.repeat, rntuple=not args.no_rntuple)
    print_report(report, console)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
        console.print(f"wrote {args.json}")
    return 0 if all(s["verified"] for s in report["selections"] + report.get("rntuple", {}).get("selections", [])) else 1


if __name__ == "__main__":
    sys.exit(main())
