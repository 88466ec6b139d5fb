"""Sizes as people write them: ``10GB``, ``500 MB``, ``2GiB`` (what ``--max-size`` and a
``step_size`` given as a memory size take, as uproot takes it)."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
}


def parse_size(text: str) -> int:
    """Bytes of `text`: a number and a unit (kB, MB, GB, TB, KiB, MiB, GiB, TiB, B; any case)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError(f"'{text}' is not a size: write 100 MB, 10GB, 2GiB or a number of bytes")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])
