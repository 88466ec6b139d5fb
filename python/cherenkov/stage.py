"""Staging: a dataset's files copied to a local directory at the link's speed, to be read from
there (`cherenkov.stage`, `cherenkov stage DATASET... DIR`).

The files are given as `cherenkov.iterate` takes them (paths, URLs, local globs, ``file:tree``,
replicas as a list in the list, XRootD redirectors). Several files are copied at once, each with
several reads in flight through the same sources reads use (adaptive streams, replicas, retries);
each copy is checked against its server's checksum where the server keeps one (XRootD), else by
its size, and is given its name only then. An interrupted stage resumes when run again: files
already in the directory are skipped, a file in progress continues from what it holds (kept as
``.NAME.<id>.cherenkov-stage`` beside it).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from cherenkov import _core
from cherenkov._core import StagedFile
from cherenkov.dataset import file_specs
from cherenkov.progress import Progress


def destination_name(url: str) -> str:
    """The file name a URL or path is staged under: its path's last part (query and fragment
    left out)."""
    path = urlsplit(url).path if "://" in url else url
    name = os.path.basename(path.rstrip("/"))
    if not name:
        raise ValueError(f"{_core.redact(url)}: no file name to stage it under")
    return name


def stage(
    files,
    directory: str | os.PathLike,
    tree: str | None = None,
    files_at_once: int = 4,
    verify: bool = True,
    progress=None,
    chunk_bytes: int = 8 << 20,
    reads_in_flight: int = 8,
    **options,
) -> list[StagedFile]:
    """Copy the files of a dataset into `directory` (made if missing) and return a `StagedFile`
    per file, in order (`path` is where it is now).

    `files_at_once` files are copied at once, each `reads_in_flight` reads of `chunk_bytes` in
    flight (what one file keeps in flight must cover the link's bandwidth times its round trip).
    `verify=False` checks sizes only. `progress`: None shows a bar on terminals, True/False force
    it. Other keywords are `cherenkov.open`'s options (connections, token, direct_io, ...).
    Raises the first file's error after every other file was tried; what was copied stays, and
    running the same stage again finishes the rest.
    """
    specs = file_specs(files, tree)
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    jobs, by_name = [], {}
    for spec in specs:
        name = destination_name(spec.replicas[0])
        if name in by_name:
            raise ValueError(f"two files would be staged as {name!r}: {_core.redact(by_name[name])} and {_core.redact(spec.replicas[0])}")
        by_name[name] = spec.replicas[0]
        jobs.append((list(spec.replicas), str(target / name)))
    job = _core.stage(jobs, files_at_once, chunk_bytes, reads_in_flight, verify, options)
    bar = Progress({"staging": 0}, progress, unit="bytes")
    shown = (0, 0)
    try:
        while True:
            finished = job.wait(0.2)
            done, total, _ = job.progress()
            if total != shown[1]:
                bar.grow("staging", total - shown[1])
            if done != shown[0]:
                bar.advance("staging", done - shown[0], done - shown[0])
            shown = (done, total)
            if finished:
                break
    except BaseException:
        job.cancel()  # copies in progress stay, for the next stage to resume
        raise
    finally:
        bar.close()
    results = job.results()
    failed = [(spec, r) for spec, r in zip(specs, results) if isinstance(r, BaseException)]
    if failed:
        first = failed[0][1]
        if len(failed) > 1:
            others = ", ".join(_core.redact(spec.replicas[0]) for spec, _ in failed[1:])
            first.add_note(f"{len(failed) - 1} more files failed: {others}; run the stage again to retry them")
        raise first
    return results
