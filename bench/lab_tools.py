"""One measurement of the latency lab, run in its own process: one tool, one scenario, one URL set.

    python bench/lab_tools.py '<JSON spec>'        # prints one line: LAB-RESULT {...}

The lab (bench/lab.py) starts a fresh process for every measurement, so no tool sees another's
caches, and the process's peak resident memory (VmHWM) is the measurement's. The process
imports only the tool it measures. The clock starts before the file is opened and stops after the
last value is in memory; computing the check values (sums, counts, bytes of values: see
`Check`) is done outside the clock for the Python tools, and inside ROOT's compiled loop (a few
leaves; negligible).

Spec keys: tool (cherenkov | root | uproot), variant, scenario (fixed | trigger | lazy |
interactive), urls, tree, fixed (branch names, counters first), others (the remaining branches),
steps ([[[start, stop], ...], ...]: each file's clusters), trigger_from and trigger_every, checks
({"fixed": [...], "trigger": [...]}), interactive ({"branch": name, "entries": 100}), progress
(a file where the process writes how far it got, for runs stopped by the time budget).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np

RESULT_MARK = "LAB-RESULT "


def rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss() -> int:
    """The process's peak resident memory: VmHWM, which starts afresh at exec (ru_maxrss does not:
    a child started by a large parent inherits the parent's peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class OutOfTime(Exception):
    """The run used up its time budget; the lab reports how far it got."""


class Progress:
    """Counts the work done; writes the fraction to a file (read by the lab if it has to kill the
    process) and stops the run once the clock passes the budget. The file is written at most every
    `WRITE_EVERY` seconds: a write per column (thousands per run) would take the reader's thread
    for most of a second, and while the clock is paused for it, reads in flight would finish
    unseen (a run would look faster than it is)."""

    WRITE_EVERY = 0.1

    def __init__(self, spec: dict, total: float, clock: Clock):
        self.path, self.budget, self.clock = spec.get("progress"), spec.get("budget"), clock
        self.total, self.done = max(total, 1), 0.0
        self.started = time.time()  # when the clock started, for the lab's watchdog
        self.written = 0.0
        self._write()

    def _write(self) -> None:
        if self.path:
            with open(self.path, "w") as f:
                f.write(f"{self.fraction:.4f} {self.started:.3f}\n")
            self.written = time.perf_counter()

    @property
    def fraction(self) -> float:
        return min(self.done / self.total, 1.0)

    def advance(self, amount: float) -> None:
        self.done += amount
        if time.perf_counter() - self.written >= self.WRITE_EVERY:
            self._write()
        if self.budget is not None and self.fraction < 1 and self.clock.seconds() > self.budget:
            raise OutOfTime


# ---------------------------------------------------------------- checks


def flat_counts(array) -> tuple[np.ndarray, np.ndarray | None, int]:
    """(flat values, values per entry or None when fixed, values per entry when fixed)."""
    if hasattr(array, "offsets") and hasattr(array, "content"):  # cherenkov.Jagged
        offsets = np.asarray(array.offsets)
        content = np.asarray(array.content)[offsets[0] : offsets[-1]]
        return content.reshape(-1), np.diff(offsets), 0
    if isinstance(array, np.ndarray):
        per_entry = int(np.prod(array.shape[1:])) if array.ndim > 1 else 1
        return array.reshape(-1), None, per_entry
    import awkward as ak  # uproot's awkward arrays

    flat = ak.to_numpy(ak.flatten(array, axis=None))
    if array.ndim > 1 and ak.type(array).content.__class__.__name__ == "ListType":
        return flat, ak.to_numpy(ak.num(array, axis=1)), 0
    return flat, None, (len(flat) // len(array)) if len(array) else 1


class Check:
    """What a run read, to compare tools: bytes of values (ROOT's GetEntry sum), and the sum and
    number of values of a few branches (float64 accumulation)."""

    def __init__(self):
        self.value_bytes = 0
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, name: str, array, entries: np.ndarray | None = None, summed: bool = False) -> None:
        """`entries`: indices within the array to account (None: all)."""
        flat, counts, per_entry = flat_counts(array)
        if entries is None:
            selected = flat
        elif counts is None:
            selected = flat.reshape(-1, per_entry)[entries].reshape(-1) if per_entry else flat[:0]
        else:
            mask = np.zeros(len(counts), dtype=bool)
            mask[entries] = True
            selected = flat[np.repeat(mask, counts)]
        self.value_bytes += selected.nbytes
        if summed:
            self.sums[name] = self.sums.get(name, 0.0) + float(np.sum(selected, dtype=np.float64))
            self.counts[name] = self.counts.get(name, 0) + int(selected.size)

    def to_dict(self, with_bytes: bool = True) -> dict:
        return {"value_bytes": self.value_bytes if with_bytes else None, "sums": self.sums, "counts": self.counts}


class Clock:
    """Wall time of the measured work, minus the pauses for computing checks."""

    def __init__(self):
        self.start = time.perf_counter()
        self.paused = 0.0

    def pause(self):
        clock = self

        class _Pause:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                clock.paused += time.perf_counter() - self.t0

        return _Pause()

    def seconds(self) -> float:
        return time.perf_counter() - self.start - self.paused


def trigger_entries(spec: dict, lo: int, hi: int) -> np.ndarray:
    """Indices (relative to `lo`) of the trigger events in [lo, hi)."""
    first, every = spec["trigger_from"], spec["trigger_every"]
    start = max(lo, first)
    start += (-start) % every
    return np.arange(start, hi, every, dtype=np.int64) - lo


class Run:
    """What one measurement accumulates: open files, clock, progress, check values."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.clock = Clock()
        if spec["scenario"] == "interactive":
            total = spec["interactive"]["entries"] * len(spec["urls"])
        else:
            total = sum(hi - lo for steps in spec["steps"][: len(spec["urls"])] for lo, hi in steps)
        self.progress = Progress(spec, total, self.clock)
        self.check = Check()
        self.files: list = []
        self.file_seconds: list[float] = []
        self.open_seconds: float | None = None
        self._file_start = 0.0
        self._steps = 0

    def opened(self, handle) -> None:
        self.files.append(handle)
        if self.open_seconds is None:
            self.open_seconds = self.clock.seconds()

    def file_started(self) -> None:
        self._file_start = self.clock.seconds()

    def file_done(self) -> None:
        self.file_seconds.append(self.clock.seconds() - self._file_start)

    def reading(self, handle) -> int:
        """Note that a step of the open file `handle` is being read (for tools that read a dataset
        through one iterator); the step's index within its file."""
        if not self.files or self.files[-1] is not handle:
            if self.files:
                self.file_done()
            else:
                self.open_seconds = self.clock.seconds()
            self.files.append(handle)
            self.file_started()
            self._steps = 0
        self._steps += 1
        return self._steps - 1

    def advance(self, entries: float) -> None:
        with self.clock.pause():
            self.progress.advance(entries)


def read_step(run: Run, i: int, lo: int, hi: int, column: Callable, arrays: Callable) -> None:
    """Step `i` (entries `lo`..`hi`) of the lazy, conditional and trigger scenarios (and uproot's
    fixed one) as the analysis reads it: `column(b)` reads branch `b` of the step, `arrays(bs)`
    several at once."""
    spec, check, clock = run.spec, run.check, run.clock
    scenario, fixed = spec["scenario"], spec["fixed"]
    checks_fixed, checks_trigger = set(spec["checks"]["fixed"]), set(spec["checks"]["trigger"])
    if scenario in ("lazy", "conditional"):  # one column at a time, on demand
        touched = fixed + (spec["extra"] if scenario == "conditional" and i % 2 == 1 else [])
        for b in touched:
            array = column(b)
            with clock.pause():
                check.add(b, array, summed=b in checks_fixed)
            run.advance((hi - lo) / len(touched))
        return
    got = arrays(fixed)
    with clock.pause():
        for b in fixed:
            check.add(b, got[b], summed=b in checks_fixed)
        fired = trigger_entries(spec, lo, hi) if scenario == "trigger" else []
    if len(fired):  # the trigger fired in this step: every branch, for those events
        run.advance((hi - lo) / 2)
        got = arrays(spec["others"])
        with clock.pause():
            for b in spec["others"]:
                check.add(b, got[b], fired, summed=b in checks_trigger)
        run.advance((hi - lo) / 2)
    else:
        run.advance(hi - lo)


# ---------------------------------------------------------------- cherenkov


def run_cherenkov(spec: dict, run: Run) -> None:
    import cherenkov

    scenario, variant, fixed = spec["scenario"], spec["variant"], spec["fixed"]
    checks_fixed = set(spec["checks"]["fixed"])
    check, clock = run.check, run.clock
    options = {"speculate": variant != "speculation off"}
    if scenario == "interactive":
        for url in spec["urls"]:
            run.reading(cherenkov.open(url, **options))
            branch, n = spec["interactive"]["branch"], spec["interactive"]["entries"]
            arrays = run.files[-1][spec["tree"]].arrays([branch], entry_stop=n, library="np")
            with clock.pause():
                check.add(branch, arrays[branch], summed=True)
            run.advance(n)
        run.file_done()
        return
    # The files are read as a dataset, as cherenkov users read one: the next file opens while one is
    # read (the "prefetch off" ablation opens each only when the previous one is done).
    files = {url: spec["tree"] for url in spec["urls"]}
    options.update(step_size=spec["step_size"])
    if variant == "prefetch off":
        options.update(steps_ahead=0, files_ahead=0)
    if scenario == "fixed":  # the branches are known: iterate prefetches them
        for arrays, report in cherenkov.iterate(files, fixed, library="np", report=True, progress=False, **options):
            run.reading(report.file)
            with clock.pause():
                for b in fixed:
                    check.add(b, arrays[b], summed=b in checks_fixed)
            run.advance(len(arrays[fixed[0]]))
        run.file_done()
        return
    # trigger and lazy: lazy chunks, branches touched as the analysis needs them, one profile for the
    # dataset's files
    chunks = cherenkov.chunks(files, profile=cherenkov.AccessProfile(), learning=variant != "learning off", **options)
    for chunk in chunks:
        i = run.reading(chunk.tree.file)  # the chunk's index in its file
        column, arrays = (lambda b, c=chunk: c.array(b, library="np")), (lambda bs, c=chunk: c.arrays(bs, library="np"))
        read_step(run, i, chunk.entry_start, chunk.entry_stop, column, arrays)
    run.file_done()


def counters_cherenkov(run: Run) -> dict:
    import cherenkov

    counters = [f.source_counters() for f in run.files]
    stats = [f.stats() for f in run.files]
    return {
        "bytes": sum(c.bytes for c in counters),
        "requests": sum(c.requests for c in counters),
        "round_trips": sum(c.round_trips for c in counters),
        "extra": {
            "cache_misses": sum(s.cache_misses for s in stats),
            "miss_fetches": sum(s.miss_fetches for s in stats),
            "startup_fetches": sum(s.startup_fetches for s in stats),
            "blocked_seconds": round(sum(s.blocked_seconds for s in stats), 4),
            "speculative_bytes": sum(s.speculative_bytes for s in stats),
            "speculative_used_bytes": sum(s.speculative_used_bytes for s in stats),
            "speculative_wasted_bytes": sum(s.speculative_wasted_bytes for s in stats),
            "compressed_bytes": sum(s.compressed_bytes for s in stats),
        },
        "version": cherenkov.__version__,
    }


# ---------------------------------------------------------------- ROOT

_ROOT_CODE = r"""
#include <TTree.h>
#include <TBranch.h>
#include <TLeaf.h>
#include <string>
#include <vector>
namespace cherenkov_lab {
// An event loop over the active branches. `per_branch`: every branch stays active and the loop
// reads the fixed ones with TBranch::GetEntry (what lazy, on-demand access is in ROOT) and, at
// trigger events, the whole entry with TTree::GetEntry. Otherwise only the fixed set is active and
// each event is TTree::GetEntry. The checked leaves are summed as they are read.
struct Loop {
  TTree *tree = nullptr;
  bool per_branch = false;
  Long64_t trigger_from = -1;
  Long64_t trigger_every = 0;
  std::vector<TBranch *> fixed;
  std::vector<TLeaf *> fixed_checks, trigger_checks;
  std::vector<double> sums;
  std::vector<long long> counts;
  long long bytes = 0;

  void setup(TTree *t, const std::vector<std::string> &names, bool per_branch_,
             const std::vector<std::string> &fc, const std::vector<std::string> &tc,
             Long64_t from, Long64_t every) {
    tree = t; per_branch = per_branch_; trigger_from = from; trigger_every = every;
    fixed.clear(); fixed_checks.clear(); trigger_checks.clear(); bytes = 0;
    if (per_branch) {
      tree->SetBranchStatus("*", 1);
    } else {
      tree->SetBranchStatus("*", 0);
      for (auto &n : names) tree->SetBranchStatus(n.c_str(), 1);
    }
    for (auto &n : names) fixed.push_back(tree->GetBranch(n.c_str()));
    for (auto &n : fc) fixed_checks.push_back(tree->GetLeaf(n.c_str()));
    for (auto &n : tc) trigger_checks.push_back(tree->GetLeaf(n.c_str()));
    sums.assign(fc.size() + tc.size(), 0.0);
    counts.assign(fc.size() + tc.size(), 0);
  }
  static void add(TLeaf *leaf, double &sum, long long &count) {
    Int_t n = leaf->GetLen();
    for (Int_t j = 0; j < n; ++j) sum += leaf->GetValue(j);
    count += n;
  }
  void run(Long64_t start, Long64_t stop) {
    for (Long64_t i = start; i < stop; ++i) {
      bool fired = trigger_every > 0 && i >= trigger_from && i % trigger_every == 0;
      if (fired) {
        bytes += tree->GetEntry(i);
      } else if (per_branch) {
        Long64_t local = tree->LoadTree(i);
        for (auto *b : fixed) bytes += b->GetEntry(local);
      } else {
        bytes += tree->GetEntry(i);
      }
      for (size_t k = 0; k < fixed_checks.size(); ++k) add(fixed_checks[k], sums[k], counts[k]);
      if (fired)
        for (size_t k = 0; k < trigger_checks.size(); ++k)
          add(trigger_checks[k], sums[fixed_checks.size() + k], counts[fixed_checks.size() + k]);
    }
  }
};
}
"""


_ROOT_NTUPLE_CODE = r"""
#include <ROOT/RNTuple.hxx>
#include <ROOT/RNTupleReader.hxx>
#include <ROOT/RNTupleView.hxx>
#include <ROOT/RVec.hxx>
#include <functional>
#include <memory>
#include <string>
#include <vector>
namespace cherenkov_lab {
// An RNTupleReader loop over the named fields (untyped views: every entry of every field is
// read), opened from the file's anchor so that it reads through the same TFile (TNetXNGFile,
// TWebFile) as the TTree runs. The checked fields are read through typed views and summed.
struct NtupleLoop {
  std::unique_ptr<ROOT::RNTupleReader> reader;
  std::vector<ROOT::RNTupleView<void>> views;
  std::vector<std::function<void(ROOT::NTupleSize_t)>> checks;
  std::vector<double> sums;
  std::vector<long long> counts;

  template <typename T> void check_scalar(const std::string &name, size_t k) {
    auto view = std::make_shared<ROOT::RNTupleView<T>>(reader->GetView<T>(name));
    checks.push_back([this, view, k](ROOT::NTupleSize_t i) { sums[k] += (*view)(i); counts[k] += 1; });
  }
  template <typename T> void check_vector(const std::string &name, size_t k) {
    auto view = std::make_shared<ROOT::RNTupleView<ROOT::RVec<T>>>(reader->GetView<ROOT::RVec<T>>(name));
    checks.push_back([this, view, k](ROOT::NTupleSize_t i) {
      for (auto x : (*view)(i)) sums[k] += x;
      counts[k] += (*view)(i).size();
    });
  }
  long long setup(ROOT::RNTuple &anchor, const std::vector<std::string> &names,
                  const std::vector<std::string> &checked, const std::vector<std::string> &types) {
    reader = ROOT::RNTupleReader::Open(anchor);
    views.clear(); checks.clear();
    sums.assign(checked.size(), 0.0);
    counts.assign(checked.size(), 0);
    for (auto &n : names)
      if (std::find(checked.begin(), checked.end(), n) == checked.end()) views.emplace_back(reader->GetView<void>(n));
    for (size_t k = 0; k < checked.size(); ++k) {
      const std::string &t = types[k];
      bool vec = t.find("RVec") != std::string::npos || t.find("vector") != std::string::npos;
      bool dbl = t.find("double") != std::string::npos;
      if (vec && dbl) check_vector<double>(checked[k], k);
      else if (vec) check_vector<float>(checked[k], k);
      else if (dbl) check_scalar<double>(checked[k], k);
      else check_scalar<float>(checked[k], k);
    }
    return reader->GetNEntries();
  }
  void run(Long64_t start, Long64_t stop) {
    for (Long64_t i = start; i < stop; ++i) {
      for (auto &v : views) v(i);
      for (auto &c : checks) c(i);
    }
  }
  void close() { checks.clear(); views.clear(); reader.reset(); }  // before its TFile closes
};
}
"""


def run_root_ntuple(spec: dict, run: Run) -> None:
    """ROOT's RNTupleReader: every scenario is its event loop over the fields (fixed and lazy:
    the fixed set; interactive: one field, the first entries). Each file is opened with the
    same TFile classes as the TTree runs, and the reader made from its anchor."""
    ROOT = import_root()
    run.root = ROOT
    loop = ROOT.cherenkov_lab.NtupleLoop()
    for anchor in root_objects(ROOT, spec, run):
        if spec["scenario"] == "interactive":
            names = checked = [spec["interactive"]["branch"]]
            stop = spec["interactive"]["entries"]
        else:
            names, checked, stop = spec["fixed"], spec["checks"]["fixed"], None
        types = [spec["types"][n] for n in checked]
        entries = int(loop.setup(anchor, strings(ROOT, names), strings(ROOT, checked), strings(ROOT, types)))
        stop = entries if stop is None else stop
        try:
            run_blocks(loop, stop, run)
        finally:
            add_checks(run, loop, checked)
            loop.close()
    run.check.value_bytes = None  # untyped views do not say how many bytes of values they read
    run.extra = {"file_class": run.files[0].ClassName(), "reader": "RNTupleReader"}


def import_root():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the PyPI build warns that it is an alpha
        import ROOT
    ROOT.gROOT.SetBatch(True)
    return ROOT


def root_open(ROOT, url: str):
    """TFile::Open, except for http: this ROOT build has no Davix, and its TWebFile plugin handler
    fails ('method ROOT::Deprecated::TWebFile not found'), so TWebFile is constructed directly."""
    if url.startswith(("http://", "https://")):
        f = ROOT.ROOT.Deprecated.TWebFile(url)
    else:
        f = ROOT.TFile.Open(url)
    if not f or f.IsZombie():
        raise OSError(f"ROOT could not open {url}")
    return f


def strings(ROOT, names):
    v = ROOT.std.vector("std::string")()
    for n in names:
        v.push_back(n)
    return v


ROOT_BLOCK = 200  # entries per call of the compiled loop (progress and time budget in between)


def root_objects(ROOT, spec: dict, run: Run):
    """Each file's tree or RNTuple anchor, the file opened and timed as the other tools' files."""
    for url in spec["urls"]:
        run.file_started()
        f = root_open(ROOT, url)
        obj = f.Get(spec["tree"])
        run.opened(f)
        yield obj
        run.file_done()


def run_blocks(loop, stop: int, run: Run) -> None:
    """The compiled loop over entries [0, stop) in blocks, progress (and the time budget) between."""
    for lo in range(0, stop, ROOT_BLOCK):
        hi = min(lo + ROOT_BLOCK, stop)
        loop.run(lo, hi)
        run.advance(hi - lo)


def add_checks(run: Run, loop, checked: list) -> None:
    """Add the loop's sums and counts of the checked branches to the run's value check."""
    sums, counts = run.check.sums, run.check.counts
    for k, n in enumerate(checked):
        sums[n] = sums.get(n, 0.0) + float(loop.sums[k])
        counts[n] = counts.get(n, 0) + int(loop.counts[k])


def run_root(spec: dict, run: Run) -> None:
    if spec.get("format") == "rntuple":
        return run_root_ntuple(spec, run)
    ROOT = import_root()  # imported and the loop compiled before the clock started (see main)
    run.root = ROOT
    scenario, variant = spec["scenario"], spec["variant"]
    loop = ROOT.cherenkov_lab.Loop()
    for tree in root_objects(ROOT, spec, run):
        if variant == "no TTreeCache":
            tree.SetCacheSize(0)
        if scenario == "interactive":
            branch = spec["interactive"]["branch"]
            names, checked_fixed, checked_trigger, per_branch, stop = [branch], [branch], [], True, spec["interactive"]["entries"]
        else:
            names = spec["fixed"]
            checked_fixed = spec["checks"]["fixed"]
            checked_trigger = spec["checks"]["trigger"] if scenario == "trigger" else []
            per_branch = scenario in ("trigger", "lazy")
            stop = int(tree.GetEntries())
        every = spec["trigger_every"] if scenario == "trigger" else 0
        loop.setup(
            tree,
            strings(ROOT, names),
            per_branch,
            strings(ROOT, checked_fixed),
            strings(ROOT, checked_trigger),
            spec["trigger_from"],
            every,
        )
        try:
            run_blocks(loop, stop, run)
        finally:
            run.check.value_bytes += int(loop.bytes)
            add_checks(run, loop, list(checked_fixed) + list(checked_trigger))
    if scenario == "interactive":
        run.check.value_bytes = None  # GetEntry's bytes of a jagged branch alone leave out its counter
    run.extra = {"cache_size": int(run.files[0].Get(spec["tree"]).GetCacheSize()), "file_class": run.files[0].ClassName()}


def counters_root(run: Run) -> dict:
    out = {
        "bytes": sum(int(f.GetBytesRead()) for f in run.files),
        "requests": sum(int(f.GetReadCalls()) for f in run.files),
        "round_trips": None,  # not exposed (its reads are synchronous: at least one round trip each)
        "extra": getattr(run, "extra", None),
        "version": run.root.gROOT.GetVersion() if hasattr(run, "root") else None,
    }
    for f in run.files:
        f.Close()
    return out


# ---------------------------------------------------------------- uproot


def run_uproot(spec: dict, run: Run) -> None:
    import uproot

    scenario, check, clock = spec["scenario"], run.check, run.clock
    for url, steps in zip(spec["urls"], spec["steps"]):
        run.file_started()
        f = uproot.open(url, array_cache=None, object_cache=None)  # the default handler (fsspec)
        tree = f[spec["tree"]]
        run.opened(f)
        if scenario == "interactive":
            branch, n = spec["interactive"]["branch"], spec["interactive"]["entries"]
            array = tree[branch].array(entry_stop=n, library="ak")
            with clock.pause():
                check.add(branch, array, summed=True)
            run.advance(n)
        for i, (lo, hi) in enumerate(steps if scenario != "interactive" else []):
            read_step(
                run,
                i,
                lo,
                hi,
                lambda b, tree=tree, lo=lo, hi=hi: tree[b].array(entry_start=lo, entry_stop=hi, library="ak"),
                lambda bs, tree=tree, lo=lo, hi=hi: tree.arrays(bs, entry_start=lo, entry_stop=hi, library="ak"),
            )
        run.file_done()


def counters_uproot(run: Run) -> dict:
    import uproot

    sources = [f.file.source for f in run.files]
    return {
        "bytes": sum(s.num_requested_bytes for s in sources),
        "requests": sum(s.num_requests for s in sources),
        "round_trips": None,
        "extra": {"handler": type(sources[0]).__name__ if sources else None, "ranges": sum(s.num_requested_chunks for s in sources)},
        "version": uproot.__version__,
    }


RUNNERS = {"cherenkov": (run_cherenkov, counters_cherenkov), "root": (run_root, counters_root), "uproot": (run_uproot, counters_uproot)}


def main() -> int:
    spec = json.loads(sys.argv[1])
    base = rss_now()  # nothing imported yet but numpy
    runner, counters = RUNNERS[spec["tool"]]
    if spec["tool"] == "root":  # imports (and ROOT's compilation of the loop) stay outside the clock
        import_root().gInterpreter.Declare(_ROOT_NTUPLE_CODE if spec.get("format") == "rntuple" else _ROOT_CODE)
    else:
        __import__(spec["tool"])
    run = Run(spec)
    try:
        runner(spec, run)
        status = "ok"
    except OutOfTime:
        status = "timeout"
    result = {
        "status": status,
        "seconds": run.clock.seconds(),
        "done": run.progress.fraction,
        "open_seconds": run.open_seconds,
        "file_seconds": run.file_seconds,
        "check": run.check.to_dict(),
        **counters(run),
        "peak_rss": peak_rss(),
        "base_rss": base,
    }
    sys.stdout.flush()
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
