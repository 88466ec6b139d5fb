"""Dataset processing in the lab: `cherenkov.process` over 1..N local worker processes, and coffea
(FuturesExecutor over uproot) running the same analysis on the same files, over http:// through
toxiproxy at 137 ms round trip, in one run.

    python bench/process_bench.py                      # 8 copies of the 40 000-entry file, 1, 2, 4 workers
    python bench/process_bench.py --files 4 --workers 1,2 --repeat 3
    python bench/process_bench.py --coffea-python /path/to/venv/bin/python   # coffea in its own venv

coffea runs in `--coffea-python` (default: this interpreter, if it can import coffea), so it can live
in its own virtual environment (`python3 -m venv V && V/bin/pip install coffea`). Both tools read
chunks of `--step-size` entries and fill the same histograms (`fill_histograms` below, imported by
the coffea child); the results are compared before the table is printed. Each configuration runs
`--repeat` times, interleaved; the table shows medians, and how many times faster cherenkov is than
coffea with the same number of workers. Worker start-up is inside the timings of both tools.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import median

import awkward as ak
import hist

BENCH = Path(__file__).resolve().parent
TREE = "Events"


def fill_histograms(get) -> dict:
    """The analysis, for both tools: `get(name)` returns a branch of the current chunk."""
    muon_pt, jet_pt, met = get("Muon_pt"), get("Jet_pt"), get("MET_pt")
    two_jets = ak.num(jet_pt) >= 2
    out = {name: hist.Hist(hist.axis.Regular(50, 0, 250, name=name)) for name in ("muon_pt", "jet_pt", "met")}
    out["muon_pt"].fill(ak.to_numpy(ak.flatten(muon_pt)))
    out["jet_pt"].fill(ak.to_numpy(ak.flatten(jet_pt[two_jets])))
    out["met"].fill(ak.to_numpy(met[two_jets]))
    out["events"] = len(muon_pt)
    return out


class CherenkovAnalysis:
    def __call__(self, chunk):
        return fill_histograms(chunk.__getitem__)


COFFEA_CHILD = r"""
import json, sys, time
from coffea import processor
from coffea.nanoevents import BaseSchema
from process_bench import fill_histograms

class Analysis(processor.ProcessorABC):
    def process(self, events):
        return fill_histograms(lambda name: events[name])
    def postprocess(self, accumulator):
        return accumulator

args = json.loads(sys.argv[1])
runner = processor.Runner(executor=processor.FuturesExecutor(workers=args["workers"], status=False),
                          schema=BaseSchema, chunksize=args["step_size"])
start = time.perf_counter()
out = runner({"dataset": {"files": {url: args["tree"] for url in args["urls"]}}}, Analysis(), treename=args["tree"])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "events": out["events"],
                  "counts": {k: out[k].values(flow=True).tolist() for k in ("muon_pt", "jet_pt", "met")}}))
"""


def has_coffea(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import coffea.processor"], capture_output=True).returncode == 0
    except OSError:  # no such interpreter (`--coffea-python none` skips coffea)
        return False


def run_coffea(python: str, urls: list[str], workers: int, step_size: int) -> dict:
    args = json.dumps({"urls": urls, "workers": workers, "step_size": step_size, "tree": TREE})
    env = dict(os.environ, PYTHONPATH=str(BENCH))  # the child and its workers import fill_histograms
    done = subprocess.run([python, "-c", COFFEA_CHILD, args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"coffea failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_cherenkov(urls: list[str], executor, step_size: int) -> dict:
    import time

    import cherenkov

    start = time.perf_counter()
    out, report = cherenkov.process(
        {"dataset": urls}, CherenkovAnalysis(), tree=TREE, executor=executor, step_size=step_size, progress=False, return_report=True
    )
    seconds = time.perf_counter() - start
    result = out["dataset"]
    counts = {k: result[k].values(flow=True).tolist() for k in ("muon_pt", "jet_pt", "met")}
    return {"seconds": seconds, "events": result["events"], "counts": counts, "report": report}


def dataset_folder(source: Path, copies: int) -> Path:
    """`copies` hard links (copies across file systems) of `source` in a folder of their own."""
    folder = source.parent / f"process-{source.stem}-x{copies}"
    folder.mkdir(exist_ok=True)
    for i in range(copies):
        target = folder / f"{source.stem}-{i}.root"
        if not target.exists():
            try:
                os.link(source, target)
            except OSError:
                import shutil

                shutil.copyfile(source, target)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=40_000, help="entries of the generated NanoAOD-like file")
    parser.add_argument("--files", type=int, default=8, help="files in the dataset (copies of that file)")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--rtt", type=float, default=137.0, help="round-trip time added by toxiproxy, ms")
    parser.add_argument("--step-size", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--coffea-python", default=sys.executable, help="an interpreter that can import coffea")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(BENCH))
    from cherenkov.processing import InProcess, LocalProcesses
    from cherenkov_lab import Lab
    from make_nanolike import ensure
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 140)
    folder = dataset_folder(ensure(entries=args.entries, log=console.print), args.files)
    names = sorted(p.name for p in folder.glob("*.root"))[: args.files]
    worker_counts = [int(w) for w in args.workers.split(",")]
    coffea = has_coffea(args.coffea_python)
    if not coffea:
        console.print(f"coffea is not importable by {args.coffea_python}: only cherenkov runs (see --coffea-python)")

    runs: dict[tuple[str, int], list[dict]] = {}
    with Lab(folder) as lab:
        lab.set_rtt(args.rtt)
        urls = [lab.url("http", name) for name in names]
        console.print(f"{len(urls)} files of {args.entries} entries over http:// at {args.rtt:g} ms round trip")
        configs = [("cherenkov in-process", 1)] + [("cherenkov processes", w) for w in worker_counts]
        configs += [("coffea futures", w) for w in worker_counts] if coffea else []
        for _ in range(args.repeat):
            for tool, workers in configs:
                if tool == "coffea futures":
                    run = run_coffea(args.coffea_python, urls, workers, args.step_size)
                else:
                    executor = InProcess() if tool.endswith("in-process") else LocalProcesses(workers)
                    run = run_cherenkov(urls, executor, args.step_size)
                console.print(f"  {tool}, {workers} workers: {run['seconds']:.2f} s")
                runs.setdefault((tool, workers), []).append(run)

    reference = next(iter(runs.values()))[0]
    for (tool, workers), rs in runs.items():
        for r in rs:
            if r["events"] != reference["events"] or r["counts"] != reference["counts"]:
                console.print(f"[red]{tool} with {workers} workers filled different histograms[/red]")
                return 1

    table = Table(title=f"{args.files} files x {args.entries} entries, http:// at {args.rtt:g} ms RTT, median of {args.repeat}")
    for column in ("tool", "workers", "seconds", "entries/s", "MB read", "requests", "bound", "x faster than coffea"):
        table.add_column(column, justify="left" if column in ("tool", "bound") else "right")
    for (tool, workers), rs in runs.items():
        seconds = median(r["seconds"] for r in rs)
        report = rs[0].get("report")
        coffea_runs = runs.get(("coffea futures", workers))
        ratio = f"{median(r['seconds'] for r in coffea_runs) / seconds:.1f}" if coffea_runs and report else ""
        table.add_row(
            tool,
            str(workers),
            f"{seconds:.2f}",
            f"{reference['events'] / seconds:,.0f}",
            f"{report.total.bytes / 1e6:.1f}" if report else "",
            str(report.total.requests) if report else "",
            report.bound if report else "",
            ratio,
        )
    console.print(table)
    widest = max((k for k in runs if k[0] == "cherenkov processes"), key=lambda k: k[1])
    console.print(f"cherenkov, {widest[1]} workers, first run:\n{runs[widest][0]['report'].summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
