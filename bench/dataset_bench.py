"""Many files in one process: cherenkov.iterate over N copies of the NanoAOD-like file, against
uproot.iterate over the same URLs, locally and behind the lab's round-trip delay.

    .venv/bin/python bench/dataset_bench.py [--rtt 137] [--files 8] [--protocol http|root] [--every 3] [--repeat 3]

Prints the median time of each reader over `--repeat` interleaved runs, the ratio to its local
time, cherenkov's goal from issue 20 (local time plus one round trip, for the first file only, times
1.3) and the floor: local time plus the round trips the first file cannot avoid (open, keys list,
first data; XRootD's login). `files_ahead=0` is cherenkov with one file after another, to show what
opening ahead is worth. Values are checked equal (entry count and a checksum of the first branch)
between every run."""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import awkward as ak
import cherenkov
from cherenkov_lab import Lab

SHARED = Path(__file__).resolve().parents[2] / "shared" / "testdata"
NANO = "nanolike-root6.40-zstd-4clusters.root"
FLOOR_ROUND_TRIPS = {"http": 3, "root": 4}


def copies(folder: Path, n: int) -> list[str]:
    folder.chmod(0o755)  # xrootd runs as nobody
    names = []
    for k in range(n):
        shutil.copyfile(SHARED / NANO, folder / f"nano-{k}.root")
        (folder / f"nano-{k}.root").chmod(0o644)
        names.append(f"nano-{k}.root")
    return names


def run(read) -> tuple[float, tuple]:
    t0 = time.perf_counter()
    entries, check = 0, 0.0
    for arrays in read():
        entries += len(arrays)
        check += float(ak.sum(arrays[arrays.fields[0]]))
    return time.perf_counter() - t0, (entries, round(check, 3))


def medians(readers: dict, repeat: int) -> dict:
    """Each reader's median time over `repeat` rounds (the readers take turns within a round), and
    its values, which must be the same in every round."""
    runs = {name: [] for name in readers}
    for _ in range(repeat):
        for name, read in readers.items():
            runs[name].append(run(read))
    out = {}
    for name, results in runs.items():
        assert len({values for _, values in results}) == 1, f"{name} read different values: {results}"
        out[name] = (statistics.median(t for t, _ in results), results[0][1])
    return out


def readers(urls: list[str], names: list[str], step: int) -> dict:
    import uproot

    return {
        "cherenkov.iterate": lambda: cherenkov.iterate([f"{u}:Events" for u in urls], names, step_size=step),
        "cherenkov, files_ahead=0": lambda: cherenkov.iterate([f"{u}:Events" for u in urls], names, step_size=step, files_ahead=0),
        "uproot.iterate": lambda: uproot.iterate({u: "Events" for u in urls}, names, step_size=step, library="ak"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtt", type=float, default=137, help="round-trip delay in ms (default 137)")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--protocol", choices=["http", "root"], default="http")
    parser.add_argument("--every", type=int, default=3, help="read every Nth readable branch (default 3)")
    parser.add_argument("--step", type=int, default=500, help="step_size in entries (default 500: one cluster)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of each reader; medians are shown (default 3)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="cherenkov-dataset-bench-") as tmp:
        folder = Path(tmp)
        files = copies(folder, args.files)
        tree = cherenkov.open(folder / files[0])["Events"]
        names = [b.path for b in tree.branches if b.readable and b.name == b.path][:: args.every]
        print(f"{args.files} files of {NANO}, {len(names)} branches, step_size {args.step}, {args.protocol}:// at {args.rtt:g} ms")
        local = medians(readers([str(folder / f) for f in files], names, args.step), args.repeat)
        with Lab(folder) as lab:
            lab.set_rtt(args.rtt)
            urls = [lab.url(args.protocol, f) for f in files]
            remote = medians(readers(urls, names, args.step), args.repeat)
    values = {result for _, result in list(local.values()) + list(remote.values())}
    assert len(values) == 1, f"readers disagree: {local} {remote}"
    print(f"{'reader':28} {'local s':>8} {'remote s':>9} {'remote/local':>13}")
    for name in local:
        print(f"{name:28} {local[name][0]:8.2f} {remote[name][0]:9.2f} {remote[name][0] / local[name][0]:13.2f}")
    ours, peer = remote["cherenkov.iterate"][0], remote["uproot.iterate"][0]
    goal = 1.3 * (local["cherenkov.iterate"][0] + args.rtt / 1000)
    print(f"cherenkov.iterate remote / goal 1.3 x (local + 1 RTT) = {goal:.2f} s: {ours / goal:.2f}x")
    # The first file's round trips that no reader avoids: its header and tail, then its keys list (this
    # file's sits outside the tail), then its first baskets; XRootD logs in first.
    trips = FLOOR_ROUND_TRIPS[args.protocol]
    floor = local["cherenkov.iterate"][0] + trips * args.rtt / 1000
    print(f"cherenkov.iterate remote / floor (local + {trips} RTT) = {floor:.2f} s: {ours / floor:.2f}x")
    print(f"cherenkov.iterate remote / uproot.iterate remote: {ours / peer:.2f}x")


if __name__ == "__main__":
    main()
