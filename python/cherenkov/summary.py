"""Human-readable summaries of files, trees and RNTuples (used by `cherenkov ls` and the demo)."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from cherenkov.ntuple import RNTuple
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


def ntuple_overview(ntuple: RNTuple) -> Table:
    """Entries, fields, sizes, compression and clusters of an RNTuple, as one table. Sizes are
    summed over top-level fields (a field's sizes include its subfields')."""
    top = [f for f in ntuple.fields if "." not in f.path]
    zipped = sum(f.compressed_bytes for f in top)
    unzipped = sum(f.uncompressed_bytes for f in top)
    kinds = Counter(f.kind for f in top)
    algos = Counter(f.compression_name.split(":")[0] for f in top if f.num_pages)
    bounds = ntuple.cluster_boundaries
    sizes = [int(bounds[i + 1] - bounds[i]) for i in range(len(bounds) - 1)]
    unreadable = len([f for f in ntuple.fields if not f.readable])
    t = Table(title=f"RNTuple {ntuple.name!r}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("entries", f"{ntuple.num_entries:,}")
    t.add_row("format", f"{ntuple.format_version}, written by {ntuple.writer or '?'}")
    readable = f", {unreadable} not readable" if unreadable else ""
    t.add_row(
        "fields",
        f"{len(top):,} top-level ({', '.join(f'{n} {k}' for k, n in kinds.most_common())}), {len(ntuple.fields):,} in all{readable}",
    )
    t.add_row("pages", f"{sum(f.num_pages for f in top):,}")
    t.add_row("size", f"{human_bytes(zipped)} compressed, {human_bytes(unzipped)} uncompressed (ratio {unzipped / max(zipped, 1):.2f})")
    t.add_row("compression", ", ".join(f"{a} ({n} fields)" for a, n in algos.most_common()))
    t.add_row("clusters", f"{len(sizes)} (entries per cluster: {min(sizes, default=0)}..{max(sizes, default=0)})")
    return t


def branch_table(tree: Tree, limit: int | None = None) -> Table:
    ntuple = isinstance(tree, RNTuple)
    t = Table(title=f"{'fields' if ntuple else 'branches'} of {tree.name!r}", title_justify="left")
    for col, justify in [
        ("field" if ntuple else "branch", "left"),
        ("type", "left"),
        ("compressed", "right"),
        ("uncompressed", "right"),
        ("ratio", "right"),
        ("pages" if ntuple else "baskets", "right"),
    ]:
        t.add_column(col, justify=justify)
    ordered = sorted(tree.branches, key=lambda b: -b.compressed_bytes)
    for b in ordered[:limit]:
        typename = b.typename if b.readable else f"[dim]{b.typename} (not readable)[/dim]"
        ratio = b.uncompressed_bytes / b.compressed_bytes if b.compressed_bytes else 0
        t.add_row(
            b.path,
            typename,
            human_bytes(b.compressed_bytes),
            human_bytes(b.uncompressed_bytes),
            f"{ratio:.2f}",
            str(b.num_pages if ntuple else b.num_baskets),
        )
    if limit is not None and len(ordered) > limit:
        t.caption = f"{len(ordered) - limit} more {'fields' if ntuple else 'branches'} not shown (largest first)"
    return t


def print_tree(tree: Tree, console: Console | None = None, limit: int | None = 20) -> None:
    console = console or Console()
    console.print(ntuple_overview(tree) if isinstance(tree, RNTuple) else tree_overview(tree))
    console.print(branch_table(tree, limit))
