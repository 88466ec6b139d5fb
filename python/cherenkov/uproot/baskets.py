"""A learning basket cache under uproot (``tree_aware=True`` of `cherenkov.uproot.Source`).

uproot reads a branch's baskets with one ``chunks`` call, and coffea's lazy (virtual) mode asks
for one branch at a time, so a plain source pays one round trip per branch and cluster.
cherenkov parses the same TTrees, so each basket uproot asks for is known as (tree, branch,
cluster), and the learning policy of the engine's lazy chunks (``engine/lazy.rs``) applies:

- *startup*: the first basket request of a tree fetches that cluster's baskets of every branch,
  in one request (within ``startup_bytes``); the branches used in that cluster become the
  learned set when the analysis moves to another cluster;
- *learned*: a request for a learned branch brings the learned set of its cluster, in one
  request, and the rest are then served from memory;
- *miss (trigger)*: the first request for a branch outside the learned set brings every unread
  basket of its cluster in one request (within ``startup_bytes``); what is then used becomes the
  miss set, fetched together on later misses.

The engine's lazy reader holds decoded arrays; uproot decompresses itself, so this cache holds
the raw baskets, within a memory budget and for the clusters in use (older clusters are
dropped). A `BasketProfile` carries what was learned to the next file of a dataset.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections import OrderedDict


@dataclasses.dataclass
class BasketCacheStats:
    """What the cache did: branch requests served from memory (hits) or fetched, and its
    fetches by kind (each one request, however many baskets it carried)."""

    hits: int = 0
    misses: int = 0
    startup_fetches: int = 0
    learned_fetches: int = 0
    miss_fetches: int = 0
    other_fetches: int = 0


class BasketProfile:
    """Which branches an analysis uses, by tree and branch path; share one between the files of
    a dataset (``uproot_options={"handler": Source, "tree_aware": True, "profile": p}``) so the
    next file needs no training. Pickles empty (each Dask worker learns by itself)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.trained: set[str] = set()
        self.learned: dict[str, set[str]] = {}
        self.missed: dict[str, set[str]] = {}

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()


@dataclasses.dataclass(frozen=True)
class _Basket:
    tree: str
    branch: str
    cluster: int


class _Tree:
    """Where a tree's baskets are: by branch and cluster, and which basket each seek is."""

    def __init__(self, name: str, core_tree):
        self.name = name
        bounds = list(core_tree.cluster_boundaries())
        self.by_seek: dict[int, tuple[_Basket, int]] = {}
        self.ranges: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for info in core_tree.branches():
            for seek, nbytes, entry in zip(info.basket_seeks, info.basket_bytes, info.basket_entry_starts):
                if nbytes == 0:
                    continue
                cluster = max(bisect.bisect_right(bounds, entry) - 1, 0)
                basket = _Basket(name, info.path, cluster)
                self.by_seek[seek] = (basket, nbytes)
                self.ranges.setdefault((info.path, cluster), []).append((seek, seek + nbytes))
        self.branches = sorted({b for b, _ in self.ranges})

    def cluster_ranges(self, branches, cluster: int) -> list[tuple[int, int]]:
        return [r for b in branches for r in self.ranges.get((b, cluster), ())]


class BasketCache:
    """``read(ranges)`` for `Source`: the baskets asked for, with what the learning policy adds
    in the same request; everything else passes through."""

    def __init__(
        self,
        core_file,
        profile: BasketProfile | None = None,
        startup_bytes: int = 64 << 20,
        budget_bytes: int = 512 << 20,
        clusters_kept: int = 2,
    ):
        self._file = core_file
        self.profile = profile if profile is not None else BasketProfile()
        self._startup_bytes = startup_bytes
        self._budget_bytes = budget_bytes
        self._clusters_kept = clusters_kept
        self._lock = threading.Lock()
        self._trees: dict[int, tuple[_Tree, int]] | None = None
        # (tree, cluster) -> {(start, stop): buffer}, oldest first
        self._held: OrderedDict[tuple[str, int], dict[tuple[int, int], object]] = OrderedDict()
        self._held_bytes = 0
        self._used: dict[tuple[str, int], set[str]] = {}
        self._triggered: set[tuple[str, int]] = set()
        self._training: dict[str, int] = {}
        self.stats = BasketCacheStats()

    def _index(self) -> dict[int, tuple[_Basket, int]]:
        if self._trees is None:
            trees = {}
            for path, cycle, cls, _title in self._file.keys():
                if cls in ("TTree", "TNtuple") and path not in trees:
                    trees[path] = _Tree(path, self._file.tree(f"{path};{cycle}"))
            self._tree_by_name = trees
            self._trees = {seek: hit for t in trees.values() for seek, hit in t.by_seek.items()}
        return self._trees

    def read(self, ranges: list[tuple[int, int]]) -> list:
        with self._lock:
            index = self._index()
            served, wanted, extra, kind = self._plan(ranges, index)
        fetched = dict(zip(wanted + extra, self._file.read_ranges(wanted + extra))) if wanted else {}
        with self._lock:
            if kind:
                setattr(self.stats, kind, getattr(self.stats, kind) + 1)
            for r in extra:
                hit = index.get(r[0])
                if hit is not None:
                    self._hold(hit[0], r, fetched[r])
        return [served[r] if r in served else fetched[r] for r in ranges]

    def _plan(self, ranges, index):
        """What memory serves, what must be fetched, what the policy adds, and the kind of fetch."""
        served, wanted, extra, kind = {}, [], [], None
        asked = set()
        for r in ranges:
            if r in served or r in asked:
                continue
            hit = index.get(r[0])
            if hit is None or r[0] + hit[1] != r[1]:
                wanted.append(r)  # not a basket: passes through
                asked.add(r)
                kind = kind or "other_fetches"
                continue
            basket = hit[0]
            key = (basket.tree, basket.cluster)
            self._use(basket)
            buffer = self._held.get(key, {}).get(r)
            if buffer is not None:
                served[r] = buffer
                self.stats.hits += 1
                continue
            self.stats.misses += 1
            wanted.append(r)
            asked.add(r)
            more, why = self._policy(basket)
            if why is not None and (kind is None or kind == "other_fetches"):
                kind = why
            for m in more:
                if m not in asked and m not in self._held.get(key, {}):
                    extra.append(m)
                    asked.add(m)
        return served, wanted, extra, kind

    def _use(self, basket: _Basket):
        """Note the branch as used in its cluster, and end a training that moved on."""
        p = self.profile
        tree, cluster = basket.tree, basket.cluster
        with p.lock:
            training = self._training.get(tree)
            if training is not None and training != cluster:
                p.learned[tree] = set(self._used.get((tree, training), ()))
                p.trained.add(tree)
                del self._training[tree]
            if tree in p.trained and basket.branch not in p.learned.get(tree, ()):
                key = (tree, cluster)
                if key in self._triggered:
                    p.missed.setdefault(tree, set()).add(basket.branch)
        self._used.setdefault((tree, cluster), set()).add(basket.branch)

    def _policy(self, basket: _Basket) -> tuple[list[tuple[int, int]], str | None]:
        """The ranges a fetch of this basket brings along, and the kind of fetch."""
        tree = self._tree_by_name[basket.tree]
        key = (basket.tree, basket.cluster)
        p = self.profile
        with p.lock:
            trained = basket.tree in p.trained
            learned = set(p.learned.get(basket.tree, ()))
            missed = set(p.missed.get(basket.tree, ()))
        if not trained:
            if basket.tree in self._training:
                return [], "miss_fetches"
            self._training[basket.tree] = basket.cluster
            everything = tree.cluster_ranges(tree.branches, basket.cluster)
            if _size(everything) <= self._startup_bytes:
                self._triggered.add(key)
                return everything, "startup_fetches"
            return [], "miss_fetches"
        if basket.branch in learned:
            return tree.cluster_ranges(sorted(learned), basket.cluster), "learned_fetches"
        if basket.branch not in missed and key not in self._triggered:
            self._triggered.add(key)
            with p.lock:
                p.missed.setdefault(basket.tree, set()).add(basket.branch)
            unread = tree.cluster_ranges(tree.branches, basket.cluster)
            if _size(unread) <= self._startup_bytes:
                return unread, "miss_fetches"
        return tree.cluster_ranges(sorted(missed | {basket.branch}), basket.cluster), "miss_fetches"

    def _hold(self, basket: _Basket, r, buffer):
        key = (basket.tree, basket.cluster)
        held = self._held.setdefault(key, {})
        self._held.move_to_end(key)
        if r not in held:
            held[r] = buffer
            self._held_bytes += r[1] - r[0]
        # Keep the clusters in use: the newest few per file, within the budget.
        while len(self._held) > self._clusters_kept or (self._held_bytes > self._budget_bytes and len(self._held) > 1):
            _, dropped = self._held.popitem(last=False)
            self._held_bytes -= sum(stop - start for start, stop in dropped)


def _size(ranges) -> int:
    return sum(stop - start for start, stop in ranges)
