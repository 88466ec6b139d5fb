"""Staging a dataset from far away: `cherenkov.stage` against `xrdcp`, on a capped link.

The lab serves ``--files`` copies (hard links) of a NanoAOD-like file of ``--entries`` entries
over root:// behind toxiproxy (``--rtt`` ms) and one shared link of ``--rate`` MB/s for every
connection (the lab's "thin" link: more streams carry no more). In ``--repeat`` interleaved
rounds, each tool copies every file into an empty directory:

- ``cherenkov.stage(urls, dir)`` (several files at once, reads in flight, adler32 verified);
- ``xrdcp`` of all the files in one command, one after the other (what users do);
- ``xrdcp --parallel 4``.

The floor is the bytes over the link's rate plus the round trips a copy cannot avoid (login,
open, first read: 3). Then an interrupted stage: a child process staging the files is killed
once about half the bytes are there, and the stage run again reports what it copied (what was
complete or partly copied is not read again). Every staged file is compared byte for byte with
its original, and one is read by cherenkov.

    python bench/stage_bench.py [--files 16] [--entries 100000] [--rtt 137] [--rate 100] [--repeat 2]
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "lab"))

import make_nanolike  # noqa: E402

FORCED_ROUND_TRIPS = 3  # login, open, first read
CHILD = """
import sys, cherenkov
cherenkov.stage(sys.argv[2:], sys.argv[1], progress=False)
"""


def dataset(files: int, entries: int) -> Path:
    """`files` hard links to one generated file, in a folder of their own."""
    source = make_nanolike.ensure(BENCH / "data" / f"nanolike-{entries}.root", entries=entries)
    folder = BENCH / "data" / f"stage-{entries}-{files}"
    folder.mkdir(exist_ok=True)
    for i in range(files):
        link = folder / f"file-{i:03d}.root"
        if not link.exists():
            os.link(source, link)
    folder.chmod(0o755)
    return folder


def staged_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file()) if directory.exists() else 0


def run_cherenkov(urls: list[str], target: Path) -> float:
    import cherenkov

    t0 = time.perf_counter()
    staged = cherenkov.stage(urls, target, progress=False)
    seconds = time.perf_counter() - t0
    unverified = [s.path for s in staged if s.verified not in ("adler32", "size")]
    if unverified:
        raise SystemExit(f"not verified: {unverified}")
    return seconds


def run_xrdcp(urls: list[str], target: Path, parallel: int) -> float:
    target.mkdir()
    command = ["xrdcp", "--silent", "--force", *(["--parallel", str(parallel)] if parallel > 1 else []), *urls, f"{target}/"]
    t0 = time.perf_counter()
    subprocess.run(command, check=True, timeout=1800)
    return time.perf_counter() - t0


def interrupted(urls: list[str], target: Path, total: int) -> tuple[int, int, float]:
    """A stage killed at about half the bytes, then run again: (bytes there when killed, bytes the
    second run copied, its seconds)."""
    import cherenkov

    child = subprocess.Popen([sys.executable, "-c", CHILD, str(target), *urls])
    deadline = time.monotonic() + 600
    try:
        while staged_bytes(target) < total // 2:
            if child.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the stage to interrupt ended before half the bytes (or took too long)")
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    there = staged_bytes(target)
    t0 = time.perf_counter()
    staged = cherenkov.stage(urls, target, progress=False)
    return there, sum(s.copied for s in staged), time.perf_counter() - t0


def check(originals: list[Path], target: Path) -> None:
    import cherenkov

    for original in originals:
        if not filecmp.cmp(original, target / original.name, shallow=False):
            raise SystemExit(f"{original.name}: the staged copy differs from the original")
    first = target / originals[0].name
    a = cherenkov.open(first)["Events"].arrays(["Jet_pt"], library="np")["Jet_pt"]
    b = cherenkov.open(originals[0])["Events"].arrays(["Jet_pt"], library="np")["Jet_pt"]
    if not (a.content == b.content).all():
        raise SystemExit(f"{first}: values differ from the original's")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rtt", type=float, default=137.0, help="round trip in ms")
    parser.add_argument("--rate", type=float, default=100.0, help="the link's MB/s, for all connections together")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--tools", default="cherenkov,xrdcp,xrdcp-parallel")
    args = parser.parse_args(argv)
    from cherenkov_lab import Lab

    folder = dataset(args.files, args.entries)
    originals = sorted(folder.glob("*.root"))
    total = sum(p.stat().st_size for p in originals)
    floor = total / (args.rate * 1e6) + FORCED_ROUND_TRIPS * args.rtt / 1000
    runs = {
        "cherenkov": run_cherenkov,
        "xrdcp": lambda urls, target: run_xrdcp(urls, target, 1),
        "xrdcp-parallel": lambda urls, target: run_xrdcp(urls, target, 4),
    }
    tools = args.tools.split(",")
    times: dict[str, list[float]] = {t: [] for t in tools}
    print(f"{len(originals)} files, {total / 1e9:.2f} GB, root:// at {args.rtt:g} ms, one link of {args.rate:g} MB/s")
    with Lab(folder.parent, link="thin", rate=args.rate) as lab, tempfile.TemporaryDirectory(prefix="cherenkov-stage-bench-") as work:
        lab.set_rtt(args.rtt)
        urls = [lab.url("root", f"{folder.name}/{p.name}") for p in originals]
        for r in range(args.repeat):
            for tool in tools:
                target = Path(work) / tool
                times[tool].append(runs[tool](urls, target))
                if r == 0:
                    check(originals, target)
                shutil.rmtree(target)
                print(f"  {tool}: {times[tool][-1]:.2f} s")
        there, copied, seconds = interrupted(urls, Path(work) / "interrupted", total)
        check(originals, Path(work) / "interrupted")
    print(f"\nfloor: {total / 1e6:.0f} MB / {args.rate:g} MB/s + {FORCED_ROUND_TRIPS} round trips = {floor:.2f} s")
    print("| tool | time (s) | MB/s | / floor |")
    print("|---|---:|---:|---:|")
    for tool in tools:
        t = statistics.median(times[tool])
        print(f"| {tool} | {t:.2f} | {total / 1e6 / t:.0f} | {t / floor:.2f} |")
    print(
        f"\ninterrupted at {there / 1e6:.0f} MB of {total / 1e6:.0f} MB; run again: copied {copied / 1e6:.0f} MB "
        f"({(total - copied) / 1e6:.0f} MB not read again) in {seconds:.2f} s"
    )
    print("every staged file equal to its original, byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
