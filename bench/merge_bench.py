"""Merging many small NanoAOD-like files: `cherenkov merge` (copy and rewrite modes) against ROOT 6.40's
`hadd -ff` (fast: compressed baskets copied, the inputs' small baskets kept) and `hadd -O -f505`
(baskets re-optimized, recompressed at ZSTD 5).

    .venv/bin/python bench/merge_bench.py [--files 200] [--entries 200] [--repeat 3] [--hadd-O-repeat 1]
                                          [--rtt 137] [--json bench/results/merge.json]

Inputs are N files of M entries cut by ROOT from bench/make_nanolike.py's file (947 branches,
ZSTD 5, each file written by ROOT as a grid job writes it), made once in bench/data/merge-N-M/. Each
tool runs in a process of its own (its peak RSS measured there), runs interleaved; medians are
printed with ratios, the outputs' sizes, and `cherenkov layout`'s prediction of the lab's fixed
30 % selection read at --rtt from the inputs and from each output (requests and time). Both
cherenkov outputs are read back and their entries counted against the inputs'.
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
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime)
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


def measured(argv: list[str]) -> tuple[float, int, float]:
    """Wall seconds, peak RSS and CPU seconds of `argv` in a process of its own."""
    run = subprocess.run([sys.executable, "-c", RUN_MEASURED, *argv], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"{argv[0]} failed: {run.stderr}")
    seconds, rss, cpu = run.stdout.split()
    return float(seconds), int(rss), float(cpu)


def find_hadd() -> str | None:
    """hadd on the PATH, else the one of the ROOT wheel (`pip install root` puts it in ROOT/bin)."""
    import importlib.util

    spec = importlib.util.find_spec("ROOT")
    wheel = Path(spec.origin).parent / "bin" / "hadd" if spec and spec.origin else None
    return shutil.which("hadd") or (str(wheel) if wheel and wheel.exists() else None)


OUTPUTS = {"cherenkov copy": "copy.root", "cherenkov rewrite": "rewrite.root", "hadd -ff": "hadd-ff.root", "hadd -O": "hadd-O.root"}


def tools(hadd: str | None, inputs: list[Path], out: Path) -> dict[str, list[str]]:
    names = [str(p) for p in inputs]
    cli = [sys.executable, "-m", "cherenkov.cli", "merge"]
    found = {
        "cherenkov copy": [*cli, str(out / OUTPUTS["cherenkov copy"]), *names, "--quiet", "--mode", "copy"],
        "cherenkov rewrite": [
            *cli,
            str(out / OUTPUTS["cherenkov rewrite"]),
            *names,
            "--quiet",
            "--mode",
            "rewrite",
            "--compression",
            "505",
        ],
    }
    if hadd:
        found["hadd -ff"] = [hadd, "-f", "-ff", str(out / OUTPUTS["hadd -ff"]), *names]
        found["hadd -O"] = [hadd, "-f505", "-O", str(out / OUTPUTS["hadd -O"]), *names]
    return found


def compression_floor(path: Path, level: int = 10) -> tuple[float, float, int]:
    """Wall and CPU seconds zstd alone takes at `level` (ROOT's ZSTD level 5, as `-f505` and
    `--compression 505` ask, is zstd's 10: ROOT doubles it) to compress the uncompressed baskets
    of `path`'s tree (ROOT's blocks of at most 16 MiB) on every core: the floor of a rewrite
    that compresses them, and their bytes."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import uproot
    import zstandard

    payloads = []
    with open(path, "rb") as f, uproot.open(path) as u:
        for b in u["Events"].itervalues(recursive=True):
            for seek, nbytes in zip(b.member("fBasketSeek")[: b.num_baskets], b.member("fBasketBytes")[: b.num_baskets]):
                f.seek(int(seek))
                raw = f.read(int(nbytes))
                objlen, keylen = int.from_bytes(raw[6:10], "big"), int.from_bytes(raw[14:16], "big")
                stored, payload = raw[keylen:], bytearray()
                while len(payload) < objlen and len(stored) != objlen:  # blocks: 9-byte header, zstd frame
                    size = int.from_bytes(stored[3:6], "little")
                    payload += zstandard.ZstdDecompressor().decompress(stored[9 : 9 + size], max_output_size=1 << 24)
                    stored = stored[9 + size :]
                payloads.extend(bytes(payload or stored)[k : k + 0xFFFFFF] for k in range(0, objlen, 0xFFFFFF))
    wall, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(lambda p: zstandard.ZstdCompressor(level=level).compress(p), payloads))
    return time.perf_counter() - wall, time.process_time() - cpu, sum(map(len, payloads))


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
                seconds, rss, cpu = measured(command)
                r = results.setdefault(name, {"seconds": [], "rss": [], "cpu": []})
                r["seconds"].append(seconds)
                r["rss"].append(rss)
                r["cpu"].append(cpu)
                print(f"  {name}: {seconds:.2f} s ({cpu:.2f} s CPU), peak RSS {rss / 1e9:.2f} GB", flush=True)
        import cherenkov

        for name in ("cherenkov copy", "cherenkov rewrite"):
            merged = cherenkov.open(out / OUTPUTS[name])["Events"]
            assert merged.num_entries == args.files * args.entries, (name, merged.num_entries)
        before = predicted(inputs, args.rtt)
        print(
            f"\n{'tool':18s} {'median s':>9s} {'peak GB':>8s} {'size MB':>8s} {'requests':>9s} {'read s':>7s}"
            f"  (fixed selection at {args.rtt:g} ms, predicted)"
        )
        print(f"{'inputs':18s} {'':>9s} {'':>8s} {total / 1e6:8.1f} {before[0]:9d} {before[1]:7.2f}")
        for name, r in results.items():
            r["median"] = statistics.median(r["seconds"])
            r["cpu_median"] = statistics.median(r["cpu"])
            path = out / OUTPUTS[name]
            r["bytes"] = path.stat().st_size
            r["requests"], r["read_seconds"] = predicted(path, args.rtt)
            print(
                f"{name:18s} {r['median']:9.2f} {max(r['rss']) / 1e9:8.2f} {r['bytes'] / 1e6:8.1f}"
                f" {r['requests']:9d} {r['read_seconds']:7.2f}"
            )
        for ours, peer in (("cherenkov copy", "hadd -ff"), ("cherenkov rewrite", "hadd -O"), ("cherenkov rewrite", "hadd -ff")):
            if peer in results:
                print(
                    f"{ours} is {results[peer]['median'] / results[ours]['median']:.2f}x faster than {peer}"
                    f" (CPU time {results[peer]['cpu_median'] / results[ours]['cpu_median']:.2f}x)"
                )
        wall, cpu, size = compression_floor(out / OUTPUTS["cherenkov rewrite"])
        rewrite = results["cherenkov rewrite"]
        results["compression floor"] = {"seconds": [wall], "cpu": [cpu], "bytes": size}
        print(
            f"compression floor (zstd 10 alone on the rewrite's {size / 1e6:.1f} MB of baskets, every core): {wall:.2f} s"
            f" ({cpu:.2f} s CPU); cherenkov rewrite is {rewrite['median'] / wall:.2f}x it (CPU time {rewrite['cpu_median'] / cpu:.2f}x)"
        )
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
