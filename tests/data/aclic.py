"""Classes compiled with a dictionary by ROOT's ACLiC, as experiments compile theirs, for the
scripts here that write test files with ROOT (interpreted classes crash ROOT's writer for some
members, and a split std::vector<Class> needs a dictionary)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import ROOT


def compile_classes(code: str, header_name: str) -> None:
    """Compile C++ `code` (classes, their LinkDef pragmas, the writing functions) as a header
    named `header_name`; its functions are then in ``ROOT``."""
    build = Path(tempfile.mkdtemp(prefix="aclic-"))
    header = build / header_name
    header.write_text(code)
    if ROOT.gSystem.CompileMacro(str(header), "kO", "", str(build)) != 1:
        raise SystemExit("ACLiC could not compile the classes (is a C++ compiler installed?)")


def write_file(out: Path, write, *args) -> None:
    """A new ROOT file `out`, filled by ``write(*args)``."""
    f = ROOT.TFile(str(out), "RECREATE")
    write(*args)
    f.Close()
    print(f"wrote {out} ({out.stat().st_size} bytes)")
