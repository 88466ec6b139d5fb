"""Pictures of where a read's time went (matplotlib; PNG or PDF by the file name).

- `read_offsets`: file offset read against time, one colour per source (the multi-source picture);
- `entry_offsets`: entry number against file offset of every basket, read ones highlighted
  (TTreePerfStats' picture);
- `timeline`: requests in flight and bytes received against time, with the moments data was
  consumed (whether latency was hidden).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _traces(files) -> list[tuple[str, dict]]:
    out = []
    for f in files if isinstance(files, (list, tuple)) else [files]:
        trace = f.trace()
        if trace is None:
            raise ValueError(f"{f.path} was not opened with trace=True: nothing to plot")
        out.append((f.path, trace))
    return out


def read_offsets(files, path: str | Path, title: str = "reads by offset and time") -> Path:
    """Each range read as a vertical bar from its offset to offset+length, at the time it was
    answered; one colour per file or source."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (name, t) in enumerate(_traces(files)):
        color = f"C{i}"
        ax.vlines(t["answered"], t["offset"] / 1e6, (t["offset"] + t["length"]) / 1e6, color=color, linewidth=2)
        ax.plot([], [], color=color, label=name)
    ax.set_xlabel("time since the file was opened [s]")
    ax.set_ylabel("file offset [MB]")
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    return _save(fig, path)


def entry_offsets(tree, path: str | Path, file=None, title: str | None = None) -> Path:
    """Every basket of every branch as a point (first entry, file offset); baskets whose bytes
    were read (per the file's trace) in colour, the others grey."""
    plt = _pyplot()
    seeks, entries = [], []
    for info in tree.branches:
        for start, seek in zip(info.basket_entry_starts, info.basket_seeks):
            entries.append(start)
            seeks.append(seek)
    seeks, entries = np.asarray(seeks, dtype=np.int64), np.asarray(entries, dtype=np.int64)
    read = np.zeros(len(seeks), dtype=bool)
    if file is not None and file.trace() is not None:
        t = file.trace()
        order = np.argsort(t["offset"])
        starts, ends = t["offset"][order], (t["offset"] + t["length"])[order]
        i = np.searchsorted(starts, seeks, side="right") - 1
        read = (i >= 0) & (seeks < ends[np.clip(i, 0, None)])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.scatter(seeks[~read] / 1e6, entries[~read], s=2, color="lightgrey", label="not read")
    ax.scatter(seeks[read] / 1e6, entries[read], s=2, color="C3", label="read")
    ax.set_xlabel("basket offset in the file [MB]")
    ax.set_ylabel("first entry of the basket")
    ax.set_title(title or f"baskets of {tree.name!r}")
    ax.legend(loc="best", markerscale=4)
    return _save(fig, path)


def timeline(file, path: str | Path, consumed: list[float] | None = None, title: str = "requests in flight") -> Path:
    """Requests in flight (step line) and cumulative megabytes received against time; `consumed`
    marks the moments (seconds since opening) the consumer took data."""
    plt = _pyplot()
    ((name, t),) = _traces([file])
    requests = {}
    for r, sent, answered, length in zip(t["request"], t["sent"], t["answered"], t["length"]):
        s, a, n = requests.get(r, (sent, answered, 0))
        requests[r] = (s, a, n + length)
    events = sorted([(s, 1) for s, _, _ in requests.values()] + [(a, -1) for _, a, _ in requests.values()])
    times = [0.0] + [e[0] for e in events]
    in_flight = np.cumsum([0] + [e[1] for e in events])
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.step(times, in_flight, where="post", color="C0", label="requests in flight")
    ax.set_xlabel("time since the file was opened [s]")
    ax.set_ylabel("requests in flight", color="C0")
    answered = sorted((a, n) for _, a, n in requests.values())
    ax2 = ax.twinx()
    ax2.plot([a for a, _ in answered], np.cumsum([n for _, n in answered]) / 1e6, color="C1", label="MB received")
    ax2.set_ylabel("megabytes received", color="C1")
    for i, c in enumerate(consumed or []):
        ax.axvline(c, color="C2", linestyle=":", label="data consumed" if i == 0 else None)
    ax.set_title(f"{title}: {name}")
    ax.legend(loc="upper left", fontsize="small")
    return _save(fig, path)


def _save(fig, path) -> Path:
    path = Path(path)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
