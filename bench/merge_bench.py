"""Merging many small NanoAOD-like files: `cherenkov merge` (rewrite mode) against ROOT 6.40's
`hadd -ff` (fast: compressed baskets copied, the inputs' small baskets kept) and `hadd -O -f505`
(baskets re-optimized, recompressed at ZSTD 5).

    .venv/bin/python bench/merge_bench.py [--files 200] [--entries 200] [--repeat 3] [--hadd-O-repeat 1]
                                          [--rtt 137] [--json bench/results/merge.json]

Inputs are N files of M entries cut by ROOT from bench/make_nanolike.py's file (947 branches,
ZSTD 5, each file written by ROOT as a grid job writes it), made once in bench/data/merge-N-M/. Each
tool runs in a process of its own (its peak RSS measured there), runs interleaved; medians are
printed with ratios, the outputs' sizes, and `cherenkov layout`'s prediction of the lab's fixed
30 % selection read at --rtt from the inputs and from each output (requests and time). The
rewritten output is read back and its entries counted against the inputs'.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import make_nanolike  # noqa: E402

# The lab's fixed selection (about 30 % of a NanoAOD event's bytes): muons, electrons, jets, MET.
SELECTION = ["nMuon", "Muon_*", "nElectron", "Electron_*", "nJet", "Jet_*", "MET_*"]

RUN_MEASURED = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - t0
if code.returncode:
    sys.stderr.write(code.stderr[-3000:])
    sys.exit(code.returncode)
print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


SPLIT = """
import sys
import ROOT
source, folder, files, entries = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
f = ROOT.TFile.Open(source)
tree = f.Get("Events")
for k in range(files):
    out = ROOT.TFile(f"{folder}/job{k:05d}.root.partial", "RECREATE", "", 505)
    tree.CopyTree("", "", entries, k * entries).Write()
    out.Close()
"""


def make_inputs(files: int, entries: int) -> list[Path]:
    """N files of M entries cut by ROOT from the lab's NanoAOD-like file (each written as a grid
    job writes its output: ROOT's own baskets, ZSTD 5), made once in bench/data/merge-N-M/."""
    folder = BENCH / "data" / f"merge-{files}-{entries}"
    paths = [folder / f"job{k:05d}.root" for k in range(files)]
    if all(p.exists() for p in paths):
        return paths
    source = make_nanolike.ensure(entries=max(40_000, files * entries))
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", SPLIT, str(source), str(folder), str(files), str(entries)], check=True)
    for p in paths:
        p.with_name(p.name + ".partial").replace(p)
    return paths


def measured(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS of `argv` in a process of its own."""
    run = subprocess.run([sys.executable, "-c", RUN_MEASURED, *argv], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"{argv[0]} failed: {run.stderr}")
    seconds, rss = run.stdout.split()
    return float(seconds), int(rss)


def find_hadd() -> str | None:
    """hadd on the PATH, else the one of the ROOT wheel (`pip install root` puts it in ROOT/bin)."""
    import importlib.util

    spec = importlib.util.find_spec("ROOT")
    wheel = Path(spec.origin).parent / "bin" / "hadd" if spec and spec.origin else None
    return shutil.which("hadd") or (str(wheel) if wheel and wheel.exists() else None)


def tools(hadd: str | None, inputs: list[Path], out: Path) -> dict[str, list[str]]:
    names = [str(p) for p in inputs]
    found = {
        "cherenkov": [
            sys.executable,
            "-m",
            "cherenkov.cli",
            "merge",
            str(out / "cherenkov.root"),
            *names,
            "--quiet",
            "--compression",
            "505",
        ]
    }
    if hadd:
        found["hadd -ff"] = [hadd, "-f", "-ff", str(out / "hadd-ff.root"), *names]
        found["hadd -O"] = [hadd, "-f505", "-O", str(out / "hadd-O.root"), *names]
    return found


def predicted(path: Path | list[Path], rtt: float) -> tuple[int, float]:
    """Requests and seconds `cherenkov layout` predicts for the fixed selection at `rtt` ms, over
    one file or the sum over many (each opened on its own)."""
    from cherenkov.layout import layout

    requests, seconds = 0, 0.0
    for p in path if isinstance(path, list) else [path]:
        (t,) = layout(p, tree="Events", branches=SELECTION, rtt_ms=rtt)
        requests += t.prediction.requests
        seconds += t.prediction.seconds
    return requests, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="runs of cherenkov and hadd -ff")
    parser.add_argument("--hadd-O-repeat", type=int, default=1, help="runs of hadd -O (30 s each)")
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip (ms) of the predicted remote read")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    inputs = make_inputs(args.files, args.entries)
    total = sum(p.stat().st_size for p in inputs)
    hadd = find_hadd()
    print(f"{len(inputs)} inputs of {args.entries} entries, {total / 1e6:.1f} MB; hadd: {hadd or 'absent (pip install root)'}")
    out = Path(tempfile.mkdtemp(prefix="cherenkov-merge-bench-"))
    results: dict[str, dict] = {}
    try:
        commands = tools(hadd, inputs, out)
        for round_ in range(max(args.repeat, args.hadd_O_repeat)):
            for name, command in commands.items():
                if round_ >= (args.hadd_O_repeat if name == "hadd -O" else args.repeat):
                    continue
                seconds, rss = measured(command)
                r = results.setdefault(name, {"seconds": [], "rss": []})
                r["seconds"].append(seconds)
                r["rss"].append(rss)
                print(f"  {name}: {seconds:.2f} s, peak RSS {rss / 1e9:.2f} GB", flush=True)
        import cherenkov

        merged = cherenkov.open(out / "cherenkov.root")["Events"]
        assert merged.num_entries == args.files * args.entries, merged.num_entries
        before = predicted(inputs, args.rtt)
        print(
            f"\n{'tool':12s} {'median s':>9s} {'peak GB':>8s} {'size MB':>8s} {'requests':>9s} {'read s':>7s}"
            f"  (fixed selection at {args.rtt:g} ms, predicted)"
        )
        print(f"{'inputs':12s} {'':>9s} {'':>8s} {total / 1e6:8.1f} {before[0]:9d} {before[1]:7.2f}")
        for name, r in results.items():
            r["median"] = statistics.median(r["seconds"])
            path = out / {"cherenkov": "cherenkov.root", "hadd -ff": "hadd-ff.root", "hadd -O": "hadd-O.root"}[name]
            r["bytes"] = path.stat().st_size
            r["requests"], r["read_seconds"] = predicted(path, args.rtt)
            print(
                f"{name:12s} {r['median']:9.2f} {max(r['rss']) / 1e9:8.2f} {r['bytes'] / 1e6:8.1f}"
                f" {r['requests']:9d} {r['read_seconds']:7.2f}"
            )
        c = results["cherenkov"]["median"]
        for peer in ("hadd -ff", "hadd -O"):
            if peer in results:
                print(f"cherenkov merge is {results[peer]['median'] / c:.2f}x faster than {peer}")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(
                json.dumps(
                    {"files": args.files, "entries": args.entries, "input_bytes": total, "results": results, "at": time.time()}, indent=1
                )
            )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
