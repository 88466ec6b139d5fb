"""uproot, coffea and dask-awkward with and without cherenkov underneath, in the latency lab.

The same coffea NanoAOD analysis (opposite-charge dimuon mass of the two leading muons, every
jet's pT, with NanoAODSchema) over the lab's NanoAOD-like files served by xrootd behind
toxiproxy (137 ms round trip by default), in one run:

- coffea's defaults (virtual mode, uproot's own XRootD source through fsspec-xrootd), then the
  same with ``uproot_options={"handler": cherenkov.uproot.Source}``, then with the tree-aware
  handler (``"tree_aware": True``). (Eager mode builds every cross-reference, which crawls on
  the generated files' resampled indices: the tests compare it on the real CMS sample);
- ``uproot.dask`` against ``cherenkov.dask`` (same columns, same partitions' size, threads).

Each is also run on the local files: a remote run cannot beat its local time plus the round
trips the protocol forces per file (XRootD login, open with the speculative head/tail read, one
vectored data read: 3), so the table gives each remote time against that floor as well as the
ratios. Times are medians of ``--repeat`` runs; histograms are compared between all runs.

    python bench/coffea_bench.py                         # 3 files of 20 000 entries, 137 ms
    python bench/coffea_bench.py --files 2 --entries 5000 --rtt 50 --repeat 1
"""

from __future__ import annotations

import argparse
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


def coffea_run(urls, mode, uproot_options):
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory

    totals = None
    for url in urls:
        events = NanoEventsFactory.from_root({url: "Events"}, schemaclass=NanoAODSchema, mode=mode, uproot_options=uproot_options).events()
        hs = histograms(*nanoevents_columns(events))
        totals = hs if totals is None else tuple(a + b for a, b in zip(totals, hs))
    return totals


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
            t0 = time.perf_counter()
            results[label] = fn()
            times[label].append(time.perf_counter() - t0)
            print(f"  {label}: {times[label][-1]:.2f} s", flush=True)
    return {label: (results[label], statistics.median(times[label])) for label, _ in runs}


def same(a, b) -> bool:
    return all((x.values() == y.values()).all() for x, y in zip(a, b))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip in ms (toxiproxy)")
    parser.add_argument("--step-size", type=int, default=10_000, help="entries per Dask partition")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each configuration (median)")
    args = parser.parse_args(argv)

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
    rows = []
    with Lab(data) as lab:
        lab.set_rtt(args.rtt)
        urls = [lab.url("root", p.name) for p in paths]
        local = [str(p) for p in paths]
        print(f"{len(urls)} files, {args.entries} entries each, {args.rtt:g} ms round trip (root://)", flush=True)
        runs = [
            ("coffea virtual (defaults)", lambda: coffea_run(urls, "virtual", {})),
            ("coffea virtual + handler", lambda: coffea_run(urls, "virtual", handler)),
            ("coffea virtual + tree-aware handler", lambda: coffea_run(urls, "virtual", {**handler, "tree_aware": True})),
            ("coffea virtual, local files", lambda: coffea_run(local, "virtual", {})),
            ("uproot.dask", lambda: dask_run(uproot.dask, urls, args.step_size)),
            ("cherenkov.dask", lambda: dask_run(cherenkov.dask, urls, args.step_size)),
            ("cherenkov.dask, local files", lambda: dask_run(cherenkov.dask, local, args.step_size)),
        ]
        results = timed_rounds(runs, args.repeat)
    coffea_ref = results["coffea virtual (defaults)"][0]
    dask_ref = results["uproot.dask"][0]
    for label, (hs, _) in results.items():
        ref = dask_ref if "dask" in label else coffea_ref
        if not same(hs, ref):
            print(f"VALUES DIFFER: {label}", file=sys.stderr)
            return 1
    # The two analyses use different mass formulas (coffea's vectors vs plain numpy); jets agree.
    assert same(dask_ref[1:], coffea_ref[1:]), "jet pT differs between the coffea and the Dask runs"

    def ratio(a, b):
        return results[a][1] / results[b][1]

    # coffea opens the files one after the other; cherenkov.dask opens them together
    forced = FORCED_ROUND_TRIPS * args.rtt / 1000
    floors = {
        "coffea virtual + tree-aware handler": results["coffea virtual, local files"][1] + len(urls) * forced,
        "cherenkov.dask": results["cherenkov.dask, local files"][1] + forced,
    }
    rows = [
        ("coffea virtual: defaults / handler", ratio("coffea virtual (defaults)", "coffea virtual + handler")),
        ("coffea virtual: defaults / tree-aware handler", ratio("coffea virtual (defaults)", "coffea virtual + tree-aware handler")),
        ("uproot.dask / cherenkov.dask", ratio("uproot.dask", "cherenkov.dask")),
    ]
    print("\nvalues identical in every run\n")
    print(f"| {'comparison':48} | times faster |")
    print(f"|{'-' * 50}|--------------|")
    for label, r in rows:
        print(f"| {label:48} | {r:12.1f} |")
    print(f"\n| {'remote run':36} | time (s) | floor (s) = local + forced round trips | / floor |")
    print(f"|{'-' * 38}|----------|{'-' * 40}|---------|")
    for label, floor in floors.items():
        local_label = "coffea virtual, local files" if "coffea" in label else "cherenkov.dask, local files"
        trips = floor - results[local_label][1]
        explained = f"{results[local_label][1]:.2f} + {trips:.2f}"
        print(f"| {label:36} | {results[label][1]:8.2f} | {floor:6.2f} = {explained:29} | {results[label][1] / floor:7.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
