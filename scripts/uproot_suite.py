"""uproot's own test suite, once with uproot's default source and once with every path and URL it
opens routed through `cherenkov.uproot.Source` (`uproot_suite_plugin.py`); prints the tests that
pass the first way and fail the second.

    .venv/bin/python scripts/uproot_suite.py --testdata DIR [--tests DIR] [--work DIR] [--compare-only] [pytest args]

``--tests``: uproot's ``tests/`` for the installed uproot (a checkout of scikit-hep/uproot5 at the
tag of the installed version, or its source distribution); without it, the source distribution
of the installed version is fetched with pip into the work folder. ``--testdata``: a folder of the
scikit-hep-testdata files (its repository's ``src/skhep_testdata/data``); the suite finds them in
the package's cache, which lives under a HOME of its own in the work folder (the suite never
downloads). The test-only packages the suite imports (scikit-hep-testdata, rangehttpserver,
pytest-timeout) are installed with pip into the work folder, not into the environment. Nothing is
written into the repository. Tests that fail only because they assert which source class uproot
chose are listed apart. Exit status: 0 when no other test fails only through cherenkov.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_PACKAGES = ["scikit-hep-testdata", "rangehttpserver", "pytest-timeout"]
# What a test asserting the chosen source class says when it fails.
SOURCE_CLASS_SIGNS = ("Source", "source_cls", "isinstance(")


def uproot_tests(work: Path, given: Path | None) -> Path:
    if given is not None:
        return given
    want = version("uproot")
    unpacked = work / f"uproot-{want}"
    if not unpacked.is_dir():
        pip = [sys.executable, "-m", "pip", "download", f"uproot=={want}", "--no-binary", ":all:", "--no-deps", "-d", str(work)]
        subprocess.run(pip, check=True)
        with tarfile.open(work / f"uproot-{want}.tar.gz") as tar:
            tar.extractall(work, filter="data")
    return unpacked / "tests"


def prepare(work: Path, testdata: Path) -> dict[str, str]:
    site = work / "site"
    if not site.is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), *TEST_PACKAGES], check=True)
    home = work / "home"
    cache = home / ".local" / "skhepdata"
    cache.mkdir(parents=True, exist_ok=True)
    for f in testdata.iterdir():
        link = cache / f.name
        if f.is_file() and not link.exists():
            link.symlink_to(f.resolve())
    pythonpath = os.pathsep.join([str(HERE), str(site), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "HOME": str(home), "PYTHONPATH": pythonpath}


def run(tests: Path, env: dict, junit: Path, plugin: bool, extra: list[str]) -> None:
    args = [sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider", "--timeout", "300", f"--junitxml={junit}"]
    if plugin:
        args += ["-p", "uproot_suite_plugin"]
    print("$", " ".join(args + extra), flush=True)
    subprocess.run(args + extra, env=env, cwd=tests.parent)


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """Per test: passed, failed, error or skipped, and the failure's message."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        state, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                state, message = kind, (node.get("message") or "") + "\n" + (node.text or "")
                break
        out[name] = (state, message)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--testdata", type=Path, required=True, help="folder of scikit-hep-testdata's files")
    parser.add_argument("--tests", type=Path, help="uproot's tests/ for the installed version")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cherenkov-uproot-suite"), help="scratch folder")
    parser.add_argument("--compare-only", action="store_true", help="compare the runs the work folder holds")
    args, extra = parser.parse_known_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    tests = uproot_tests(args.work, args.tests)
    env = prepare(args.work, args.testdata)
    runs = {}
    for label, plugin in (("default", False), ("cherenkov", True)):
        junit = args.work / f"{label}.xml"
        if not args.compare_only:
            run(tests, env, junit, plugin, extra)
        runs[label] = outcomes(junit)
    default, ours = runs["default"], runs["cherenkov"]
    passing = [t for t, (s, _) in default.items() if s == "passed"]
    broken = [t for t in passing if ours.get(t, ("missing", ""))[0] not in ("passed", "skipped")]
    about_class = [t for t in broken if any(sign in ours[t][1] for sign in SOURCE_CLASS_SIGNS) and "cherenkov" in ours[t][1]]
    others = [t for t in broken if t not in about_class]
    print(f"\nuproot {version('uproot')}: {len(default)} tests, {len(passing)} pass with uproot's default source")
    print(f"through cherenkov.uproot.Source: {len(passing) - len(broken)} of them pass, {len(broken)} fail")
    for label, names in (("asserting the source class", about_class), ("other failures", others)):
        print(f"\n{label} ({len(names)}):")
        for t in names:
            first = ours[t][1].strip().splitlines()[0][:160] if ours[t][1].strip() else ""
            print(f"  {t}: {first}")
    return 1 if others else 0


if __name__ == "__main__":
    sys.exit(main())
