"""cherenkov's byte sources under uproot: ``uproot.open(url, handler=cherenkov.uproot.Source)``.

Everything else in an uproot or coffea analysis stays as it is; uproot still interprets the
bytes, cherenkov fetches them (one vectored request per ``chunks`` call, opening answered from
the speculative head and tail read, replicas, retries, statistics). ``tree_aware=True`` adds
the learning cache of `cherenkov.uproot.baskets`.
"""

from cherenkov.uproot.source import Source

__all__ = ["Source"]
