"""uproot, coffea and dask-awkward with and without cherenkov underneath, in the latency lab: the
one-line change (``handler=cherenkov.uproot.Source``) against each tool's defaults and against
its floor.

Over the lab's NanoAOD-like files served by xrootd behind toxiproxy (137 ms round trip by
default), in one run:

- uproot: ``uproot.open(url)["Events"].arrays(fixed)`` of the lab's fixed set (30 % of the
  branches by compressed volume, plus counters, as `local_read.py` chooses it) in the first
  file, with uproot's default source (fsspec-xrootd) and with the handler;
- coffea: a NanoAOD analysis in virtual mode (opposite-charge dimuon mass of the two leading
  muons, every jet's pT, with NanoAODSchema) over the files one after the other, with coffea's
  defaults and with ``uproot_options={"handler": cherenkov.uproot.Source}``. (Eager mode builds
  every cross-reference, which crawls on the generated files' resampled indices: the tests
  compare it on the real CMS sample);
- ``uproot.dask`` against ``cherenkov.dask`` (same columns, same partitions' size, threads);
- ``preprocess`` (not by default): coffea's ``preprocess`` of ``--preprocess-files`` names of the
  first file (links), with coffea's defaults, the handler, and the handler with the files opened
  ahead (`cherenkov.uproot.open_ahead`), against its 0 ms floor;
- ``graph`` (not by default): Dask graphs built (not computed) over 1 and ``--preprocess-files``
  files with ``cherenkov.dask``, ``uproot.dask`` with the handler and ``uproot.dask`` (``--graph-readers``
  picks them: uproot's open and parse every file in turn, minutes for 64): the form and
  ``necessary_columns`` are compared, the times of many files against one.

Each is also run on the local files (0 ms). The floor of a remote run is the same code on the
local files plus the round trips the protocol forces per file (XRootD login, open with the
speculative head/tail read, one vectored data read: 3). Every run starts as a new analysis would
(`cherenkov.uproot.forget_learned`): what one file teaches the next is inside each run. Times
are medians of ``--repeat`` runs; values and histograms are compared between all runs. The
round trips each file cost (uproot's ``chunks`` calls; cherenkov's round trips to the server,
with learning and with ``speculate=False``) are printed from a separate pass.

    python bench/coffea_bench.py                         # 3 files of 20 000 entries, 137 ms
    python bench/coffea_bench.py --files 2 --entries 5000 --rtt 50 --repeat 1 --parts uproot,coffea
"""

from __future__ import annotations

import argparse
import base64
import gzip
import statistics
import sys
import time
from pathlib import Path

import awkward as ak
import dask
import hist
import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import make_nanolike  # noqa: E402

FORCED_ROUND_TRIPS = 3  # per file: login, open (+ head/tail), one vectored data read
PREPROCESS_STEP = 5_000
DASK_COLUMNS = ["Muon_pt", "Muon_eta", "Muon_phi", "Muon_mass", "Muon_charge", "nMuon", "Jet_pt", "nJet"]


def nanoevents_columns(events):
    muons = events.Muon[ak.num(events.Muon) >= 2]
    first, second = muons[:, 0], muons[:, 1]
    return (first + second).mass[first.charge != second.charge], ak.flatten(events.Jet.pt)


def plain_columns(arr):
    """The same analysis on flat branches (for uproot.dask / cherenkov.dask without a schema)."""
    two = arr[arr.nMuon >= 2]
    pt, eta, phi, m, q = (two[f"Muon_{x}"] for x in ("pt", "eta", "phi", "mass", "charge"))
    px, py, pz = pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)
    e = np.sqrt(px**2 + py**2 + pz**2 + m**2)
    mass = np.sqrt(
        np.maximum((e[:, 0] + e[:, 1]) ** 2 - (px[:, 0] + px[:, 1]) ** 2 - (py[:, 0] + py[:, 1]) ** 2 - (pz[:, 0] + pz[:, 1]) ** 2, 0)
    )
    return mass[q[:, 0] != q[:, 1]], ak.flatten(arr.Jet_pt)


def histograms(mass, jet_pt):
    return (
        hist.Hist.new.Reg(60, 0, 300, name="mass").Double().fill(ak.to_numpy(mass)),
        hist.Hist.new.Reg(50, 0, 500, name="pt").Double().fill(ak.to_numpy(jet_pt)),
    )


def new_analysis():
    import cherenkov.dask_arrays
    import cherenkov.uproot

    cherenkov.uproot.forget_learned()
    cherenkov.dask_arrays._open_trees.clear()  # files a Dask graph opened are kept open


def coffea_run(urls, mode, uproot_options, ahead=False):
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    if ahead:
        import cherenkov.uproot

        cherenkov.uproot.open_ahead(urls)
    totals = None
    for url in urls:
        events = NanoEventsFactory.from_root({url: "Events"}, schemaclass=NanoAODSchema, mode=mode, uproot_options=uproot_options).events()
        hs = histograms(*nanoevents_columns(events))
        totals = hs if totals is None else tuple(a + b for a, b in zip(totals, hs))
    return totals


def uproot_run(url, names, options):
    import uproot

    with uproot.open(url, **options) as f:
        return f["Events"].arrays(names, library="ak")


def preprocess_run(urls, uproot_options, save_form, ahead=False):
    """coffea's `preprocess` of the files (steps of PREPROCESS_STEP entries, forms saved, as coffea
    does by default): the dataset's form, and per file its entries, steps and UUID."""
    from coffea.dataset_tools import preprocess

    fileset = {"dataset": {"files": {u: "Events" for u in urls}}}
    if ahead:
        import cherenkov.uproot

        cherenkov.uproot.open_ahead(fileset)
    available, _ = preprocess(fileset, step_size=PREPROCESS_STEP, save_form=save_form, uproot_options=uproot_options)
    files = available["dataset"]["files"]
    form = available["dataset"].get("compressed_form")
    form = form and gzip.decompress(base64.b64decode(form))  # gzip's header has the time
    return [form] + [(files[u]["num_entries"], files[u]["steps"], files[u]["uuid"]) for u in urls]


def preprocess_files(data: Path, source: Path, count: int) -> list[Path]:
    """`count` names of one file (symbolic links: preprocessing reads metadata only)."""
    folder = data / f"preprocess-{count}"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o755)
    links = [folder / f"file-{i:03}.root" for i in range(count)]
    for link in links:
        if not link.is_symlink():
            link.symlink_to(Path("..") / source.name)
    return links


def fixed_set(path) -> list[str]:
    import cherenkov
    from local_read import counters_of, selections

    return selections(cherenkov.open(path)["Events"], counters_of(path, "Events"))["30% by volume"]


def requests_per_file(urls, handler, run):
    """Per file: uproot's `chunks` calls, and the round trips cherenkov's source waited for
    (opening included; a large read split over parallel streams is one), while
    `run(url, options)` ran with the handler."""
    import cherenkov.uproot

    class Counting(cherenkov.uproot.Source):
        opened: list = []

        def __init__(self, file_path, **options):
            super().__init__(file_path, **options)
            Counting.opened.append(self)

    new_analysis()
    out = []
    for url in urls:
        Counting.opened.clear()
        run(url, {**handler, "handler": Counting})
        sources = [s for s in Counting.opened if s.file is not None]
        out.append((sum(s.num_requests for s in sources), sum(s.file.source_counters().round_trips for s in sources)))
    return out


def graph_run(make, urls, step_size, **options):
    """A Dask graph of the plain analysis over the files, built only: its form and the columns it
    needs (the same whatever the number of files)."""
    import dask_awkward as dak

    arr = make({u: "Events" for u in urls}, filter_name=DASK_COLUMNS, step_size=step_size, **options)
    mass, jet_pt = plain_columns(arr)
    return [arr.form.to_json(), sorted(next(iter(dak.necessary_columns(mass, jet_pt).values())))]


def dask_run(make, urls, step_size):
    arr = make({u: "Events" for u in urls}, filter_name=DASK_COLUMNS, step_size=step_size)
    mass, jet_pt = plain_columns(arr)
    return histograms(*dask.compute(mass, jet_pt, scheduler="threads"))


def timed_rounds(runs, repeat):
    """Each run's result and median time over `repeat` rounds; a round runs every configuration
    once, so a change of load on this shared machine hits them all alike."""
    times = {label: [] for label, _ in runs}
    results = {}
    for _ in range(repeat):
        for label, fn in runs:
            new_analysis()
            t0 = time.perf_counter()
            results[label] = fn()
            times[label].append(time.perf_counter() - t0)
            print(f"  {label}: {times[label][-1]:.2f} s", flush=True)
    return {label: (results[label], statistics.median(times[label])) for label, _ in runs}


def same(a, b) -> bool:
    if isinstance(a, ak.Array):
        return ak.array_equal(a, b, equal_nan=True)
    if isinstance(a, list):
        return a == b
    return all((x.values() == y.values()).all() for x, y in zip(a, b))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip in ms (toxiproxy)")
    parser.add_argument("--step-size", type=int, default=10_000, help="entries per Dask partition")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each configuration (median)")
    parser.add_argument("--parts", default="uproot,coffea,dask", help="which comparisons to run (and preprocess, graph)")
    parser.add_argument("--preprocess-files", type=int, default=64, help="files coffea's preprocess and the Dask graphs read")
    parser.add_argument(
        "--graph-readers",
        default="cherenkov,uproot+handler,uproot",
        help="whose graphs --parts graph builds (uproot's open every file in turn)",
    )
    parser.add_argument("--no-forms", action="store_true", help="preprocess without saving forms (coffea's default saves them)")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))

    import cherenkov
    import cherenkov.uproot
    import uproot
    from cherenkov_lab import Lab

    data = BENCH / "data"
    paths = [
        make_nanolike.ensure(data / f"coffea-nanolike-{args.entries}-{seed}.root", entries=args.entries, seed=seed)
        for seed in range(1, args.files + 1)
    ]
    data.chmod(0o755)
    for p in paths:
        p.chmod(0o644)
    handler = {"handler": cherenkov.uproot.Source}
    fixed = fixed_set(paths[0])
    forced = FORCED_ROUND_TRIPS * args.rtt / 1000
    with Lab(data) as lab:
        lab.set_rtt(args.rtt)
        urls = [lab.url("root", p.name) for p in paths]
        local = [str(p) for p in paths]
        print(f"{len(urls)} files, {args.entries} entries each, {args.rtt:g} ms round trip (root://)", flush=True)
        runs, compared, floors, requests = [], [], [], {}
        if "uproot" in parts:
            print(f"uproot: arrays() of {len(fixed)} branches (the fixed set) of {paths[0].name}")
            runs += [
                ("uproot arrays (default)", lambda: uproot_run(urls[0], fixed, {})),
                ("uproot arrays + handler", lambda: uproot_run(urls[0], fixed, handler)),
                ("uproot arrays (default), local", lambda: uproot_run(local[0], fixed, {})),
                ("uproot arrays + handler, local", lambda: uproot_run(local[0], fixed, handler)),
            ]
            compared += [
                ("uproot arrays: default / handler", "uproot arrays (default)", "uproot arrays + handler"),
                ("uproot arrays, 0 ms: handler / default", "uproot arrays + handler, local", "uproot arrays (default), local"),
            ]
            floors.append(("uproot arrays + handler", "uproot arrays + handler, local", forced))
            requests["uproot arrays"] = requests_per_file(urls[:1], {}, lambda u, o: uproot_run(u, fixed, o))
        if "coffea" in parts:
            runs += [
                ("coffea virtual (defaults)", lambda: coffea_run(urls, "virtual", {})),
                ("coffea virtual + handler", lambda: coffea_run(urls, "virtual", handler)),
                ("coffea virtual + handler, opened ahead", lambda: coffea_run(urls, "virtual", handler, ahead=True)),
                ("coffea virtual (defaults), local", lambda: coffea_run(local, "virtual", {})),
                ("coffea virtual + handler, local", lambda: coffea_run(local, "virtual", handler)),
            ]
            compared += [
                ("coffea virtual: defaults / handler", "coffea virtual (defaults)", "coffea virtual + handler"),
                ("coffea virtual: defaults / handler, opened ahead", "coffea virtual (defaults)", "coffea virtual + handler, opened ahead"),
                ("coffea virtual, 0 ms: handler / defaults", "coffea virtual + handler, local", "coffea virtual (defaults), local"),
            ]
            # coffea opens the files one after the other
            floors.append(("coffea virtual + handler", "coffea virtual + handler, local", len(urls) * forced))
            requests["coffea virtual"] = requests_per_file(urls, {}, lambda u, o: coffea_run([u], "virtual", o))
        if "preprocess" in parts:
            many = preprocess_files(data, paths[0], args.preprocess_files)
            many_urls = [lab.url("root", f"{p.parent.name}/{p.name}") for p in many]
            print(f"coffea preprocess: {len(many)} files (links to {paths[0].name})")
            local_many = [str(p) for p in many]
            forms = not args.no_forms
            runs += [
                ("preprocess (defaults)", lambda: preprocess_run(many_urls, {}, forms)),
                ("preprocess + handler", lambda: preprocess_run(many_urls, handler, forms)),
                ("preprocess + handler, opened ahead", lambda: preprocess_run(many_urls, handler, forms, ahead=True)),
                ("preprocess (defaults), local", lambda: preprocess_run(local_many, {}, forms)),
            ]
            compared += [
                ("preprocess: defaults / handler", "preprocess (defaults)", "preprocess + handler"),
                ("preprocess: defaults / handler, opened ahead", "preprocess (defaults)", "preprocess + handler, opened ahead"),
            ]
            # the files opened at once: one file's forced round trips
            floors.append(("preprocess + handler, opened ahead", "preprocess (defaults), local", forced))
        if "graph" in parts:
            many = preprocess_files(data, paths[0], args.preprocess_files)
            many_urls = [lab.url("root", f"{p.parent.name}/{p.name}") for p in many]
            n = len(many_urls)
            print(f"Dask graphs over 1 and {n} files (links to {paths[0].name})")
            readers = {
                "cherenkov": ("cherenkov.dask", cherenkov.dask, {}),
                "uproot+handler": ("uproot.dask + handler", uproot.dask, handler),
                "uproot": ("uproot.dask", uproot.dask, {}),
            }
            for label, make, options in (readers[r] for r in args.graph_readers.split(",")):
                runs += [
                    (f"graph {label}, 1 file", lambda make=make, o=options: graph_run(make, many_urls[:1], args.step_size, **o)),
                    (f"graph {label}, {n} files", lambda make=make, o=options: graph_run(make, many_urls, args.step_size, **o)),
                ]
                compared.append((f"graph {label}: {n} files / 1 file", f"graph {label}, {n} files", f"graph {label}, 1 file"))
        if "dask" in parts:
            runs += [
                ("uproot.dask", lambda: dask_run(uproot.dask, urls, args.step_size)),
                ("cherenkov.dask", lambda: dask_run(cherenkov.dask, urls, args.step_size)),
                ("cherenkov.dask, local", lambda: dask_run(cherenkov.dask, local, args.step_size)),
            ]
            compared.append(("uproot.dask / cherenkov.dask", "uproot.dask", "cherenkov.dask"))
            # cherenkov.dask opens the files together
            floors.append(("cherenkov.dask", "cherenkov.dask, local", forced))
        for label, per_file in requests.items():
            speculate = {"speculate": False}
            run = (lambda u, o: uproot_run(u, fixed, o)) if label.startswith("uproot") else (lambda u, o: coffea_run([u], "virtual", o))
            plain = requests_per_file(urls[: len(per_file)], speculate, run)
            requests[label] = (per_file, plain)
        results = timed_rounds(runs, args.repeat)
    for group in ("uproot arrays", "coffea virtual", "preprocess", "graph", "dask"):
        labels = [label for label in results if label.startswith(group) or (group == "dask" and "dask" in label and "graph" not in label)]
        for label in labels[1:]:
            if not same(results[label][0], results[labels[0]][0]):
                print(f"VALUES DIFFER: {label} and {labels[0]}", file=sys.stderr)
                return 1

    def t(label):
        return results[label][1]

    print("\nvalues identical in every run\n")
    print(f"| {'comparison':50} | ratio |")
    print(f"|{'-' * 52}|-------|")
    for label, a, b in compared:
        print(f"| {label:50} | {t(a) / t(b):5.2f} |")
    print(f"\n| {'remote run':34} | time (s) | floor (s) = 0 ms + forced round trips | / floor |")
    print(f"|{'-' * 36}|----------|{'-' * 39}|---------|")
    for label, local_label, trips in floors:
        floor = t(local_label) + trips
        explained = f"{t(local_label):.2f} + {trips:.2f}"
        print(f"| {label:34} | {t(label):8.2f} | {floor:6.2f} = {explained:28} | {t(label) / floor:7.2f} |")
    if requests:
        print("\nper file through the handler: uproot's chunks calls: cherenkov's round trips to the server")
        for label, (learning, plain) in requests.items():
            show = lambda counts: ", ".join(f"{a}: {b}" for a, b in counts)  # noqa: E731
            print(f"  {label}: learning {show(learning)}; speculate=False {show(plain)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
