"""Generate a large NanoAOD-like ROOT file from the branch schema of the real CMS NanoAOD sample.

The sample (947 branches, 200 events) gives the schema: every branch's name, type, title and
counter (`Muon_pt` is counted by `nMuon`), the per-event multiplicities, and each branch's value
distribution. Generated events resample whole sample events' multiplicities (so `nLHEPdfWeight`
stays 102 and `nJet` keeps its spread); values are drawn from each branch's sample values, and
floats with many distinct values are jittered by 2 % and rounded to the precision the sample
stores them with (NanoAOD truncates mantissas), so compression ratios stay realistic.

Written with real ROOT (PyROOT) when it imports, so the basket and cluster layout is ROOT's own,
else with uproot's writer in several chunks. ZSTD compressed. A JSON sidecar records the
parameters; a file made with the same parameters is reused.

    python bench/make_nanolike.py                    # bench/data/nanolike-40000.root
    python bench/make_nanolike.py --entries 2000 --writer uproot --output /tmp/small.root
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GENERATOR_VERSION = 1
BENCH = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("CHERENKOV_SHARED", BENCH.parent.parent / "shared"))
SAMPLE_NAME = "nanoAOD_2015_CMS_Open_Data_ttbar.root"
# The shared folder's copy, else the repository's (lab/data): the schema is there without ../shared.
_SAMPLES = (SHARED / "testdata" / SAMPLE_NAME, BENCH.parent / "lab" / "data" / SAMPLE_NAME)
SAMPLE = next((p for p in _SAMPLES if p.exists()), _SAMPLES[0])
TREE = "Events"
CHUNK_ENTRIES = 5000  # entries generated at a time (and one `extend`, so one basket, for uproot)
JITTER = 0.02  # relative spread added to floats with many distinct sample values
FEW_DISTINCT = 16  # at most this many distinct sample values: draw them exactly, no jitter

# numpy dtype -> ROOT leaf type code
LEAF_CODES = {
    "bool": "O",
    "int8": "B",
    "uint8": "b",
    "int16": "S",
    "uint16": "s",
    "int32": "I",
    "uint32": "i",
    "int64": "L",
    "uint64": "l",
    "float32": "F",
    "float64": "D",
}


def default_output(entries: int) -> Path:
    return BENCH / "data" / f"nanolike-{entries}.root"


@dataclass
class BranchSchema:
    name: str
    title: str
    dtype: np.dtype  # native byte order
    counter: str | None  # name of the counting branch for jagged branches
    values: np.ndarray  # all sample values, flattened
    jitter: bool  # floats with many distinct values: jitter and round to `zero_bits`
    zero_bits: int  # low mantissa bits that are zero in every sample value


@dataclass
class Schema:
    branches: list[BranchSchema]
    counts: dict[str, np.ndarray]  # counter name -> per-sample-event multiplicity

    @property
    def num_sample_events(self) -> int:
        return len(next(iter(self.counts.values())))


def zero_mantissa_bits(values: np.ndarray) -> int:
    """How many low mantissa bits are zero in every float32 value (NanoAOD's stored precision)."""
    mantissas = values.astype(np.float32).view(np.uint32) & np.uint32(0x7FFFFF)
    mantissas = mantissas[mantissas != 0]
    if mantissas.size == 0:
        return 23
    lowest_set = mantissas & (~mantissas + np.uint32(1))
    return int(np.log2(lowest_set.min()))


def read_schema(sample: Path = SAMPLE) -> Schema:
    import uproot

    tree = uproot.open(sample)[TREE]
    arrays = tree.arrays(library="np")
    branches, counts = [], {}
    for branch in tree.branches:
        data = arrays[branch.name]
        counter = branch.count_branch.name if branch.count_branch is not None else None
        if counter is not None:
            counts.setdefault(counter, np.array([len(x) for x in data], dtype=np.int64))
            values = np.concatenate(data) if len(data) else np.empty(0)
        else:
            values = data
        dtype = values.dtype.newbyteorder("=")
        values = values.astype(dtype)
        is_float = dtype.kind == "f"
        jitter = is_float and len(np.unique(values)) > FEW_DISTINCT
        zero_bits = zero_mantissa_bits(values) if jitter and dtype == np.float32 else 0
        branches.append(BranchSchema(branch.name, branch.title, dtype, counter, values, jitter, zero_bits))
    return Schema(branches, counts)


def round_mantissa(values: np.ndarray, zero_bits: int) -> np.ndarray:
    """Round finite float32 values to nearest, keeping 23 - zero_bits mantissa bits."""
    if zero_bits == 0:
        return values
    bits = values.view(np.uint32)
    half = np.uint32(1 << (zero_bits - 1))
    mask = np.uint32(~((1 << zero_bits) - 1) & 0xFFFFFFFF)
    return np.where(np.isfinite(values), ((bits + half) & mask).view(np.float32), values)


def draw_values(branch: BranchSchema, rng: np.random.Generator, size: int) -> np.ndarray:
    if size == 0 or branch.values.size == 0:
        return np.zeros(size, dtype=branch.dtype)
    values = branch.values[rng.integers(0, branch.values.size, size)]
    if branch.jitter:
        with np.errstate(invalid="ignore", over="ignore"):
            spread = values.astype(np.float64) * (1.0 + JITTER * rng.standard_normal(size))
        values = spread.astype(branch.dtype)
        if branch.dtype == np.float32:
            values = round_mantissa(values, branch.zero_bits)
    return values


def make_chunk(schema: Schema, rng: np.random.Generator, n: int) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """n generated entries: branch name -> (content, offsets or None for one value per entry)."""
    events = rng.integers(0, schema.num_sample_events, n)
    counts = {name: per_event[events] for name, per_event in schema.counts.items()}
    chunk = {}
    for branch in schema.branches:
        if branch.name in counts:
            chunk[branch.name] = (counts[branch.name].astype(branch.dtype), None)
        elif branch.counter is not None:
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(counts[branch.counter], out=offsets[1:])
            chunk[branch.name] = (draw_values(branch, rng, int(offsets[-1])), offsets)
        else:
            chunk[branch.name] = (draw_values(branch, rng, n), None)
    return chunk


def chunk_sizes(entries: int) -> list[int]:
    return [min(CHUNK_ENTRIES, entries - start) for start in range(0, entries, CHUNK_ENTRIES)]


# ---------------------------------------------------------------- ROOT writer

_ROOT_FILL = r"""
#include <TTree.h>
#include <cstring>
namespace nanolike {
// Copy entry i of every column into the branch buffers, then Fill; columns with offsets are jagged.
void fill(TTree *tree, long entries, long columns, const unsigned long *buffers,
          const unsigned long *contents, const unsigned long *offsets, const long *itemsizes) {
  for (long i = 0; i < entries; ++i) {
    for (long c = 0; c < columns; ++c) {
      const char *content = reinterpret_cast<const char *>(contents[c]);
      char *buffer = reinterpret_cast<char *>(buffers[c]);
      if (offsets[c]) {
        const long *off = reinterpret_cast<const long *>(offsets[c]);
        std::memcpy(buffer, content + off[i] * itemsizes[c], (off[i + 1] - off[i]) * itemsizes[c]);
      } else {
        std::memcpy(buffer, content + i * itemsizes[c], itemsizes[c]);
      }
    }
    tree->Fill();
  }
}
}
"""


def write_with_root(path: Path, schema: Schema, entries: int, seed: int, level: int) -> None:
    ROOT = import_root()
    if not hasattr(ROOT, "nanolike"):
        ROOT.gInterpreter.Declare(_ROOT_FILL)
    algorithm = ROOT.RCompressionSetting.EAlgorithm.kZSTD
    out = ROOT.TFile(str(path), "RECREATE", "", algorithm * 100 + level)
    tree = ROOT.TTree(TREE, TREE)
    buffers = []
    for branch in schema.branches:
        capacity = int(schema.counts[branch.counter].max()) if branch.counter else 1
        buffer = np.zeros(max(capacity, 1), dtype=branch.dtype)
        leaf = f"{branch.name}[{branch.counter}]" if branch.counter else branch.name
        made = tree.Branch(branch.name, buffer, f"{leaf}/{LEAF_CODES[branch.dtype.name]}")
        made.SetTitle(branch.title)  # as NanoAOD does: the branch title is the documentation
        buffers.append(buffer)
    buffer_addresses = np.array([b.ctypes.data for b in buffers], dtype=np.uint64)
    itemsizes = np.array([b.dtype.itemsize for b in buffers], dtype=np.int64)
    rng = np.random.default_rng(seed)
    for n in chunk_sizes(entries):
        chunk = make_chunk(schema, rng, n)
        columns = [chunk[b.name] for b in schema.branches]
        contents = np.array([np.ascontiguousarray(c).ctypes.data for c, _ in columns], dtype=np.uint64)
        offsets = np.array([o.ctypes.data if o is not None else 0 for _, o in columns], dtype=np.uint64)
        ROOT.nanolike.fill(tree, n, len(columns), buffer_addresses, contents, offsets, itemsizes)
        del chunk, columns  # the arrays had to stay alive until fill returned
    out.Write()
    out.Close()


# ---------------------------------------------------------------- uproot writer


def _uproot_chunk(schema: Schema, chunk: dict) -> dict:
    """Group jagged branches by counter as uproot expects: {"Muon": record of jagged fields} makes
    branches Muon_pt, Muon_eta, ... counted by nMuon; a lone jagged branch X is counted by nX."""
    import awkward as ak

    out, groups = {}, {}
    for branch in schema.branches:
        content, offsets = chunk[branch.name]
        if branch.name in schema.counts:
            continue  # uproot writes the counters itself
        if offsets is None:
            out[branch.name] = content
            continue
        group = branch.counter[1:]
        array = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets), ak.contents.NumpyArray(content)))
        if branch.name == group:
            out[group] = array
        else:
            groups.setdefault(group, {})[branch.name[len(group) + 1 :]] = array
            out.setdefault(group, None)  # keep the schema's order
    for group, fields in groups.items():
        out[group] = ak.zip(fields)
    return out


def write_with_uproot(path: Path, schema: Schema, entries: int, seed: int, level: int) -> None:
    import awkward as ak
    import uproot

    rng = np.random.default_rng(seed)
    with uproot.recreate(path, compression=uproot.ZSTD(level)) as out:
        for i, n in enumerate(chunk_sizes(entries)):
            chunk = _uproot_chunk(schema, make_chunk(schema, rng, n))
            if i == 0:
                types = {k: v.type.content if isinstance(v, ak.Array) else v.dtype for k, v in chunk.items()}
                out.mktree(TREE, types)
            out[TREE].extend(chunk)


# ---------------------------------------------------------------- caching and command line


def import_root():
    """PyROOT in batch mode, or None when it is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the PyPI build warns that it is an alpha
            import ROOT
    except ImportError:
        return None
    ROOT.gROOT.SetBatch(True)
    return ROOT


def root_version() -> str | None:
    ROOT = import_root()
    return f"ROOT {ROOT.gROOT.GetVersion()}" if ROOT else None


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def parameters(entries: int, seed: int, level: int) -> dict:
    return {"entries": entries, "seed": seed, "compression": f"ZSTD:{level}", "schema": SAMPLE.name, "version": GENERATOR_VERSION}


def cached(path: Path, params: dict, writer: str) -> dict | None:
    """The sidecar's record if `path` was made with these parameters (and this writer, unless 'auto')."""
    try:
        record = json.loads(sidecar(path).read_text())
    except (OSError, ValueError):
        return None
    if not path.exists() or record.get("parameters") != params:
        return None
    if writer != "auto" and not record.get("writer", "").lower().startswith(writer):
        return None
    return record


def ensure(path: Path | None = None, entries: int = 40_000, seed: int = 1, level: int = 5, writer: str = "auto", log=print) -> Path:
    """Generate the file unless it exists with the same parameters; return its path."""
    path = Path(path) if path else default_output(entries)
    params = parameters(entries, seed, level)
    record = cached(path, params, writer)
    if record:
        log(f"{path}: reusing (made by {record['writer']}, same parameters)")
        return path
    if not SAMPLE.exists():
        raise FileNotFoundError(f"{SAMPLE} is absent: set CHERENKOV_SHARED to the shared folder")
    use_root = writer == "root" or (writer == "auto" and root_version() is not None)
    made_by = root_version() if use_root else _uproot_version()
    if use_root and made_by is None:
        raise RuntimeError("--writer root: `import ROOT` fails")
    log(f"{path}: generating {entries} entries from the schema of {SAMPLE.name} with {made_by} ...")
    t0 = time.perf_counter()
    schema = read_schema(SAMPLE)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    (write_with_root if use_root else write_with_uproot)(partial, schema, entries, seed, level)
    partial.replace(path)
    sidecar(path).write_text(json.dumps({"parameters": params, "writer": made_by}, indent=1) + "\n")
    seconds = time.perf_counter() - t0
    log(f"{path}: {path.stat().st_size / 1e6:.1f} MB, {len(schema.branches)} branches, written by {made_by} in {seconds:.1f} s")
    return path


def _uproot_version() -> str:
    import uproot

    return f"uproot {uproot.__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=40_000, help="entries to write (default 40000)")
    parser.add_argument("--output", type=Path, help="default: bench/data/nanolike-<entries>.root")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--level", type=int, default=5, help="ZSTD level (default 5, ROOT's default)")
    parser.add_argument("--writer", choices=["auto", "root", "uproot"], default="auto", help="auto: ROOT when it imports")
    parser.add_argument("--force", action="store_true", help="regenerate even if a matching file exists")
    args = parser.parse_args(argv)
    path = args.output or default_output(args.entries)
    if args.force:
        sidecar(path).unlink(missing_ok=True)
    ensure(path, args.entries, args.seed, args.level, args.writer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
