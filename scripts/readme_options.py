"""Write the README's table of `cherenkov.open`'s options from the core's one definition of them
(`crates/cherenkov-core/src/engine/options.rs`, as `cherenkov._core.OPEN_OPTIONS`).

`python scripts/readme_options.py` rewrites the table in place; `--check` only says whether it is
current (the test suite checks it too)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
START = "<!-- open options: generated from engine/options.rs by `python scripts/readme_options.py` -->"
END = "<!-- /open options -->"


def table() -> str:
    from cherenkov import _core

    rows = ["| option | default | what it does |", "|---|---|---|"]
    rows += [f"| `{name}` | {default} | {doc} |" for name, default, doc in _core.OPEN_OPTIONS]
    return "\n".join(rows)


def with_table(readme: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"{README}: the markers of the options table are missing")
    return pattern.sub(lambda _: f"{START}\n{table()}\n{END}", readme)


def main() -> int:
    text = README.read_text()
    current = with_table(text)
    if "--check" in sys.argv:
        print("current" if current == text else "out of date: run python scripts/readme_options.py")
        return int(current != text)
    README.write_text(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
