"""`cherenkov.Dataset`: the files a job wrote for one event output, and its JSON manifest.

>>> skim = out["ttbar"]["skim"]                 # returned by cherenkov.process
>>> skim = cherenkov.Dataset.load("skims/ttbar/skim")          # or read back from its manifest
>>> cherenkov.process(skim, next_step)           # {skim.name: its files} (or {"x": skim})
>>> for arrays in cherenkov.iterate(skim, ["Muon_pt"]): ...
>>> uproot.concatenate(skim), cherenkov.dask(skim), uproot.dask(skim)

Iterating a Dataset gives ``{file: tree}`` per file, which every reader above takes as a list of
files. The manifest, ``dataset.json`` beside the files, names them relative to itself (the folder
can move), with their entries, the input ranges each was selected from, and the job's provenance.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_VERSION = 1


@dataclass
class Dataset:
    """Files holding one tree (TTree or RNTuple) each, with their entries and where they came from.

    `files` are paths (absolute once loaded); `entries[i]` is the entries of `files[i]`;
    `inputs[i]` lists the ``[url, entry_start, entry_stop]`` input ranges `files[i]` was selected
    from; `provenance` holds the job's input files, processor, dataset and output names."""

    name: str
    tree: str
    format: str
    files: list[str] = field(default_factory=list)
    entries: list[int] = field(default_factory=list)
    inputs: list[list] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)
    manifest: str | None = None  # where it is saved

    @property
    def num_entries(self) -> int:
        return sum(self.entries)

    def __iter__(self):
        # one {file: tree} per file: what cherenkov.iterate/chunks/dask and uproot take as a list of files
        return iter([{f: self.tree} for f in self.files])

    def __repr__(self) -> str:
        return f"<cherenkov.Dataset {self.name!r}: {len(self.files)} files, {self.num_entries} entries of {self.tree!r} ({self.format})>"

    def spec(self) -> dict:
        """As an entry of `cherenkov.process`'s dataset spec."""
        return {"files": list(self.files), "tree": self.tree}

    def save(self, path: str | os.PathLike | None = None) -> str:
        """Write the manifest (to `path`, a file or a folder, else where it was saved or loaded
        from); file paths inside the manifest's folder are stored relative to it. Returns its path."""
        target = Path(path if path is not None else self.manifest or "")
        if target.is_dir() or not target.suffix:
            target = target / "dataset.json"
        base = target.parent.resolve()
        files = []
        for f, entries, inputs in zip(self.files, self.entries, self.inputs, strict=True):
            resolved = Path(f).resolve()
            stored = str(resolved.relative_to(base)) if resolved.is_relative_to(base) else f
            files.append({"path": stored, "entries": entries, "inputs": inputs})
        document = {
            "cherenkov_dataset": MANIFEST_VERSION,
            "name": self.name,
            "tree": self.tree,
            "format": self.format,
            "entries": self.num_entries,
            "files": files,
            "provenance": self.provenance,
        }
        temporary = target.with_name(f".{target.name}.{os.getpid()}.part")
        temporary.write_text(json.dumps(document, indent=1) + "\n")
        os.replace(temporary, target)  # a reader never sees half a manifest
        self.manifest = str(target)
        return self.manifest

    @classmethod
    def load(cls, path: str | os.PathLike) -> Dataset:
        """The Dataset of a manifest (its path, or the folder holding ``dataset.json``)."""
        target = Path(path)
        if target.is_dir():
            target = target / "dataset.json"
        try:
            document = json.loads(target.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{target}: not a readable cherenkov dataset manifest ({e})") from e
        if not isinstance(document, dict) or document.get("cherenkov_dataset") != MANIFEST_VERSION:
            raise ValueError(f"{target}: not a cherenkov dataset manifest of version {MANIFEST_VERSION}")
        base = target.parent.resolve()
        files = document["files"]
        return cls(
            name=document["name"],
            tree=document["tree"],
            format=document["format"],
            files=[f["path"] if "://" in f["path"] else str(base / f["path"]) for f in files],  # absolute stays so
            entries=[int(f["entries"]) for f in files],
            inputs=[f.get("inputs", []) for f in files],
            provenance=document.get("provenance", {}),
            manifest=str(target),
        )
