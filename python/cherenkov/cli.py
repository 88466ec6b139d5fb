"""The `cherenkov` command. Each command imports what it alone needs (rich, the plots, ...):
`cherenkov merge` of many small files is a short run, and its start-up counts."""

from __future__ import annotations

import argparse
import json
import sys
import time

import cherenkov
from cherenkov.dataset import TABLE_CLASSES
from cherenkov.units import parse_size


def _trees(f: cherenkov.File) -> list[str]:
    """The file's trees and RNTuples, one per name whatever the cycles."""
    names = [k.split(";")[0] for k, cls in f.classnames().items() if cls in TABLE_CLASSES]
    return list(dict.fromkeys(names))


def cmd_ls(args) -> int:
    from rich.console import Console

    from cherenkov.stats import as_dict
    from cherenkov.summary import human_bytes, print_tree

    f = cherenkov.open(args.url)
    console = Console()
    if args.json:
        out = {"file": f.path, "size": f.size, "keys": f.classnames(), "trees": {}}
        for name in _trees(f):
            tree = f[name]
            out["trees"][name] = {
                "kind": "RNTuple" if isinstance(tree, cherenkov.RNTuple) else "TTree",
                "entries": tree.num_entries,
                "clusters": tree.cluster_boundaries.tolist(),
                "branches": [as_dict(b) for b in tree.branches],
            }
        print(json.dumps(out, indent=1))
        return 0
    console.print(f"[bold]{f.path}[/bold]: {human_bytes(f.size)}, ROOT format {f.format_version}")
    for key, cls in f.classnames().items():
        console.print(f"  {key}  [dim]{cls}[/dim]")
    for name in [args.tree] if args.tree else _trees(f):
        print_tree(f[name], console, limit=None if args.all else 20)
    return 0


def entry_range(text: str) -> tuple[int | None, int | None]:
    """`A:B`, `A:` or `:B` as (start, stop), for argparse: a malformed or backwards range is an
    error naming what was given, not an empty read."""
    lo, colon, hi = text.partition(":")
    try:
        start, stop = (int(lo) if lo.strip() else None), (int(hi) if hi.strip() else None)
    except ValueError:
        start = stop = None
        colon = ""
    if not colon:
        raise argparse.ArgumentTypeError(f"'{text}' is not an entry range: write A:B, A: or :B with whole numbers")
    if start is not None and stop is not None and 0 <= stop < start:
        raise argparse.ArgumentTypeError(f"'{text}': the stop entry ({stop}) is before the start ({start})")
    return start, stop


def _open(args) -> cherenkov.File:
    return cherenkov.open(args.url, trace=bool(getattr(args, "plot", None)))


def cmd_read(args) -> int:
    from rich.console import Console

    from cherenkov.summary import human_bytes

    f = _open(args)
    trees = _trees(f)
    tree = f[args.tree or (trees[0] if len(trees) == 1 else "")] if (args.tree or len(trees) == 1) else None
    if tree is None:
        raise cherenkov.NotFoundError(f"{f.path}: say which tree with --tree (the file has {', '.join(trees) or 'none'})")
    start, stop = args.entries or (None, None)
    console = Console(quiet=args.quiet and not args.stats)
    t0 = time.perf_counter()
    selected = tree.resolve(args.branches or None)
    ntuple = isinstance(tree, cherenkov.RNTuple)
    steps = 0
    progress = False if args.quiet else None
    for _ in tree.iterate(
        [k for k, _ in selected], step_size=args.step_size, entry_start=start, entry_stop=stop, library="np", progress=progress
    ):
        steps += 1
    seconds = time.perf_counter() - t0
    stats = f.stats()
    mb = stats.uncompressed_bytes / 1e6
    if not args.quiet:
        items, units = ("fields", "pages") if ntuple else ("branches", "baskets")
        console.print(
            f"read {len(selected)} {items} of {tree.name!r} in {steps} steps: {stats.baskets} {units}, "
            f"{human_bytes(stats.compressed_bytes)} compressed, {mb:.1f} MB unzipped in {seconds:.3f} s "
            f"({mb / max(seconds, 1e-9):.0f} MB/s), {stats.requests} requests"
        )
    if args.stats:
        if args.json:
            print(stats.to_json(indent=1))
        else:
            console.print(stats.table())
    if args.plot:
        from pathlib import Path

        from cherenkov import plots

        out = Path(args.plot)
        made = [
            plots.read_offsets([f], out.with_name(out.stem + "-offsets" + out.suffix)),
            plots.timeline(f, out.with_name(out.stem + "-timeline" + out.suffix)),
        ]
        if not ntuple:  # baskets by entry and offset; an RNTuple's pages have no such listing
            made.insert(0, plots.entry_offsets(tree, out, file=f))
        console.print(f"plots written: {', '.join(map(str, made))}")
    return 0


def cmd_cache(args) -> int:
    import os

    from cherenkov import _core
    from cherenkov.summary import human_bytes

    where = args.dir or os.environ.get("CHERENKOV_CACHE")
    if not where:
        raise SystemExit("cherenkov cache: say which cache with --dir or $CHERENKOV_CACHE")
    if args.action == "clear":
        print(f"{where}: removed {human_bytes(_core.cache_clear(where))}")
    elif args.action == "prune":
        print(f"{where}: removed {human_bytes(_core.cache_prune(where, args.max_bytes))}")
    files, entries, size = _core.cache_summary(where)
    print(f"{where}: {files} files, {entries} ranges, {human_bytes(size)}")
    return 0


def cmd_stage(args) -> int:
    from cherenkov.summary import human_bytes

    files, directory = args.dataset[:-1], args.dataset[-1]
    if not files:
        raise SystemExit("cherenkov stage: give the dataset's files, then the directory to copy them to")
    options = {"direct_io": True} if args.direct_io else {}
    staged = cherenkov.stage(
        files, directory, files_at_once=args.files_at_once, verify=not args.no_verify, progress=False if args.quiet else None, **options
    )
    copied = sum(s.copied for s in staged)
    seconds = max((s.seconds for s in staged), default=0.0)
    if not args.quiet:
        for s in staged:
            how = "already there" if s.verified == "earlier" else f"verified by {s.verified}"
            resumed = f", resumed at {human_bytes(s.resumed_from)}" if s.resumed_from else ""
            print(f"{s.path}: {human_bytes(s.bytes)}, {how}{resumed}")
        print(f"{len(staged)} files in {directory}: {human_bytes(copied)} copied in {seconds:.1f} s")
    return 0


def size_bytes(text: str) -> int:
    """`10GB`, `500MB`, `2GiB` or a number of bytes, for argparse."""
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_merge(args) -> int:
    report = cherenkov.merge(
        args.inputs,
        args.output,
        max_size=args.max_size,
        mode=args.mode,
        schema=args.schema,
        format=args.format,
        compression=args.compression,
        progress=not args.quiet,
        resume=args.resume,
    )
    if args.json:
        import dataclasses

        print(json.dumps(dataclasses.asdict(report), indent=1))
    elif not args.quiet:
        print(report.table())
    return 0


def cmd_layout(args) -> int:
    from rich.console import Console

    from cherenkov.layout import as_dict, layout
    from cherenkov.summary import human_bytes

    trees = layout(args.url, tree=args.tree, branches=args.branches or None, rtt_ms=args.rtt, step_size=args.step_size)
    if args.json:
        print(json.dumps(as_dict(trees), indent=1))
        return 0
    console = Console()
    for t in trees:
        m = t.metadata
        console.print(
            f"[bold]{t.name}[/bold] ({t.kind}): {t.entries} entries in {t.clusters} clusters ({t.mean_cluster_entries:.0f} entries each), "
            f"{t.baskets} baskets of {human_bytes(t.mean_basket_bytes)} on average, {human_bytes(t.compressed_bytes)}"
        )
        console.print(
            f"  metadata at {m['tree_at']:.0%} of the file, streamer infos at {m['streamers_at']:.0%}: "
            f"opening takes {t.opening_requests} request(s)"
        )
        worst = sorted(t.branches, key=lambda b: -b.baskets_per_cluster)[:5]
        for b in worst:
            console.print(
                f"  {b.name}: {b.baskets} baskets, {b.baskets_per_cluster:.1f} per cluster, {human_bytes(b.mean_basket_bytes)} each"
            )
        p = t.prediction
        if p is not None:
            console.print(
                f"  reading {p.branches} branches at {p.rtt_ms:g} ms: {p.requests} requests, {human_bytes(p.bytes)}, "
                f"about {p.seconds:.2f} s ({p.steps} steps of {args.step_size} entries)"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cherenkov", description="Read ROOT files fast, near or far.")
    parser.add_argument("--version", action="version", version=f"cherenkov {cherenkov.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("ls", help="list a file's keys and its trees' branches (RNTuples' fields)")
    ls.add_argument("url", help="path or URL of a ROOT file")
    ls.add_argument("--tree", help="only this tree or RNTuple")
    ls.add_argument("--all", action="store_true", help="list every branch, not the 20 largest")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(run=cmd_ls)
    # What `read` and `stats` both take.
    reading = argparse.ArgumentParser(add_help=False)
    reading.add_argument("url", help="path or URL of a ROOT file")
    reading.add_argument("--tree", help="tree or RNTuple name (needed when the file has several)")
    reading.add_argument("--branches", nargs="*", help="names or glob patterns, of fields for an RNTuple (default: all readable)")
    reading.add_argument("--entries", type=entry_range, help="entry range A:B")
    reading.add_argument("--step-size", type=int, default=100_000, help="entries per step (whole clusters)")
    reading.add_argument("--json", action="store_true", help="statistics as JSON")
    rd = sub.add_parser("read", parents=[reading], help="read branches and report what it cost")
    rd.add_argument("--stats", action="store_true", help="print the read statistics")
    rd.add_argument("--plot", metavar="FILE", help="write plots of the read (PNG or PDF by extension)")
    rd.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    rd.set_defaults(run=cmd_read)
    st = sub.add_parser("stats", parents=[reading], help="read branches and print where the time went")
    st.set_defaults(run=cmd_read, stats=True, quiet=True, plot=None)
    cache = sub.add_parser("cache", help="the disk cache of remote reads: info, clear or prune")
    cache.add_argument("action", choices=["info", "clear", "prune"])
    cache.add_argument("--dir", help="the cache directory (default: $CHERENKOV_CACHE)")
    cache.add_argument("--max-bytes", type=int, default=20 << 30, help="prune: bytes to keep at most (LRU)")
    cache.set_defaults(run=cmd_cache)
    stage = sub.add_parser("stage", help="copy a dataset's files to a local directory (resumable, verified)")
    stage.add_argument("dataset", nargs="+", metavar="DATASET... DIR", help="files (paths, URLs, globs), then the directory")
    stage.add_argument("--files-at-once", type=int, default=4, help="files copied at once (default 4)")
    stage.add_argument("--no-verify", action="store_true", help="check sizes only, not the servers' checksums")
    stage.add_argument("--direct-io", action="store_true", help="leave the copies out of the page cache")
    stage.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    stage.set_defaults(run=cmd_stage)
    lay = sub.add_parser("layout", help="a file's layout and what reading it costs at a round trip time")
    lay.add_argument("url", help="path or URL of a ROOT file")
    lay.add_argument("--tree", help="only this tree")
    lay.add_argument("--branches", nargs="*", help="the selection whose read is predicted (names or patterns; default: all)")
    lay.add_argument("--rtt", type=float, default=0.0, help="round trip time in ms for the prediction")
    lay.add_argument("--step-size", type=int, default=100_000, help="entries per step (whole clusters)")
    lay.add_argument("--json", action="store_true", help="machine-readable output")
    lay.set_defaults(run=cmd_layout)
    mg = sub.add_parser("merge", help="merge many files into few, rewritten for remote reading")
    mg.add_argument("output", help="the output file (stem_0.root, stem_1.root, ... when split by --max-size)")
    mg.add_argument("inputs", nargs="+", help="paths, URLs or globs of the inputs, in order (file.root:tree for one tree)")
    mg.add_argument("--max-size", type=size_bytes, help="input bytes per output (10GB, 500MB): N inputs make M outputs, in order")
    mg.add_argument("--mode", choices=["auto", "copy", "rewrite"], default="auto")
    mg.add_argument(
        "--schema",
        choices=["strict", "union", "intersection"],
        default="strict",
        help="inputs with other branches: refuse, fill with defaults, keep the common ones",
    )
    mg.add_argument("--format", choices=["ttree", "rntuple"], help="output format (default: each tree's own)")
    mg.add_argument("--compression", type=int, help="ROOT's setting, e.g. 505 (zstd 5); default: the first input's")
    mg.add_argument("--json", action="store_true", help="the report as JSON")
    mg.add_argument("--quiet", action="store_true", help="no progress bar or report")
    mg.add_argument(
        "--no-resume",
        dest="resume",
        action="store_false",
        help="write every output again, even those an interrupted run of the same merge completed",
    )
    mg.set_defaults(run=cmd_merge)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return args.run(args)
    except (cherenkov.CherenkovError, ValueError, OSError) as e:
        print(f"cherenkov: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
