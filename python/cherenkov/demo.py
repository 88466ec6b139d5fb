"""`make demo`: open the real CMS NanoAOD sample, summarize its tree, and read branches with timing,
side by side with uproot when it is installed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from statistics import median

from rich.console import Console
from rich.table import Table

import cherenkov
from cherenkov.summary import human_bytes, print_tree

SAMPLE = "nanoAOD_2015_CMS_Open_Data_ttbar.root"
# Written by ROOT 6.40 with the sample's schema: 2000 entries in 4 clusters, ROOT's basket layout.
TIMING_SAMPLE = "nanolike-root6.40-zstd-4clusters.root"
BRANCHES = ["Muon_pt", "Muon_eta", "Muon_phi", "Muon_charge", "nMuon", "Jet_pt", "Jet_btagCSVV2", "MET_pt", "run", "event"]


def shared_dir() -> Path:
    return Path(os.environ.get("CHERENKOV_SHARED", Path(__file__).resolve().parents[3] / "shared"))


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return median(times), result


def main() -> int:
    console = Console()
    path = shared_dir() / "testdata" / SAMPLE
    if not path.exists():
        console.print(f"[red]The sample {path} is absent; set CHERENKOV_SHARED to the shared folder.[/red]")
        return 1
    t0 = time.perf_counter()
    f = cherenkov.open(path)
    tree = f["Events"]
    console.print(f"[bold]cherenkov {cherenkov.__version__}[/bold]: opened {path.name} ({human_bytes(f.size)}) "
                  f"and its 947-branch tree in {1000 * (time.perf_counter() - t0):.1f} ms")
    print_tree(tree, console, limit=12)

    names = [n for n in BRANCHES if n in tree]
    arrays = tree.arrays(names, library="ak")
    console.print(f"\nread {len(names)} branches: {', '.join(names)}")
    with_muons = next((i for i, n in enumerate(arrays["nMuon"].to_list()) if n > 0), 0)
    console.print(f"event {with_muons}: " + ", ".join(f"{n}={arrays[n][with_muons].tolist() if hasattr(arrays[n][with_muons], 'tolist') else arrays[n][with_muons]}" for n in names[:5]))
    timing_path = path.with_name(TIMING_SAMPLE)
    console.print(timing_table(timing_path if timing_path.exists() else path))
    return 0


def timing_table(path: Path) -> Table:
    """All readable branches of `path`, cherenkov and uproot side by side, medians of several runs."""
    tree = cherenkov.open(path)["Events"]
    everything = [b.path for b in tree.branches if b.readable]
    _, (_, stats) = timed(lambda: tree.read(everything), repeat=1)  # also warms the page cache
    mb = stats["uncompressed_bytes"] / 1e6
    results = Table(title=f"reading all {len(everything)} branches of {path.name} ({mb:.1f} MB unzipped, page cache warm, medians)", title_justify="left")
    for col in ("tool", "seconds", "unzipped MB/s"):
        results.add_column(col, justify="left" if col == "tool" else "right")
    ours, _ = timed(lambda: tree.arrays(everything, library="np"))
    results.add_row("cherenkov " + cherenkov.__version__, f"{ours:.3f}", f"{mb / ours:.0f}")
    try:
        import uproot
    except ImportError:
        results.caption = "uproot is not installed: no side-by-side numbers"
        return results
    utree = uproot.open(path, array_cache=None)["Events"]  # no cache: measure reading, not a dict lookup
    theirs, _ = timed(lambda: utree.arrays(everything, library="np"), repeat=3)
    results.add_row("uproot " + uproot.__version__, f"{theirs:.3f}", f"{mb / theirs:.0f}")
    results.caption = f"cherenkov/uproot speed ratio in this run: {theirs / ours:.1f}x"
    return results


if __name__ == "__main__":
    sys.exit(main())
