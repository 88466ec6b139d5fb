"""`iterate`'s memory budget bounds memory: over all branches of the lab's NanoAOD-like file
(40 000 entries, one step; 143 MB written by ROOT, 53 MB by uproot's writer, the same arrays),
peak RSS stays under the budget plus the step's arrays (plus a small fixed slack, `SLACK`).

Each measurement runs in a fresh subprocess (peak RSS is per process) and is printed. The file is
made once by bench/make_nanolike.py (cached in bench/data/; a minute or two with uproot's writer);
CHERENKOV_MEMORY_TEST_ENTRIES picks a smaller one."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED

ENTRIES = int(os.environ.get("CHERENKOV_MEMORY_TEST_ENTRIES", "40000"))
MB = 1 << 20
# What the process allocates besides arrays and units while reading (the decoding threads' malloc
# arenas, Python's objects for 947 arrays, the plans): measured at 0 to 7 MiB here.
SLACK = 16 * MB

MEASURE = r"""
import json, resource, sys
import cherenkov, numpy as np

path, budget = sys.argv[1], int(sys.argv[2])

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

def peak_rss():
    # VmHWM belongs to this address space; ru_maxrss would also carry the peak of the pytest
    # process that spawned us (Linux keeps it across vfork + exec).
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

def nbytes(a):
    if isinstance(a, cherenkov.Jagged):
        return nbytes(a.offsets) + nbytes(a.content)
    return a.nbytes

tree = cherenkov.open(path)["Events"]
names = [b.path for b in tree.branches if b.readable]
before = rss()
largest = steps = 0
for arrays in tree.iterate(names, memory_budget=budget, library="np", progress=False):
    largest = max(largest, sum(nbytes(a) for a in arrays.values()))
    steps += 1
    del arrays  # the next step is the current one: this one's arrays are not held meanwhile
peak = peak_rss()
print(json.dumps({"before": before, "peak": peak, "largest_step": largest, "steps": steps, "branches": len(names)}))
"""


@pytest.fixture(scope="module")
def nanolike():
    if not (SHARED / "testdata" / "nanoAOD_2015_CMS_Open_Data_ttbar.root").exists():
        pytest.skip(f"{SHARED}/testdata is absent: set CHERENKOV_SHARED")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from make_nanolike import ensure
    finally:
        sys.path.pop(0)
    return ensure(entries=ENTRIES, log=lambda m: print(m, file=sys.stderr))


@pytest.mark.parametrize("budget", [64 * MB, 1 * MB])
def test_peak_memory_stays_under_the_budget_plus_the_steps_arrays(nanolike: Path, budget: int):
    done = subprocess.run([sys.executable, "-c", MEASURE, str(nanolike), str(budget)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    m = json.loads(done.stdout.strip().splitlines()[-1])
    grew = m["peak"] - m["before"]
    bound = budget + m["largest_step"] + SLACK
    print(
        f"{nanolike.name} ({nanolike.stat().st_size / 1e6:.0f} MB, {m['branches']} branches, {m['steps']} step(s)), "
        f"budget {budget / MB:.0f} MiB: peak RSS grew by {grew / MB:.0f} MiB; the largest step's arrays "
        f"take {m['largest_step'] / MB:.0f} MiB; bound (budget + arrays + {SLACK // MB} MiB) {bound / MB:.0f} MiB"
    )
    assert grew <= bound, f"peak RSS grew by {grew / MB:.0f} MiB, more than budget + step arrays + slack = {bound / MB:.0f} MiB"
