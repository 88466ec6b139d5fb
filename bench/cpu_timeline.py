"""The cores a command keeps busy over time: runs it, samples its threads' CPU (from /proc) every
`--every` seconds, and prints per slice of `--slice` seconds the cores used in all and by thread
group (threads named alike: cherenkov-zip-0 and -1 are "cherenkov-zip"), then the idle-core seconds
(cores × wall − CPU). Where a merge leaves a core idle shows here: its start, between outputs.

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


def threads(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of `pid` and of its descendants: its name and CPU seconds."""
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
        found[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
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
    seen: dict[int, tuple[str, float]] = {}
    slices: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    while child.poll() is None:
        time.sleep(args.every)
        now = threads(child.pid)
        k = int((time.perf_counter() - started) / args.slice)
        for tid, (name, cpu) in now.items():
            before = seen.get(tid, (name, 0.0))[1]
            slices[k][group(name)] += cpu - before
        seen.update(now)
    wall = time.perf_counter() - started
    groups = sorted({g for s in slices.values() for g in s}, key=lambda g: -sum(s.get(g, 0) for s in slices.values()))
    print(f"{'t (s)':>6} {'cores':>5}  " + " ".join(f"{g[:14]:>14}" for g in groups))
    for k in range(max(slices) + 1 if slices else 0):
        s = slices.get(k, {})
        cells = " ".join(f"{s.get(g, 0) / args.slice:>14.2f}" for g in groups)
        print(f"{k * args.slice:>6.2f} {sum(s.values()) / args.slice:>5.2f}  {cells}")
    cpu = sum(sum(s.values()) for s in slices.values())
    cores = os.cpu_count() or 1
    print(f"wall {wall:.2f} s, CPU {cpu:.2f} s (sampled; threads ending between samples are missed), idle cores {cores * wall - cpu:.2f} s")
    totals = {g: sum(s.get(g, 0) for s in slices.values()) for g in groups}
    print("by thread group: " + ", ".join(f"{g} {c:.2f} s" for g, c in totals.items()))
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
