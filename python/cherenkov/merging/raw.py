"""Rewrite mode's fast path: an input TTree whose branches are stored as the writer stores the
output's (the same leaf or collection class, counter and entry offsets) has its baskets read and
decompressed in Rust and their serialized entries moved into the output's baskets (see
`cherenkov_core::engine::writer::raw`), instead of being decoded into arrays and serialized
back. The output is re-clustered and recompressed as in the array path. Other inputs (other
storage, RNTuples, branches missing for ``schema="union"``) go through the array path in their
place, and are reported."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

from cherenkov.file import open as open_file
from cherenkov.merging.schema import OPENED_AT_ONCE, InputInfo
from cherenkov.progress import Progress

# Trees handed to one call: their basket reads follow each other without a pause.
MOVED_AT_ONCE = 16


def rewrite_raw(tree, table: str, group: list[InputInfo], decode, open_options: dict, progress=None) -> tuple[int, dict[str, str]]:
    """Append `table` of the group's inputs to the writer's TTree `tree`, moving serialized
    entries; an input whose entries cannot be moved is appended with `decode([info])` (the
    array path) in its place. `progress` as `merge` takes it. Returns how many inputs were
    moved, and {input: why it was decoded}."""
    return in_batches(tree.file._core.rewrite_trees, tree, table, group, decode, open_options, progress)


def in_batches(
    append,
    tree,
    table: str,
    group: list[InputInfo],
    otherwise,
    open_options: dict,
    progress=None,
    at_once: int = MOVED_AT_ONCE,
    parsed=None,
    kind: str = "TTree",
) -> tuple[int, dict[str, str]]:
    """Append `table` of the group's inputs to the writer's table `tree` with the core's
    `append(table_id, tables)` (``WritableFile.rewrite_trees``, ``.copy_trees`` or
    ``.copy_ntuples``: how many it appended, and why the next was refused), `at_once` tables a
    call, the next inputs opened meanwhile (each table's metadata parsed once, then given to
    `parsed(info, table)` if set); an input refused (or not a `kind`: "TTree" or "RNTuple") is
    appended with `otherwise([info])` in its place.
    `progress`: `Progress`'s `show` (bars of entries and compressed bytes). Returns how many
    inputs `append` took, and {input: why it was refused}."""
    table_id = tree._table
    refused: dict[str, str] = {}
    having = [i for i in group if table in i.tables]
    done = 0
    bar = Progress({table: sum(i.tables[table].entries for i in having)}, progress)

    def opened(info: InputInfo):
        if info.tables[table].kind != kind:
            return info, None, None
        f = open_file(list(info.spec.replicas), **open_options)
        try:  # its metadata parsed here, off the writing thread, once
            t = f._core.tree(table) if kind == "TTree" else f._core.ntuple(table)
            if parsed is not None:
                parsed(info, t)
        except BaseException:
            f.close()
            raise
        return info, f, t

    batch: list = []

    def flush() -> None:
        nonlocal done
        while batch:
            trees = []
            for _, _, t in batch:
                if t is None:
                    break
                trees.append(t)
            taken, why = append(table_id, trees) if trees else (0, f"not a {kind}")
            done += taken
            for info, f, _ in batch[:taken]:
                f.close()
                bar.advance(table, info.tables[table].entries, info.tables[table].compressed)
            del batch[:taken]
            if why is not None:
                info, f, _ = batch.pop(0)
                if f is not None:
                    f.close()
                refused[info.spec.replicas[0]] = why
                otherwise([info])
                bar.advance(table, info.tables[table].entries, info.tables[table].compressed)

    with ThreadPoolExecutor(OPENED_AT_ONCE) as pool, closing(bar):
        pending = [pool.submit(opened, i) for i in having[:OPENED_AT_ONCE]]
        for n in range(len(having)):
            batch.append(pending.pop(0).result())
            if n + OPENED_AT_ONCE < len(having):
                pending.append(pool.submit(opened, having[n + OPENED_AT_ONCE]))
            if len(batch) == at_once:
                flush()
        flush()
    return done, refused
