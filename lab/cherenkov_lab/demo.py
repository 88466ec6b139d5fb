"""`make demo`: a short run of the latency lab.

A glance at the real CMS NanoAOD sample first (from ../shared, else the copy in lab/data), then one
NanoAOD-like file (the shared one written by ROOT 6.40, 2000 entries, 4 clusters, ROOT's own basket
layout; without the shared folder, one of 2000 entries generated from the sample's schema by
bench/make_nanolike.py) read from nginx on 127.0.0.1 behind toxiproxy at
a 137 ms round trip, and from the local disk: the fixed set (30 % of the branches by volume, every
entry) and the trigger pattern (the fixed set for every event, every branch for every 50th event of
the second half of the file), by cherenkov, uproot (`library="ak"`, its fast path) and ROOT 6.40
with its default TTreeCache (`make demo` installs both; a peer that cannot be installed is left out
with its reason shown). Every run is a fresh process stopped after 15 s; the values read are
checked against cherenkov's local read. About a minute and a half. The full lab is `make bench`
(bench/lab.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import cherenkov
from cherenkov.summary import human_bytes, tree_overview
from rich.console import Console
from rich.table import Table

SAMPLE = "nanoAOD_2015_CMS_Open_Data_ttbar.root"
LAB_FILE = "nanolike-root6.40-zstd-4clusters.root"  # written by ROOT 6.40: 2000 entries, 4 clusters
RTT_MS = 137
BUDGET_S = 15
REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    return Path(os.environ.get("CHERENKOV_SHARED", REPO.parent / "shared"))


def lab_file(console: Console) -> Path:
    """The shared NanoAOD-like file written by ROOT, or, without the shared folder, one of the
    same size generated from the CMS sample's schema (bench/make_nanolike.py; ROOT writes it when it
    imports)."""
    shared = shared_dir() / "testdata" / LAB_FILE
    if shared.exists():
        return shared
    sys.path.insert(0, str(REPO / "bench"))
    import make_nanolike

    return make_nanolike.ensure(entries=2000, log=lambda line: console.print(line, highlight=False, markup=False))


def summary(console: Console, path: Path) -> None:
    t0 = time.perf_counter()
    tree = cherenkov.open(path)["Events"]
    opened = time.perf_counter() - t0
    arrays = tree.arrays(["nMuon", "Muon_pt", "Muon_eta"], library="np")
    event = next((i for i, n in enumerate(arrays["nMuon"]) if n > 0), 0)
    pts = ", ".join(f"{x:.1f}" for x in arrays["Muon_pt"][event])
    console.print(
        f"[bold]cherenkov {cherenkov.__version__}[/bold]: opened {path.name} and its {len(tree.branches)}-branch tree "
        f"in {1000 * opened:.1f} ms; event {event} has {arrays['nMuon'][event]} muon(s), pt = {pts} GeV"
    )
    console.print(tree_overview(tree))


def load_lab():
    """bench/lab.py from the source checkout, or None (the lab needs the checkout's servers and tools)."""
    bench = REPO / "bench"
    if not (bench / "lab.py").exists():
        return None
    sys.path.insert(0, str(bench))
    import lab

    return lab


def latency_table(rows: list[dict], rtt: float) -> Table:
    protocols = [p for p in ("http", "root") if any(r["protocol"] == p for r in rows)]
    table = Table(title=f"seconds, locally and at a {rtt:g} ms round trip", title_justify="left")
    for name in (
        ["scenario", "tool", "local"]
        + [f"{p}://" for p in protocols]
        + ["requests" + (f" ({' / '.join(protocols)})" if len(protocols) > 1 else "")]
    ):
        table.add_column(name, justify="left" if name in ("scenario", "tool") else "right")
    by_key = {(r["tool"], r["scenario"], r["protocol"]): r for r in rows}
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        for tool in dict.fromkeys(r["tool"] for r in rows if r["scenario"] == scenario):
            remote = [by_key.get((tool, scenario, p)) for p in protocols]
            counts = [_count(r, "requests") for r in remote]
            table.add_row(
                scenario,
                tool,
                _seconds(by_key.get((tool, scenario, "file"))),
                *map(_seconds, remote),
                " / ".join(counts) if any(counts) else "",
            )
        table.add_section()
    return table


def _seconds(r: dict | None) -> str:
    if r is None:
        return ""
    if r["status"] == "ok":
        mark = "" if r.get("verified", True) else " [red]✗[/red]"
        return f"{r['seconds']:.2f}{mark}"
    if r["status"] in ("timeout", "skipped"):
        done = r.get("done_fraction")
        return f"[yellow]> {r['budget_seconds']:g}[/yellow]" + (f" ({100 * done:.0f} % done)" if done is not None and done < 1 else "")
    return "[red]error[/red]"


def _count(r: dict | None, key: str) -> str:
    if r is None:
        return ""
    value = r.get(key) if r["status"] == "ok" else (r.get("so_far") or {}).get(key)
    if value is None:
        return ""
    return f"{value:,}" if r["status"] == "ok" else f"≥ {value:,}"


def main() -> int:
    console = Console()
    if not console.is_terminal and console.width < 110:
        console = Console(width=110)  # piped: room for the table
    sample = next(p for p in (shared_dir() / "testdata" / SAMPLE, REPO / "lab" / "data" / SAMPLE) if p.exists())
    summary(console, sample)

    lab = load_lab()
    if lab is None:
        console.print(
            "[yellow]The latency demo runs the lab from a source checkout (bench/lab.py, the servers set up by "
            "`make setup`); clone the repository and run `make demo` there.[/yellow]"
        )
        return 0
    lab_path = lab_file(console)
    plan = lab.make_plan([lab_path])
    tree = cherenkov.open(lab_path)["Events"]
    console.print(
        f"\n[bold]Latency demo[/bold]: {lab_path.name} ({human_bytes(lab_path.stat().st_size)}, {tree.num_entries:,} entries, "
        f"{len(tree.cluster_boundaries) - 1} clusters) served by nginx on 127.0.0.1 behind toxiproxy at a {RTT_MS} ms "
        f"round trip, and from the local disk.\n"
        f"  fixed:   {len(plan.fixed)} of {len(plan.fixed) + len(plan.others)} branches (30 % of the volume), every entry\n"
        f"  trigger: the fixed set for every event; every branch for every {plan.trigger_every}th event from entry "
        f"{plan.trigger_from} on (in chunks of one cluster for cherenkov; ROOT in its event loop)\n"
        f"Each run is a fresh process, stopped after {BUDGET_S} s.\n"
    )
    tools = [t for t in lab.TOOLS if t.key in ("cherenkov", "uproot", "root")]
    config = lab.Config(
        rtts=[RTT_MS],
        protocols=["http", "root"],
        scenarios=["fixed", "trigger"],
        tools=tools,
        repeat=1,
        budget=BUDGET_S,
        once_over=BUDGET_S,
        bandwidth=None,
        local=True,
        cherenkov_protocols_only=True,
    )
    t0 = time.perf_counter()
    rows, notes = run(lab, plan, config, console)
    console.print()
    console.print(latency_table(rows, RTT_MS))
    checked = [r for r in rows if r.get("verified") is not None]
    bad = [r for r in checked if r["verified"] is False]
    if bad:
        for r in bad:
            console.print(f"[red]MISMATCH[/red] {r['tool']}, {r['scenario']}, {r['protocol']}: {'; '.join(r['problems'])}")
    else:
        console.print(
            f"[green]checked[/green]: all {len(checked)} finished runs read the same values as cherenkov's local read "
            "(bytes of values, sums and counts of a few branches)"
        )
    for key, why in notes.items():
        if key.split("-")[0] in ("root", "uproot", "cherenkov") and key != "cherenkov build":
            console.print(f"[dim]{key}: {why}[/dim]")
    console.print(
        f"[dim]{time.perf_counter() - t0:.0f} s. The full lab (5 round-trip times, lazy and interactive "
        "scenarios, cherenkov's switches, ROOT without TTreeCache, trace replay): make bench[/dim]"
    )
    return 0 if not bad else 1


def run(lab, plan, config, console: Console):
    def log(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    return lab.run_matrix(plan, config, log=log)


if __name__ == "__main__":
    sys.exit(main())
