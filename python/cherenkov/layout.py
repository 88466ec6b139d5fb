"""What a file's layout costs a reader far away (`cherenkov layout FILE`): its trees' clusters,
baskets per branch per cluster and their mean size, where the metadata lies, and for a selection
of branches the requests, bytes and time a read by cherenkov's engine needs at a round trip time.

The prediction follows how the engine reads (see the README's "How remote reads stay fast"):
opening reads the file's head and tail in one request, and one more round trip fetches what lies
outside them (a tree's metadata or the streamer infos written early, as uproot writes them); a
read goes in steps of whole clusters (``step_size`` entries), each fetching the selected baskets
of its clusters as vectored requests (ranges closer than 128 bytes merged, at most 200 ranges a
request; a file no larger than the head and tail is read whole by opening); requests are
pipelined over ``connections``, so the time is the opening's round trips plus the longer of the
steps' round trips spread over the connections and the bytes at ``bandwidth``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from cherenkov.dataset import TABLE_CLASSES
from cherenkov.file import open as open_file

HEAD_BYTES = 64 << 10
TAIL_BYTES = 1 << 20
MERGE_GAP = 128
RANGES_PER_REQUEST = 200


@dataclass
class BranchLayout:
    name: str
    baskets: int
    baskets_per_cluster: float
    mean_basket_bytes: float
    compressed_bytes: int


@dataclass
class Prediction:
    """A read of `branches` branches of a tree: requests (opening included), bytes, seconds."""

    branches: int
    steps: int
    requests: int
    bytes: int
    seconds: float
    rtt_ms: float


@dataclass
class TreeLayout:
    name: str
    kind: str
    entries: int
    clusters: int
    mean_cluster_entries: float
    baskets: int
    mean_basket_bytes: float
    compressed_bytes: int
    metadata: dict  # where the tree's metadata and the streamer infos lie, as fractions of the file
    opening_requests: int
    branches: list[BranchLayout] = field(default_factory=list)
    prediction: Prediction | None = None


def layout(
    path,
    *,
    tree: str | None = None,
    branches=None,
    rtt_ms: float = 0.0,
    step_size: int = 100_000,
    connections: int = 8,
    bandwidth: float = 125e6,
    **open_options,
) -> list[TreeLayout]:
    """The `TreeLayout` of each tree of the file at `path` (or of `tree`); `branches` (names or
    patterns, as `Tree.arrays` takes them; None: every readable branch) is the selection whose read
    is predicted at `rtt_ms`, `connections` requests in flight and `bandwidth` bytes/s."""
    with open_file(path, **open_options) as f:
        locations = {(p, c): (seek, n) for p, c, _, seek, n in f._core.key_locations()}
        names = [tree] if tree else list(dict.fromkeys(k.split(";")[0] for k, c in f.classnames().items() if c in TABLE_CLASSES))
        return [_tree_layout(f, name, locations, branches, rtt_ms, step_size, connections, bandwidth) for name in names]


def _outside_opening(seek: int, nbytes: int, size: int) -> bool:
    """Whether metadata lies outside what opening reads anyway (the head and the tail)."""
    return not (seek + nbytes <= HEAD_BYTES or seek >= size - TAIL_BYTES)


def _tree_layout(f, name, locations, selection, rtt_ms, step_size, connections, bandwidth) -> TreeLayout:
    t = f[name]
    bounds = np.asarray(t.cluster_boundaries, dtype=np.int64)
    clusters = max(len(bounds) - 1, 0)
    entries = t.num_entries
    ttree = type(t).__name__ != "RNTuple"
    branch_layouts = []
    for b in t.branches:
        count = b.num_baskets if ttree else b.num_pages
        if count == 0:
            continue
        branch_layouts.append(BranchLayout(b.name, count, count / max(clusters, 1), b.compressed_bytes / count, b.compressed_bytes))
    baskets = sum(b.baskets for b in branch_layouts)
    compressed = sum(b.compressed_bytes for b in branch_layouts)
    cycles = [c for (p, c) in locations if p == name]
    seek, nbytes = locations[(name, max(cycles))] if cycles else (0, 0)
    info_seek, info_bytes = locations.get(("StreamerInfo", 1), (0, 0))
    metadata = {
        "tree_at": round(seek / f.size, 4) if f.size else 0.0,
        "tree_bytes": nbytes,
        "streamers_at": round(info_seek / f.size, 4) if f.size else 0.0,
        "file_bytes": f.size,
    }
    outside = [_outside_opening(s, n, f.size) for s, n in ((seek, nbytes), (info_seek, info_bytes)) if n]
    opening = 1 + int(any(outside))
    out = TreeLayout(
        name,
        "TTree" if ttree else "RNTuple",
        entries,
        clusters,
        entries / max(clusters, 1),
        baskets,
        compressed / max(baskets, 1),
        compressed,
        metadata,
        opening,
        branch_layouts,
    )
    if ttree:
        out.prediction = _predict(t, f.size, bounds, selection, opening, rtt_ms, step_size, connections, bandwidth)
    return out


def _steps(bounds: np.ndarray, step_size: int) -> list[tuple[int, int]]:
    """Entry ranges of whole clusters of at least `step_size` entries (the last one shorter)."""
    steps, start = [], int(bounds[0]) if len(bounds) else 0
    for b in bounds[1:]:
        if b - start >= step_size:
            steps.append((start, int(b)))
            start = int(b)
    if len(bounds) and start < bounds[-1]:
        steps.append((start, int(bounds[-1])))
    return steps


def _predict(t, size, bounds, selection, opening, rtt_ms, step_size, connections, bandwidth) -> Prediction:
    chosen = [info for _, info in t.resolve(selection)]
    requests = total = 0
    steps = _steps(bounds, step_size)
    for lo, hi in steps:
        ranges = []
        for b in chosen:
            starts = np.asarray(list(b.basket_entry_starts) + [b.entries], dtype=np.int64)
            for k in range(b.num_baskets):
                seek, nbytes = b.basket_seeks[k], b.basket_bytes[k]
                if starts[k] < hi and starts[k + 1] > lo and nbytes:
                    ranges.append((seek, nbytes))
        merged = _coalesce(ranges)
        total += sum(n for _, n in merged)
        requests += math.ceil(len(merged) / RANGES_PER_REQUEST)
    if size <= HEAD_BYTES + TAIL_BYTES:  # opening read the whole file
        requests, total = 0, 0
    rtt = rtt_ms / 1000
    seconds = opening * rtt + max(requests * rtt / max(connections, 1), total / bandwidth)
    return Prediction(len(chosen), len(steps), opening + requests, total, seconds, rtt_ms)


def _coalesce(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for seek, n in sorted(ranges):
        if out and seek <= out[-1][0] + out[-1][1] + MERGE_GAP:
            out[-1][1] = max(out[-1][0] + out[-1][1], seek + n) - out[-1][0]
        else:
            out.append([seek, n])
    return [(s, n) for s, n in out]


def as_dict(layouts: list[TreeLayout]) -> list[dict]:
    return [asdict(t) for t in layouts]
