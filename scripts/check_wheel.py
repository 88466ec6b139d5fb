"""Check the wheel as a user gets it: install it in a fresh virtual environment (no Rust on the
PATH, only what pip brings), then read a file over HTTP from the lab's nginx with it, through the
API and the `cherenkov` command, and compare the values with the checkout's own read.

    make wheel && python scripts/check_wheel.py target/wheels/cherenkov-*.whl
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cherenkov
import numpy as np
from cherenkov_lab import NginxServer

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "lab" / "data" / "nanoAOD_2015_CMS_Open_Data_ttbar.root"
READ = """
import json, sys, cherenkov
tree = cherenkov.open(sys.argv[1])["Events"]
arrays = tree.arrays(["nMuon", "Muon_pt"], library="np")
print(json.dumps({"version": cherenkov.__version__, "nMuon": arrays["nMuon"].tolist(),
                  "Muon_pt": arrays["Muon_pt"].content.tolist(), "file": cherenkov.__file__}))
"""


def main(wheel: str) -> int:
    with tempfile.TemporaryDirectory(prefix="cherenkov-wheel-") as scratch:
        venv, served = Path(scratch) / "venv", Path(scratch) / "served"
        served.mkdir()
        os.chmod(scratch, 0o755)
        os.chmod(served, 0o755)
        shutil.copy(SAMPLE, served / SAMPLE.name)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        # No cargo or rustc where the user's PATH has them: the wheel must not need them.
        env = {**os.environ, "PATH": "/usr/bin:/bin"}
        env.pop("VIRTUAL_ENV", None)
        env.pop("PYTHONPATH", None)
        subprocess.run([venv / "bin" / "pip", "install", "-q", wheel], check=True, env=env)
        with NginxServer(served) as nginx:
            url = nginx.url(SAMPLE.name)
            run = {"env": env, "check": True, "capture_output": True, "text": True, "cwd": scratch}
            got = json.loads(subprocess.run([venv / "bin" / "python", "-c", READ, url], **run).stdout)
            listing = subprocess.run([venv / "bin" / "cherenkov", "ls", url], **run).stdout
        want = cherenkov.open(SAMPLE)["Events"].arrays(["nMuon", "Muon_pt"], library="np")
        same = got["nMuon"] == want["nMuon"].tolist() and np.array_equal(got["Muon_pt"], want["Muon_pt"].content)
        print(f"installed cherenkov {got['version']} from {Path(wheel).name} at {got['file']}")
        print(f"read {url}: {'the same values as the checkout' if same else 'DIFFERENT values'}")
        print(f"`cherenkov ls` over HTTP: {len(listing.splitlines())} lines, first: {listing.splitlines()[0] if listing else ''}")
        return 0 if same and "Events" in listing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
