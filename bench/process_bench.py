"""Scale out in the lab: `cherenkov.process` and coffea's Dask executor on the same Dask
`LocalCluster`s (processes) over a dataset of many NanoAOD-like files served by xrootd through
toxiproxy (137 ms round trip), measured as an analysis facility would:

- *scaling*: events/s with 1, 2, 4, 8 and 16 workers, both tools filling the same histograms
  (compared), with the CPU the workers, the driver and the servers used (this machine's cores are
  few: what can be shown is that I/O-bound throughput grows with workers until they are used);
- *second run*: the same dataset again with the metadata kept in a disk cache (the driver's memory
  emptied first, as in a new process): files opened for metadata (and the requests of it), and the
  time to the first processed chunk against one file's open;
- *faults*: one file behind a link ten times farther, then also one worker killed mid-run: the run
  finishes, the histograms are identical, and the time against the same run without them;
- *local*: events per second per core on the local files (CPU-bound), for this histogram analysis
  and a dimuon-mass one, beside the 200 Gbps Challenge's 15 kHz per core (other hardware and
  analysis: reported, not compared).

    python bench/process_bench.py                                  # 256 files of 40 000 entries
    python bench/process_bench.py --files 32 --entries 10000 --workers 1,2,4 --scenarios scaling

The files are copies (hard links) of `--variants` NanoAOD-like files made by make_nanolike.py with
different seeds. coffea's per-file cost is mostly round trips: with few workers it reads the first
`--coffea-files-per-worker` x workers files only (its events/s is what is compared; the table says
how many files each run read). Worker start-up is outside the timings (the cluster exists, as at a
facility); each run starts with no metadata known (the first run of a dataset) except "second run".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median

import awkward as ak
import hist
import numpy as np

BENCH = Path(__file__).resolve().parent
TREE = "Events"
CHALLENGE_HZ_PER_CORE = 15_000  # the 200 Gbps Challenge (arXiv 2503.15464), CMS NanoAOD behind XCache


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


def dimuon(get) -> dict:
    """A heavier NanoAOD analysis: the opposite-charge mass of the two leading muons, jets' pT."""
    pt, eta, phi, mass, charge = (get(f"Muon_{x}") for x in ("pt", "eta", "phi", "mass", "charge"))
    two = ak.num(pt) >= 2
    pt, eta, phi, mass, charge = (x[two] for x in (pt, eta, phi, mass, charge))
    px, py, pz = pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)
    e = np.sqrt(px**2 + py**2 + pz**2 + mass**2)
    m2 = (e[:, 0] + e[:, 1]) ** 2 - (px[:, 0] + px[:, 1]) ** 2 - (py[:, 0] + py[:, 1]) ** 2 - (pz[:, 0] + pz[:, 1]) ** 2
    m = np.sqrt(np.maximum(m2, 0))[charge[:, 0] != charge[:, 1]]
    out = {"mass": hist.Hist(hist.axis.Regular(60, 0, 300, name="mass")).fill(ak.to_numpy(m))}
    out["jet_pt"] = hist.Hist(hist.axis.Regular(50, 0, 500, name="pt")).fill(ak.to_numpy(ak.flatten(get("Jet_pt"))))
    out["events"] = len(pt)
    return out


class CherenkovAnalysis:
    def __init__(self, analysis=fill_histograms):
        self.analysis = analysis

    def __call__(self, chunk):
        return self.analysis(chunk.__getitem__)


def counts(out: dict) -> dict:
    return {"events": out["events"], **{k: v.values(flow=True).tolist() for k, v in out.items() if k != "events"}}


# ---- the dataset ---------------------------------------------------------------------------------


def dataset_folder(entries: int, files: int, variants: int, log) -> Path:
    """`files` hard links (copies across file systems) of `variants` generated files, in a folder of their own."""
    from make_nanolike import ensure

    data = BENCH / "data"
    sources = [ensure(data / f"nanolike-{entries}-seed{s}.root", entries=entries, seed=s, log=log) for s in range(1, variants + 1)]
    folder = data / f"scale-{entries}-x{files}-v{variants}"
    folder.mkdir(exist_ok=True)
    for i in range(files):
        target = folder / f"nano-{i:04d}.root"
        if not target.exists():
            try:
                os.link(sources[i % variants], target)
            except OSError:
                import shutil

                shutil.copyfile(sources[i % variants], target)
    for p in [data, folder, *folder.iterdir()]:
        p.chmod(0o755 if p.is_dir() else 0o644)  # xrootd runs as nobody
    return folder


# ---- what the machine did ------------------------------------------------------------------------


class CpuMeter:
    """CPU seconds used by the cluster's workers, this process (driver and scheduler) and the
    servers between `start()` and `stop()`."""

    def __init__(self, client, servers: dict[str, int]):
        import psutil

        self.psutil = psutil
        pids = client.run(os.getpid) if client is not None else {}
        self.groups = {"workers": list(pids.values()), "driver": [os.getpid()], "servers": list(servers.values())}

    def _seconds(self) -> dict[str, float]:
        out = {}
        for group, pids in self.groups.items():
            total = 0.0
            for pid in pids:
                try:
                    t = self.psutil.Process(pid).cpu_times()
                    total += t.user + t.system
                except self.psutil.Error:
                    pass  # a worker killed on purpose
            out[group] = total
        return out

    def start(self) -> None:
        self.t0, self.before = time.perf_counter(), self._seconds()

    def stop(self) -> dict:
        wall = time.perf_counter() - self.t0
        used = {g: s - self.before[g] for g, s in self._seconds().items()}
        cores = os.cpu_count() or 1
        return {"wall": wall, **used, "use": sum(used.values()) / (wall * cores)}


# ---- the tools ----------------------------------------------------------------------------------


def forget_metadata() -> None:
    """Empty the driver's memory of metadata: the next job learns it (or reads the disk cache)."""
    from cherenkov.processing import metadata

    metadata._MEMORY = metadata._Memory()


def run_cherenkov(client, urls, step_size, analysis=fill_histograms, open_options=None, workers=None) -> dict:
    """One job on `client` (or any executor `cherenkov.process` takes, with `workers`)."""
    import cherenkov

    start = time.perf_counter()
    out, report = cherenkov.process(
        {"dataset": urls},
        CherenkovAnalysis(analysis),
        tree=TREE,
        executor=client,
        workers=workers,
        step_size=step_size,
        progress=False,
        open_options=open_options,
        return_report=True,
    )
    return {"seconds": time.perf_counter() - start, "counts": counts(out["dataset"]), "report": report}


def coffea_processor():
    from coffea import processor

    class Analysis(processor.ProcessorABC):
        def process(self, events):
            return fill_histograms(lambda name: events[name])

        def postprocess(self, accumulator):
            return accumulator

    return Analysis()


def run_coffea(client, urls, step_size) -> dict:
    from coffea import processor
    from coffea.nanoevents import BaseSchema

    runner = processor.Runner(executor=processor.DaskExecutor(client=client, status=False), schema=BaseSchema, chunksize=step_size)
    start = time.perf_counter()
    out = runner({"dataset": {"files": {url: TREE for url in urls}}}, coffea_processor(), treename=TREE)
    return {"seconds": time.perf_counter() - start, "counts": counts(out)}


def cluster(workers: int):
    from distributed import Client, LocalCluster

    made = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = Client(made)
    client.wait_for_workers(workers)
    return made, client


def stop_cluster(made, client) -> None:
    """Close a cluster; on a loaded machine its nannies may time out killing many workers, which
    must not lose the measurements made."""
    client.close()
    try:
        made.close(timeout=60)
    except (TimeoutError, OSError) as e:
        print(f"closing the cluster: {type(e).__name__}: {e} (its processes are killed at exit)")


def one_open_seconds(urls: list[str], repeat: int = 3) -> float:
    """The median time to open a file and find its tree (each a file not opened before here)."""
    import cherenkov

    times = []
    for url in urls[-repeat:]:
        t0 = time.perf_counter()
        cherenkov.open(url)[TREE]
        times.append(time.perf_counter() - t0)
    return median(times)


# ---- scenarios ----------------------------------------------------------------------------------


def scaling(args, lab, urls, console) -> list[dict]:
    rows = []
    servers = {"xrootd": lab.xrootd.proc.pid, "toxiproxy": lab.toxiproxy.proc.pid}
    for workers in args.worker_counts:
        made, client = cluster(workers)
        try:
            for tool in ("cherenkov", "coffea") if args.coffea else ("cherenkov",):
                chosen = urls if tool == "cherenkov" else urls[: min(len(urls), args.coffea_files_per_worker * workers)]
                for _ in range(args.repeat):
                    forget_metadata()
                    meter = CpuMeter(client, servers)
                    meter.start()
                    run = (
                        run_cherenkov(client, chosen, args.step_size) if tool == "cherenkov" else run_coffea(client, chosen, args.step_size)
                    )
                    run.update(tool=tool, workers=workers, files=len(chosen), cpu=meter.stop())
                    rate = run["counts"]["events"] / run["seconds"]
                    console.print(f"  {tool}, {workers} workers, {len(chosen)} files: {run['seconds']:.1f} s, {rate:,.0f} events/s")
                    rows.append(run)
        finally:
            stop_cluster(made, client)
    return rows


def second_run(args, lab, urls, console) -> dict:
    made, client = cluster(args.second_workers)
    cache = tempfile.mkdtemp(prefix="cherenkov-process-cache-")
    try:
        forget_metadata()
        first = run_cherenkov(client, urls, args.step_size, open_options={"cache": cache})
        forget_metadata()  # as a new process: only the disk cache knows
        second = run_cherenkov(client, urls, args.step_size, analysis=dimuon, open_options={"cache": cache})
        opened = one_open_seconds(urls)
    finally:
        stop_cluster(made, client)
    for name, run in (("first run", first), ("second run, another processor", second)):
        r = run["report"]
        console.print(
            f"  {name}: {run['seconds']:.1f} s, {r.metadata_opened} files opened for metadata "
            f"({r.metadata_requests} requests), first chunk at {r.first_output_seconds:.2f} s"
        )
    console.print(f"  one file's open and tree: {opened:.2f} s")
    return {"first": first, "second": second, "one_open": opened}


def far_url(lab, name: str, rtt: float) -> str:
    """`name` over root:// through a proxy of its own, `rtt` ms away."""
    port = lab.toxiproxy.proxy("xrootd-far", lab.xrootd.port)
    lab.toxiproxy.set_rtt("xrootd-far", rtt)
    return lab.xrootd.url(name, port)


def faults(args, lab, urls, names, console) -> dict:
    made, client = cluster(args.fault_workers)
    out = {}
    try:
        forget_metadata()
        out["baseline"] = run_cherenkov(client, urls, args.step_size)
        far = list(urls)
        far[len(far) // 2] = far_url(lab, names[len(far) // 2], 10 * args.rtt)
        forget_metadata()
        out["far file"] = run_cherenkov(client, far, args.step_size)
        forget_metadata()
        killer = threading.Timer(0.4 * out["baseline"]["seconds"], kill_a_worker, args=(client, out))
        killer.start()
        out["far file, worker killed"] = run_cherenkov(client, far, args.step_size)
        killer.cancel()
    finally:
        stop_cluster(made, client)
    base = out["baseline"]["seconds"]
    for name, run in out.items():
        if not isinstance(run, dict) or "seconds" not in run:
            continue
        same = run["counts"] == out["baseline"]["counts"]
        r = run["report"]
        console.print(
            f"  {name}: {run['seconds']:.1f} s ({run['seconds'] / base:.2f}x), histograms {'identical' if same else 'DIFFER'}, "
            f"{len(r.lost_workers)} workers lost, {r.retries} retries, {r.copies} copies"
        )
    return out


def kill_a_worker(client, out: dict) -> None:
    pids = client.run(os.getpid)
    address, pid = sorted(pids.items())[0]
    os.kill(pid, signal.SIGKILL)
    out["killed"] = f"{address} (pid {pid})"


def local(args, folder, names, console) -> list[dict]:
    cores = os.cpu_count() or 1
    paths = [str(folder / n) for n in names[: args.local_files]]
    rows = []
    made, client = cluster(cores)
    try:
        for label, analysis in (("histograms (3 branches)", fill_histograms), ("dimuon mass (7 branches)", dimuon)):
            forget_metadata()
            run_cherenkov(client, paths[:4], args.step_size, analysis)  # warm the page cache and the workers
            forget_metadata()
            meter = CpuMeter(client, {})
            meter.start()
            run = run_cherenkov(client, paths, args.step_size, analysis)
            cpu = meter.stop()
            events = run["counts"]["events"]
            per_core = events / (cpu["workers"] + cpu["driver"])
            console.print(f"  {label}: {events / run['seconds']:,.0f} events/s on {cores} cores, {per_core:,.0f} per CPU second")
            rows.append({"analysis": label, "seconds": run["seconds"], "events": events, "per_cpu_second": per_core, "cpu": cpu})
    finally:
        stop_cluster(made, client)
    return rows


# ---- tables -------------------------------------------------------------------------------------


def scaling_table(rows: list[dict], args):
    from rich.table import Table

    table = Table(title=f"{args.files} files x {args.entries} entries over root:// at {args.rtt:g} ms, LocalCluster (processes)")
    for column in ("workers", "tool", "files", "seconds", "events/s", "x coffea", "CPU use", "workers' CPU s", "servers' CPU s", "MB read"):
        table.add_column(column, justify="left" if column == "tool" else "right")
    rate = {}
    for row in rows:
        rate.setdefault((row["tool"], row["workers"]), []).append(row["counts"]["events"] / row["seconds"])
    shown = set()
    for row in rows:
        key = (row["tool"], row["workers"])
        if key in shown:
            continue
        shown.add(key)
        events_per_s = median(rate[key])
        coffea = rate.get(("coffea", row["workers"]))
        ratio = f"{events_per_s / median(coffea):.1f}" if coffea and row["tool"] == "cherenkov" else ""
        report = row.get("report")
        cpu = row["cpu"]
        table.add_row(
            str(row["workers"]),
            row["tool"],
            str(row["files"]),
            f"{row['seconds']:.1f}",
            f"{events_per_s:,.0f}",
            ratio,
            f"{100 * cpu['use']:.0f} %",
            f"{cpu['workers']:.1f}",
            f"{cpu['servers']:.1f}",
            f"{report.total.bytes / 1e6:.0f}" if report else "",
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=40_000, help="entries of each generated NanoAOD-like file")
    parser.add_argument("--files", type=int, default=256, help="files in the dataset")
    parser.add_argument("--variants", type=int, default=4, help="distinct generated files the dataset copies")
    parser.add_argument("--workers", default="1,2,4,8,16", help="worker counts, comma-separated")
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip added by toxiproxy, ms")
    parser.add_argument("--step-size", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--coffea-files-per-worker", type=int, default=16, help="coffea reads at most this many files per worker")
    parser.add_argument("--no-coffea", dest="coffea", action="store_false")
    parser.add_argument("--second-workers", type=int, default=4)
    parser.add_argument("--fault-workers", type=int, default=8)
    parser.add_argument("--local-files", type=int, default=64)
    parser.add_argument("--scenarios", default="scaling,second,faults,local")
    parser.add_argument("--json", type=Path, default=BENCH / "results" / "process.json")
    args = parser.parse_args(argv)
    args.worker_counts = [int(w) for w in args.workers.split(",")]
    scenarios = set(args.scenarios.split(","))

    sys.path.insert(0, str(BENCH))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH")]))  # for the workers
    from cherenkov_lab import Lab
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 160)
    if args.coffea:
        try:
            import coffea.processor  # noqa: F401
        except ImportError:
            console.print("coffea is not importable: only cherenkov runs (pip install coffea)")
            args.coffea = False
    folder = dataset_folder(args.entries, args.files, args.variants, console.print)
    names = sorted(p.name for p in folder.glob("*.root"))[: args.files]
    results: dict = {"args": {k: v for k, v in vars(args).items() if k != "json"}}
    with Lab(folder) as lab:
        lab.set_rtt(args.rtt)
        urls = [lab.url("root", name) for name in names]
        console.print(f"{len(urls)} files of {args.entries} entries over root:// at {args.rtt:g} ms; {os.cpu_count()} cores")
        if "scaling" in scenarios:
            rows = scaling(args, lab, urls, console)
            reference = rows[0]["counts"]
            cherenkov_counts = {json.dumps(r["counts"]) for r in rows if r["tool"] == "cherenkov"}
            if len(cherenkov_counts) != 1:
                console.print("[red]cherenkov runs filled different histograms[/red]")
                return 1
            for r in rows:
                if r["tool"] == "coffea" and r["files"] == len(urls) and r["counts"] != reference:
                    console.print(f"[red]coffea with {r['workers']} workers filled different histograms[/red]")
                    return 1
            console.print(scaling_table(rows, args))
            widest = max((r for r in rows if r["tool"] == "cherenkov"), key=lambda r: r["workers"])
            console.print(f"cherenkov, {widest['workers']} workers:\n{widest['report'].summary()}")
            results["scaling"] = [{k: v for k, v in r.items() if k not in ("report", "counts")} for r in rows]
        if "second" in scenarios:
            console.print("second run over the same dataset (metadata in a disk cache):")
            second = second_run(args, lab, urls, console)
            results["second"] = {
                "one_open_seconds": second["one_open"],
                **{
                    name: {
                        "seconds": second[name]["seconds"],
                        "metadata_opened": second[name]["report"].metadata_opened,
                        "metadata_requests": second[name]["report"].metadata_requests,
                        "first_output_seconds": second[name]["report"].first_output_seconds,
                    }
                    for name in ("first", "second")
                },
            }
        if "faults" in scenarios:
            console.print(f"one file {10 * args.rtt:g} ms away, then also a worker killed, {args.fault_workers} workers:")
            out = faults(args, lab, urls, names, console)
            results["faults"] = {
                name: {"seconds": run["seconds"], "identical": run["counts"] == out["baseline"]["counts"]}
                for name, run in out.items()
                if isinstance(run, dict) and "seconds" in run
            }
            results["faults"]["killed"] = out.get("killed")
    if "local" in scenarios:
        console.print("local files, CPU-bound:")
        rows = local(args, folder, names, console)
        for row in rows:
            console.print(
                f"  {row['analysis']}: {row['per_cpu_second']:,.0f} events per CPU second "
                f"({row['per_cpu_second'] / CHALLENGE_HZ_PER_CORE:.0f}x the Challenge's 15 kHz per core)"
            )
        results["local"] = rows
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    console.print(f"results in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
