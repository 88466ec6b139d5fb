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
from cherenkov.merging.schema import OPENED_AT_ONCE_REMOTE, InputInfo, TableSchema, check_probed, combine, opened_at_once, tree_schema
from cherenkov.progress import Progress

# Trees handed to one call: their basket reads follow each other without a pause.
MOVED_AT_ONCE = 16


def rewrite_raw(
    tree, table: str, group: list[InputInfo], first: InputInfo, decode, open_options: dict, progress=None
) -> tuple[int, dict[str, str]]:
    """Append `table` of the group's inputs to the writer's TTree `tree`, moving serialized
    entries; an input whose entries cannot be moved is appended with `decode([info])` (the
    array path) in its place. `first`: the first input having the table, described (see
    `in_batches`). `progress` as `merge` takes it. Returns how many inputs were moved, and
    {input: why it was decoded}."""
    return in_batches(tree.file._core.rewrite_trees, tree, table, group, first, decode, open_options, progress)


def in_batches(
    append,
    tree,
    table: str,
    group: list[InputInfo],
    first: InputInfo,
    otherwise,
    open_options: dict,
    progress=None,
    at_once: int = MOVED_AT_ONCE,
    kind: str = "TTree",
    opened_remote: int = OPENED_AT_ONCE_REMOTE,
) -> tuple[int, dict[str, str]]:
    """Append `table` of the group's inputs to the writer's table `tree` with the core's
    `append(table_id, tables)` (``WritableFile.rewrite_trees``, ``.copy_trees`` or
    ``.copy_ntuples``: how many it appended, and why the next was refused), `at_once` tables a
    call, the next inputs opened meanwhile (each table's metadata parsed once, and a TTree not
    described yet described from it: see `describe_parsed`); an input refused (or not a `kind`:
    "TTree" or "RNTuple") is appended with `otherwise([info])` in its place. `progress`:
    `Progress`'s `show` (bars of entries and compressed bytes; inputs not described yet counted
    as `first`'s entries until they are). Returns how many inputs `append` took, and {input: why
    it was refused}. `opened_remote`: inputs opened ahead when remote."""
    table_id = tree._table
    refused: dict[str, str] = {}
    having = [i for i in group if table in i.tables]
    done = 0
    guess = first.tables[table].entries
    bar = Progress({table: sum(guess if i.tables[table].columns is None else i.tables[table].entries for i in having)}, progress)
    reference: list = [first.parsed[table]] if table in first.parsed else []  # `first`'s core tree

    def opening(info: InputInfo):
        if info.tables[table].kind != kind:
            return None
        early, info.opening = info.opening, None
        return early.result() if early is not None else open_file(list(info.spec.replicas), **open_options)

    def opened(info: InputInfo, file):
        f = file.result()
        if f is None:
            return info, None, None, False
        try:  # its metadata parsed here, off the writing thread, once
            if info.probed:
                check_probed(info, f, table, first)
            t = f._core.tree(table) if kind == "TTree" else f._core.ntuple(table)
            guessed = kind == "TTree" and describe_parsed(info, t, table, first, reference, open_options)
        except BaseException:
            f.close()
            raise
        return info, f, t, guessed

    batch: list = []

    def flush() -> None:
        nonlocal done
        while batch:
            trees = []
            for _, _, t, _ in batch:
                if t is None:
                    break
                trees.append(t)
            taken, why = append(table_id, trees) if trees else (0, f"not a {kind}")
            done += taken
            for info, f, _, _ in batch[:taken]:
                f.close()
                bar.advance(table, info.tables[table].entries, info.tables[table].compressed)
            del batch[:taken]
            if why is not None:
                info, f, _, _ = batch.pop(0)
                if f is not None:
                    f.close()
                refused[info.spec.replicas[0]] = why
                otherwise([info])
                bar.advance(table, info.tables[table].entries, info.tables[table].compressed)

    # Inputs opened `wide` ahead, their TTree metadata parsed `ahead` ahead.
    wide, ahead = opened_at_once([i.spec for i in having], opened_remote)
    at_once = max(at_once, ahead)  # remote: each call's first read waits a round trip
    with ThreadPoolExecutor(wide) as files, ThreadPoolExecutor(ahead) as pool, closing(bar):
        opens = [files.submit(opening, i) for i in having[:wide]]
        pending = [pool.submit(opened, i, f) for i, f in zip(having[:ahead], opens)]
        for n in range(len(having)):
            batch.append(pending.pop(0).result())
            if batch[-1][3]:
                bar.grow(table, batch[-1][0].tables[table].entries - guess)
            if n + wide < len(having):
                opens.append(files.submit(opening, having[n + wide]))
            if n + ahead < len(having):
                pending.append(pool.submit(opened, having[n + ahead], opens[n + ahead]))
            opens[n] = None  # its file is the batch's now
            if len(batch) == at_once:
                flush()
        flush()
    return done, refused


def describe_parsed(info: InputInfo, parsed, table: str, first: InputInfo, reference: list, open_options: dict) -> bool:
    """Describe `table` of `info` from its core tree `parsed`, if not described yet (`describe`
    describes only the first input with the ``strict`` schema: a TTree's metadata is then parsed
    once, when the tree is moved). It must have `first`'s columns: when its branches are
    `first`'s alike (compared in Rust with `first`'s core tree, parsed once into `reference`), it
    takes `first`'s description. Returns whether it was described here; raises, naming the
    file and the branch, when its columns differ."""
    if info.tables[table].columns is not None:
        return False
    if not reference:
        with open_file(list(first.spec.replicas), **open_options) as f:
            reference.append(f._core.tree(table))
    schema = first.tables[table]
    if parsed.same_branches(reference[0]):
        info.tables[table] = TableSchema("TTree", parsed.num_entries, schema.columns)
        return True
    info.tables[table] = mine = tree_schema(parsed)
    if mine.columns == schema.columns:
        mine.columns = schema.columns  # one dict for them all
    else:
        combine(table, [first, info], "strict")  # raises, naming the file and the branch
    return True
