"""The decompression floor of a selection: what the zstd library alone (Python `zstandard`, or
zlib) takes to decompress the same compressed blocks a read decompresses, on one core, scaled to
every core: floor = uncompressed bytes / (the library's rate per core x cores). A reader cannot
be faster than that without decompressing less.

    python bench/floor.py FILE [--tree Events] [--branches 'Muon_*' ...] [--repeat 5]

The blocks are found from where the read's units are stored (`stored_ranges`: TTree baskets,
RNTuple pages) and ROOT's 9-byte block headers: a TTree basket's key header is skipped, an RNTuple
page's checksum is skipped, and a page stored uncompressed (no sequence of block headers) costs
nothing to decompress and is left out of both the bytes and the time.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import threading
import time
import zlib
from statistics import median

import zstandard

HEADER = 9


def _blocks(payload: bytes) -> list[tuple[bytes, bytes, int]] | None:
    """(algorithm, compressed block, uncompressed length) of a run of ROOT compression blocks
    filling `payload` exactly, or None when it is not one."""
    out, at = [], 0
    while at < len(payload):
        head = payload[at : at + HEADER]
        if len(head) < HEADER or head[:2] not in (b"ZS", b"ZL", b"L4", b"XZ", b"CS"):
            return None
        clen = int.from_bytes(head[3:6], "little")
        ulen = int.from_bytes(head[6:9], "little")
        block = payload[at + HEADER : at + HEADER + clen]
        if len(block) != clen:
            return None
        out.append((head[:2], block, ulen))
        at += HEADER + clen
    return out


def blocks_of(path: str, ranges: list[tuple[int, int]], ttree: bool) -> list[tuple[bytes, bytes, int]]:
    """The compression blocks stored in `ranges` of the file (TTree keys or RNTuple pages)."""
    out = []
    with open(path, "rb") as f:
        for offset, length in ranges:
            f.seek(offset)
            raw = f.read(length)
            if ttree:  # a key: fNbytes, fVersion, fObjLen, fDatime, fKeyLen, ...
                nbytes, _, objlen, _, keylen = struct.unpack(">ihiIh", raw[:16])
                if objlen <= nbytes - keylen:
                    continue  # stored uncompressed
                raw = raw[keylen:]
            # An RNTuple page may end in its 8-byte XXH3 checksum.
            found = _blocks(raw) if ttree else (_blocks(raw) or _blocks(raw[:-8]))
            if found is None:
                if ttree:
                    raise ValueError(f"{path}: no compression blocks in the basket at {offset}")
                continue  # an RNTuple page stored as is
            out.extend(found)
    return out


def _decompress_all(blocks) -> None:
    zstd = zstandard.ZstdDecompressor()
    for algorithm, block, ulen in blocks:
        if algorithm == b"ZS":
            zstd.decompress(block, max_output_size=ulen)
        elif algorithm == b"ZL":
            zlib.decompress(block, bufsize=ulen)
        else:
            raise ValueError(f"the floor measures zstd and zlib blocks, found {algorithm!r}")


def _on_every_core(blocks, cores: int) -> float:
    """Seconds the library takes to decompress `blocks` on `cores` threads at once, each its share
    (largest blocks first, each to the least loaded; zstandard and zlib release the GIL while
    they work)."""
    shares: list[list] = [[] for _ in range(cores)]
    loads = [0] * cores
    for block in sorted(blocks, key=lambda b: -b[2]):
        least = loads.index(min(loads))
        shares[least].append(block)
        loads[least] += block[2]
    threads = [threading.Thread(target=_decompress_all, args=(share,)) for share in shares]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def floor(path: str, table, names: list[str], repeat: int = 5) -> dict:
    """The floor of reading `names` of `table` (a cherenkov Tree or RNTuple of `path`) whole:
    the library's single-core seconds (median of `repeat`), its rate, and the floor on all cores;
    also the library's own seconds on every core at once (`every_core_seconds`): two vCPUs of a
    virtual machine may share one physical core, and then the floor's linear scaling is not met
    even by the library."""
    indices = [table[n].index for n in names]
    ranges = table._core.stored_ranges(indices, 0, table.num_entries)
    blocks = blocks_of(path, ranges, ttree=not hasattr(table, "fields"))
    uncompressed = sum(ulen for _, _, ulen in blocks)
    _decompress_all(blocks)  # once untimed: the blocks in memory, the decompressor warm
    times, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        _decompress_all(blocks)
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    one_core = median(times)
    cores = os.cpu_count() or 1
    every_core = median(_on_every_core(blocks, cores) for _ in range(repeat))
    return {
        "blocks": len(blocks),
        "compressed_bytes": sum(len(b) for _, b, _ in blocks),
        "uncompressed_bytes": uncompressed,
        "library": f"zstandard {zstandard.__version__} (libzstd {'.'.join(map(str, zstandard.ZSTD_VERSION))})",
        "one_core_seconds": one_core,
        # CPU time of the same work: on a loaded machine wall times stretch, CPU work does not.
        "one_core_cpu_seconds": median(cpu),
        "rate_per_core": uncompressed / one_core,
        "cores": cores,
        "floor_seconds": one_core / cores,
        "every_core_seconds": every_core,
    }


def main(argv: list[str] | None = None) -> int:
    import cherenkov

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--tree", default="Events")
    parser.add_argument("--branches", nargs="*", help="names or patterns (default: every readable branch)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    table = cherenkov.open(args.file)[args.tree]
    names = [k for k, _ in table.resolve(args.branches)] if args.branches else [b.path for b in table.branches if b.readable]
    f = floor(args.file, table, names, args.repeat)
    print(
        f"{len(names)} items, {f['blocks']} blocks, {f['compressed_bytes'] / 1e6:.1f} MB -> {f['uncompressed_bytes'] / 1e6:.1f} MB; "
        f"{f['library']}: {f['rate_per_core'] / 1e6:.0f} MB/s per core, floor on {f['cores']} cores {f['floor_seconds'] * 1000:.1f} ms "
        f"(the library on {f['cores']} cores at once: {f['every_core_seconds'] * 1000:.1f} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
