"""Merging many small ROOT files into few large ones, laid out for reading from far away.

>>> report = cherenkov.merge("jobs/*.root", "merged.root", max_size=10 << 30)
>>> report.outputs                # ["merged_0.root", "merged_1.root"] when split by max_size
>>> print(report.table())

Inputs are given as every dataset function takes them (paths, URLs, globs, replicas,
``{file: tree}``). Trees are concatenated in input order, each in one of two modes, chosen per
tree and reported (the rule is in `cherenkov.merging.copy`): *copy* (compressed baskets copied
without decompression, re-keyed, the next inputs opened and their baskets read while one is
written: hadd's fast mode) or *rewrite* (written by cherenkov's writer with its layout policy:
clusters of ROOT's AutoFlush size, one basket per branch per cluster, metadata at the end; a TTree
input stored as the writer stores the output has its baskets decompressed and their serialized
entries moved, see `cherenkov.merging.raw`, other inputs are read with the engine's read-ahead by
`cherenkov.iterate`); histograms are summed and other
objects copied from the first input (see `cherenkov.merging.objects`). Each output is written
under a temporary name and appears under its own when complete: an interrupted merge leaves no
output that looks complete, and a rerun keeps the outputs already complete whose inputs and
settings are unchanged, and writes the others (see `cherenkov.merging.resume`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from cherenkov.arrays import to_layout
from cherenkov.dataset import file_specs, iterate
from cherenkov.merging.copy import choose, copy_table
from cherenkov.merging.objects import copy_objects
from cherenkov.merging.raw import rewrite_raw
from cherenkov.merging.resume import Journal, remove_abandoned
from cherenkov.merging.schema import InputInfo, column_types, combine, default_column, describe
from cherenkov.writing import _layout, recreate

MODES = ("auto", "copy", "rewrite")
FORMATS = (None, "ttree", "rntuple")
# The array path's steps, by memory: 947 NanoAOD branches take 4.5 kB an entry, 8 take 40 B.
STEP_SIZE = "64 MB"


@dataclass
class TableReport:
    """What the merge did with one tree: the mode chosen and why, entries and columns written,
    columns filled with defaults (``schema="union"``: {column: inputs lacking it}) or left out
    (``"intersection"``), inputs without the tree (``"union"``)."""

    mode: str
    reason: str
    entries: int = 0
    columns: int = 0
    filled: dict[str, list[str]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    lacking: list[str] = field(default_factory=list)
    rewritten: dict[str, str] = field(default_factory=dict)  # copy mode: input -> why rewritten
    moved: int = 0  # rewrite mode: inputs whose serialized entries were moved (`cherenkov.merging.raw`)
    decoded: dict[str, str] = field(default_factory=dict)  # rewrite mode: input -> why decoded into arrays


@dataclass
class MergeReport:
    """What `merge` wrote: the outputs and the inputs each holds, each tree's `TableReport`,
    histograms summed, objects copied from the first input, objects not copied and why."""

    outputs: list[str] = field(default_factory=list)
    inputs: list[list[str]] = field(default_factory=list)
    trees: dict[str, TableReport] = field(default_factory=dict)
    histograms: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)  # outputs an interrupted run completed, kept
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0

    def table(self) -> str:
        """A few lines for a terminal."""
        lines = [
            f"{sum(len(i) for i in self.inputs)} inputs ({self.bytes_read / 1e6:.1f} MB) -> {len(self.outputs)} outputs "
            f"({self.bytes_written / 1e6:.1f} MB) in {self.seconds:.2f} s"
        ]
        for output, inputs in zip(self.outputs, self.inputs):
            kept = " (kept: complete from an earlier run)" if output in self.kept else ""
            lines.append(f"  {output}: {len(inputs)} inputs{kept}")
        for name, t in self.trees.items():
            lines.append(f"  tree {name}: {t.mode} ({t.reason}), {t.entries} entries, {t.columns} branches")
            if t.filled:
                lines.append(f"    filled with defaults where missing: {', '.join(t.filled)}")
            if t.dropped:
                lines.append(f"    left out (not in every input): {', '.join(t.dropped)}")
            if t.lacking:
                lines.append(f"    inputs without it: {', '.join(t.lacking)}")
            for path, why in t.rewritten.items():
                lines.append(f"    rewritten, not copied: {path}: {why}")
            if t.moved:
                lines.append(f"    serialized entries moved from {t.moved} inputs")
            for path, why in t.decoded.items():
                lines.append(f"    decoded into arrays, not moved: {path}: {why}")
        if self.histograms:
            lines.append(f"  summed: {', '.join(self.histograms)}")
        if self.copied:
            lines.append(f"  copied from the first input: {', '.join(self.copied)}")
        for path, why in self.skipped.items():
            lines.append(f"  not copied: {path}: {why}")
        return "\n".join(lines)


def merge(
    inputs,
    output: str | os.PathLike,
    *,
    max_size: int | None = None,
    mode: str = "auto",
    schema: str = "strict",
    format: str | None = None,
    compression=None,
    progress=True,
    resume: bool = True,
    **open_options,
) -> MergeReport:
    """Merge `inputs` into `output` (see the module's help). `max_size` (bytes of input per
    output) splits the inputs, in order, into outputs named ``stem_0.root``, ``stem_1.root``, ...;
    `mode` ``"copy"`` copies compressed baskets, ``"rewrite"`` re-clusters, ``"auto"`` picks per
    tree (`cherenkov.merging.copy.choose`); `schema` ``"strict"`` (the inputs' branches must agree), ``"union"``
    (missing branches filled with defaults) or ``"intersection"`` (common branches only);
    `format` ``"ttree"`` or ``"rntuple"`` (default: each tree's own); `compression` the writer's
    (default: the first input's); `progress` True shows bars when stderr is a terminal, False
    none, a callable gets `cherenkov.progress.ProgressUpdate`s; `resume` keeps the outputs an
    interrupted run of the same merge completed (False: write them all again). Other keywords go
    to `cherenkov.open`; remote inputs are opened on one connection each unless ``connections``
    says otherwise."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {', '.join(MODES)}")
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: 'ttree' or 'rntuple'")
    started = time.perf_counter()
    # Many inputs are read at once, each a little: a second connection per input (XRootD's
    # default, for bandwidth) only doubled the logins and opens (1000 inputs at 137 ms over
    # root://: copy 3.93 s instead of 4.73 s, rewrite 12.2 s instead of 13.5 s).
    open_options = {"connections": 1, **open_options}
    specs = file_specs(inputs)
    named_trees = [s.tree for s in specs if s.tree]
    # With the strict schema each TTree's metadata is read once, when the tree is copied or
    # moved: only the first input's is read up front, the others are checked against it then
    # (947 branches: ~1 ms a parse). A tree written by the array path needs every input's first.
    lazy = schema == "strict" and format != "rntuple"
    infos = describe(specs, open_options, trees=not lazy)
    first = infos[0]
    tables = list(dict.fromkeys(named_trees)) if named_trees else list(first.tables)
    for table in tables:
        if not any(table in i.tables for i in infos):
            raise ValueError(f"no input has a tree {table!r}")
    plans = {t: _plan(t, infos, schema, format, open_options) for t in tables}
    # TTrees not described yet are compared with the first's TTree as they are written: an
    # RNTuple written, or read first, needs them described before.
    firsts = {t: next(i for i in infos if t in i.tables).tables[t].kind for t in tables}
    undescribed = any(i.tables[t].columns is None for i in infos for t in tables if t in i.tables)
    if undescribed and any(p["format"] != "ttree" or firsts[t] != "TTree" for t, p in plans.items()):
        infos = describe(specs, open_options)
        first = infos[0]
        plans = {t: _plan(t, infos, schema, format, open_options) for t in tables}
    objects = {} if named_trees else first.objects
    # By default the first input's: its tables' own where known (ROOT's importer writes zstd
    # pages in a file whose TFile setting says zlib), else its file's.
    own = [first.tables[t].compression for t in tables if t in first.tables and first.tables[t].compression is not None]
    setting = compression if compression is not None else (own[0] if own else first.compression)
    groups = split(infos, max_size)
    report = MergeReport(bytes_read=sum(i.size for i in infos))
    progress = None if progress is True else progress
    chosen = {t: choose(t, plan, infos, mode) for t, plan in plans.items()}
    totals = _counts(tables)
    settings = {"mode": mode, "schema": schema, "format": format, "compression": setting, "tables": tables, "groups": len(groups)}
    journal = Journal(os.fspath(output), settings)
    for n, group in enumerate(groups):
        path = output_name(os.fspath(output), n, len(groups))
        report.inputs.append([i.spec.replicas[0] for i in group])
        report.outputs.append(path)
        done = journal.complete(path, group) if resume else None
        if done is not None:
            report.kept.append(path)
            report.bytes_written += os.path.getsize(path)
            _add(totals, done)
            continue
        journal.forget(path)
        remove_abandoned(path)
        counts = _counts(tables)  # this output's, kept in the journal with it
        with recreate(path, compression=setting) as out:
            copy_objects(out, [i.spec for i in group], objects, report)
            for table, plan in plans.items():
                tree = out.mktree(table, plan["types"], format=plan["format"])

                def rewrite(run, table=table, plan=plan, tree=tree):
                    _write_table(tree, table, plan, run, progress, open_options)

                first_having = next(i for i in infos if table in i.tables)
                if chosen[table][0] == "copy":
                    counts["rewritten"][table].update(copy_table(tree, table, group, first_having, rewrite, open_options))
                elif plan["format"] == "ttree":
                    count, why = rewrite_raw(tree, table, group, first_having, rewrite, open_options, progress)
                    counts["moved"][table] += count
                    counts["decoded"][table].update(why)
                else:
                    rewrite(group)
                counts["entries"][table] += tree.num_entries
        report.bytes_written += os.path.getsize(path)
        journal.record(path, group, counts)
        _add(totals, counts)
    journal.finish()
    for table, plan in plans.items():
        report.trees[table] = TableReport(
            *chosen[table],
            totals["entries"][table],
            len(plan["names"]),
            plan["missing"],
            plan["dropped"],
            [i.spec.replicas[0] for i in infos if table not in i.tables],
            totals["rewritten"][table],
            totals["moved"][table],
            totals["decoded"][table],
        )
    report.seconds = time.perf_counter() - started
    return report


def _counts(tables: list[str]) -> dict:
    """What writing tables did, per table: inputs rewritten in copy mode and decoded in rewrite
    mode ({input: why}), inputs whose entries were moved, entries written."""
    return {
        "rewritten": {t: {} for t in tables},
        "decoded": {t: {} for t in tables},
        "moved": dict.fromkeys(tables, 0),
        "entries": dict.fromkeys(tables, 0),
    }


def _add(totals: dict, counts: dict) -> None:
    for table in totals["entries"]:
        totals["rewritten"][table].update(counts["rewritten"][table])
        totals["decoded"][table].update(counts["decoded"][table])
        totals["moved"][table] += counts["moved"][table]
        totals["entries"][table] += counts["entries"][table]


def split(infos: list[InputInfo], max_size: int | None) -> list[list[InputInfo]]:
    """Consecutive inputs grouped so that each group's input bytes stay within `max_size` (a
    group holds at least one input, however large)."""
    if max_size is None:
        return [infos]
    if max_size <= 0:
        raise ValueError(f"max_size={max_size}: a positive number of bytes")
    groups: list[list[InputInfo]] = [[]]
    size = 0
    for info in infos:
        if groups[-1] and size + info.size > max_size:
            groups.append([])
            size = 0
        groups[-1].append(info)
        size += info.size
    return groups


def output_name(output: str, index: int, count: int) -> str:
    """`output` itself for one output, else ``stem_<index>.ext`` (zero-padded to sort)."""
    if count == 1:
        return output
    stem, ext = os.path.splitext(output)
    return f"{stem}_{index:0{len(str(count - 1))}d}{ext or '.root'}"


def _plan(table: str, infos: list[InputInfo], schema: str, format: str | None, open_options: dict) -> dict:
    names, missing = combine(table, infos, schema)
    having = [i for i in infos if table in i.tables]
    everything: dict[str, str] = {}
    kept = set(names)
    for i in having:
        everything.update(i.tables[table].columns or {})
    kind = having[0].tables[table].kind
    plan = {"names": names, "missing": missing, "dropped": [n for n in everything if n not in kept]}
    plan["format"] = format or ("rntuple" if kind == "RNTuple" else "ttree")
    try:
        plan["types"], plan["untyped"] = column_types(table, names, having, open_options), None
    except TypeError as e:  # an RNTuple of types the writer does not make can still have its pages copied
        if kind != "RNTuple" or plan["format"] != "rntuple":
            raise
        plan["types"], plan["untyped"] = {}, str(e)
    return plan


def _write_table(tree, table: str, plan: dict, group: list[InputInfo], progress, open_options: dict) -> None:
    """Append `table` of the group's inputs to the writer's `tree`, runs of inputs with the same
    columns read by one `iterate` (its read-ahead crosses their files)."""
    names, types = plan["names"], plan["types"]
    runs: list[tuple[list[str], list[InputInfo]]] = []
    for info in group:
        if table not in info.tables:
            continue
        present = [n for n in names if n in info.tables[table].columns]
        if runs and runs[-1][0] == present:
            runs[-1][1].append(info)
        else:
            runs.append((present, [info]))
    specs = dict(tree._columns)
    for present, run in runs:
        files = [list(i.spec.replicas) for i in run]
        steps = iterate(files, present, tree=table, library="layouts", report=True, step_size=STEP_SIZE, progress=progress, **open_options)
        for chunk, where in steps:
            length = where.tree_entry_stop - where.tree_entry_start
            tree._extend_layouts([_column(name, chunk, length, types, specs) for name in names])


def _column(name: str, chunk: dict, length: int, types: dict, specs: dict) -> dict:
    """Column `name` of a chunk read as layouts, as the writer takes it: as read (the writer
    takes read layouts as they are), or defaults (lists as long as their counter, when the chunk
    has it)."""
    import awkward as ak

    if name in chunk:
        return chunk[name]
    counters = {n: ak.Array(to_layout(chunk[n])) for n in (f"n{name}", f"n{name.split('_', 1)[0]}") if n in chunk}
    return _layout(default_column(name, types[name], length, counters), specs[name], name)
