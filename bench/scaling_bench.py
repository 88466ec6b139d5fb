"""Do more workers mean more speed? `cherenkov.process` with 1, 2 and 4 workers in this process,
in local processes and on a Dask `LocalCluster` (processes), over the lab's NanoAOD-like files
served by xrootd behind toxiproxy (137 ms round trip): I/O-bound work, where throughput should
grow with workers even on few cores.

    python bench/scaling_bench.py                       # 32 files of 10 000 entries, 1,2,4 workers
    python bench/scaling_bench.py --files 64 --repeat 3 --executors processes,dask

First the driver's own cost: CPU seconds to hand out every packet of 250 to 2000 files (no
server: planning alone). Each run is a first run over the dataset (the driver's memory of metadata
emptied). The Dask cluster exists before its runs, as at a facility. Local processes are kept
between calls: a 2-file call that starts them and one that takes them up are timed first, then
every timed run takes them up, as a user's successive `executor="processes"` calls do. Printed:
medians of `--repeat` interleaved runs, the speed-up against 1 worker of the same executor and
against in-process, where the time went (until every file was known, the first chunk, workers'
busy and idle time), what was read, and the machine's load average (the cores are shared).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from statistics import median

BENCH = Path(__file__).resolve().parent


def run_once(executor, workers: int, urls: list[str], step_size: int) -> dict:
    from process_bench import forget_metadata, run_cherenkov

    forget_metadata()
    load0 = os.getloadavg()[0]
    cpu0 = time.process_time()
    run = run_cherenkov(executor, urls, step_size, workers=workers)
    seconds, report = run["seconds"], run["report"]
    total = report.total
    return {
        "seconds": seconds,
        "events": report.entries,
        "counts": run["counts"],
        "known_seconds": report.open_seconds,
        "first_output_seconds": report.first_output_seconds,
        "busy_seconds": total.wall_seconds,
        "idle_seconds": total.idle_seconds,
        "worker_cpu_seconds": total.cpu_seconds,
        "driver_cpu_seconds": time.process_time() - cpu0,
        "packets": report.packets,
        "bytes": total.bytes,
        "requests": total.requests,
        "metadata_requests": report.metadata_requests,
        "files_opened_by_workers": total.files_opened,
        "metadata_reads_by_workers": total.metadata_reads,
        "load": (load0 + os.getloadavg()[0]) / 2,
        "summary": report.summary(),
    }


def measure(args, urls, console, startup: list) -> list[dict]:
    """Every (executor, workers) `--repeat` times, interleaved so that the machine's load is shared."""
    from cherenkov.processing import close_workers
    from distributed import Client, LocalCluster

    clusters = {}
    plan = []
    for kind in args.executors:
        for workers in [1] if kind == "in-process" else args.worker_counts:
            plan.append((kind, workers))
    rows = []
    try:
        for kind, workers in plan:
            if kind == "dask":
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
                clusters[workers] = (cluster, Client(cluster))
                clusters[workers][1].wait_for_workers(workers)
                run_once(clusters[workers][1], workers, urls[:2], args.step_size)  # imports done on the workers
            elif kind == "processes":
                # The first call starts the processes, the next ones take them up (kept between calls).
                close_workers()
                cold = run_once(kind, workers, urls[:2], args.step_size)["seconds"]
                kept = run_once(kind, workers, urls[:2], args.step_size)["seconds"]
                console.print(f"  processes, {workers} workers, 2 files: {cold:.2f} s starting them, {kept:.2f} s with them kept")
                startup.append({"workers": workers, "cold_seconds": cold, "kept_seconds": kept})
        for repeat in range(args.repeat):
            for kind, workers in plan:
                executor = clusters[workers][1] if kind == "dask" else kind
                row = run_once(executor, workers, urls, args.step_size)
                row.update(executor=kind, workers=workers, repeat=repeat)
                rows.append(row)
                console.print(
                    f"  {kind}, {workers} workers: {row['seconds']:.2f} s, {row['events'] / row['seconds']:,.0f} events/s, "
                    f"files known at {row['known_seconds']:.2f} s, load {row['load']:.1f}"
                )
    finally:
        for cluster, client in clusters.values():
            client.close()
            cluster.close()
    return rows


def driver_cost(file_counts: list[int], workers: int = 8) -> list[dict]:
    """The driver's CPU time to hand out every packet of `files` files (4 clusters each) to
    `workers` simulated workers that finish at once: what planning costs with thousands of files,
    no server involved (CPU seconds, so the machine's load matters little)."""
    from cherenkov.processing.dataset import FileSpec
    from cherenkov.processing.metadata import FileMeta
    from cherenkov.processing.packets import FileInfo, Packetizer

    rows = []
    names = [f"w{i}" for i in range(workers)]
    for files in file_counts:
        packetizer = Packetizer()
        for i in range(files):
            meta = FileMeta(40_000, [0, 10_000, 20_000, 30_000, 40_000], 50_000_000, 0.5)
            packetizer.add_file(FileInfo(FileSpec("d", (f"root://far//f{i}.root",), "Events"), i, i, meta, meta.chunks(10_000)))
        held: dict[str, list] = {w: [] for w in names}
        cpu0, packets = time.process_time(), 0
        while not packetizer.exhausted() or any(held.values()):
            for w in names:
                while len(held[w]) < packetizer.holds(w, held[w], workers):
                    packet = packetizer.next_packet(w, names, held[w])
                    if packet is None:
                        break
                    held[w].append(packet)
            for w in names:
                if held[w]:
                    packets += 1
                    packetizer.completed(w, held[w].pop(0), 0.5, {"trained": True} if packets == 1 else None)
        cpu = time.process_time() - cpu0
        rows.append({"files": files, "packets": packets, "cpu_seconds": cpu, "ms_per_packet": 1e3 * cpu / packets})
    return rows


def table(rows: list[dict], args):
    from rich.table import Table

    out = Table(title=f"{args.files} files x {args.entries} entries over root:// at {args.rtt:g} ms, medians of {args.repeat}")
    columns = ["executor", "workers", "seconds", "events/s", "x 1 worker", "x in-process", "files known s", "first chunk s"]
    columns += ["busy s", "idle s", "workers' CPU s", "driver CPU s", "MB", "requests", "worker opens (metadata)", "load"]
    for column in columns:
        out.add_column(column, justify="left" if column == "executor" else "right")
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["executor"], row["workers"]), []).append(row)
    rate = {key: median(r["events"] / r["seconds"] for r in group) for key, group in groups.items()}
    ratios = {}
    for (kind, workers), group in groups.items():

        def m(key: str, group=group) -> float:
            return median(r[key] for r in group)

        one = rate.get((kind, 1))
        inproc = rate.get(("in-process", 1))
        ratios[f"{kind} {workers}"] = {"x 1 worker": rate[(kind, workers)] / one if one else None}
        out.add_row(
            kind,
            str(workers),
            f"{m('seconds'):.2f}",
            f"{rate[(kind, workers)]:,.0f}",
            f"{rate[(kind, workers)] / one:.2f}" if one else "",
            f"{rate[(kind, workers)] / inproc:.2f}" if inproc else "",
            f"{m('known_seconds'):.2f}",
            f"{m('first_output_seconds'):.2f}",
            f"{m('busy_seconds'):.1f}",
            f"{m('idle_seconds'):.1f}",
            f"{m('worker_cpu_seconds'):.1f}",
            f"{m('driver_cpu_seconds'):.1f}",
            f"{m('bytes') / 1e6:.0f}",
            f"{m('requests'):.0f}",
            f"{m('files_opened_by_workers'):.0f} ({m('metadata_reads_by_workers'):.0f})",
            f"{m('load'):.1f}",
        )
    return out, ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=32)
    parser.add_argument("--entries", type=int, default=10_000, help="entries of each generated NanoAOD-like file")
    parser.add_argument("--variants", type=int, default=2, help="distinct generated files the dataset copies")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--executors", default="in-process,processes,dask")
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip added by toxiproxy, ms")
    parser.add_argument("--step-size", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--driver-files", default="250,500,1000,2000", help="file counts of the driver's planning cost")
    parser.add_argument("--json", type=Path, default=BENCH / "results" / "scaling.json")
    args = parser.parse_args(argv)
    args.worker_counts = [int(w) for w in args.workers.split(",")]
    args.executors = args.executors.split(",")

    sys.path.insert(0, str(BENCH))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH")]))  # for the workers
    from cherenkov_lab import Lab
    from process_bench import dataset_folder
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 200)
    planning = driver_cost([int(n) for n in args.driver_files.split(",") if n])
    for row in planning:
        console.print(
            f"driver, {row['files']} files: {row['packets']} packets handed out in {row['cpu_seconds']:.2f} CPU s "
            f"({row['ms_per_packet']:.2f} ms each)"
        )
    folder = dataset_folder(args.entries, args.files, args.variants, console.print)
    names = sorted(p.name for p in folder.glob("*.root"))[: args.files]
    with Lab(folder) as lab:
        lab.set_rtt(args.rtt)
        urls = [lab.url("root", name) for name in names]
        console.print(f"{len(urls)} files over root:// at {args.rtt:g} ms; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        startup: list[dict] = []
        rows = measure(args, urls, console, startup)
    if len({json.dumps(r["counts"]) for r in rows}) != 1:
        console.print("[red]the runs filled different histograms[/red]")
        return 1
    shown, ratios = table(rows, args)
    console.print(shown)
    widest = max(rows, key=lambda r: (r["executor"] == "dask", r["workers"]))
    console.print(f"{widest['executor']}, {widest['workers']} workers (last run):\n{widest['summary']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    kept = [{k: v for k, v in r.items() if k not in ("counts", "summary")} for r in rows]
    args.json.write_text(
        json.dumps(
            {"args": {k: str(v) for k, v in vars(args).items()}, "ratios": ratios, "runs": kept, "driver": planning, "startup": startup},
            indent=1,
        )
        + "\n"
    )
    console.print(f"results in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
