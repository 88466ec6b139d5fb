"""Survey: every TTree branch of some ROOT files (or of the files in some directories), read by uproot and by
cherenkov (``library="ak"``), classified as equal, wrong value, wrong type, same type in another
form, refused (``UnsupportedBranch``, with its reason) or failed (any other error). Branches uproot
cannot read are counted apart and not judged: ``beyond-uproot`` when cherenkov reads them (in files
uproot opens, or in files it cannot open, such as ROOT 3 to 5.21 archives with "CS" compression),
else ``uproot-fails``; the files uproot reads nothing of and cherenkov reads are counted at the end.

    .venv/bin/python scripts/conformance_survey.py FILE_OR_DIR ...   # e.g. scikit-hep-testdata's files

Each file is surveyed in a subprocess with a time and memory limit, so one pathological file cannot
stall the survey; a file that times out or crashes is reported as such. uproot's reading of one
branch is bounded too (``--branch-timeout``, and the memory limit): a branch uproot does not finish
is ``uproot-fails``, as one it refuses.

Differences judged by ROOT to be uproot's errors (ROOT reads what cherenkov reads) are listed with
their evidence in ``conformance_known_differences.json`` beside this script; branches they match
are counted as ``known-difference`` instead of ``wrong-value`` or ``wrong-type``.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import math
import resource
import signal
import subprocess
import sys
from pathlib import Path

TREE_CLASSES = {"TTree", "TNtuple", "TNtupleD"}
KNOWN_DIFFERENCES = Path(__file__).with_name("conformance_known_differences.json")
# Bytes of address space a file's subprocess may use: uproot's reading of some malformed maps
# grows past 16 GB before it fails.
MEMORY_LIMIT = 8 << 30


def _known_difference(rec: dict, known: list[dict]) -> str | None:
    """The cause of a wrong value or type that ROOT showed to be uproot's, or None."""
    name = Path(rec["file"]).name
    for k in known:
        if (
            rec["outcome"] in k["outcomes"]
            and fnmatch.fnmatchcase(name, k["file"])
            and any(fnmatch.fnmatchcase(rec.get("branch") or "", b) for b in k["branches"])
        ):
            return k["cause"]
    return None


class _Slow(BaseException):
    """Not an Exception: uproot's own handlers must not catch it."""


def _bounded(seconds: float, read, *args, **kwargs):
    """`read(*args, **kwargs)`, or _Slow after `seconds` (uproot's Python code sees the alarm)."""

    def alarm(signum, frame):
        raise _Slow(f"did not finish in {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return read(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _same_values(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_values(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return _same_values(list(a), list(b))
    return type(a) is type(b) and a == b or (isinstance(a, int | float) and isinstance(b, int | float) and a == b)


def _form(array) -> dict:
    """The form without form keys (they name buffers, not structure)."""

    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k != "form_key"}
        if isinstance(d, list):
            return [strip(x) for x in d]
        return d

    return strip(array.layout.form.to_dict(verbose=False))


def survey_file(path: str, branch_timeout: float = 60.0) -> list[dict]:
    """One record per branch: file, tree, branch, outcome, detail."""
    import awkward as ak
    import cherenkov
    import uproot

    out = []
    try:
        theirs_file = uproot.open(path)
        trees = [k for k, c in theirs_file.classnames(cycle=False).items() if c in TREE_CLASSES]
    except Exception as e:  # not a ROOT file uproot opens: nothing to judge, but what does cherenkov read?
        return _beyond_uproot(path, f"{type(e).__name__}: {e}"[:200])
    try:
        ours_file = cherenkov.open(path)
    except Exception as e:
        ours_file, open_error = None, f"{type(e).__name__}: {e}"[:300]
    for tree_key in trees:
        try:
            theirs_tree = theirs_file[tree_key]
            theirs_branches = theirs_tree.values(recursive=True)
        except Exception:
            continue
        ours_tree, tree_error = None, None
        if ours_file is None:
            tree_error = open_error
        else:
            try:
                ours_tree = ours_file[tree_key]
            except Exception as e:
                tree_error = f"{type(e).__name__}: {e}"[:300]
        seen = set()
        for theirs_branch in theirs_branches:
            name = theirs_branch.name
            # The first of several branches with one name is the one both libraries read by it.
            if name in seen:
                continue
            seen.add(name)
            rec = {"file": path, "tree": tree_key, "branch": name}
            out.append(rec)
            try:
                theirs = _bounded(branch_timeout, theirs_tree[name].array, library="ak")
            except (Exception, _Slow) as e:
                rec.update(_ours_alone(ours_tree, name, f"{type(e).__name__}: {e}"[:200]))
                continue
            if tree_error is not None:
                rec.update(outcome="error", detail=tree_error)
                continue
            try:
                ours = ours_tree.arrays([name], library="ak")[name]
            except cherenkov.UnsupportedBranch as e:
                rec.update(outcome="refused", detail=str(e).rsplit(": ", 1)[-1][:200])
                continue
            except Exception as e:
                rec.update(outcome="error", detail=f"{type(e).__name__}: {e}"[:300])
                continue
            try:
                if str(ours.type) != str(theirs.type):
                    rec.update(outcome="wrong-type", detail=f"ours {ours.type} / uproot {theirs.type}"[:300])
                elif not _same_values(ak.to_list(ours), ak.to_list(theirs)):
                    rec.update(outcome="wrong-value", detail=str(theirs.type)[:200])
                elif _form(ours) != _form(theirs):
                    rec.update(outcome="other-form", detail=str(theirs.type)[:200])
                else:
                    rec.update(outcome="equal")
            except Exception as e:
                rec.update(outcome="compare-error", detail=f"{type(e).__name__}: {e}"[:200])
    return out


def _ours_alone(ours_tree, name: str, uproot_error: str) -> dict:
    """A branch uproot cannot read: ``beyond-uproot`` when cherenkov reads it, else ``uproot-fails``."""
    if ours_tree is not None:
        try:
            ours_tree.arrays([name], library="ak")
            return {"outcome": "beyond-uproot", "detail": uproot_error}
        except Exception:
            pass
    return {"outcome": "uproot-fails", "detail": uproot_error}


def _beyond_uproot(path: str, uproot_error: str) -> list[dict]:
    """A file uproot cannot open: one record per branch cherenkov lists (``beyond-uproot`` or
    ``uproot-fails``), or one ``uproot-cannot-open`` record when cherenkov finds no tree either."""
    import cherenkov

    out = []
    try:
        ours_file = cherenkov.open(path)
        trees = [k for k, c in ours_file.classnames().items() if c in TREE_CLASSES]
    except Exception:
        trees = []
    for tree_key in trees:
        try:
            ours_tree = ours_file[tree_key]
            names = [b.name for b in ours_tree.branches]
        except Exception:
            out.append({"file": path, "tree": tree_key, "outcome": "uproot-fails", "detail": uproot_error})
            continue
        for name in dict.fromkeys(names):
            out.append({"file": path, "tree": tree_key, "branch": name, **_ours_alone(ours_tree, name, uproot_error)})
    return out or [{"file": path, "outcome": "uproot-cannot-open", "detail": uproot_error}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="ROOT files, or directories whose *.root files are surveyed")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per file")
    parser.add_argument("--branch-timeout", type=float, default=60.0, help="seconds for uproot's reading of a branch")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--list", action="store_true", help="print every branch that is not equal")
    parser.add_argument("--json", help="write every branch record to this file")
    args = parser.parse_args()
    if args.one:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        print(json.dumps(survey_file(args.one, args.branch_timeout)))
        return
    if not args.paths:
        parser.error("name the ROOT files or directories to survey")
    given = [Path(p) for p in args.paths]
    files = sorted(p for g in given for p in (g.glob("*.root") if g.is_dir() else [g]) if p.stat().st_size > 1024)
    records = []
    for path in files:
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--one", str(path), "--branch-timeout", str(args.branch_timeout)],
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            lines = done.stdout.strip().splitlines()
            if done.returncode != 0 or not lines:
                records.append({"file": str(path), "outcome": "file-crashed", "detail": done.stderr[-300:]})
            else:
                records.extend(json.loads(lines[-1]))
        except subprocess.TimeoutExpired:
            records.append({"file": str(path), "outcome": "file-timeout", "detail": f"over {args.timeout} s"})
    known = json.loads(KNOWN_DIFFERENCES.read_text())
    for r in records:
        cause = _known_difference(r, known)
        if cause is not None:
            r.update(outcome="known-difference", detail=cause, was=r["outcome"])
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=0))
    counts = collections.Counter(r["outcome"] for r in records)
    unjudged = ("uproot-fails", "uproot-cannot-open", "beyond-uproot")
    judged = sum(n for k, n in counts.items() if k not in unjudged)
    print(f"{len(files)} files, {judged} branches uproot reads")
    for outcome, n in counts.most_common():
        share = f" ({100 * n / judged:.1f} %)" if judged and outcome not in unjudged else ""
        print(f"  {outcome:18} {n}{share}")
    by_file = collections.defaultdict(collections.Counter)
    for r in records:
        by_file[r["file"]][r["outcome"]] += 1
    refused = [f for f, c in by_file.items() if not set(c) - set(unjudged)]
    read = [f for f in refused if by_file[f]["beyond-uproot"]]
    whole = [f for f in read if set(by_file[f]) == {"beyond-uproot"}]
    print(f"files uproot reads no branch of: {len(refused)}; cherenkov reads branches of {len(read)}, all of them in {len(whole)}")
    shown = (
        "wrong-value",
        "wrong-type",
        "other-form",
        "error",
        "compare-error",
        "refused",
        "file-timeout",
        "file-crashed",
        "known-difference",
    )
    for outcome in (*shown, "beyond-uproot"):
        reasons = collections.Counter(r.get("detail", "") for r in records if r["outcome"] == outcome)
        if reasons:
            print(f"\n{outcome}: top reasons")
            for reason, n in reasons.most_common(12):
                print(f"  {n:5}  {reason[:160]}")
    if args.list:
        print()
        for r in records:
            if r["outcome"] not in ("equal", *unjudged):
                print(f"{r['outcome']:12} {Path(r['file']).name}:{r.get('tree')}:{r.get('branch')}  {r.get('detail', '')[:150]}")


if __name__ == "__main__":
    main()
