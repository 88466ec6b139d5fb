"""The latency lab: cherenkov, ROOT and uproot side by side, reading the same NanoAOD-like files from
real servers (xrootd and nginx on 127.0.0.1) behind toxiproxy, at several simulated round-trip times.

    python bench/lab.py                         # the full lab (`make bench`): 0, 10, 50, 137, 240 ms
    python bench/lab.py --quick                 # a few minutes: 0 and 137 ms, http, one repetition
    python bench/lab.py --rtt 0,137 --repeat 5 --bandwidth 100 --protocols http
    python bench/lab.py --link narrow --rate 10     # each connection capped at 10 MB/s (= --bandwidth 10)
    python bench/lab.py --link thin --rate 20       # all connections share one 20 MB/s link
    python bench/lab.py --format rntuple --rtt 0,137   # the same data as RNTuples (needs ROOT)

Scenarios (every tool that can express one runs it): fixed, trigger, lazy, interactive (see
SCENARIOS below and bench/README.md). Tools: cherenkov (default, and with prefetch, learning or
parallel unzipping off), ROOT through PyROOT with a compiled event loop (TTreeCache default, and
off), uproot 5 with its default handlers. Each measurement runs in its own process
(bench/lab_tools.py): no shared caches, and its peak RSS is the measurement's. Tools are
interleaved within each repetition; the tables show medians. Every run's values are checked
against cherenkov's local read of the same scenario (bytes of values, sums and counts of a few
branches) and the check is printed.

After the matrix, full runs replay a recorded trace (bench/replay.py) and measure reading through
two replicas (bench/multi_source.py); their tables end latency.md.

`--format rntuple` runs the fixed, lazy and interactive scenarios on the RNTuple copies ROOT's
RNTupleImporter makes of the files (bench/local_read.py's, same flat names as projected fields):
cherenkov and uproot with the same calls, ROOT with RNTupleReader; it writes latency-rntuple.*.

Output: bench/results/latency.{json,md,png} and multi_source.json; full runs (not --quick) also write
the copies the README links, in docs/bench/ (--no-publish to skip, --publish to force).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import cherenkov  # noqa: E402
from cherenkov_lab import Lab  # noqa: E402
from lab_tools import RESULT_MARK  # noqa: E402

TREE = "Events"
RESULTS = BENCH / "results"
PUBLISHED = REPO / "docs" / "bench"
DEFAULT_RTTS = [0, 10, 50, 137, 240]

SCENARIOS = {
    "fixed": "30 % of the branches by compressed volume (plus the counters of the jagged ones), all entries",
    "trigger": "the fixed set for every event; every branch for every 50th event of the second half of the "
    "file's clusters (the trigger fires after the readers have learned the fixed set)",
    "lazy": "the fixed set touched one column at a time in each chunk, over a dataset of two files",
    "conditional": "the fixed set touched one column at a time in every chunk and an extra set (every tenth other "
    "branch) in every other chunk, over a dataset of two files (issue 20's conditional access)",
    "interactive": "open the file and read one branch of the first 100 entries (time to first data)",
}


@dataclass(frozen=True)
class Tool:
    key: str  # command-line name
    tool: str  # cherenkov | root | uproot (the runner in lab_tools.py)
    variant: str
    scenarios: tuple[str, ...]
    env: dict = field(default_factory=dict)
    max_rtt: float | None = None  # not run above this round-trip time (ROOT without its cache)
    ablation: bool = False  # a cherenkov switch: run on the first protocol only (and locally)

    def label(self, versions: dict) -> str:
        name = {"cherenkov": "cherenkov", "root": f"ROOT {versions.get('root', '')}", "uproot": f"uproot {versions.get('uproot', '')}"}[
            self.tool
        ]
        return name if self.variant == "default" else f"{name}, {self.variant}"


ALL = ("fixed", "trigger", "lazy", "conditional", "interactive")
RNTUPLE_SCENARIOS = ("fixed", "lazy", "interactive")
TOOLS = [
    Tool("cherenkov", "cherenkov", "default", ALL),
    Tool("cherenkov-noprefetch", "cherenkov", "prefetch off", ("fixed", "trigger", "lazy"), ablation=True),
    Tool("cherenkov-nolearning", "cherenkov", "learning off", ("trigger", "lazy"), ablation=True),
    Tool("cherenkov-nospeculation", "cherenkov", "speculation off", ("trigger", "conditional"), ablation=True),
    Tool("cherenkov-serial", "cherenkov", "1 unzip thread", ("fixed", "trigger", "lazy"), env={"RAYON_NUM_THREADS": "1"}, ablation=True),
    # ROOT's compiled loop expresses fixed, trigger, lazy and interactive (not conditional)
    Tool("root", "root", "TTreeCache", tuple(s for s in ALL if s != "conditional")),
    Tool("root-nocache", "root", "no TTreeCache", tuple(s for s in ALL if s != "conditional"), max_rtt=10),
    Tool("uproot", "uproot", "default", ALL),
]
# On RNTuples: ROOT's reader is RNTupleReader (its cluster pool prefetches the active fields).
RNTUPLE_TOOLS = [
    Tool("cherenkov", "cherenkov", "default", RNTUPLE_SCENARIOS),
    Tool("cherenkov-noprefetch", "cherenkov", "prefetch off", ("fixed", "lazy"), ablation=True),
    Tool("root", "root", "RNTupleReader", RNTUPLE_SCENARIOS),
    Tool("uproot", "uproot", "default", RNTUPLE_SCENARIOS),
]


# ---------------------------------------------------------------- the plan: data, branches, checks


@dataclass
class Plan:
    files: list[Path]  # the first is the file of every scenario; lazy reads all of them
    fixed: list[str]
    others: list[str]
    extra: list[str]  # the conditional set: every tenth of the others
    step_size: int
    steps: list[list[list[int]]]  # per file, its clusters ([start, stop] each)
    trigger_from: int
    trigger_every: int
    checks: dict
    interactive: dict
    entries: int
    clusters: list[int]
    writer: str
    format: str = "ttree"
    types: dict = field(default_factory=dict)  # type names of the checked fields (ROOT's RNTuple views)

    def spec(self, tool: Tool, scenario: str, urls: list[str]) -> dict:
        return {
            "tool": tool.tool,
            "variant": tool.variant,
            "scenario": scenario,
            "urls": urls,
            "tree": TREE,
            "fixed": self.fixed,
            "others": self.others,
            "extra": self.extra,
            "step_size": self.step_size,
            "steps": self.steps,
            "trigger_from": self.trigger_from,
            "trigger_every": self.trigger_every,
            "checks": self.checks,
            "interactive": self.interactive,
            "format": self.format,
            "types": self.types,
        }


def make_plan(files: list[Path], trigger_every: int = 50, interactive_branch: str = "Jet_pt") -> Plan:
    from local_read import checked_branches, counters_of, selections  # its deterministic 30 % choice

    tree = cherenkov.open(files[0])[TREE]
    counters = counters_of(files[0], TREE)
    chosen = selections(tree, counters)
    every, fixed_set = chosen["all"], set(chosen["30% by volume"])
    counter_names = set(counters.values())
    # counters first: ROOT reads a jagged branch's counter with it, and must count it once
    fixed = [n for n in every if n in fixed_set and n in counter_names] + [n for n in every if n in fixed_set and n not in counter_names]
    others = [n for n in every if n not in fixed_set]

    def floats(names):
        return [n for n in names if tree[n].typename.lower().startswith(("float", "double")) or "float" in tree[n].typename.lower()]

    checks = {"fixed": checked_branches(tree, floats(fixed) or fixed)[:3], "trigger": checked_branches(tree, floats(others) or others)[:2]}
    bounds = tree.cluster_boundaries.tolist()
    clusters = len(bounds) - 1
    trigger_from = bounds[(clusters + 1) // 2] if clusters > 1 else tree.num_entries // 2
    branch = interactive_branch if interactive_branch in tree else fixed[-1]
    sidecar = files[0].with_name(files[0].name + ".json")
    try:
        writer = json.loads(sidecar.read_text())["writer"]
    except (OSError, ValueError, KeyError):
        writer = "unknown writer"
    return Plan(
        files=files,
        fixed=fixed,
        others=others,
        extra=others[::10],
        step_size=1,
        # each file's own clusters: a dataset's files need not be clustered alike
        steps=[[list(s) for s in cherenkov.open(f)[TREE].steps(1)] for f in files],
        trigger_from=trigger_from,
        trigger_every=trigger_every,
        checks=checks,
        interactive={"branch": branch, "entries": min(100, tree.num_entries)},
        entries=tree.num_entries,
        clusters=bounds,
        writer=writer,
    )


def as_rntuple(plan: Plan, log=print) -> Plan:
    """The plan on the RNTuple copies of its files (ROOT's RNTupleImporter, made once beside
    them): the same flat names (projected fields), the RNTuple's own clusters as steps."""
    from local_read import make_rntuple
    from make_nanolike import import_root

    ROOT = import_root()
    files = [make_rntuple(p, ROOT, log=log) for p in plan.files]
    ntuple = cherenkov.open(files[0])[TREE]
    bounds = ntuple.cluster_boundaries.tolist()
    checked = plan.checks["fixed"] + [plan.interactive["branch"]]
    return Plan(
        **{
            **plan.__dict__,
            "files": files,
            "steps": [[list(s) for s in cherenkov.open(f)[TREE].steps(1)] for f in files],
            "clusters": bounds,
            "writer": f"ROOT's RNTupleImporter from the TTree ({plan.writer})",
            "format": "rntuple",
            "types": {n: ntuple[n].typename for n in checked},
        }
    )


def ensure_data(entries: int, log=print) -> list[Path]:
    """The lab's dataset: the NanoAOD-like file and a second one (another seed) for `lazy`."""
    from make_nanolike import default_output, ensure

    first = ensure(default_output(entries), entries, seed=1, log=log)
    second = ensure(first.with_name(f"nanolike-{entries}-seed2.root"), entries, seed=2, log=log)
    return [first, second]


def warm_page_cache(paths) -> None:
    for p in paths:
        with open(p, "rb") as f:
            while f.read(16 << 20):
                pass


# ---------------------------------------------------------------- running one measurement


def run_child(spec: dict, env: dict, budget: float) -> dict:
    """One measurement in a fresh process. The process stops itself at the first progress point
    after its clock passes `budget` seconds and says how far it got; a run stuck in one long call
    is killed two seconds past the budget (its clock start is in the progress file), and any run a
    minute past it."""
    with tempfile.NamedTemporaryFile(prefix="lab-progress-", delete=False) as tmp:
        progress = Path(tmp.name)
    spec = dict(spec, progress=str(progress), budget=budget)
    environment = dict(os.environ, PYTHONWARNINGS="ignore", **env)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, str(BENCH / "lab_tools.py"), json.dumps(spec)],
            stdout=out,
            stderr=err,
            text=True,
            env=environment,
            cwd=str(BENCH),
        )
        launched, killed = time.time(), False
        try:
            while proc.poll() is None:
                time.sleep(0.1)
                done, started = _read_progress(progress)
                late = started is not None and time.time() - started > budget + 2
                if late or time.time() - launched > budget + 60:
                    proc.kill()
                    proc.wait()
                    killed = True
        except BaseException:  # interrupted: take the measurement process down too
            proc.kill()
            proc.wait()
            progress.unlink(missing_ok=True)
            raise
        done, _ = _read_progress(progress)
        progress.unlink(missing_ok=True)
        if killed:
            return {"status": "timeout", "budget": budget, "done": done}
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            result = json.loads(line[len(RESULT_MARK) :])
            if result["status"] == "timeout":
                return {**result, "budget": budget}
            return result
    return {"status": "error", "error": (stderr or stdout)[-1500:], "done": done}


def _read_progress(path: Path) -> tuple[float | None, float | None]:
    """(fraction done, epoch seconds when the run's clock started) as the run last wrote them."""
    try:
        fraction, started = path.read_text().split()
        return float(fraction), float(started)
    except (OSError, ValueError):
        return None, None


# ---------------------------------------------------------------- checking


def compare(check: dict, reference: dict) -> list[str]:
    """Differences between what a run read and the reference (cherenkov, local file)."""
    problems = []
    if (
        check.get("value_bytes") is not None
        and reference.get("value_bytes") is not None
        and check["value_bytes"] != reference["value_bytes"]
    ):
        problems.append(f"{check['value_bytes']} bytes of values, reference {reference['value_bytes']}")
    for name, want in reference.get("sums", {}).items():
        got = check.get("sums", {}).get(name)
        count, want_count = check.get("counts", {}).get(name), reference["counts"][name]
        if got is None:
            problems.append(f"{name}: not read")
        elif count != want_count:
            problems.append(f"{name}: {count} values, reference {want_count}")
        elif not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9):
            problems.append(f"{name}: sum {got!r}, reference {want!r}")
    return problems


# ---------------------------------------------------------------- the matrix


@dataclass
class Config:
    rtts: list[float]
    protocols: list[str]
    scenarios: list[str]
    tools: list[Tool]
    repeat: int
    budget: float
    once_over: float  # a measurement whose first run took longer runs once
    bandwidth: float | None  # MB/s per connection (toxiproxy; --link narrow)
    local: bool = True
    shared_rate: float | None = None  # MB/s for all connections together (--link thin)
    nocache_max_rtt: float = 10
    cherenkov_protocols_only: bool = False  # drop the protocols cherenkov cannot read (the demo)


def probe_protocols(lab: Lab, name: str, protocols: list[str]) -> dict:
    """Which tool can read which protocol here: {(tool, protocol): None or why not}."""
    out = {}
    for protocol in protocols:
        try:
            cherenkov.open(lab.url(protocol, name))[TREE]
            out[("cherenkov", protocol)] = None
        except ValueError as e:
            out[("cherenkov", protocol)] = f"cherenkov cannot open {protocol}:// yet ({e})"
        except Exception as e:
            out[("cherenkov", protocol)] = f"cherenkov failed on {protocol}://: {type(e).__name__}: {e}"
        if protocol == "root":
            try:
                import fsspec_xrootd  # noqa: F401
                import XRootD.client  # noqa: F401

                out[("uproot", protocol)] = None
            except ImportError:
                out[("uproot", protocol)] = "uproot's root:// needs the fsspec-xrootd and xrootd packages (scripts/setup-bench.sh)"
        else:
            try:
                import aiohttp  # noqa: F401

                out[("uproot", protocol)] = None
            except ImportError:
                out[("uproot", protocol)] = "uproot's default http handler (fsspec) needs aiohttp (scripts/setup-bench.sh)"
        out[("root", protocol)] = None
    return out


def have_root() -> str | None:
    """ROOT's version if `import ROOT` works (checked in a subprocess: it is slow and large)."""
    code = "import warnings; warnings.simplefilter('ignore'); import ROOT; print(ROOT.gROOT.GetVersion())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None


def versions() -> dict:
    import uproot

    return {"cherenkov": cherenkov.__version__, "uproot": uproot.__version__, "root": have_root()}


def extension_build() -> str:
    """Size and modification time of the compiled cherenkov extension: if it changes during a run
    (rebuilt by `make setup`), the results mix two builds, and the report says so."""
    import cherenkov._core as core

    st = Path(core.__file__).stat()
    return f"{st.st_size} bytes, built {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(st.st_mtime))} UTC"


def run_matrix(plan: Plan, config: Config, log=print) -> tuple[list[dict], dict]:
    """Every (rtt, repetition, scenario, protocol, tool), interleaved; returns rows and notes."""
    vers = versions()
    build = extension_build()
    tools = [t for t in config.tools if t.tool != "root" or vers["root"]]
    notes = {}
    if not vers["root"]:
        notes["root"] = "ROOT is not installed (`import ROOT` fails): no ROOT rows (scripts/setup-bench.sh installs it)"
    runs: dict[tuple, list[dict]] = {}
    references: dict[str, dict] = {}
    names = [p.name for p in plan.files]
    data_dir = plan.files[0].parent
    if any(p.parent != data_dir for p in plan.files):
        raise ValueError("the lab serves one folder: put the dataset's files side by side")
    combos = [(s, t) for s in config.scenarios for t in tools if s in t.scenarios]

    def urls_for(scenario, protocol, lab=None):
        chosen = names if scenario in ("lazy", "conditional") else names[:1]
        if protocol == "file":
            return [str(data_dir / n) for n in chosen]
        return [lab.url(protocol, n) for n in chosen]

    def measure(rtt, protocol, scenario, tool, lab=None):
        key = (tool.label(vers), scenario, protocol, rtt)
        spec = plan.spec(tool, scenario, urls_for(scenario, protocol, lab))
        result = run_child(spec, tool.env, config.budget)
        result["repetition"] = len(runs.get(key, []))
        runs.setdefault(key, []).append(result)
        if result["status"] == "ok":
            if tool.key == "cherenkov" and protocol == "file" and scenario not in references:
                references[scenario] = result["check"]
            result["problems"] = compare(result["check"], references[scenario]) if scenario in references else ["no reference"]
        log(describe(key, result))
        return result

    warm_page_cache(plan.files)
    if config.local:
        # the reference first: cherenkov on the local file, then everyone locally
        for rep in range(config.repeat):
            for scenario, tool in _rotate(combos, rep):
                if rep and _slow(runs.get((tool.label(vers), scenario, "file", 0), []), config.once_over):
                    continue
                measure(0, "file", scenario, tool)
    with Lab(data_dir, link="thin" if config.shared_rate else None, rate=config.shared_rate) as lab:
        availability = probe_protocols(lab, names[0], config.protocols)
        protocols = list(config.protocols)
        for (tool_name, protocol), why in availability.items():
            if why:
                notes[f"{tool_name}-{protocol}"] = why
                if tool_name == "cherenkov" and config.cherenkov_protocols_only:
                    protocols.remove(protocol)
        if config.bandwidth:
            for proxy in ("xrootd", "nginx"):
                lab.toxiproxy.toxic(proxy, "bandwidth", "bandwidth", stream="downstream", rate=int(config.bandwidth * 1000))
        given_up: set[tuple] = set()  # (tool, scenario, protocol) that ran out of time at a lower RTT
        for rtt in sorted(config.rtts):
            lab.set_rtt(rtt)
            for rep in range(config.repeat):
                for scenario, tool in _rotate(combos, rep):
                    for protocol in protocols:
                        label = tool.label(vers)
                        key = (label, scenario, protocol, rtt)
                        if availability.get((tool.tool, protocol)):
                            continue
                        if tool.ablation and protocol != protocols[0]:
                            continue
                        if tool.max_rtt is not None and rtt > tool.max_rtt:
                            continue
                        if (label, scenario, protocol) in given_up:
                            if rep == 0:
                                runs[key] = [{"status": "skipped", "budget": config.budget}]
                            continue
                        if rep and _slow(runs.get(key, []), config.once_over):
                            continue
                        result = measure(rtt, protocol, scenario, tool, lab)
                        if result["status"] == "timeout":
                            given_up.add((label, scenario, protocol))
    rows = summarize(runs, plan)
    notes.update(method_notes(plan, config, vers))
    notes["cherenkov build"] = build
    if extension_build() != build:
        notes["WARNING"] = (
            f"the cherenkov extension was rebuilt during this run (was {build}, now {extension_build()}): "
            "the results mix two builds; run the lab again"
        )
        log("WARNING: " + notes["WARNING"])
    return rows, notes


def _rotate(items: list, k: int) -> list:
    k %= max(len(items), 1)
    return items[k:] + items[:k]


def _slow(previous: list[dict], once_over: float) -> bool:
    return any(r["status"] != "ok" or r["seconds"] > once_over for r in previous)


def describe(key: tuple, r: dict) -> str:
    label, scenario, protocol, rtt = key
    where = "local" if protocol == "file" else f"{protocol} {rtt:g} ms"
    head = f"  [{where}] {scenario:<11} {label:<32}"
    if r["status"] == "ok":
        bad = "" if not r.get("problems") else f"  MISMATCH: {'; '.join(r['problems'])}"
        trips = f", {r['round_trips']} round trips" if r.get("round_trips") is not None else ""
        sizes = f"{r['bytes'] / 1e6:.1f} MB, peak RSS {r['peak_rss'] / 1e6:.0f} MB"
        return f"{head} {r['seconds']:8.3f} s  {r['requests']} requests{trips}, {sizes}{bad}"
    if r["status"] == "timeout":
        done = f", {100 * r['done']:.0f} % done" if r.get("done") is not None else ""
        so_far = f" ({r['requests']} requests so far)" if r.get("requests") is not None else ""
        return f"{head} stopped at the {r['budget']:g} s budget{done}{so_far}"
    return f"{head} ERROR {r.get('error', '')[-400:]}"


def summarize(runs: dict, plan: Plan) -> list[dict]:
    rows = []
    for (label, scenario, protocol, rtt), results in runs.items():
        ok = [r for r in results if r["status"] == "ok"]
        stopped = [r for r in results if r["status"] in ("timeout", "skipped")]
        errors = [r for r in results if r["status"] == "error"]
        row = {
            "tool": label,
            "scenario": scenario,
            "protocol": protocol,
            "rtt_ms": rtt,
            "seconds": None,
            "bytes": None,
            "requests": None,
            "round_trips": None,
            "peak_rss": None,
            "runs": len(results),
            "status": "ok",
        }
        if stopped or errors or not ok:
            row["status"] = "timeout" if stopped else "error"
            if stopped:
                r = stopped[0]
                row["budget_seconds"] = r.get("budget")
                row["done_fraction"] = r.get("done")
                if r.get("requests") is not None:
                    row["so_far"] = {k: r.get(k) for k in ("requests", "round_trips", "bytes", "peak_rss")}
                if r["status"] == "skipped":
                    row["status"] = "skipped"
            if errors:
                row["error"] = errors[0].get("error", "")[-500:]
        if ok:

            def med(k, ok=ok):
                return median(r[k] for r in ok) if all(r.get(k) is not None for r in ok) else None

            if row["status"] == "ok":
                row["seconds"] = med("seconds")
                row["open_seconds"] = med("open_seconds")
                row["all_seconds"] = [r["seconds"] for r in ok]
                if scenario in ("lazy", "conditional"):
                    row["file_seconds"] = [median(r["file_seconds"][i] for r in ok) for i in range(len(ok[0]["file_seconds"]))]
            for k in ("bytes", "requests", "round_trips", "peak_rss"):
                row[k] = med(k)
            row["base_rss"] = med("base_rss")
            row["extra"] = ok[0].get("extra")
            problems = sorted({p for r in ok for p in r.get("problems", [])})
            row["verified"] = not problems
            if problems:
                row["problems"] = problems
        rows.append(row)
    order = {s: i for i, s in enumerate(SCENARIOS)}
    tools = {label: i for i, label in enumerate(dict.fromkeys(label for label, *_ in runs))}
    protocols = {"file": 0, "http": 1, "root": 2}
    rows.sort(key=lambda r: (order.get(r["scenario"], 9), tools[r["tool"]], protocols.get(r["protocol"], 9), r["rtt_ms"]))
    return rows


def method_notes(plan: Plan, config: Config, vers: dict) -> dict:
    notes = {
        "data": f"{plan.files[0].name}: {plan.entries:,} entries, {len(plan.fixed) + len(plan.others)} branches, "
        f"{len(plan.clusters) - 1} clusters {plan.clusters}, {plan.files[0].stat().st_size / 1e6:.1f} MB, written by {plan.writer}"
        + (f"; lazy also reads {plan.files[1].name}" if len(plan.files) > 1 else ""),
        "fixed set": f"{len(plan.fixed)} branches (30 % of the compressed volume, chosen by a hash of the names, plus counters)",
        "trigger": f"every {plan.trigger_every}th event from entry {plan.trigger_from} on reads every branch "
        f"({len(plan.fixed) + len(plan.others)}); ROOT in its event loop (TTree::GetEntry at those events, "
        "TBranch::GetEntry of the fixed set at the others); cherenkov and uproot read chunks (the file's clusters): "
        "the fixed set, then, if a trigger event is in the chunk, every other branch, keeping the trigger events' values",
        "lazy": "cherenkov: lazy chunks, one AccessProfile shared by the two files; uproot: TBranch.array per column "
        "and chunk; ROOT: every branch active, TBranch::GetEntry of the fixed set, a new TTreeCache per file",
        "conditional": f"as lazy, plus an extra set of {len(plan.extra)} branches (every tenth of the others) read "
        "one column at a time in every other chunk (the odd ones); cherenkov and uproot",
        "latency": "toxiproxy's latency toxic delays the data each way by half the RTT; it does not delay TCP's "
        "handshake (a real WAN adds one RTT per new connection, for every tool)",
        "clock": "from before opening the file to the last value in memory; each measurement in a fresh process "
        "(peak RSS = that process's VmHWM, imports included)",
        "method": f"medians of {config.repeat} interleaved repetitions; a measurement whose first run took over "
        f"{config.once_over:g} s runs once; runs are stopped at {config.budget:g} s and not retried at higher RTTs",
        "cherenkov switches": f"prefetch off (iterate(steps_ahead=0), chunks(steps_ahead=0)), learning off "
        "(chunks(learning=False)), speculation off (open(speculate=False)), 1 unzip thread (RAYON_NUM_THREADS=1): locally and over "
        f"{config.protocols[0]}:// only",
        "ROOT without TTreeCache": f"run only up to {config.nocache_max_rtt:g} ms RTT (one synchronous read per "
        "basket: hundreds of seconds beyond)",
        "ROOT http": "ROOT 6.40's pip build has no Davix and its TWebFile plugin handler fails, so the lab opens "
        "http:// with ROOT::Deprecated::TWebFile directly (multi-range reads); root:// is TNetXNGFile",
        "uproot": "uproot.open's default handler (fsspec: HTTPFileSystem/aiohttp for http, fsspec-xrootd for root)",
        "cores": f"{os.cpu_count()} cores; cherenkov decompresses on all of them (RAYON_NUM_THREADS=1 for the "
        "'1 unzip thread' rows), ROOT and uproot on one",
        "versions": ", ".join(f"{k} {v}" for k, v in vers.items() if v),
        "machine": f"{platform.platform()}, Python {platform.python_version()}",
    }
    if config.bandwidth:
        notes["bandwidth"] = f"toxiproxy caps each link at {config.bandwidth:g} MB/s"
    if config.shared_rate:
        notes["link"] = f"thin: every connection shares one {config.shared_rate:g} MB/s link (cherenkov_lab.SharedLink)"
    return notes


# ---------------------------------------------------------------- command line


def parse_list(text: str, kind=float) -> list:
    return [kind(x) for x in text.replace(" ", "").split(",") if x]


def main(argv: list[str] | None = None) -> int:
    from lab_report import write_outputs

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt", help="round-trip times in ms, comma-separated (default 0,10,50,137,240)")
    parser.add_argument("--bandwidth", type=float, help="cap every link at this many MB/s (toxiproxy)")
    parser.add_argument(
        "--link",
        choices=["narrow", "thin"],
        help="narrow: each connection capped at --rate MB/s (toxiproxy, as a TCP window does); thin: one --rate MB/s link for all",
    )
    parser.add_argument("--rate", type=float, help="MB/s of --link (default 10 narrow, 20 thin)")
    parser.add_argument("--repeat", type=int, help="repetitions (default 3; --quick 1)")
    parser.add_argument(
        "--quick", action="store_true", help="0 and 137 ms, http only, one repetition, fewer variants, 20 s budget: a few minutes"
    )
    parser.add_argument("--entries", type=int, default=40_000, help="entries of the generated files (default 40000)")
    parser.add_argument("--protocols", help="http, root or both (default both; --quick http)")
    parser.add_argument("--scenarios", help=f"some of {', '.join(SCENARIOS)} (default all; RNTuple: {', '.join(RNTUPLE_SCENARIOS)})")
    parser.add_argument("--format", choices=["ttree", "rntuple"], default="ttree", help="the files as TTrees or as RNTuples")
    parser.add_argument("--tools", help=f"some of {', '.join(t.key for t in TOOLS)} (default all; --quick fewer)")
    parser.add_argument("--budget", type=float, help="seconds after which a run is stopped (default 90; --quick 20)")
    parser.add_argument("--root-nocache-max-rtt", type=float, default=10, help="ROOT without TTreeCache runs up to this RTT (ms)")
    parser.add_argument("--no-local", action="store_true", help="skip the local-file runs (they are the reference of the checks)")
    parser.add_argument("--no-replay", action="store_true", help="skip the trace replay at the end")
    parser.add_argument("--no-multi-source", action="store_true", help="skip the multi-source setups at the end (bench/multi_source.py)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for latency.json/.md/.png (default bench/results)")
    publish = parser.add_mutually_exclusive_group()
    publish.add_argument(
        "--publish", dest="publish", action="store_true", default=None, help="also write docs/bench (default: unless --quick)"
    )
    publish.add_argument("--no-publish", dest="publish", action="store_false")
    args = parser.parse_args(argv)

    quick = args.quick
    rtts = parse_list(args.rtt) if args.rtt else ([0, 137] if quick else DEFAULT_RTTS)
    rntuple = args.format == "rntuple"
    known = RNTUPLE_TOOLS if rntuple else TOOLS
    default_tools = ["cherenkov", "cherenkov-noprefetch", "root", "uproot"] if quick else [t.key for t in known]
    wanted = parse_list(args.tools, str) if args.tools else default_tools
    unknown = set(wanted) - {t.key for t in known}
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}")
    tools = [
        t if t.key != "root-nocache" else Tool(**{**t.__dict__, "max_rtt": args.root_nocache_max_rtt}) for t in known if t.key in wanted
    ]
    scenarios = parse_list(args.scenarios or ",".join(RNTUPLE_SCENARIOS if rntuple else SCENARIOS), str)
    allowed = RNTUPLE_SCENARIOS if rntuple else SCENARIOS
    if set(scenarios) - set(allowed):
        parser.error(f"unknown scenarios {sorted(set(scenarios) - set(allowed))}")
    rate = args.rate or {"narrow": 10.0, "thin": 20.0}.get(args.link or "")
    if args.link == "narrow" and args.bandwidth:
        parser.error("--link narrow --rate R is --bandwidth R: give one")
    config = Config(
        rtts=rtts,
        protocols=parse_list(args.protocols or ("http" if quick else "http,root"), str),
        scenarios=scenarios,
        tools=tools,
        repeat=args.repeat or (1 if quick else 3),
        budget=args.budget or (20 if quick else 90),
        once_over=20,
        bandwidth=rate if args.link == "narrow" else args.bandwidth,
        shared_rate=rate if args.link == "thin" else None,
        local=not args.no_local,
        nocache_max_rtt=args.root_nocache_max_rtt,
    )
    if not config.local:
        print("note: without --local runs there is no reference, so the checks compare nothing")
    t0 = time.perf_counter()
    files = ensure_data(args.entries)
    plan = make_plan(files)
    if rntuple:
        plan = as_rntuple(plan)
    print(
        f"latency lab: {len(config.rtts)} RTTs {config.rtts} ms, protocols {config.protocols}, scenarios {config.scenarios}, "
        f"{len(config.tools)} tool variants, {config.repeat} repetition(s), {config.budget:g} s budget per run"
    )
    rows, notes = run_matrix(plan, config)
    if rntuple:
        for key in ("trigger", "ROOT without TTreeCache"):
            notes.pop(key, None)
        notes["lazy"] = (
            "cherenkov: lazy chunks, one AccessProfile shared by the two files; uproot: the RNTuple field's "
            ".array per column and chunk; ROOT: RNTupleReader over the fixed set"
        )
        notes["ROOT RNTupleReader"] = (
            "a compiled loop over untyped views of the fixed set (typed views for the checked fields), the reader made from "
            "the anchor of a TFile opened as in the TTree runs (TNetXNGFile for root://, TWebFile for http://)"
        )
    replay_table = None
    if not args.no_replay and not quick and not rntuple:
        import replay

        rtt = 137 if 137 in config.rtts else max(config.rtts)
        print(f"trace replay at {rtt:g} ms ...")
        replay_table = replay.lab_replay(plan.files[0], plan.fixed, rtt, budget=60, log=print)
    multi_source_table = None
    if not args.no_multi_source and not quick and not rntuple:
        import multi_source

        reason = multi_source.XrootdFederation.missing(proxied=True)
        if reason:
            notes["multi-source"] = f"not measured: {reason}"
        else:
            data = plan.files[0]
            multi_source_table = multi_source.run_setups(data.parent, data.name, runs=3)
    notes["wall"] = f"the whole lab took {(time.perf_counter() - t0) / 60:.1f} min"
    publish_to = PUBLISHED if (args.publish if args.publish is not None else not quick) else None
    stem = "latency-rntuple" if rntuple else "latency"
    text = write_outputs(rows, notes, config, plan, SCENARIOS, args.out, publish_to, replay_table, multi_source_table, stem=stem)
    print()
    print(text)
    return 0 if all(r.get("verified", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
