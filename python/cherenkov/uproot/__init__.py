"""cherenkov's byte sources under uproot: ``uproot.open(url, handler=cherenkov.uproot.Source)``.

Everything else in an uproot or coffea analysis stays as it is; uproot still interprets the
bytes, cherenkov fetches them: at most one vectored request per ``chunks`` call, uproot's metadata
reads answered from what the engine read while opening, the baskets uproot asks for learned per
tree layout (what a file's reader used is on its way when the next file alike opens), replicas,
retries, statistics.
"""

from cherenkov import _core
from cherenkov.uproot.source import Source, open_ahead


def forget_learned() -> None:
    """Forget what this process learned about the files read through `Source` (and fsspec): the
    next files are read as if they were the first (a new analysis in the same session)."""
    _core.forget_layouts()


__all__ = ["Source", "forget_learned", "open_ahead"]
