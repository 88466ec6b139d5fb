"""cherenkov: read ROOT event data from far-away XRootD and HTTP servers as fast as from the local disk.

>>> import cherenkov
>>> f = cherenkov.open("events.root")
>>> tree = f["Events"]                      # a TTree, or an RNTuple (same methods)
>>> arrays = tree.arrays(["Muon_pt", "Muon_eta"], library="ak")
>>> for arrays in cherenkov.iterate(["a.root:Events", "b.root:Events"], ["Muon_pt"]): ...
>>> with cherenkov.recreate("skim.root") as out:   # writing: see cherenkov.writing
...     out["Events"] = arrays
"""

from cherenkov._core import (
    AccessProfile,
    BranchInfo,
    CherenkovError,
    EngineCounters,
    FieldInfo,
    FileChangedError,
    FileMetadata,
    FormatError,
    LazyStats,
    NotFoundError,
    Quality,
    ReadStats,
    ReplicaReport,
    SourceCounters,
    SourceError,
    SourceNotFoundError,
    SourcePermissionError,
    SourceTimeoutError,
    StagedFile,
    UnsupportedBranch,
    __version__,
)
from cherenkov.arrays import Jagged
from cherenkov.dataset import Report, chunks, concatenate, iterate
from cherenkov.file import Directory, File, open
from cherenkov.merging import MergeReport, merge
from cherenkov.ntuple import RNTuple
from cherenkov.processing import Dataset, Events
from cherenkov.stage import stage
from cherenkov.tree import LazyChunk, Tree
from cherenkov.writing import (
    LZ4,
    LZMA,
    ZLIB,
    ZSTD,
    Compression,
    WritableDirectory,
    WritableFile,
    WritableTree,
    recreate,
    update,
)

__all__ = [
    "open",
    "iterate",
    "concatenate",
    "chunks",
    "Report",
    "process",
    "Events",
    "Dataset",
    "merge",
    "MergeReport",
    "recreate",
    "update",
    "WritableFile",
    "WritableDirectory",
    "WritableTree",
    "Compression",
    "ZLIB",
    "LZMA",
    "LZ4",
    "ZSTD",
    "stage",
    "StagedFile",
    "File",
    "Directory",
    "Tree",
    "RNTuple",
    "FieldInfo",
    "BranchInfo",
    "LazyChunk",
    "AccessProfile",
    "FileMetadata",
    "Jagged",
    "Stats",
    "EngineCounters",
    "SourceCounters",
    "ReplicaReport",
    "Quality",
    "ReadStats",
    "LazyStats",
    "CherenkovError",
    "FormatError",
    "SourceError",
    "SourceNotFoundError",
    "SourcePermissionError",
    "SourceTimeoutError",
    "FileChangedError",
    "UnsupportedBranch",
    "NotFoundError",
    "__version__",
]


def __getattr__(name):
    # The plug-ins import uproot, dask-awkward and fsspec only when first used; `Stats` (rich,
    # for its tables) and `process` (asyncio, process pools) too: `cherenkov merge` and other
    # short commands start without them.
    if name == "process":
        from cherenkov.processing import process

        return process
    if name == "Stats":
        from cherenkov.stats import Stats

        return Stats
    if name == "uproot":
        import cherenkov.uproot

        return cherenkov.uproot
    if name == "dask":
        from cherenkov.dask_arrays import dask

        return dask
    raise AttributeError(f"module 'cherenkov' has no attribute {name!r}")
