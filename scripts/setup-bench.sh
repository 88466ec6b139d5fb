#!/usr/bin/env bash
# The latency lab's peers, on top of scripts/setup.sh (servers, toxiproxy, .venv, extension):
# ROOT 6.40 (the `root` PyPI package, about 250 MB), uproot's default http handler (aiohttp) and its
# XRootD handler (fsspec-xrootd + xrootd), matplotlib for the plot. Idempotent: each package is
# installed only when importing it fails. A peer that will not install is reported and left out;
# bench/lab.py then says which rows are missing and why.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py=.venv/bin/python
log() { printf '\033[1;34m[setup-bench]\033[0m %s\n' "$*"; }
imports() { "$py" -W ignore -c "$1" >/dev/null 2>&1; }
install() { "$py" -m pip install -q "$@"; }

if [ ! -x "$py" ]; then
  echo "setup-bench: $py is missing: run scripts/setup.sh (make setup) first" >&2
  exit 1
fi

if ! imports "import ROOT"; then
  log "installing ROOT (pip package 'root', about 250 MB)"
  install root || log "ROOT did not install: the lab will run without ROOT"
fi
if ! imports "import uproot, matplotlib"; then
  log "installing uproot and matplotlib"
  install "uproot>=5.3" "matplotlib>=3.7"
fi
if ! imports "import aiohttp, requests"; then
  log "installing aiohttp and requests (uproot's default http:// handler, fsspec)"
  install aiohttp requests || log "aiohttp did not install: no uproot http:// rows"
fi
if ! imports "import fsspec_xrootd, XRootD.client"; then
  log "installing fsspec-xrootd and xrootd (uproot's root:// handler)"
  install fsspec-xrootd xrootd || log "fsspec-xrootd/xrootd did not install from PyPI: no uproot root:// rows"
fi
log "peers: $("$py" -W ignore -c '
import importlib
out = []
for name, module, attr in [("ROOT", "ROOT", None), ("uproot", "uproot", "__version__"), ("xrootd", "XRootD.client", None), ("aiohttp", "aiohttp", "__version__")]:
    try:
        m = importlib.import_module(module)
        version = m.gROOT.GetVersion() if name == "ROOT" else (getattr(m, attr, "") if attr else "")
        out.append(name + " " + (version or "ok"))
    except Exception:
        out.append(name + " missing")
print(", ".join(out))
' 2>/dev/null)"
