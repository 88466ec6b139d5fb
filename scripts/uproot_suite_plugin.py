"""A pytest plugin for uproot's own test suite: every path and URL that uproot opens with its default
source (no ``handler`` given) is opened through `cherenkov.uproot.Source` instead. Tests that name
a handler, and file-like objects, keep what they asked for.

    pytest -p uproot_suite_plugin tests/      (with this folder on PYTHONPATH; see uproot_suite.py)
"""

from __future__ import annotations

import cherenkov.uproot
import uproot
import uproot._util

_default = uproot._util.file_path_to_source_class
routed: list[str] = []


def _through_cherenkov(file_path_or_object, options):
    path = uproot._util.regularize_path(file_path_or_object)
    if options.get("handler") is None and isinstance(path, str):
        routed.append(path)
        options = {**options, "handler": cherenkov.uproot.Source}
    return _default(file_path_or_object, options)


def pytest_configure(config):
    uproot._util.file_path_to_source_class = _through_cherenkov


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"cherenkov.uproot.Source opened {len(routed)} paths and URLs for uproot")
