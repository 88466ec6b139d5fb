"""Human-readable summaries of files and trees (used by `cherenkov ls` and the demo)."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from cherenkov.tree import Tree


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def tree_overview(tree: Tree) -> Table:
    """Entries, branches, sizes, compression and clusters of a tree, as one table."""
    data = [b for b in tree.branches if not b.has_children]
    zipped = sum(b.compressed_bytes for b in data)
    unzipped = sum(b.uncompressed_bytes for b in data)
    kinds = Counter(b.kind for b in data)
    algos = Counter(b.compression_name.split(":")[0] for b in data)
    bounds = tree.cluster_boundaries
    sizes = [int(bounds[i + 1] - bounds[i]) for i in range(len(bounds) - 1)]
    t = Table(title=f"tree {tree.name!r}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("entries", f"{tree.num_entries:,}")
    t.add_row("branches", f"{len(tree.branches):,} ({', '.join(f'{n} {k}' for k, n in kinds.most_common())})")
    t.add_row("baskets", f"{sum(b.num_baskets for b in data):,}")
    t.add_row("size", f"{human_bytes(zipped)} compressed, {human_bytes(unzipped)} uncompressed (ratio {unzipped / max(zipped, 1):.2f})")
    t.add_row("compression", ", ".join(f"{a} ({n} branches)" for a, n in algos.most_common()))
    t.add_row("clusters", f"{len(sizes)} (entries per cluster: {min(sizes, default=0)}..{max(sizes, default=0)})")
    return t


def branch_table(tree: Tree, limit: int | None = None) -> Table:
    t = Table(title=f"branches of {tree.name!r}", title_justify="left")
    for col, justify in [
        ("branch", "left"),
        ("type", "left"),
        ("compressed", "right"),
        ("uncompressed", "right"),
        ("ratio", "right"),
        ("baskets", "right"),
    ]:
        t.add_column(col, justify=justify)
    ordered = sorted(tree.branches, key=lambda b: -b.compressed_bytes)
    for b in ordered[:limit]:
        typename = b.typename if b.readable else f"[dim]{b.typename} (not readable)[/dim]"
        ratio = b.uncompressed_bytes / b.compressed_bytes if b.compressed_bytes else 0
        t.add_row(b.path, typename, human_bytes(b.compressed_bytes), human_bytes(b.uncompressed_bytes), f"{ratio:.2f}", str(b.num_baskets))
    if limit is not None and len(ordered) > limit:
        t.caption = f"{len(ordered) - limit} more branches not shown (largest first)"
    return t


def print_tree(tree: Tree, console: Console | None = None, limit: int | None = 20) -> None:
    console = console or Console()
    console.print(tree_overview(tree))
    console.print(branch_table(tree, limit))
