"""Event outputs: selected events a processor returns are written by the worker that selected them.

>>> def skim(chunk):
...     muons = chunk["nMuon"] >= 2
...     return {"skim": cherenkov.Events({"Muon_pt": chunk["Muon_pt"][muons], ...}),
...             "events": len(chunk)}
>>> out = cherenkov.process({"ttbar": files}, skim, output_dir="skims")
>>> out["ttbar"]["skim"]          # a cherenkov.Dataset: the files written, read back directly

Each packet writes each of its outputs to one file of its own, named after the dataset, the output,
the position of the packet's file among the dataset's and its chunks there
(``skims/ttbar/skim/part-000002-000004-000008.root``: file 2, chunks 4 to 8): a packet run again
after a failure, or copied to another worker near the end (a straggler), writes the same name again,
so no event is ever written twice. A file is written under a temporary name of its writer and renamed
when complete (the writer's rule; a rename is atomic), so a worker killed mid-write leaves no file
that looks complete, and of two copies the last to finish replaces the other's file with the same
events. Only the files of packets the driver merged are kept: it removes leftovers (temporary files,
an earlier run's parts) when the job ends.

In the merged output an `Events` becomes `Parts` (the files written, in file and chunk order), which
the driver turns into a `cherenkov.Dataset` saved as ``dataset.json`` beside its files. With a
`max_size`, consecutive files are then grouped into files of at most that size (`plan_merges`), each
group merged by a worker (`MergeTask`: `cherenkov.merge`) into
``merged-<first file>-<first chunk>-<last file>-<end chunk>.root``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import cherenkov
from cherenkov.processing.manifest import Dataset

FORMATS = ("ttree", "rntuple")
MANIFEST = "dataset.json"
_PART = re.compile(r"^(part|merged)(-\d+){3,4}\.root$")
_TEMPORARY = re.compile(r"^\.(part|merged)(-\d+){3,4}\.root\.cherenkov-.*\.part$")  # the writer's temporary names


class Events:
    """Selected events returned by a processor, to be written to files where they were selected.

    `arrays`: an awkward record array, a dict of arrays (numpy or awkward), or a chunk: every column
    becomes a branch (field) of the tree `tree` in the output files. Return it under a key of the
    processor's dict (``{"skim": cherenkov.Events(selected)}``); `process` then needs `output_dir`."""

    def __init__(self, arrays, *, tree: str = "Events"):
        self.arrays = arrays
        self.tree = tree

    def __repr__(self) -> str:
        return f"<cherenkov.Events for tree {self.tree!r}>"


@dataclass(frozen=True)
class OutputOptions:
    """Where and how workers write event outputs."""

    directory: str
    format: str = "ttree"
    compression: object = 505
    max_size: int | None = None  # merge a packet's files into files of about this many bytes

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ValueError(f"output_format={self.format!r}: one of {FORMATS}")


@dataclass
class Part:
    """One output file of a packet (or the part of it a chunk wrote): entries, and the input ranges."""

    path: str
    entries: int
    inputs: list = field(default_factory=list)  # [url, entry_start, entry_stop]
    first: tuple[int, int] = (0, 0)  # (file position in the dataset, chunk) of its first chunk
    end: tuple[int, int] = (0, 0)  # and of the chunk after its last, in the same file


@dataclass
class Parts:
    """An event output in a merged result: its files in chunk order (adding concatenates)."""

    tree: str
    format: str
    items: list[Part] = field(default_factory=list)

    def __add__(self, other: Parts) -> Parts:
        if (other.tree, other.format) != (self.tree, self.format):
            raise TypeError(f"an event output written as tree {self.tree!r} and as {other.tree!r}: use one name for each")
        items = list(self.items)
        for part in other.items:
            last = items[-1] if items else None
            if last is not None and last.path == part.path:  # chunks of one packet: one file
                items[-1] = Part(part.path, last.entries + part.entries, last.inputs + part.inputs, last.first, part.end)
            else:
                items.append(part)
        return Parts(self.tree, self.format, items)


def folder(options: OutputOptions, dataset: str, output: str) -> Path:
    """The folder of one output of one dataset."""
    return Path(options.directory) / _safe(dataset) / Path(*[_safe(p) for p in output.split("/")])


def _safe(name: str) -> str:
    # dataset names such as CMS's "/DY.../NANOAODSIM" hold slashes: one folder per name
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", name).strip(".") or "_"


class PacketOutputs:
    """A worker's event outputs for one packet: one file per output, opened at its first chunk."""

    def __init__(self, options: OutputOptions | None, packet):
        self.options = options
        self.packet = packet
        self.files: dict[str, tuple] = {}  # output name -> (WritableFile, WritableTree)
        self.next_chunk = packet.first_chunk  # the file's number of the chunk `take` gets next

    def take(self, result, chunk):
        """`result` (of the packet's next chunk) with every `Events` in it written and replaced by `Parts`."""
        try:
            return self._walk(result, (), chunk)
        finally:
            self.next_chunk += 1

    def _walk(self, value, keys: tuple, chunk):
        if isinstance(value, Events):
            return self._write("/".join(keys) or value.tree, value, chunk)
        if isinstance(value, dict):
            return {k: self._walk(v, (*keys, str(k)), chunk) for k, v in value.items()}
        return value

    def _write(self, output: str, events: Events, chunk) -> Parts:
        if self.options is None:
            raise ValueError("the processor returned cherenkov.Events: give process() an output_dir to write them to")
        path = self._path(output)
        if output not in self.files:
            path.parent.mkdir(parents=True, exist_ok=True)
            f = cherenkov.recreate(path, compression=self.options.compression)
            try:
                tree = f.write(events.tree, events.arrays, format=self.options.format)
            except BaseException:
                f.abandon()
                raise
            self.files[output] = (f, tree)
            entries = tree.num_entries
        else:
            tree = self.files[output][1]
            before = tree.num_entries
            tree.extend(events.arrays)
            entries = tree.num_entries - before
        position, number = self.packet.position, self.next_chunk
        inputs = [[self.packet.url, chunk.entry_start, chunk.entry_stop]]
        part = Part(str(path), entries, inputs, (position, number), (position, number + 1))
        return Parts(events.tree, self.options.format, [part])

    def _path(self, output: str) -> Path:
        p = self.packet
        name = f"part-{p.position:06d}-{p.first_chunk:06d}-{p.first_chunk + len(p.chunks):06d}.root"
        return folder(self.options, p.dataset, output) / name

    def close(self) -> int:
        """Finish every file (each appears under its name now); a file with no entries is not kept.
        Returns the entries written."""
        written = 0
        while self.files:
            _, (f, tree) = self.files.popitem()
            if tree.num_entries:
                written += tree.num_entries
                f.close()
            else:
                f.abandon()
        return written

    def abandon(self) -> None:
        """The packet failed: remove what it was writing (no file of it appears)."""
        for f, _ in self.files.values():
            f.abandon()
        self.files.clear()


@dataclass
class MergeTask:
    """Merging consecutive files of an event output into one, run by a worker (`cherenkov.merge`)."""

    id: int
    inputs: list[str]
    target: str
    format: str
    compression: object
    attempts: int = 0
    failed_on: set = field(default_factory=set)

    def __str__(self) -> str:
        return f"{len(self.inputs)} files into {Path(self.target).name}"

    def run(self) -> None:
        cherenkov.merge(self.inputs, self.target, format=self.format, compression=self.compression, progress=False)


def plan_merges(result, options: OutputOptions, first_id: int = 0) -> tuple[object, list[MergeTask]]:
    """`result` with each event output's files grouped, in order, into files of at most
    `options.max_size` bytes (a bigger file stays alone), and the merges that make those files.
    A merged file is named after its first and end chunks (``merged-<file>-<chunk>-<file>-<chunk>.root``):
    a rerun makes it again."""
    tasks: list[MergeTask] = []

    def walk(value):
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if not isinstance(value, Parts):
            return value
        items = []
        for group in _groups([p for p in value.items if p.entries], options.max_size):
            if len(group) == 1:
                items.append(group[0])
                continue
            first, end = group[0].first, group[-1].end
            name = f"merged-{first[0]:06d}-{first[1]:06d}-{end[0]:06d}-{end[1]:06d}.root"
            target = str(Path(group[0].path).with_name(name))
            inputs = [r for p in group for r in p.inputs]
            items.append(Part(target, sum(p.entries for p in group), inputs, first, end))
            tasks.append(MergeTask(first_id + len(tasks), [p.path for p in group], target, value.format, options.compression))
        return Parts(value.tree, value.format, items)

    return walk(result), tasks


def _groups(parts: list[Part], max_size: int) -> list[list[Part]]:
    groups: list[list[Part]] = []
    size = 0
    for part in parts:
        bytes_ = os.path.getsize(part.path)
        if groups and size + bytes_ <= max_size:
            groups[-1].append(part)
            size += bytes_
        else:
            groups.append([part])
            size = bytes_
    return groups


def finish(result, options: OutputOptions, dataset: str, provenance: dict):
    """The merged `result` of `dataset` with every `Parts` turned into a saved `Dataset`; files in
    its folder that are not part of it (an earlier run's, killed writers') are removed."""
    return _finish(result, (), options, dataset, provenance)


def _finish(value, keys: tuple, options, dataset, provenance):
    if isinstance(value, Parts):
        output = "/".join(keys) or value.tree
        kept = [p for p in value.items if p.entries]
        result = Dataset(
            name=f"{dataset}/{output}",
            tree=value.tree,
            format=value.format,
            files=[p.path for p in kept],
            entries=[p.entries for p in kept],
            inputs=[p.inputs for p in kept],
            provenance={**provenance, "dataset": dataset, "output": output},
        )
        where = folder(options, dataset, output)
        where.mkdir(parents=True, exist_ok=True)
        remove_leftovers(where, {Path(f).name for f in result.files})
        result.save(where / MANIFEST)
        return result
    if isinstance(value, dict):
        return {k: _finish(v, (*keys, str(k)), options, dataset, provenance) for k, v in value.items()}
    return value


def forget_manifests(options: OutputOptions, datasets) -> None:
    """At the start of a job: the manifests of an earlier job into the same folders no longer
    describe what is there once this job writes (a failed job must not leave them looking valid)."""
    for dataset in datasets:
        for manifest in (Path(options.directory) / _safe(dataset)).glob(f"**/{MANIFEST}"):
            manifest.unlink(missing_ok=True)


def remove_leftovers(where: Path, kept: set[str]) -> list[str]:
    """Delete the part files in `where` whose names are not in `kept` (an earlier run's, cut into
    other packets) and temporary files of killed writers; returns what was removed."""
    removed = []
    if not where.is_dir():
        return removed
    for entry in os.scandir(where):
        if (_PART.match(entry.name) and entry.name not in kept) or _TEMPORARY.match(entry.name):
            os.unlink(entry.path)
            removed.append(entry.path)
    return removed
