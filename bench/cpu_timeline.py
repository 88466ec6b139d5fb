"""The cores a command keeps busy over time: runs it, samples its threads' CPU (from /proc) every
`--every` seconds, and prints per slice of `--slice` seconds the cores used in all and by thread
group (threads named alike: cherenkov-zip-0 and -1 are "cherenkov-zip") and the cores its runnable
threads want ("wanted": threads running or waiting for a core, at most the cores), then the
idle-core seconds (cores × wall − CPU). Where a merge leaves a core idle shows here: its start,
between outputs. On a loaded machine the idle cores are the other processes'; "wanted" still shows
the cores the command could not use (its threads sleeping, waiting for each other).

    .venv/bin/python bench/cpu_timeline.py [--every 0.05] [--slice 0.25] -- COMMAND...
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

TICK = os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> dict[int, tuple[str, float, bool]]:
    """Each thread of `pid` and of its descendants: its name, CPU seconds and whether it is
    runnable (running or waiting for a core)."""
    found = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children = [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / TICK, fields[0] == "R")
        for child in children:
            found.update(threads(child))
    return found


def group(name: str) -> str:
    return re.sub(r"[-_ ]?\d+$", "", name) or name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=float, default=0.05)
    parser.add_argument("--slice", type=float, default=0.25)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    child = subprocess.Popen(args.command, stdout=subprocess.DEVNULL)
    cores = os.cpu_count() or 1
    seen: dict[int, tuple[str, float, bool]] = {}
    slices: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    # Per slice: samples, and the cores the runnable threads would keep busy on an idle machine.
    wanted: dict[int, list[float]] = defaultdict(lambda: [0, 0.0])
    while child.poll() is None:
        time.sleep(args.every)
        now = threads(child.pid)
        k = int((time.perf_counter() - started) / args.slice)
        for tid, (name, cpu, _) in now.items():
            before = seen.get(tid, (name, 0.0, False))[1]
            slices[k][group(name)] += cpu - before
        wanted[k][0] += 1
        wanted[k][1] += min(cores, sum(runnable for _, _, runnable in now.values()))
        seen.update(now)
    wall = time.perf_counter() - started
    groups = sorted({g for s in slices.values() for g in s}, key=lambda g: -sum(s.get(g, 0) for s in slices.values()))
    print(f"{'t (s)':>6} {'cores':>5} {'wanted':>6}  " + " ".join(f"{g[:14]:>14}" for g in groups))
    for k in range(max(slices) + 1 if slices else 0):
        s = slices.get(k, {})
        cells = " ".join(f"{s.get(g, 0) / args.slice:>14.2f}" for g in groups)
        n, busy = wanted.get(k, [0, 0.0])
        print(f"{k * args.slice:>6.2f} {sum(s.values()) / args.slice:>5.2f} {busy / max(n, 1):>6.2f}  {cells}")
    cpu = sum(sum(s.values()) for s in slices.values())
    samples = sum(n for n, _ in wanted.values())
    short = sum(cores * n - busy for n, busy in wanted.values()) / max(samples, 1)
    print(f"wall {wall:.2f} s, CPU {cpu:.2f} s (sampled; threads ending between samples are missed), idle cores {cores * wall - cpu:.2f} s")
    print(f"runnable threads short of the {cores} cores: {short:.2f} on average, {short * wall:.2f} core-seconds")
    print("(the idle an unloaded machine would show)")
    totals = {g: sum(s.get(g, 0) for s in slices.values()) for g in groups}
    print("by thread group: " + ", ".join(f"{g} {c:.2f} s" for g, c in totals.items()))
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
