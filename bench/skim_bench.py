"""A skim in the lab: `cherenkov.process` writing the selected events on its workers
(`cherenkov.Events`, `output_dir`) against coffea's `processor.Runner` writing each chunk with
uproot (as coffea users do), over http:// through toxiproxy at 137 ms round trip, in one run; then
a fixed selection of branches read back from each output over the same link.

The skim: events with at least two muons, 50 branches kept (run, lumi, event, nMuon, MET_pt and the
muons') and a derived column (the two leading muons' pt sum). Both outputs are checked to hold the
same events, value for value, before the table is printed.

    python bench/skim_bench.py                       # 8 copies of the 40 000-entry file, 2 workers
    python bench/skim_bench.py --files 4 --entries 20000 --workers 2 --repeat 3

coffea runs in `--coffea-python` (default: this interpreter, if it imports coffea). Worker start-up
is inside the timings of both tools; times are medians of `--repeat` interleaved runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import awkward as ak

BENCH = Path(__file__).resolve().parent
TREE = "Events"
READ_BACK = ["Muon_pt", "Muon_eta", "Muon_phi", "Dimuon_ptsum"]  # the fixed selection read back


def kept(names) -> list[str]:
    muons = sorted(n for n in names if n.startswith("Muon_") and not n.endswith(("Idx", "cleanmask")))
    return (["run", "luminosityBlock", "event", "nMuon", "MET_pt"] + muons)[:50]


def skim_columns(get, keep: list[str], min_muons: int = 2) -> dict:
    """The skim, for both tools: `get(name)` returns a branch of the current chunk."""
    two = get("nMuon") >= min_muons
    out = {name: get(name)[two] for name in keep}
    out["Dimuon_ptsum"] = ak.sum(out["Muon_pt"][:, :2], axis=1)
    return out


def for_uproot(columns: dict) -> dict:
    """The same columns as uproot writes NanoAOD-style counted branches: the muons zipped (nMuon, Muon_x)."""
    muons = {n[len("Muon_") :]: a for n, a in columns.items() if n.startswith("Muon_")}
    flat = {n: a for n, a in columns.items() if not n.startswith("Muon_") and n != "nMuon"}
    return {**flat, "Muon": ak.zip(muons)}


class CherenkovSkim:
    def __init__(self, keep: list[str], min_muons: int):
        self.keep, self.min_muons = keep, min_muons

    def __call__(self, chunk):
        import cherenkov

        return {"skim": cherenkov.Events(skim_columns(chunk.__getitem__, self.keep, self.min_muons)), "events": len(chunk)}


COFFEA_CHILD = r"""
import json, os, sys, time
import uproot
from coffea import processor
from coffea.nanoevents import BaseSchema
from skim_bench import skim_columns, for_uproot

args = json.loads(sys.argv[1])

class Skim(processor.ProcessorABC):
    def process(self, events):
        columns = skim_columns(lambda name: events[name], args["keep"], args["min_muons"])
        meta = events.metadata
        name = os.path.basename(meta["filename"]).replace(".root", "")
        path = os.path.join(args["output"], f"{name}-{meta['entrystart']:012d}-{meta['entrystop']:012d}.root")
        data = for_uproot(columns)
        with uproot.recreate(path) as f:  # a TTree (f["Events"] = data makes an RNTuple in uproot 5.7)
            f.mktree("Events", {k: v.type for k, v in data.items()})
            f["Events"].extend(data)
        return {"events": len(events), "selected": len(columns["run"])}
    def postprocess(self, accumulator):
        return accumulator

runner = processor.Runner(executor=processor.FuturesExecutor(workers=args["workers"], status=False),
                          schema=BaseSchema, chunksize=args["step_size"])
start = time.perf_counter()
out = runner({"dataset": {"files": {url: "Events" for url in args["urls"]}}}, Skim(), treename="Events")
print(json.dumps({"seconds": time.perf_counter() - start, "events": out["events"], "selected": out["selected"]}))
"""


def has_coffea(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import coffea.processor"], capture_output=True).returncode == 0
    except OSError:  # no such interpreter (`--coffea-python none` skips coffea)
        return False


def run_coffea(python: str, urls, keep, min_muons: int, output: Path, workers: int, step_size: int) -> dict:
    args = {"urls": urls, "keep": keep, "min_muons": min_muons, "output": str(output), "workers": workers, "step_size": step_size}
    args = json.dumps(args)
    env = dict(os.environ, PYTHONPATH=str(BENCH))
    done = subprocess.run([python, "-c", COFFEA_CHILD, args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"coffea failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_cherenkov(urls, keep, min_muons: int, output: Path, workers: int, step_size: int, max_size: int | None) -> dict:
    import cherenkov
    from cherenkov.processing import LocalProcesses

    start = time.perf_counter()
    out, report = cherenkov.process(
        {"dataset": urls},
        CherenkovSkim(keep, min_muons),
        executor=LocalProcesses(workers),
        step_size=step_size,
        output_dir=output,
        output_max_size=max_size,
        progress=False,
        return_report=True,
    )
    seconds = time.perf_counter() - start
    ds = out["dataset"]["skim"]
    return {
        "seconds": seconds,
        "events": out["dataset"]["events"],
        "selected": ds.num_entries,
        "dataset": ds,
        "merge_seconds": report.merge_seconds,
    }


def read_back(reader: str, urls: list[str]) -> tuple[float, dict]:
    import cherenkov
    import uproot

    start = time.perf_counter()
    files = [{u: TREE} for u in urls]
    if reader == "cherenkov":
        arrays = cherenkov.concatenate(files, READ_BACK, library="ak")
    else:
        arrays = uproot.concatenate(files, READ_BACK, library="ak")
    return time.perf_counter() - start, {n: arrays[n] for n in READ_BACK}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=40_000, help="entries of the generated NanoAOD-like file")
    parser.add_argument("--files", type=int, default=8, help="files in the dataset (copies of that file)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rtt", type=float, default=137.0, help="round-trip time added by toxiproxy, ms")
    parser.add_argument("--step-size", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-size-mb", type=float, default=256, help="cherenkov merges its output into files this big (0: no merge)")
    parser.add_argument("--min-muons", type=int, default=2, help="the skim keeps events with at least this many muons")
    parser.add_argument("--coffea-python", default=sys.executable, help="an interpreter that can import coffea")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(BENCH))
    import uproot
    from cherenkov_lab import Lab
    from process_bench import dataset_folder

    folder = dataset_folder(args.entries, args.files, 1, print)  # copies of one generated file
    names = sorted(p.name for p in folder.glob("*.root"))[: args.files]
    keep = kept(uproot.open(folder / names[0])[TREE].keys())
    coffea = has_coffea(args.coffea_python)
    if not coffea:
        print(f"coffea is not importable by {args.coffea_python}: only cherenkov runs (see --coffea-python)")
    outputs = {"cherenkov": folder / "skim-cherenkov", "coffea": folder / "skim-coffea"}
    times: dict[str, list[float]] = {}
    with Lab(folder) as lab:
        lab.set_rtt(args.rtt)
        urls = [lab.url("http", name) for name in names]
        print(f"{len(urls)} files of {args.entries} entries over http:// at {args.rtt:g} ms round trip, {args.workers} workers")
        for _ in range(args.repeat):
            for tool in ("cherenkov", "coffea") if coffea else ("cherenkov",):
                shutil.rmtree(outputs[tool], ignore_errors=True)
                outputs[tool].mkdir(mode=0o755)
                if tool == "cherenkov":
                    max_size = int(args.max_size_mb * 1e6) or None
                    run = run_cherenkov(urls, keep, args.min_muons, outputs[tool], args.workers, args.step_size, max_size)
                    written = [str(Path(f).relative_to(folder)) for f in run["dataset"].files]
                else:
                    run = run_coffea(args.coffea_python, urls, keep, args.min_muons, outputs[tool], args.workers, args.step_size)
                    written = sorted(str(p.relative_to(folder)) for p in outputs[tool].glob("*.root"))
                for path in outputs[tool].rglob("*"):
                    path.chmod(0o755 if path.is_dir() else 0o644)
                times.setdefault(f"skim: {tool}", []).append(run["seconds"])
                merging = f" (merging {run['merge_seconds']:.2f} s)" if run.get("merge_seconds") else ""
                events = f"{run['selected']} of {run['events']} events in {len(written)} files"
                print(f"  skim with {tool}: {run['seconds']:.2f} s{merging}, {events}")
                back = [lab.url("http", w) for w in written]
                for reader in ("cherenkov", "uproot"):
                    seconds, arrays = read_back(reader, back)
                    times.setdefault(f"read back {tool}'s output with {reader}", []).append(seconds)
                    if tool == "cherenkov" and reader == "cherenkov":
                        reference = arrays
                    elif not all(ak.array_equal(arrays[n], reference[n]) for n in READ_BACK):
                        print(f"VALUES DIFFER: {tool}'s output read with {reader}", file=sys.stderr)
                        return 1
    medians = {label: median(ts) for label, ts in times.items()}
    print(f"\n| {'step (median of ' + str(args.repeat) + ')':52} | seconds |")
    print(f"|{'-' * 54}|---------|")
    for label, seconds in medians.items():
        print(f"| {label:52} | {seconds:7.2f} |")
    if coffea:
        print(f"\nskim end to end: cherenkov {medians['skim: coffea'] / medians['skim: cherenkov']:.1f}x faster than coffea + uproot")
        for reader in ("cherenkov", "uproot"):
            ratio = medians[f"read back coffea's output with {reader}"] / medians[f"read back cherenkov's output with {reader}"]
            print(f"read back with {reader}: cherenkov's output {ratio:.1f}x faster than coffea's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
