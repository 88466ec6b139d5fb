#!/usr/bin/env bash
# Idempotent setup: system packages (xrootd, nginx), toxiproxy, the project venv, and the
# cherenkov extension built in release mode. Each step is skipped when its inputs are unchanged.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
stamps=.setup-stamps
mkdir -p "$stamps" .tools/bin
log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*"; }

# 1. System packages: real servers for the tests and the lab.
# xrootd-scitokens-plugins: ztn tokens checked by the servers of tests/test_xrootd_auth.py.
# krb5-kdc, krb5-admin-server, krb5-user: the Kerberos realm of tests/test_xrootd_gsi.py.
apt_pkgs="xrootd-server xrootd-client xrootd-scitokens-plugins nginx-light krb5-kdc krb5-admin-server krb5-user"
if ! dpkg -s $apt_pkgs >/dev/null 2>&1; then
  log "installing system packages: $apt_pkgs"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $apt_pkgs >/dev/null
  # The Debian nginx package starts a system-wide server on port 80; the tests run their own.
  (command -v systemctl >/dev/null && $SUDO systemctl disable --now nginx) >/dev/null 2>&1 || true
  [ -f /run/nginx.pid ] && $SUDO kill "$(cat /run/nginx.pid)" 2>/dev/null || true
fi

# 2. toxiproxy (Shopify), pinned: the newest the Go module proxy serves here.
if [ ! -x .tools/bin/toxiproxy-server ]; then
  log "building toxiproxy v2.5.0"
  export PATH="/usr/local/go/bin:$PATH"
  GOBIN="$root/.tools/gobin" go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0
  mv .tools/gobin/server .tools/bin/toxiproxy-server
  rm -rf .tools/gobin
fi

# 3. Python virtual environment with the test and bench extras.
python_inputs=$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-16)
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
if [ ! -f "$stamps/python-$python_inputs" ]; then
  log "installing Python dependencies"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q "maturin>=1.5,<2" numpy "awkward>=2.5" rich pytest "uproot>=5.3" \
    xxhash lz4 zstandard matplotlib hist "dask[distributed]==2025.3.1" "ruff==0.17.6"
  # uproot/coffea/Dask plug-ins and their peers (dask-awkward needs dask < 2025.4)
  .venv/bin/pip install -q "dask-awkward==2026.2.1" "coffea==2026.9.0" "fsspec-xrootd==0.5.5" "xrootd==6.2.1"
  rm -f "$stamps"/python-*
  touch "$stamps/python-$python_inputs"
fi

# The test and benchmark servers (lab/cherenkov_lab) are not part of the installed package: the
# venv finds them through a .pth file.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$root/lab" > "$site/cherenkov_lab.pth"

# 4. The extension: rebuilt when any Rust or Python source changes.
ext_inputs=$(find crates python Cargo.toml Cargo.lock pyproject.toml -type f \( -name '*.rs' -o -name '*.toml' -o -name '*.py' -o -name Cargo.lock \) -print0 2>/dev/null \
  | sort -z | xargs -0 sha1sum | sha1sum | cut -c1-16)
if [ ! -f "$stamps/ext-$ext_inputs" ] || ! .venv/bin/python -c "import cherenkov._core" 2>/dev/null; then
  log "building the cherenkov extension (release)"
  export PATH="$HOME/.cargo/bin:$PATH"
  if ! VIRTUAL_ENV="$root/.venv" .venv/bin/maturin develop --release -q >"$stamps/maturin.log" 2>&1; then
    cat "$stamps/maturin.log"
    exit 1
  fi
  rm -f "$stamps"/ext-*
  touch "$stamps/ext-$ext_inputs"
fi
# Bytecode of the package and the lab, compiled once: an editable install has none, and where
# PYTHONDONTWRITEBYTECODE is set every process compiled them again (0.1 s of each
# `cherenkov merge`). A stale file is compiled again in memory, so an edit needs no new setup.
.venv/bin/python -m compileall -q python lab bench >/dev/null
log "ready"
