"""Resuming an interrupted merge: outputs already complete are kept, the others written again.

Each output is written under a temporary name and renamed when complete (the writer's sink), so
an output under its own name is complete. Whether it is the output this merge would write is in
the merge's journal (``<output>.resume.json``, beside the output, rewritten atomically after each
output and removed when the whole merge is done): per output, the inputs it holds with their size
and version (a local file's modification time, an HTTP ETag or Last-Modified, an XRootD mtime, as
the byte source saw it when opened), the settings that shape its bytes (mode, schema, format,
compression, trees), and the output's own size and modification time. A rerun keeps an output
when all of these match; an input whose version its source cannot tell never matches (its output
is written again). Temporary files of writers no longer running (a killed merge's) are removed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

JOURNAL_SUFFIX = ".resume.json"


def fingerprint(info) -> list:
    """What identifies an input's bytes: its replicas, size and version (None when unknown)."""
    return [list(info.spec.replicas), info.size, info.version]


class Journal:
    """The outputs of a merge to `output` written so far, and what each was made from."""

    def __init__(self, output: str, settings: dict):
        self.path = Path(output + JOURNAL_SUFFIX)
        self.settings = settings
        try:
            kept = json.loads(self.path.read_text())
        except (OSError, ValueError):
            kept = {}
        self.done: dict = kept.get("outputs", {}) if kept.get("settings") == settings else {}

    def complete(self, path: str, group) -> dict | None:
        """The record of output `path` if it is complete and made from `group` as they are now
        (None: write it)."""
        record = self.done.get(path)
        if record is None or any(info.version is None for info in group):
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        same = record["inputs"] == [fingerprint(i) for i in group] and [st.st_size, st.st_mtime_ns] == record["written"]
        return record if same else None

    def forget(self, path: str) -> None:
        """Output `path` is being written again: its record no longer holds."""
        if self.done.pop(path, None) is not None:
            self._save()

    def record(self, path: str, group, extra: dict) -> None:
        """Output `path` is complete, made from `group`."""
        st = os.stat(path)
        self.done[path] = {"inputs": [fingerprint(i) for i in group], "written": [st.st_size, st.st_mtime_ns], **extra}
        self._save()

    def finish(self) -> None:
        """The merge is done: a rerun writes every output again."""
        self.path.unlink(missing_ok=True)

    def _save(self) -> None:
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        partial.write_text(json.dumps({"settings": self.settings, "outputs": self.done}, indent=1))
        partial.replace(self.path)


def remove_abandoned(path: str) -> list[str]:
    """Remove the temporary files of `path` left by writers that no longer run on this machine
    (``.name.cherenkov-PID-N.part``, see the local sink); returns them."""
    folder, name = os.path.split(os.path.abspath(path))
    pattern = re.compile(rf"^\.{re.escape(name)}\.cherenkov-(\d+)-\d+\.part$")
    removed = []
    if not os.path.isdir(folder):
        return removed  # the writer says what is wrong with the path
    for entry in os.scandir(folder):
        match = pattern.match(entry.name)
        if match and not _running(int(match.group(1))):
            os.unlink(entry.path)
            removed.append(entry.path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
