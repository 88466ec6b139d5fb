"""Copy mode: a tree's compressed baskets copied into the output without decompression (see
`cherenkov_core::engine::writer::copy`), and the rule that picks copy or rewrite per tree.

The rule: a remote reader fetches a cluster of the selected branches per request, so what a
layout costs is its cluster size. Inputs whose clusters average at least `COPY_MIN_CLUSTER_BYTES`
compressed (a third of ROOT's AutoFlush target of 30 MB) are copied as they are; smaller ones
are rewritten into clusters of the writer's target size. With the ``strict`` schema only the
first input is described before writing (the others' metadata is parsed once, as they are
written), and its clusters decide for all. An input whose branches are not stored
as the writer stores them (another leaf class, baskets kept in the TTree's metadata, ...) is
rewritten within a copied tree, and reported.
"""

from __future__ import annotations

from cherenkov.merging.raw import in_batches
from cherenkov.merging.schema import InputInfo

COPY_MIN_CLUSTER_BYTES = 10_000_000
# Trees handed to one copy call: their basket reads follow each other without a pause.
COPIED_AT_ONCE = 8


def choose(table: str, plan: dict, infos: list[InputInfo], mode: str) -> tuple[str, str]:
    """``(mode, reason)`` for `table`: copy or rewrite, and why. Raises when ``mode="copy"`` is
    asked for a tree that cannot be copied."""
    having = [i.tables[table] for i in infos if table in i.tables]
    kind = having[0].kind
    refusal = None
    if kind == "RNTuple":
        refusal = "an RNTuple's pages are rewritten (page copy is not in this build)"
    elif plan["format"] != "ttree":
        refusal = f"converted to {plan['format']}"
    elif plan["missing"]:
        refusal = "branches missing from some inputs are filled with defaults"
    if mode == "copy":
        if refusal:
            raise ValueError(f"mode='copy': tree {table!r} cannot be copied: {refusal}")
        return "copy", "asked for"
    if refusal or mode == "rewrite":
        return "rewrite", refusal or "asked for"
    # Inputs not described yet (`describe` with the strict schema) are taken as alike the described.
    described = [t for t in having if t.columns is not None]
    clusters = sum(t.clusters for t in described)
    mean = sum(t.compressed for t in described) / max(clusters, 1)
    size = f"clusters average {mean / 1e6:.2f} MB compressed"
    if len(described) < len(having):
        size += f" in the first {'input' if len(described) == 1 else f'{len(described)} inputs'}"
    if mean >= COPY_MIN_CLUSTER_BYTES:
        return "copy", f"{size}, at least {COPY_MIN_CLUSTER_BYTES / 1e6:.0f} MB: kept as they are"
    return "rewrite", f"{size}, under {COPY_MIN_CLUSTER_BYTES / 1e6:.0f} MB: re-clustered"


def copy_table(tree, table: str, group: list[InputInfo], first: InputInfo, rewrite, open_options: dict) -> dict[str, str]:
    """Append `table` of the group's inputs to the writer's `tree` by copying baskets, opening
    the next inputs while one batch is copied (`raw.in_batches`, which describes the inputs not
    described yet: they must have `first`'s columns); an input that cannot be copied is
    rewritten with `rewrite([info])` in its place. Returns {input: why it was rewritten}."""
    having = [i for i in group if table in i.tables]
    for info in having:
        if info.tables[table].kind != "TTree":
            raise ValueError(f"{info.spec.replicas[0]}: {table!r} is an {info.tables[table].kind}, a TTree in {first.spec.replicas[0]}")
    # No bar: the inputs' entries are known only as they are copied.
    _, rewritten = in_batches(tree.file._core.copy_trees, tree, table, having, first, rewrite, open_options, False, COPIED_AT_ONCE)
    return rewritten
