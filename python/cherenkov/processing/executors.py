"""Where packets run: in this process, in local worker processes, or on a Dask cluster.

Every executor runs the same function, `run` (a packet: `run_packet`; a task that runs itself, such
as merging packets' output files), and offers the driver the same few methods: `start(job)` (before
the files are opened, so workers boot meanwhile), `adopt(url, file)` (a file the driver opened, for
workers in this process), `workers()` (ids of the slots that can each run one packet),
`submit(worker, job, work, done)` (returns the future, which `done` is called with),
`executing(futures)` (how many of those futures' tasks workers hold now, running or queued
where they run: the driver asks before it gives up packets as lost), `lost(error)` (did the worker
die?), `replace(worker)` and `close`. The driver hands each slot one packet at a time, so it knows which
worker measured which speed, and can send a retry to a different worker.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import socket
import threading
import time
import traceback
from collections import OrderedDict
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields

import cherenkov
from cherenkov.processing.merge import BlockFolder
from cherenkov.processing.outputs import OutputOptions, PacketOutputs
from cherenkov.processing.packets import MAX_PROMISED, Packet
from cherenkov.tree import LazyChunk


@dataclass
class Job:
    """What every packet of a job shares. `processor` is the callable, or its pickle for workers elsewhere."""

    id: str
    processor: object
    step_size: int
    open_options: dict
    memory_budget: int = 256 << 20  # what a packet's read-ahead holds at most
    outputs: OutputOptions | None = None  # where event outputs (`cherenkov.Events`) are written


@dataclass
class WorkerStats:
    """Counters of one worker (or one packet, or the whole job when summed with +).

    `wall_seconds` is the time the worker spent on packets (busy), `idle_seconds` the time it
    waited for one while the job ran (set by the driver). `cpu_seconds` is the worker thread's CPU
    time (the processor, array building) plus the CPU time spent decompressing on the reader's
    threads; `io_wait_seconds` is the busy time the worker thread was not computing, i.e. waiting
    for bytes and decompression. `fetch_seconds` is the time the reader waited for its sources,
    summed over reads (reads in flight together overlap). `bytes`, `requests` and `round_trips`
    count what the files' sources did, opening included. `files_opened` counts the files the
    worker opened, `metadata_reads` those of them it had to read the metadata of (the driver had
    none to give, or the file had changed)."""

    packets: int = 0
    entries: int = 0
    wall_seconds: float = 0.0
    idle_seconds: float = 0.0
    cpu_seconds: float = 0.0
    io_wait_seconds: float = 0.0
    decompress_cpu_seconds: float = 0.0
    fetch_seconds: float = 0.0
    bytes: int = 0
    requests: int = 0
    round_trips: int = 0
    files_opened: int = 0
    metadata_reads: int = 0
    events_written: int = 0  # events of event outputs (`cherenkov.Events`) written to files

    def __add__(self, other: WorkerStats) -> WorkerStats:
        return WorkerStats(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass
class PacketResult:
    packet_id: int
    blocks: list  # (level, index, value) of the file's merge tree, in chunk order
    stats: WorkerStats
    where: str  # host:pid of the process that ran it
    started: float  # time.time() when it started, and when its first chunk's output was made
    first_output: float | None = None
    profile: dict | None = None  # the access profile's state, when this packet trained it
    stale_metadata: bool = False  # the file had changed since its metadata was learned
    waited: float = 0.0  # seconds it waited for its first chunk (less when read ahead)
    gap: float = 0.0  # seconds the worker waited for it since its last packet ended


class PacketError(Exception):
    """A packet failed in a worker. Carries the worker's traceback as text (exceptions of the reader
    cannot always be pickled back), whether the file is to blame (it could not be read), and
    whether it had changed since its metadata was learned (its packets no longer fit it)."""

    def __init__(self, message: str, bad_file: bool, worker_traceback: str, changed: bool = False):
        super().__init__(message, bad_file, worker_traceback, changed)
        self.message, self.bad_file, self.worker_traceback = message, bad_file, worker_traceback
        self.changed = changed

    def __str__(self) -> str:
        return self.message


# ---- the worker's side -------------------------------------------------------------------------

_local = threading.local()  # per worker thread: files stay open and profiles trained between packets


class _WorkerState:
    """What a worker keeps between packets of a job: the processor, files open (a few, with the
    next ones opening ahead), the metadata it was given, one access profile per dataset's tree."""

    MAX_OPEN_FILES = 4
    KEEP_METADATA = 64  # files' metadata kept (some 50-80 kB each for NanoAOD)

    def __init__(self, job: Job):
        self.job_id = job.id
        self.processor = pickle.loads(job.processor) if isinstance(job.processor, bytes) else job.processor
        self.open_options = job.open_options
        self.files: OrderedDict = OrderedDict()  # url -> (file, stale)
        self.opening: dict = {}  # url -> Future of (file, stale): files opened ahead
        self.metadata: OrderedDict = OrderedDict()  # url -> FileMetadata bytes given by the driver (see `know`)
        self.profiles: dict = {}
        self.trees: dict = {}  # (url, tree) -> Tree of a file open
        self.ahead: dict[int, Future] = {}  # packet id -> its start, read ahead (the next packets)
        self.last_end: float | None = None  # when its last packet ended (perf_counter)

    def _open(self, url, metadata: bytes | None):
        """(file, stale): opened with the metadata the driver gave, which spares reading it; a
        file that changed since (or metadata that does not fit it) is opened afresh."""
        if metadata is not None:
            try:
                return cherenkov.open(url, metadata=metadata, **self.open_options), False
            except (cherenkov.FileChangedError, cherenkov.FormatError):
                return cherenkov.open(url, **self.open_options), True
        return cherenkov.open(url, **self.open_options), False

    def file(self, url, metadata: bytes | None):
        """(file, stale, opened now, read its metadata): files stay open for the next packets."""
        key = _url_key(url)
        self.know(url, metadata)
        if key in self.files:
            self.files.move_to_end(key)
            f, stale = self.files[key]
            return f, stale, False, False
        opening = self.opening.pop(key, None)
        known = self.metadata.get(key)
        f, stale = opening.result() if opening is not None else self._open(url, known)
        self.files[key] = (f, stale)
        if len(self.files) > self.MAX_OPEN_FILES:
            closed, _ = self.files.popitem(last=False)
            self.trees = {k: t for k, t in self.trees.items() if k[0] != closed}
        return f, stale, True, known is None or stale

    def know(self, url, metadata: bytes | None) -> None:
        """Keep the metadata the driver sent for `url`: sent once per worker, it is needed again when
        the file, closed for others, comes back (as a packet taken from another worker)."""
        if metadata is None:
            return
        self.metadata[_url_key(url)] = metadata
        self.metadata.move_to_end(_url_key(url))
        while len(self.metadata) > self.KEEP_METADATA:
            self.metadata.popitem(last=False)

    def tree(self, f, url, name: str):
        """The tree `name` of an open file, parsed once while the file stays open."""
        return self.trees.setdefault((_url_key(url), name), f[name])

    def read_ahead(self, packet: Packet, profile, step_size: int, memory_budget: int) -> None:
        """Start `packet` (one of this worker's next) in the background: open its file, start its
        lazy reader with the trained `profile` and fetch its first chunk, while others run."""
        if packet.id in self.ahead:
            return
        key = _url_key(packet.url)
        opened = self.files.get(key)
        if opened is None and key not in self.opening:
            self.opening[key] = _opener().submit(self._open, packet.url, self.metadata.get(key))
        opening = self.opening.get(key)
        known = self.trees.get((key, packet.tree))

        def start():
            f, stale = opened if opened is not None else opening.result()
            tree = known or f[packet.tree]
            _check_entries(packet, tree, stale)
            core = tree.start_chunks(tree.steps(step_size, packet.entry_start, packet.entry_stop), profile, True, memory_budget)
            return tree, core, core.advance()

        self.ahead[packet.id] = _next_reader().submit(start)

    def started(self, packet: Packet):
        """(tree, lazy reader, first chunk's span) of `packet` if its start was read ahead, else
        None. Starts read ahead for packets no longer promised (given to others) are dropped."""
        wanted = {packet.id} | {p.id for p in packet.then}
        self.ahead = {i: f for i, f in self.ahead.items() if i in wanted}
        ahead = self.ahead.pop(packet.id, None)
        return ahead.result() if ahead is not None else None

    def open_ahead(self, ahead, then: tuple = ()) -> None:
        """Start opening the files this worker is likely to read next (`ahead`: (url, metadata or
        None) pairs): at a long round trip an open costs a few of them, which then overlap with
        the current packet. Files opening for the packets it gets next (`then`) are kept: dropped,
        each would be opened a second time when its packet comes."""
        for url, metadata in ahead:
            self.know(url, metadata)
        wanted = {_url_key(url) for url, _ in ahead} | {_url_key(p.url) for p in then}
        for key in list(self.opening):
            if key not in wanted:  # given to another worker after all
                del self.opening[key]
        for url, _ in ahead:
            key = _url_key(url)
            if key not in self.files and key not in self.opening:
                self.opening[key] = _opener().submit(self._open, url, self.metadata.get(key))

    def profile(self, dataset: str, tree: str, given: dict | None):
        """One access profile per dataset's tree: the one trained by the job's first packet when
        the driver sends it, so that this worker reads no whole chunk to learn it again."""
        key = (dataset, tree)
        if given is not None and not (key in self.profiles and self.profiles[key].trained):
            self.profiles[key] = cherenkov.AccessProfile(given)
        return self.profiles.setdefault(key, cherenkov.AccessProfile())


def _url_key(url) -> str:
    """A file's URL, or its replicas', as one key."""
    return url if isinstance(url, str) else " | ".join(url)


_opener_pool = None


def _opener() -> ThreadPoolExecutor:
    global _opener_pool
    if _opener_pool is None:
        # Files opened ahead, and those of the packets read ahead: an open waits for round trips.
        _opener_pool = ThreadPoolExecutor(max_workers=MAX_PROMISED + 3, thread_name_prefix="cherenkov-open-ahead")
    return _opener_pool


_next_reader_pool = None


def _next_reader() -> ThreadPoolExecutor:
    global _next_reader_pool
    if _next_reader_pool is None:
        _next_reader_pool = ThreadPoolExecutor(max_workers=MAX_PROMISED, thread_name_prefix="cherenkov-next-packet")
    return _next_reader_pool


def _state(job: Job) -> _WorkerState:
    state = getattr(_local, "state", None)
    if state is None or state.job_id != job.id:
        state = _local.state = _WorkerState(job)
    return state


_COUNTERS = ("bytes_read", "requests", "round_trips", "decompress_cpu_seconds", "fetch_seconds")


def _counters(f) -> dict:
    stats = f.stats().to_dict()  # the engine's and the source's counters of this file
    return {k: stats[k] for k in _COUNTERS}


def run_packet(job: Job, packet: Packet) -> PacketResult:
    """Run the processor over the chunks of `packet`; the results come back folded into blocks."""
    started, wall0, cpu0 = time.time(), time.perf_counter(), time.thread_time()
    first_output, stale = None, False
    outputs = PacketOutputs(job.outputs, packet)
    try:
        state = _state(job)
        gap = wall0 - state.last_end if state.last_end is not None else 0.0
        for then in packet.then:
            state.know(then.url, then.metadata)
        wait0 = time.perf_counter()
        ahead = state.started(packet)
        f, stale, opened_now, read_metadata = state.file(packet.url, packet.metadata)
        state.open_ahead(packet.open_ahead, packet.then)
        f.begin_reading()  # its read-ahead decodes before that of the next packet's file
        before = dict.fromkeys(_COUNTERS, 0) if opened_now else _counters(f)
        profile = state.profile(packet.dataset, packet.tree, packet.profile)
        trained_before = profile.trained
        budget = job.memory_budget // (1 + len(packet.then))  # this packet's reader, and the next ones'
        if trained_before:
            # Before waiting for this packet's first chunk, not after: else every packet whose
            # start was not read ahead costs the next one a round trip of its own (16 files at
            # 137 ms, 4 workers: 0.15 s waited by each second packet of a file).
            _read_next_ahead(state, packet, job, budget)
        if ahead is not None:
            tree, core, span = ahead
            _check_entries(packet, tree, stale)
        else:
            tree = state.tree(f, packet.url, packet.tree)
            _check_entries(packet, tree, stale)  # before its steps, which a shorter file refuses
            core = tree.start_chunks(tree.steps(job.step_size, packet.entry_start, packet.entry_stop), profile, True, budget)
            span = core.advance()
        waited = time.perf_counter() - wait0
        folder = BlockFolder(packet.first_chunk)
        i = 0
        while span is not None:
            if i >= len(packet.chunks) or tuple(span) != packet.chunks[i]:
                changed = " (the file changed since its metadata was learned)" if stale else ""
                raise RuntimeError(f"{packet}: the reader's chunk {i} is {span[0]}..{span[1]}, not the planned one{changed}")
            chunk = LazyChunk(tree, core, *span)
            chunk.metadata = {"dataset": packet.dataset, "file": packet.url, "tree": packet.tree}
            folder.add(outputs.take(state.processor(chunk), chunk))
            if i == 0:
                first_output = time.time()
                if not trained_before:  # it has just taught the profile the next packet needs
                    _read_next_ahead(state, packet, job, budget)
            span = core.advance()
            i += 1
        if folder.next != packet.first_chunk + len(packet.chunks):
            raise RuntimeError(f"{packet}: the reader gave {folder.next - packet.first_chunk} chunks, not {len(packet.chunks)}")
        events_written = outputs.close()
        after = _counters(f)
    except Exception as e:
        outputs.abandon()
        bad_file = isinstance(e, (cherenkov.FormatError, cherenkov.SourceError, cherenkov.NotFoundError))
        changed = stale or isinstance(e, _FileChanged)  # also when found out reading its start ahead
        raise PacketError(f"{type(e).__name__}: {e}", bad_file, traceback.format_exc(), changed) from e
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    decompress = after["decompress_cpu_seconds"] - before["decompress_cpu_seconds"]
    stats = WorkerStats(
        packets=1,
        entries=packet.num_entries,
        wall_seconds=wall,
        cpu_seconds=cpu + decompress,
        io_wait_seconds=max(0.0, wall - cpu),
        decompress_cpu_seconds=decompress,
        fetch_seconds=after["fetch_seconds"] - before["fetch_seconds"],
        bytes=after["bytes_read"] - before["bytes_read"],
        requests=after["requests"] - before["requests"],
        round_trips=after["round_trips"] - before["round_trips"],
        files_opened=int(opened_now),
        metadata_reads=int(read_metadata),
        events_written=events_written,
    )
    trained = profile.state() if profile.trained and not trained_before else None
    where = f"{socket.gethostname()}:{os.getpid()}"
    state.last_end = time.perf_counter()
    return PacketResult(packet.id, folder.blocks, stats, where, started, first_output, trained, stale, waited, gap)


def run(job: Job, work):
    """A packet of `job`, or a task of it that runs itself (`work.run()`: merging output files)."""
    return run_packet(job, work) if isinstance(work, Packet) else work.run()


class _FileChanged(RuntimeError):
    """The file has other entries than when its metadata was learned: its packets no longer fit."""


def _check_entries(packet: Packet, tree, stale: bool) -> None:
    # Also when not `stale`: a file opened without the driver's metadata (none was sent to this
    # worker) is checked against the entries its packets were planned on.
    if (stale or packet.file_entries) and tree.num_entries != packet.file_entries:
        raise _FileChanged(f"{packet}: the file now has {tree.num_entries} entries, not {packet.file_entries}")


def _read_next_ahead(state: _WorkerState, packet: Packet, job: Job, budget: int) -> None:
    """Start reading the next packets, those whose profile is trained here (a packet that trains
    starts them after its first chunk)."""
    for then in packet.then:
        profile = state.profile(then.dataset, then.tree, then.profile)
        if profile.trained:
            state.read_ahead(then, profile, job.step_size, budget)


def pickled(processor) -> bytes:
    """The processor as bytes for other processes; cloudpickle (installed with dask) also takes
    lambdas and functions defined in a notebook."""
    try:
        import cloudpickle

        return cloudpickle.dumps(processor)
    except ImportError:
        try:
            return pickle.dumps(processor)
        except Exception as e:
            raise TypeError(
                f"the processor cannot be pickled for worker processes ({e}); define it at module level or install cloudpickle"
            ) from e


# ---- the executors ---------------------------------------------------------------------------------


def warm_up(job: Job) -> None:
    """Import the reader and unpickle the processor, while the driver reads the files' metadata."""
    _state(job)


class InProcess:
    """Runs packets one at a time in the calling thread: for debugging (breakpoints, prints work)."""

    name = "in-process"
    pickles = False

    def start(self, job: Job) -> None:
        self.job = job

    def adopt(self, url, file) -> None:
        # reuse the files the driver opened for their metadata
        _state(self.job).files[_url_key(url)] = (file, False)

    def workers(self) -> list[str]:
        return ["main"]

    def submit(self, worker: str, job: Job, work, done) -> Future:
        future: Future = Future()
        try:
            future.set_result(run(job, work))
        except Exception as e:
            future.set_exception(e)
        done(future)
        return future

    def executing(self, futures: list) -> int:
        return 0  # a packet runs within `submit`

    def lost(self, error: BaseException) -> bool:
        return False

    def replace(self, worker: str) -> None:
        pass

    def close(self) -> None:
        _local.state = None


def _worker_context() -> multiprocessing.context.BaseContext:
    """Where worker processes come from: forked from a server process that imported the reader once
    (numpy, awkward, the extension: some 0.6 CPU seconds, which `spawn` paid in every worker, so
    that 4 workers on 2 busy cores started 6-14 s late), and not from the driver, whose threads
    (the reader's runtime, Dask's) make `fork` unsafe. `spawn` where there is no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # Read when the fork server starts (once per driver process; kept for later jobs).
    context.set_forkserver_preload(["cherenkov.processing.executors"])
    return context


class LocalProcesses:
    """`workers` local processes (forked from a clean server process, see `_worker_context`, so nothing
    of the driver is inherited); each re-opens files by URL.

    Each worker is a one-process pool, so a packet goes to a known process, and a process that dies
    takes down only its own pool, which is replaced. With `keep=True` (the default) the processes
    outlive the call: the next `process` call of this session takes them up instead of starting
    its own (`close_workers()` ends them, as does the end of the session)."""

    name = "processes"
    pickles = True

    def __init__(self, workers: int | None = None, keep: bool = True):
        self.num_workers = workers or os.cpu_count() or 1
        self.keep = keep
        self.pools: dict[str, ProcessPoolExecutor] = {}
        self.busy: dict[str, int] = {}  # worker -> packets submitted and not yet finished
        self.closed: dict[str, ProcessPoolExecutor] = {}  # kept once their last packet ends
        self.lock = threading.Lock()
        self.reused = 0  # processes taken up from an earlier call

    def _new_pool(self, worker: str) -> ProcessPoolExecutor:
        pool = _kept_pool() if self.keep else None
        self.reused += pool is not None
        self.pools[worker] = pool or ProcessPoolExecutor(max_workers=1, mp_context=_worker_context())
        self.busy[worker] = 0
        return self.pools[worker]

    def start(self, job: Job) -> None:
        for slot in range(self.num_workers):
            try:
                self._new_pool(f"process-{slot}").submit(warm_up, job)  # starts the process now
            except BrokenProcessPool:
                pass  # a kept process died since: its first packet finds out, and it is replaced

    def adopt(self, url, file) -> None:
        pass  # the workers open files themselves

    def workers(self) -> list[str]:
        return list(self.pools)

    def submit(self, worker: str, job: Job, work, done) -> Future:
        try:
            future = self.pools[worker].submit(run, job, work)
        except BrokenProcessPool as e:  # the process died after its last packet
            future = Future()
            future.set_exception(e)
        with self.lock:
            self.busy[worker] += 1
        future.add_done_callback(lambda _, w=worker: self._finished(w))
        future.add_done_callback(done)
        return future

    def executing(self, futures: list) -> int:
        return sum(f is not None and not f.done() for f in futures)  # a pool holds what it has not answered

    def _finished(self, worker: str) -> None:
        with self.lock:
            self.busy[worker] -= 1
            if self.busy[worker] == 0 and worker in self.closed:  # a copy that lost ended
                _rejoin(self.closed.pop(worker))

    def lost(self, error: BaseException) -> bool:
        return isinstance(error, BrokenProcessPool)

    def replace(self, worker: str) -> None:
        """A new process in place of `worker` (which died), under a new id: process-0 becomes process-0.1."""
        self.pools.pop(worker).shutdown(wait=False, cancel_futures=True)
        slot, _, replaced = worker.partition(".")
        self._new_pool(f"{slot}.{int(replaced or 0) + 1}")

    def close(self) -> None:
        """Processes are kept for the next call (with `keep`): at once when idle, else when the
        packet they still run ends (a copy whose twin answered first: not waited for)."""
        with self.lock:
            for worker, pool in self.pools.items():
                if not self.keep:
                    _end_pool(pool)
                elif self.busy[worker] == 0:
                    _keep_pool(pool)
                else:
                    self.closed[worker] = pool
                    with _KEPT_LOCK:
                        _RETURNING.add(pool)
            self.pools.clear()


_KEPT_POOLS: list[ProcessPoolExecutor] = []  # idle worker processes of earlier calls, for the next ones
_RETURNING: set[ProcessPoolExecutor] = set()  # kept once the packet they still run ends
_KEPT_LOCK = threading.Lock()


def _forget() -> None:
    """In a kept worker process: drop the finished job's files (their connections) and processor."""
    _local.state = None


def _keep_pool(pool: ProcessPoolExecutor) -> None:
    try:
        pool.submit(_forget)
    except (BrokenProcessPool, RuntimeError):  # it died, or the session is ending
        return
    with _KEPT_LOCK:
        _KEPT_POOLS.append(pool)


def _rejoin(pool: ProcessPoolExecutor) -> None:
    """A closed call's process whose last packet ended joins the kept ones, unless
    `close_workers()` ended it meanwhile."""
    with _KEPT_LOCK:
        if pool not in _RETURNING:
            return
        _RETURNING.discard(pool)
    _keep_pool(pool)


def _kept_pool() -> ProcessPoolExecutor | None:
    with _KEPT_LOCK:
        return _KEPT_POOLS.pop() if _KEPT_POOLS else None


def _end_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a one-process pool now, even mid-packet: its process is terminated."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)


def close_workers() -> None:
    """End the worker processes kept by earlier `process` calls of this session (they also end
    with it)."""
    with _KEPT_LOCK:
        pools, _KEPT_POOLS[:] = list(_KEPT_POOLS), []
        returning = list(_RETURNING)
        _RETURNING.clear()
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)
    for pool in returning:  # still running a copy whose twin answered: not worth waiting for
        _end_pool(pool)


class Dask:
    """A Dask distributed cluster: an existing `distributed.Client`, or a `LocalCluster` made for the
    call (`workers` processes, one thread each; `processes=False` runs them as threads here).

    A packet runs on the worker it is given to, and nowhere else: Dask's work stealing would move
    the packets queued on a worker to an idle one, which then reads without the read-ahead the
    first had started for them (16 workers: 10x the bytes read, each worker busy 11 % of the
    time). The driver hands the packets of a worker that left to others. Merges of output files
    (no read-ahead to lose) may run anywhere."""

    name = "dask"
    pickles = True

    def __init__(self, client=None, workers: int | None = None, processes: bool = True):
        self.client = client
        self.num_workers = workers or os.cpu_count() or 1
        self.processes = processes
        self._cluster = None
        self._workers: list[str] = []
        self._listed_at = -1e9

    def start(self, job: Job) -> None:
        if self.client is None:
            from distributed import Client, LocalCluster

            self._cluster = LocalCluster(n_workers=self.num_workers, threads_per_worker=1, processes=self.processes, dashboard_address=":0")
            self.client = Client(self._cluster)
        self.client.wait_for_workers(1)
        self._listed_at = -1e9  # list the workers afresh
        for address in self.client.scheduler_info(n_workers=-1)["workers"]:
            # Each worker imports the reader and unpickles the processor while the files are learned.
            key = ("cherenkov warm-up", job.id, address)
            self.client.submit(warm_up, job, key=key, workers=[address], pure=False, priority=1 << 30)

    def adopt(self, url, file) -> None:
        pass  # the workers open files themselves

    def workers(self) -> list[str]:
        # asking the scheduler is a round trip: once a second is enough to follow workers coming and going
        if time.monotonic() - self._listed_at > 1.0:
            info = self.client.scheduler_info(n_workers=-1)["workers"]
            self._workers = [f"{address}#{t}" for address, w in info.items() for t in range(w.get("nthreads", 1))]
            self._listed_at = time.monotonic()
        return self._workers

    def submit(self, worker: str, job: Job, work, done):
        address = worker.rsplit("#", 1)[0]
        future = self.client.submit(
            run,
            job,
            work,
            key=task_key(job, work),
            workers=[address],
            allow_other_workers=not isinstance(work, Packet),
            pure=False,
            priority=-work.id,  # a worker runs the packets it holds in the order handed out
        )
        future.add_done_callback(done)
        return future

    def executing(self, futures: list) -> int:
        """Those of `futures` whose tasks the scheduler has given to a worker that says it has work
        (the scheduler has believed tasks to be processing on idle workers: distributed#6245,
        dask#7543)."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        given = set()
        for address, keys in self.client.processing().items():
            counts = info.get(address, {}).get("metrics", {}).get("task_counts")
            if counts is None or any(n for state, n in counts.items() if state not in _RESTING):
                given.update(keys)
        return sum(f is not None and f.key in given for f in futures)

    def lost(self, error: BaseException) -> bool:
        from distributed.scheduler import KilledWorker

        return isinstance(error, KilledWorker)

    def replace(self, worker: str) -> None:
        pass  # the cluster (its nanny) restarts workers; `workers()` lists who is there

    def close(self) -> None:
        if self._cluster is not None:
            self.client.close()
            self._cluster.close()
            self.client = self._cluster = None


_RESTING = ("memory", "released", "error", "forgotten")  # states of a worker's tasks that take no thread


def task_key(job: Job, packet) -> tuple:
    """A packet's Dask key: the dashboard groups tasks by its first part ("cherenkov ttbar", the
    dataset) and shows the rest (file, entries, job, packet, attempt, copy) on hover. Other work
    (merging output files) is keyed by its own description."""
    if not isinstance(packet, Packet):
        return ("cherenkov merge", str(packet), job.id, packet.id, packet.attempts)
    url = packet.url if isinstance(packet.url, str) else packet.url[0]
    where = f"{os.path.basename(url.rstrip('/'))} {packet.entry_start}-{packet.entry_stop}"
    return (f"cherenkov {packet.dataset}", where, job.id, packet.id, packet.attempts, int(packet.copy))


def make_executor(executor, workers: int | None):
    """An executor from a name ("in-process", "processes", "dask"), a distributed.Client, or itself."""
    if isinstance(executor, str):
        kinds = {"in-process": InProcess, "inprocess": InProcess, "processes": LocalProcesses, "dask": Dask}
        if executor not in kinds:
            raise ValueError(f"executor must be one of 'in-process', 'processes', 'dask', not {executor!r}")
        return InProcess() if kinds[executor] is InProcess else kinds[executor](workers=workers)
    if type(executor).__name__ == "Client" and type(executor).__module__.startswith("distributed"):
        return Dask(client=executor)
    return executor
