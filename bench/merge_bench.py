"""Merging many small NanoAOD-like files: `cherenkov merge` (copy and rewrite modes) against ROOT 6.40's
`hadd -ff` (fast: compressed baskets copied, the inputs' small baskets kept) and `hadd -O -f505`
(baskets re-optimized, recompressed at ZSTD 5).

    .venv/bin/python bench/merge_bench.py [--files 1000] [--entries 100] [--outputs 2] [--repeat 3]
                                          [--hadd-O-repeat 1] [--tools copy,rewrite,hadd-ff,hadd-O]
                                          [--tiny] [--rtt 137] [--remote [--rate MB/s]]
                                          [--baseline OTHER_VENV/bin/python] [--json bench/results/merge.json]

Inputs are N files of M entries cut by ROOT from bench/make_nanolike.py's 40 000-entry file (947
branches, ZSTD 5, each file written by ROOT as a grid job writes it; past the 40 000th entry the cuts
start over), made once in bench/data/merge-N-M/ by one ROOT process. `--tiny` makes N tiny files
instead (a few NanoAOD-like branches, M entries, written by ROOT's C++ in one process): the scenario of
10 000 inputs, where peak memory is what is judged. The inputs are merged into `--outputs` files:
cherenkov with `--max-size` (input bytes per output, chosen so that exactly that many come out),
hadd once per output over the same consecutive inputs (its time the sum, its peak RSS the largest).
Each tool runs in processes of its own (peak RSS measured there), runs interleaved; medians are
printed with ratios, the outputs' sizes, and `cherenkov layout`'s prediction of the lab's fixed 30 %
selection read at --rtt from the inputs and from the outputs (requests and time). cherenkov's outputs
are read back and their entries counted against the inputs'.

`--remote` also merges the same inputs served by a real xrootd behind toxiproxy at --rtt (the lab's
`Lab`; `--rate` makes it one link of that many MB/s for every connection, else the loopback's), in
each cherenkov mode asked for, in the same rounds: the remote merge against the local one plus the
link's transfer time of the inputs' bytes (their bytes at --rate; none without it).

`--baseline PYTHON` also runs cherenkov's local modes with another Python (whose cherenkov is another
build, e.g. main's `.venv/bin/python`), interleaved with this one's: the A/B of a change, as wall and
CPU time ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
SOURCE_ENTRIES = 40_000

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
starts = tree.GetEntries() - entries + 1
for k in range(files):
    out = ROOT.TFile(f"{folder}/job{k:05d}.root.partial", "RECREATE", "", 505)
    tree.CopyTree("", "", entries, k * entries % starts).Write()
    out.Close()
"""

# Tiny NanoAOD-like files written by ROOT's C++ (a counter, counted leaves, scalars, a vector).
TINY = r"""
#include <TFile.h>
#include <TTree.h>
#include <TRandom3.h>
#include <vector>
void cherenkov_tiny(const char* folder, int files, int entries) {
  TRandom3 rng(1);
  for (int k = 0; k < files; ++k) {
    TFile out(Form("%s/job%05d.root.partial", folder, k), "RECREATE", "", 505);
    auto tree = new TTree("Events", "Events");  // the file owns it: Close deletes it
    UInt_t run = 1; ULong64_t event = 0; Int_t nMuon = 0; Float_t pt[16], eta[16], met = 0; Bool_t trigger = false;
    std::vector<float> weights;
    tree->Branch("run", &run, "run/i");
    tree->Branch("event", &event, "event/l");
    tree->Branch("nMuon", &nMuon, "nMuon/I");
    tree->Branch("Muon_pt", pt, "Muon_pt[nMuon]/F");
    tree->Branch("Muon_eta", eta, "Muon_eta[nMuon]/F");
    tree->Branch("MET_pt", &met, "MET_pt/F");
    tree->Branch("HLT_IsoMu24", &trigger, "HLT_IsoMu24/O");
    tree->Branch("LHEPdfWeight", &weights);
    for (int e = 0; e < entries; ++e) {
      event = (ULong64_t)k * entries + e;
      nMuon = rng.Integer(5);
      for (int m = 0; m < nMuon; ++m) { pt[m] = rng.Exp(30); eta[m] = rng.Gaus(0, 1.5); }
      met = rng.Exp(40); trigger = rng.Rndm() < 0.3;
      weights.assign(rng.Integer(4), 1.0f);
      tree->Fill();
    }
    tree->Write();
    out.Close();
  }
}
"""

MAKE_TINY = """
import sys
import ROOT
ROOT.gInterpreter.Declare(sys.argv[1])
ROOT.cherenkov_tiny(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
"""


def make_inputs(files: int, entries: int, tiny: bool = False) -> list[Path]:
    """N files of M entries written by ROOT, made once in bench/data/: cut from the lab's
    NanoAOD-like file (947 branches), or `tiny` ones."""
    folder = BENCH / "data" / f"merge-{'tiny-' if tiny else ''}{files}-{entries}"
    paths = [folder / f"job{k:05d}.root" for k in range(files)]
    if all(p.exists() for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    if tiny:
        command = [sys.executable, "-c", MAKE_TINY, TINY, str(folder), str(files), str(entries)]
    else:
        source = make_nanolike.ensure(entries=SOURCE_ENTRIES)
        command = [sys.executable, "-c", SPLIT, str(source), str(folder), str(files), str(entries)]
    t0 = time.perf_counter()
    subprocess.run(command, check=True)
    for p in paths:
        p.with_name(p.name + ".partial").replace(p)
    print(f"made {files} inputs in {folder} in {time.perf_counter() - t0:.1f} s")
    return paths


def groups_of(sizes: list[int], max_size: int) -> list[range]:
    """Consecutive inputs per output, as `cherenkov merge --max-size` groups them."""
    groups, start, size = [], 0, 0
    for k, s in enumerate(sizes):
        if k > start and size + s > max_size:
            groups.append(range(start, k))
            start, size = k, 0
        size += s
    groups.append(range(start, len(sizes)))
    return groups


def max_size_for(sizes: list[int], outputs: int) -> int:
    """Input bytes per output such that `outputs` outputs come out (the last holds the rest)."""
    return -(-sum(sizes) // outputs) + max(sizes)


def measured(argv: list[str]) -> tuple[float, int, float]:
    """Wall seconds, peak RSS and CPU seconds of `argv` in a process of its own."""
    run = subprocess.run([sys.executable, "-c", RUN_MEASURED, *argv], capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"{argv[0]} failed: {run.stderr}")
    seconds, rss, cpu = run.stdout.split()
    return float(seconds), int(rss), float(cpu)


def cpu_of(processes: list) -> float:
    """CPU seconds (user and system) `processes` (Popen objects) have used so far."""
    import psutil

    return sum(sum(psutil.Process(p.pid).cpu_times()[:2]) for p in processes)


def find_hadd() -> str | None:
    """hadd on the PATH, else the one of the ROOT wheel (`pip install root` puts it in ROOT/bin)."""
    import importlib.util

    spec = importlib.util.find_spec("ROOT")
    wheel = Path(spec.origin).parent / "bin" / "hadd" if spec and spec.origin else None
    return shutil.which("hadd") or (str(wheel) if wheel and wheel.exists() else None)


TOOLS = {"copy": "cherenkov copy", "rewrite": "cherenkov rewrite", "hadd-ff": "hadd -ff", "hadd-O": "hadd -O"}
STEMS = {"cherenkov copy": "copy", "cherenkov rewrite": "rewrite", "hadd -ff": "hadd-ff", "hadd -O": "hadd-O"}
REMOTE = " (root://)"  # a cherenkov tool's name, merging the served inputs
BASELINE = " (baseline)"  # a cherenkov tool's name, run by --baseline's Python (its cherenkov)
for _name in ("cherenkov copy", "cherenkov rewrite"):
    STEMS[_name + REMOTE] = STEMS[_name] + "-remote"
    STEMS[_name + BASELINE] = STEMS[_name] + "-baseline"


def outputs_of(name: str, out: Path, count: int) -> list[Path]:
    """The files tool `name` writes (cherenkov's naming: stem_0.root, stem_1.root, ...)."""
    stem = out / STEMS[name]
    if count == 1:
        return [stem.with_suffix(".root")]
    return [Path(f"{stem}_{k:0{len(str(count - 1))}d}.root") for k in range(count)]


def tools(
    hadd: str | None,
    inputs: list[Path],
    out: Path,
    groups: list[range],
    max_size: int,
    wanted: list[str],
    urls: list[str] | None = None,
    baseline: str | None = None,
) -> dict[str, list[list[str]]]:
    """Each tool's commands (one per process, run in turn): cherenkov one, hadd one per output;
    with `urls` (the inputs served), cherenkov's tools again on them; with `baseline` (a Python
    whose cherenkov is another build, e.g. main's), cherenkov's local tools again run by it."""
    names = [str(p) for p in inputs]
    cli = [sys.executable, "-m", "cherenkov.cli", "merge"]
    split = ["--max-size", str(max_size)] if len(groups) > 1 else []
    modes = {"cherenkov copy": ["--mode", "copy"], "cherenkov rewrite": ["--mode", "rewrite", "--compression", "505"]}
    found = {name: [[*cli, str(out / f"{STEMS[name]}.root"), *names, "--quiet", *flags, *split]] for name, flags in modes.items()}
    if hadd:
        for name, flags in (("hadd -ff", ["-f", "-ff"]), ("hadd -O", ["-f505", "-O"])):
            targets = outputs_of(name, out, len(groups))
            found[name] = [[hadd, *flags, str(t), *(names[k] for k in g)] for t, g in zip(targets, groups)]
    chosen = {TOOLS[w]: found[TOOLS[w]] for w in wanted if TOOLS[w] in found}
    if baseline is not None:
        for name, flags in modes.items():
            if name in chosen:
                cmd = [baseline, *cli[1:], str(out / f"{STEMS[name + BASELINE]}.root"), *names, "--quiet", *flags, *split]
                chosen[name + BASELINE] = [cmd]
    if urls is not None:
        for name, flags in modes.items():
            if name in chosen:
                # The same --max-size: the served inputs have the local ones' sizes.
                chosen[name + REMOTE] = [[*cli, str(out / f"{STEMS[name + REMOTE]}.root"), *urls, "--quiet", *flags, *split]]
    return chosen


def compression_floor(paths: list[Path], repeat: int, level: int = 10) -> tuple[float, float, int]:
    """Wall and CPU seconds zstd alone takes at `level` (ROOT's ZSTD level 5, as `-f505` and
    `--compression 505` ask, is zstd's 10: ROOT doubles it) to compress the uncompressed baskets
    of `paths`' trees (ROOT's blocks of at most 16 MiB) on every core: the floor of a rewrite
    that compresses them (medians of `repeat`, as the tools' times), and their bytes."""
    from concurrent.futures import ThreadPoolExecutor

    import zstandard

    payloads = [p for path in paths for p in uncompressed_baskets(path)]
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(os.cpu_count()) as pool:
            list(pool.map(lambda p: zstandard.ZstdCompressor(level=level).compress(p), payloads))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), sum(map(len, payloads))


def uncompressed_baskets(path: Path) -> list[bytes]:
    """The uncompressed baskets of `path`'s tree, in ROOT's blocks of at most 16 MiB."""
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
    return payloads


def predicted(paths: list[Path], rtt: float) -> tuple[int, float]:
    """Requests and seconds `cherenkov layout` predicts for the fixed selection at `rtt` ms, summed
    over files each opened on its own."""
    from cherenkov.layout import layout

    requests, seconds = 0, 0.0
    for p in paths:
        (t,) = layout(p, tree="Events", branches=SELECTION, rtt_ms=rtt)
        requests += t.prediction.requests
        seconds += t.prediction.seconds
    return requests, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--outputs", type=int, default=2, help="outputs the inputs are merged into")
    parser.add_argument("--tiny", action="store_true", help="tiny inputs (8 branches): the many-inputs memory scenario")
    parser.add_argument("--tools", default="copy,rewrite,hadd-ff,hadd-O", help=f"some of {','.join(TOOLS)}")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool but hadd -O")
    parser.add_argument("--hadd-O-repeat", type=int, default=1, help="runs of hadd -O (minutes each)")
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip (ms) of the predicted remote read and of --remote's link")
    parser.add_argument("--remote", action="store_true", help="also merge the inputs served by xrootd at --rtt (cherenkov's modes)")
    parser.add_argument("--rate", type=float, help="with --remote: one link of this many MB/s for all connections")
    parser.add_argument("--baseline", help="a Python whose cherenkov is the build to compare with (e.g. main's .venv/bin/python)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    inputs = make_inputs(args.files, args.entries, args.tiny)
    sizes = [p.stat().st_size for p in inputs]
    total = sum(sizes)
    max_size = max_size_for(sizes, args.outputs)
    groups = groups_of(sizes, max_size)
    hadd = find_hadd()
    print(
        f"{len(inputs)} inputs of {args.entries} entries, {total / 1e6:.1f} MB, into {len(groups)} outputs "
        f"(--max-size {max_size}); hadd: {hadd or 'absent (pip install root)'}"
    )
    out = Path(tempfile.mkdtemp(prefix="cherenkov-merge-bench-"))
    results: dict[str, dict] = {}
    lab = contextlib.ExitStack()
    try:
        urls = None
        if args.remote:
            from cherenkov_lab.servers import Lab

            served = lab.enter_context(Lab(inputs[0].parent, link="thin" if args.rate else None, rate=args.rate))
            served.set_rtt(args.rtt)
            urls = [served.url("root", p.name) for p in inputs]
            link = f"one {args.rate:g} MB/s link" if args.rate else "the loopback's bandwidth"
            print(f"served by xrootd at {args.rtt:g} ms ({link})")
        commands = tools(hadd, inputs, out, groups, max_size, args.tools.split(","), urls, args.baseline)
        for round_ in range(max(args.repeat, args.hadd_O_repeat)):
            for name, runs in commands.items():
                if round_ >= (args.hadd_O_repeat if name == "hadd -O" else args.repeat):
                    continue
                seconds, rss, cpu = 0.0, 0, 0.0
                servers = [served.xrootd.proc, served.toxiproxy.proc] if name.endswith(REMOTE) else []
                serving = cpu_of(servers)
                for command in runs:  # hadd: one process per output
                    s, r, c = measured(command)
                    seconds, rss, cpu = seconds + s, max(rss, r), cpu + c
                r = results.setdefault(name, {"seconds": [], "rss": [], "cpu": [], "servers_cpu": []})
                r["seconds"].append(seconds)
                r["rss"].append(rss)
                r["cpu"].append(cpu)
                r["servers_cpu"].append(cpu_of(servers) - serving)
                print(f"  {name}: {seconds:.2f} s (CPU {cpu:.2f} s), peak RSS {rss / 1e9:.2f} GB", flush=True)
        import cherenkov

        for name in results:
            if name.startswith("cherenkov"):
                merged = [cherenkov.open(p)["Events"].num_entries for p in outputs_of(name, out, len(groups))]
                assert sum(merged) == args.files * args.entries, (name, merged)
        predict = not args.tiny and len(inputs) <= 2000  # the layout of each input: one open each
        before = predicted(inputs, args.rtt) if predict else (0, 0.0)
        print(
            f"\n{'tool':28s} {'median s':>9s} {'CPU s':>7s} {'peak GB':>8s} {'size MB':>8s} {'requests':>9s} {'read s':>7s}"
            f"  (fixed selection at {args.rtt:g} ms, predicted)"
        )
        print(f"{'inputs':28s} {'':>9s} {'':>7s} {'':>8s} {total / 1e6:8.1f} {before[0]:9d} {before[1]:7.2f}")
        for name, r in results.items():
            r["median"] = statistics.median(r["seconds"])
            r["cpu_median"] = statistics.median(r["cpu"])
            paths = outputs_of(name, out, len(groups))
            r["bytes"] = sum(p.stat().st_size for p in paths)
            r["requests"], r["read_seconds"] = predicted(paths, args.rtt) if predict else (0, 0.0)
            print(
                f"{name:28s} {r['median']:9.2f} {r['cpu_median']:7.2f} {max(r['rss']) / 1e9:8.2f} {r['bytes'] / 1e6:8.1f}"
                f" {r['requests']:9d} {r['read_seconds']:7.2f}"
            )
        for ours, peer in (("cherenkov copy", "hadd -ff"), ("cherenkov rewrite", "hadd -O"), ("cherenkov rewrite", "hadd -ff")):
            if peer in results and ours in results:
                wall = results[peer]["median"] / results[ours]["median"]
                cpu = results[peer]["cpu_median"] / results[ours]["cpu_median"]
                print(f"{ours}: {wall:.2f}x the speed of {peer} (CPU time: {cpu:.2f}x less)")
        for name in TOOLS.values():
            if name in results and name + BASELINE in results:
                ours, theirs = results[name], results[name + BASELINE]
                print(
                    f"{name}: {ours['median'] / theirs['median']:.3f}x the baseline's wall time, "
                    f"{ours['cpu_median'] / theirs['cpu_median']:.3f}x its CPU time (medians, runs interleaved)"
                )
        transfer = total / (args.rate * 1e6) if args.rate else 0.0
        for name in TOOLS.values():
            if name in results and name + REMOTE in results:
                remote, local = results[name + REMOTE]["median"], results[name]["median"]
                results[name + REMOTE]["ratio_to_local_plus_transfer"] = ratio = remote / (local + transfer)
                print(
                    f"{name + REMOTE}: {remote:.2f} s, {ratio:.2f}x (the local merge {local:.2f} s + the link's transfer of "
                    f"{total / 1e6:.1f} MB {transfer:.2f} s)"
                )
                # Here the servers share the merge's cores: the local merge's CPU and theirs, on every core.
                serving = statistics.median(results[name + REMOTE]["servers_cpu"])
                shared = (results[name]["cpu_median"] + serving) / os.cpu_count()
                floor = max(shared, local + transfer)
                print(
                    f"  xrootd and toxiproxy took {serving:.2f} s of CPU on this machine's {os.cpu_count()} cores: with the local "
                    f"merge's {results[name]['cpu_median']:.2f} s, at least {shared:.2f} s; {remote / floor:.2f}x that"
                )
        if "cherenkov rewrite" in results:
            wall, cpu, size = compression_floor(outputs_of("cherenkov rewrite", out, len(groups)), args.repeat)
            rewrite = results["cherenkov rewrite"]
            results["compression floor"] = {"seconds": [wall], "cpu": [cpu], "bytes": size}
            print(
                f"compression floor (zstd 10 alone on the rewrite's {size / 1e6:.1f} MB of baskets, every core, "
                f"median of {args.repeat}): {wall:.2f} s"
                f" ({cpu:.2f} s CPU); cherenkov rewrite is {rewrite['median'] / wall:.2f}x it (CPU time {rewrite['cpu_median'] / cpu:.2f}x)"
            )
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(
                json.dumps(
                    {
                        "files": args.files,
                        "entries": args.entries,
                        "tiny": args.tiny,
                        "outputs": len(groups),
                        "input_bytes": total,
                        "results": results,
                        "at": time.time(),
                    },
                    indent=1,
                )
            )
    finally:
        lab.close()
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
