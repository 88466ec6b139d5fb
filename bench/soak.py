"""Soak: readers for a set number of minutes against the lab's xrootd and nginx (behind toxiproxy),
with a server restarted or the link cut now and then; every value read is checked.

    python bench/soak.py --minutes 30 --threads 4 --processes 2

Threads in this process and in `--processes` others (spawned) loop until the time is up: each read
opens one of the files over root:// or http:// and reads some branches over an entry range (the
files differ), or reads through the file this process opened once per protocol and shares (the
same file, the same sources, read by every thread at once). Every read is compared with a local
read of the same entries. Every `--fault-every` seconds one fault, in turn: xrootd restarted,
nginx restarted, the link to one of them cut for a few seconds, its connections reset.

The report: reads done, values checked, wrong values (must be 0), errors by kind (expected while a
fault lasts: each names its file), hangs (a read or open still running after `--hang-after`
seconds: must be 0), retries (the sources' own count), and for each process its peak memory, and
its open file descriptors and connections after its first minute, at most and at the end (no
growth). Not part of
`make test`: it takes minutes by design.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import awkward as ak
import numpy as np

FILES = 4
ENTRIES = 200_000
BRANCHES = ["x", "y", "nv", "v"]  # nv: the counter uproot writes for the jagged v
PROTOCOLS = ["root", "http"]


def make_files(folder: Path) -> list[str]:
    """`FILES` files written by uproot, 4 clusters each: two flat branches and a jagged one."""
    import uproot

    names = []
    for k in range(FILES):
        rng = np.random.default_rng(k)
        name = f"soak-{k}.root"
        with uproot.recreate(folder / name) as out:
            tree = out.mktree("Events", {"x": "f8", "y": "i4", "v": "var * float32"})  # TTree
            for _ in range(4):
                counts = rng.integers(0, 6, ENTRIES // 4)
                tree.extend(
                    {
                        "x": rng.normal(size=ENTRIES // 4),
                        "y": rng.integers(-1000, 1000, ENTRIES // 4).astype(np.int32),
                        "v": ak.unflatten(rng.normal(size=counts.sum()).astype(np.float32), counts),
                    }
                )
        os.chmod(folder / name, 0o644)
        names.append(name)
    return names


def fd_counts() -> tuple[int, int]:
    """Open file descriptors of this process, and how many of them are sockets."""
    fds = sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        fds += 1
        try:
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return fds, sockets


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Readers:
    """The reading threads of one process, and their tallies."""

    def __init__(self, folder: Path, names: list[str], urls: dict, options: dict, hang_after: float, seed: int):
        import cherenkov

        self.cherenkov = cherenkov
        self.names, self.urls, self.options = names, urls, options
        self.hang_after = hang_after
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.tally = Counter()
        self.errors = Counter()
        self.wrong: list[str] = []
        self.retries = 0
        self.busy: dict[int, tuple[float, str]] = {}  # thread -> (started, what)
        self.samples: list[tuple[float, float, int, int]] = []  # (minute, RSS MB, fds, sockets)
        self.hung: set[tuple[int, float]] = set()
        self.local = {n: cherenkov.open(folder / n)["Events"] for n in names}
        self.shared = {p: cherenkov.open(urls[p][names[0]], **options) for p in PROTOCOLS}

    def pick(self):
        with self.lock:
            protocol = self.random.choice(PROTOCOLS)
            shared = self.random.random() < 0.5
            name = self.names[0] if shared else self.random.choice(self.names)
            branches = self.random.sample(BRANCHES, self.random.randint(1, len(BRANCHES)))
            start = self.random.randrange(0, ENTRIES - 1)
            stop = min(ENTRIES, start + self.random.randint(1, ENTRIES // 2))
        return protocol, shared, name, branches, start, stop

    def read_once(self) -> None:
        protocol, shared, name, branches, start, stop = self.pick()
        what = f"{protocol} {'shared' if shared else 'own'} {name} {branches} {start}:{stop}"
        me = threading.get_ident()
        self.busy[me] = (time.monotonic(), what)
        try:
            f = self.shared[protocol] if shared else self.cherenkov.open(self.urls[protocol][name], **self.options)
            got = f["Events"].arrays(branches, entry_start=start, entry_stop=stop, library="np")
            want = self.local[name].arrays(branches, entry_start=start, entry_stop=stop, library="np")
            checked = 0
            for b in branches:
                a, w = got[b], want[b]
                same = (
                    np.array_equal(a.offsets, w.offsets) and np.array_equal(a.content, w.content)
                    if isinstance(w, self.cherenkov.Jagged)
                    else np.array_equal(a, w)
                )
                with self.lock:
                    if not same:
                        self.wrong.append(f"{what}: branch {b}")
                checked += len(w.content) if isinstance(w, self.cherenkov.Jagged) else len(w)
            with self.lock:
                self.tally["reads"] += 1
                self.tally["values checked"] += checked
                if not shared:
                    self.retries += f.source_counters().retries
        except self.cherenkov.SourceError as e:
            with self.lock:
                self.errors[type(e).__name__] += 1
                if name not in str(e):
                    self.errors["not naming the file"] += 1
        except Exception as e:  # anything else is a defect: counted apart
            with self.lock:
                self.errors[f"unexpected {type(e).__name__}: {e}"[:200]] += 1
        finally:
            self.busy.pop(me, None)

    def run(self, threads: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds

        def loop():
            while time.monotonic() < deadline:
                self.read_once()

        workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
        for w in workers:
            w.start()
        started = time.monotonic()
        while any(w.is_alive() for w in workers):
            time.sleep(1)
            now = time.monotonic()
            if not self.samples or now - started >= 30 * len(self.samples):
                self.samples.append(((now - started) / 60, rss_mb(), *fd_counts()))
            for thread, (since, what) in list(self.busy.items()):
                if now - since > self.hang_after and (thread, since) not in self.hung:
                    self.hung.add((thread, since))
                    print(f"HANG: {what} running for {now - since:.0f} s", file=sys.stderr, flush=True)
            if now > deadline + 3 * self.hang_after:
                break  # reported as hangs; the threads are daemons

    def report(self) -> dict:
        """The tallies, and the process's resources: after its first minute, and at the end once
        the files dropped are collected (connections close with their file)."""
        retries = self.retries + sum(f.source_counters().retries for f in self.shared.values())
        gc.collect()
        time.sleep(3)
        warm = next((x for x in self.samples if x[0] >= 1), self.samples[-1])
        end = (self.samples[-1][0], rss_mb(), *fd_counts())
        return {
            "pid": os.getpid(),
            "reads": self.tally["reads"],
            "values checked": self.tally["values checked"],
            "wrong values": len(self.wrong),
            "wrong": self.wrong[:10],
            "errors": dict(self.errors),
            "hangs": len(self.hung),
            "retries": retries,
            "peak memory MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "memory MB after 1 min / median / end": [round(warm[1]), round(float(np.median([x[1] for x in self.samples]))), round(end[1])],
            "fds after 1 min / most / end": [warm[2], max(x[2] for x in self.samples), end[2]],
            "connections after 1 min / most / end": [warm[3], max(x[3] for x in self.samples), end[3]],
            "memory MB every 30 s": [round(x[1]) for x in self.samples],
        }


def reader_process(folder, names, urls, options, threads, seconds, hang_after, seed, out):
    readers = Readers(Path(folder), names, urls, options, hang_after, seed)
    readers.run(threads, seconds)
    out.put(readers.report())


class Faults:
    """One fault every `every` seconds, in turn, until stopped."""

    KINDS = ["restart xrootd", "cut root link", "restart nginx", "reset http connections", "cut http link"]

    def __init__(self, lab, folder: Path, every: float):
        from cherenkov_lab import NginxServer, XrootdServer

        self.lab, self.folder, self.every = lab, folder, every
        self.servers = {"xrootd": XrootdServer, "nginx": NginxServer}
        self.retired = []
        self.done = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def restart(self, which: str) -> None:
        old = getattr(self.lab, which)
        old.stop()
        self.retired.append(old)
        time.sleep(1)  # down for a second, then up on the same port (the proxy's upstream)
        for attempt in range(5):  # xrootd 5.5 sometimes dies at start (SIGSEGV): start it again
            try:
                setattr(self.lab, which, self.servers[which](self.folder, port=old.port))
                return
            except RuntimeError as e:
                print(f"{which} did not start (attempt {attempt + 1}): {str(e)[:200]}", flush=True)
                self.done[f"{which} failed to start"] += 1
                time.sleep(1)
        raise RuntimeError(f"{which} did not start again in 5 attempts")

    def cut(self, proxy: str, seconds: float) -> None:
        self.lab.toxiproxy.enable(proxy, False)
        time.sleep(seconds)
        self.lab.toxiproxy.enable(proxy, True)

    def reset(self, proxy: str) -> None:
        self.lab.toxiproxy.toxic(proxy, "reset", "reset_peer", stream="upstream", timeout=0)
        time.sleep(1)
        self.lab.toxiproxy.remove_toxic(proxy, "reset")

    def run(self) -> None:
        k = 0
        while not self.stop.wait(self.every):
            kind = self.KINDS[k % len(self.KINDS)]
            k += 1
            {
                "restart xrootd": lambda: self.restart("xrootd"),
                "restart nginx": lambda: self.restart("nginx"),
                "cut root link": lambda: self.cut("xrootd", 3),
                "cut http link": lambda: self.cut("nginx", 3),
                "reset http connections": lambda: self.reset("nginx"),
            }[kind]()
            self.done[kind] += 1
            print(f"{time.strftime('%H:%M:%S')} fault: {kind}", flush=True)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        for server in self.retired:
            server.__exit__(None, None, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--threads", type=int, default=4, help="reading threads per process")
    parser.add_argument("--processes", type=int, default=2, help="reading processes besides this one")
    parser.add_argument("--fault-every", type=float, default=45, help="seconds between faults")
    parser.add_argument("--timeout", type=float, default=10, help="cherenkov.open's timeout")
    parser.add_argument("--hang-after", type=float, default=120, help="seconds after which a read is a hang")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()

    from cherenkov_lab import Lab

    folder = Path(tempfile.mkdtemp(prefix="cherenkov-soak-"))
    os.chmod(folder, 0o755)  # xrootd runs as nobody
    try:
        names = make_files(folder)
        with Lab(folder) as lab:
            urls = {p: {n: lab.url(p, n) for n in names} for p in PROTOCOLS}
            options = {"timeout": args.timeout}
            seconds = args.minutes * 60
            context = multiprocessing.get_context("spawn")
            out = context.Queue()
            others = [
                context.Process(
                    target=reader_process,
                    args=(str(folder), names, urls, options, args.threads, seconds, args.hang_after, 1 + i, out),
                )
                for i in range(args.processes)
            ]
            for p in others:
                p.start()
            readers = Readers(folder, names, urls, options, args.hang_after, 0)
            faults = Faults(lab, folder, args.fault_every)
            faults.thread.start()
            started = time.monotonic()
            readers.run(args.threads, seconds)
            faults.close()
            reports = [readers.report()]
            for p in others:
                p.join(seconds + 4 * args.hang_after)
            while not out.empty() or len(reports) < 1 + args.processes:
                try:
                    reports.append(out.get(timeout=30))
                except Exception:
                    break
            summary = {
                "minutes": (time.monotonic() - started) / 60,
                "processes": 1 + args.processes,
                "threads per process": args.threads,
                "faults": dict(faults.done),
                "reads": sum(r["reads"] for r in reports),
                "values checked": sum(r["values checked"] for r in reports),
                "wrong values": sum(r["wrong values"] for r in reports),
                "hangs": sum(r["hangs"] for r in reports),
                "processes reporting": len(reports),
                "retries": sum(r["retries"] for r in reports),
                "errors": dict(sum((Counter(r["errors"]) for r in reports), Counter())),
                "per process": reports,
            }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    bad = summary["wrong values"] or summary["hangs"] or summary["processes reporting"] < 1 + args.processes
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
