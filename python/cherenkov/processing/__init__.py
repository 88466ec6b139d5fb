"""Run one analysis over whole datasets, in this process, in local processes or on Dask.

>>> def analysis(chunk):
...     h = hist.Hist.new.Reg(50, 0, 100, name="pt").Double()
...     return {"pt": h.fill(ak.flatten(chunk["Muon_pt"])), "events": len(chunk)}
>>> out, report = cherenkov.process({"ttbar": ["a.root", "b.root"]}, analysis,
...                                 executor="processes", workers=4, return_report=True)
>>> out["ttbar"]["pt"], report.summary()

The parts: `dataset` (what to read), `metadata` (what the files hold, learned once and kept),
`packets` (splitting into cluster-aligned work packets sized by worker and file speed), `executors`
(where packets run), `merge` (combining outputs), `driver` (the loop that hands out packets and
handles failures), `report` (what the job did), `outputs` (events the workers write,
`cherenkov.Events`) and `manifest` (the `cherenkov.Dataset` they make). Deploying on a cluster: docs/deployment.md.
"""

import importlib
from typing import TYPE_CHECKING

from cherenkov.processing.dataset import FileSpec
from cherenkov.processing.manifest import Dataset
from cherenkov.processing.merge import merge
from cherenkov.processing.outputs import Events
from cherenkov.progress import ProgressUpdate

if TYPE_CHECKING:
    from cherenkov.processing.driver import process
    from cherenkov.processing.executors import Dask, InProcess, LocalProcesses, WorkerStats, close_workers
    from cherenkov.processing.report import PacketFailure, ProcessingError, Report

# The driver, its executors (asyncio, process pools, Dask) and its report are imported when first
# asked for: reading, writing and merging files need none of them, and they were a third of
# `import cherenkov` (80 ms of every `cherenkov merge`).
IMPORTED_WHEN_USED = {
    "process": "driver",
    "Dask": "executors",
    "InProcess": "executors",
    "LocalProcesses": "executors",
    "WorkerStats": "executors",
    "close_workers": "executors",
    "PacketFailure": "report",
    "ProcessingError": "report",
    "Report": "report",
}


def __getattr__(name: str):
    module = IMPORTED_WHEN_USED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "process",
    "Report",
    "ProcessingError",
    "PacketFailure",
    "InProcess",
    "LocalProcesses",
    "close_workers",
    "Dask",
    "WorkerStats",
    "ProgressUpdate",
    "FileSpec",
    "merge",
    "Events",
    "Dataset",
]
