# Sourced by the Makefile: puts the project's own tools (toxiproxy, venv) first on PATH.
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$_root/.tools/bin:$_root/.venv/bin:$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
export CHERENKOV_SHARED="${CHERENKOV_SHARED:-$(cd "$_root/.." && pwd)/shared}"
unset _root
