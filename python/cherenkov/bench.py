"""`cherenkov bench`: the latency lab (bench/lab.py) of a source checkout, with the same options.

    cherenkov bench --quick
    python -m cherenkov.bench --rtt 0,137 --repeat 5

The lab needs what only a checkout has: bench/lab.py and its helpers, the data generator, and the
servers `make setup` installs (xrootd, nginx, toxiproxy in .tools/bin); `make bench` also installs
ROOT and uproot's XRootD handler (scripts/setup-bench.sh). So this command finds the checkout this
package was built from and runs bench/lab.py there with this interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "bench" / "lab.py"


def checkout() -> Path | None:
    """The source checkout this package lives in, or None (an installed wheel has no bench/)."""
    return REPO if LAB.is_file() and (REPO / "scripts" / "setup-bench.sh").is_file() else None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    repo = checkout()
    if repo is None:
        print(
            "cherenkov bench: error: the latency lab runs from a source checkout of cherenkov (it needs "
            f"bench/lab.py and the servers `make setup` installs), and {Path(__file__).resolve().parent} is not "
            "inside one. Clone the repository and run `make bench` (or `cherenkov bench` from its .venv).",
            file=sys.stderr,
        )
        return 2
    return subprocess.call([sys.executable, str(LAB), *args], cwd=str(repo))


def add_subcommand(subparsers) -> None:
    """Register `bench` on the `cherenkov` command's subparsers (cli.py: `add_subcommand(sub)`).
    Every argument after `bench`, options included, goes to bench/lab.py: the subparser has no
    option prefix of its own, so `cherenkov bench --quick` and `cherenkov bench --help` reach it."""
    parser = subparsers.add_parser(
        "bench", help="the latency lab: cherenkov, ROOT and uproot at simulated round trips", add_help=False, prefix_chars="\x00"
    )
    parser.add_argument("lab_args", nargs="*", help="options of bench/lab.py (see `cherenkov bench --help`)")
    parser.set_defaults(run=lambda args: main(args.lab_args))


if __name__ == "__main__":
    sys.exit(main())
