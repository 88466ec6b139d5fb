"""Merging processor outputs.

`merge(a, b)` combines two outputs: histograms and numbers are added, dicts merged key by key
(recursively), numpy/awkward arrays and lists concatenated (a before b), sets united; None is nothing.

Chunk results are merged along fixed binary trees: over the chunk numbers of a file (chunk i is
leaf i, and block (level j, index k) holds chunks [k*2^j, (k+1)*2^j)), then over the files of a
dataset in the order given (`DatasetMerge`). Workers fold the chunks of a packet into the aligned
blocks it covers (`BlockFolder`); the driver merges blocks with their siblings as packets arrive
(`TreeMerge`), and a file's result with its neighbours' once the file is done. Every executor,
packet size and arrival order thus performs the same additions in the same grouping, so results
are identical bit for bit, floating-point histogram sums included, and arrays come out in entry
order. A file's chunks are numbered from what is known of it alone, so packets of the first files
learned run while the others are still being opened. Only blocks waiting for a sibling are held: a
few per packet still running, never all partial results.
"""

from __future__ import annotations

import numpy as np


def merge(a, b):
    """The merged output of `a` followed by `b`; neither input is modified."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for key, value in b.items():
            out[key] = merge(out[key], value) if key in out else value
        return out
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.ndim and b.ndim:
        return np.concatenate([a, b])
    if _is_awkward(a) and _is_awkward(b):
        import awkward as ak

        return ak.concatenate([a, b])
    if isinstance(a, set) and isinstance(b, set):
        return a | b
    if type(a) is not type(b) and not (_is_number(a) and _is_number(b)):
        raise TypeError(f"cannot merge a {type(a).__name__} with a {type(b).__name__}")
    try:
        return a + b  # histograms, numbers, lists, Counters
    except TypeError:
        raise TypeError(f"cannot merge outputs of type {type(a).__name__}: return histograms, numbers, arrays or dicts of those") from None


def merge_all(values):
    """Left-to-right merge of `values` (None when empty)."""
    out = None
    for v in values:
        out = merge(out, v)
    return out


def _is_awkward(x) -> bool:
    return type(x).__module__.startswith("awkward") and type(x).__name__ == "Array"


def _is_number(x) -> bool:
    return isinstance(x, (int, float, complex, np.number)) or (isinstance(x, np.ndarray) and x.ndim == 0)


def aligned_blocks(first: int, stop: int) -> list[tuple[int, int]]:
    """The largest aligned blocks (level, index) that cover chunks [first, stop), in order."""
    out = []
    while first < stop:
        level = 0
        while first % (2 << level) == 0 and first + (2 << level) <= stop:
            level += 1
        out.append((level, first >> level))
        first += 1 << level
    return out


class BlockFolder:
    """Folds consecutive chunk results, starting at chunk `first`, into aligned blocks (a worker's side)."""

    def __init__(self, first: int):
        self.next = first
        self.blocks: list[tuple[int, int, object]] = []  # (level, index, value), in chunk order

    def add(self, value) -> None:
        level, index = 0, self.next
        self.next += 1
        # like carrying in a binary counter: a right sibling completes its parent
        while self.blocks and index % 2 == 1 and self.blocks[-1][:2] == (level, index - 1):
            value = merge(self.blocks.pop()[2], value)
            level, index = level + 1, index // 2
        self.blocks.append((level, index, value))


class TreeMerge:
    """The driver's side: blocks of one dataset's `num_chunks` chunks, merged with their siblings."""

    def __init__(self, num_chunks: int):
        self.num_chunks = num_chunks
        self.waiting: dict[tuple[int, int], object] = {}
        self.result = None
        self.done = num_chunks == 0

    def add(self, level: int, index: int, value) -> None:
        while True:
            size = 1 << level
            if index == 0 and size >= self.num_chunks:
                self.result, self.done = value, True
                return
            sibling = (level, index ^ 1)
            if index % 2 == 0 and (index + 1) * size >= self.num_chunks:
                pass  # no right sibling: the block is its parent
            elif sibling in self.waiting:
                other = self.waiting.pop(sibling)
                value = merge(other, value) if index % 2 else merge(value, other)
            else:
                self.waiting[(level, index)] = value
                return
            level, index = level + 1, index // 2

    def skip(self, first: int, stop: int) -> None:
        """Chunks [first, stop) will never arrive (a skipped bad file): they merge as nothing."""
        for level, index in aligned_blocks(first, stop):
            self.add(level, index, None)

    def partial(self):
        """Everything merged so far, in chunk order (computed on demand, nothing is consumed)."""
        if self.done:
            return self.result
        return merge_all(value for _, value in sorted(self.waiting.items(), key=lambda kv: kv[0][1] << kv[0][0]))


class DatasetMerge:
    """One dataset's result from its `num_files` files' (in the order given): each file's chunks
    merged along its own tree once its chunk count is known (`start_file`), the files' results
    along the dataset's."""

    def __init__(self, num_files: int):
        self.files = TreeMerge(num_files)
        self.running: dict[int, TreeMerge] = {}  # files started, not done

    @property
    def done(self) -> bool:
        return self.files.done

    @property
    def result(self):
        return self.files.result

    def start_file(self, file: int, num_chunks: int) -> None:
        self.running[file] = TreeMerge(num_chunks)
        self._finish(file)  # a file without entries is done at once

    def add(self, file: int, level: int, index: int, value) -> None:
        self.running[file].add(level, index, value)
        self._finish(file)

    def skip(self, file: int, first: int, stop: int) -> None:
        """Chunks [first, stop) of `file` will never arrive (a bad file given up): nothing."""
        self.running[file].skip(first, stop)
        self._finish(file)

    def skip_file(self, file: int) -> None:
        """`file` could not be opened: it adds nothing."""
        self.files.add(0, file, None)

    def _finish(self, file: int) -> None:
        merge = self.running[file]
        if merge.done:
            del self.running[file]
            self.files.add(0, file, merge.result)

    def partial(self):
        """Everything merged so far, in file and chunk order (nothing is consumed)."""
        if self.done:
            return self.result
        pieces = [(index << level, value) for (level, index), value in self.files.waiting.items()]
        pieces += [(file, merge.partial()) for file, merge in self.running.items()]
        return merge_all(value for _, value in sorted(pieces, key=lambda p: p[0]))
