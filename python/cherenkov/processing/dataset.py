"""Dataset specifications: which files make up each named dataset, and which tree to read in them.

A dataset spec maps names to files::

    {"ttbar": ["a.root", "root://server//b.root"],                       # tree from `tree=`
     "data": {"files": ["c.root", ["http://x/d.root", "root://y//d.root"]], "tree": "events"}}

A file given as a list is one file with replicas: it is opened as a replica set, read from the
fastest replicas and surviving a failing one (see `cherenkov.open`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cherenkov.processing.manifest import Dataset


@dataclass(frozen=True)
class FileSpec:
    """One file of a dataset: its replicas (URLs or paths) and the tree to read."""

    dataset: str
    replicas: tuple[str, ...]
    tree: str

    @property
    def url(self) -> str | tuple[str, ...]:
        """What `cherenkov.open` takes: the path, or the tuple of replicas."""
        return self.replicas[0] if len(self.replicas) == 1 else self.replicas


def normalize(dataset: Mapping | Dataset, default_tree: str = "Events") -> list[FileSpec]:
    """Every file of every dataset, datasets and files in the order given. A `cherenkov.Dataset`
    (a job's output) is a dataset of its own name, or an entry of the spec."""
    if isinstance(dataset, Dataset):
        dataset = {dataset.name: dataset}
    if not isinstance(dataset, Mapping):
        raise TypeError(f"a dataset spec maps dataset names to lists of files, not {type(dataset).__name__}")
    specs = []
    for name, entry in dataset.items():
        tree = default_tree
        files = entry
        if isinstance(entry, Dataset):
            entry = entry.spec()
        if isinstance(entry, Mapping):
            if "files" not in entry:
                raise ValueError(f"dataset {name!r}: a dict entry needs a 'files' list")
            files = entry["files"]
            tree = entry.get("tree", default_tree)
        if isinstance(files, (str, os.PathLike)) or not isinstance(files, Sequence):
            raise TypeError(f"dataset {name!r}: files must be a list of paths or URLs")
        for f in files:
            replicas = (f,) if isinstance(f, (str, os.PathLike)) else tuple(f)
            if not replicas:
                raise ValueError(f"dataset {name!r}: a file with an empty list of replicas")
            specs.append(FileSpec(str(name), tuple(os.fspath(r) for r in replicas), tree))
    return specs
