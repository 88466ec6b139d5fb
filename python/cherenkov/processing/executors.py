"""Where packets run: in this process, in local worker processes, or on a Dask cluster.

Every executor runs the same function, `run` (a packet: `run_packet`; a task that runs itself, such
as merging a packet's output files), and offers the driver the same few methods:
`start(job)` (before the files are opened, so workers boot meanwhile), `adopt(files)` (the files the
driver opened), `workers()` (ids of the slots that can each run one packet), `submit(worker, job,
work, done)`, `lost(error)` (did the worker die?), `replace(worker)` and `close`. The driver hands each
slot one packet at a time, so it knows which worker measured which speed, and can send a retry to a
different worker.
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
from cherenkov.processing.packets import Packet


@dataclass
class Job:
    """What every packet of a job shares. `processor` is the callable, or its pickle for workers elsewhere."""

    id: str
    processor: object
    step_size: int
    open_options: dict
    outputs: OutputOptions | None = None  # where event outputs are written


@dataclass
class WorkerStats:
    """Counters of one worker (or one packet, or the whole job when summed with +).

    `cpu_seconds` is the worker thread's CPU time (the processor, array building) plus the CPU time
    spent decompressing on the reader's threads; `io_wait_seconds` is the time the worker thread was
    not computing, i.e. waiting for bytes and decompression. `fetch_seconds` is the time the reader
    waited for its sources, summed over reads (reads in flight together overlap). `bytes`,
    `requests` and `round_trips` count what the files' sources did, opening included."""

    packets: int = 0
    entries: int = 0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    io_wait_seconds: float = 0.0
    decompress_cpu_seconds: float = 0.0
    fetch_seconds: float = 0.0
    bytes: int = 0
    requests: int = 0
    round_trips: int = 0
    events_written: int = 0  # events of event outputs (`cherenkov.Events`) written to files

    def __add__(self, other: WorkerStats) -> WorkerStats:
        return WorkerStats(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass
class PacketResult:
    packet_id: int
    blocks: list  # (level, index, value) of the dataset's merge tree, in chunk order
    stats: WorkerStats
    where: str  # host:pid of the process that ran it


class PacketError(Exception):
    """A packet failed in a worker. Carries the worker's traceback as text (exceptions of the reader
    cannot always be pickled back) and whether the file is to blame (it could not be read)."""

    def __init__(self, message: str, bad_file: bool, worker_traceback: str):
        super().__init__(message, bad_file, worker_traceback)
        self.message, self.bad_file, self.worker_traceback = message, bad_file, worker_traceback

    def __str__(self) -> str:
        return self.message


# ---- the worker's side -------------------------------------------------------------------------

_local = threading.local()  # per worker thread: files stay open and profiles trained between packets


class _WorkerState:
    MAX_OPEN_FILES = 4

    def __init__(self, job: Job):
        self.job_id = job.id
        self.processor = pickle.loads(job.processor) if isinstance(job.processor, bytes) else job.processor
        self.open_options = job.open_options
        self.files: OrderedDict = OrderedDict()
        self.opening: dict[str, Future] = {}  # files opened ahead, in the background
        self.profiles: dict = {}

    def file(self, url: str):
        """(file, opened_now): files are kept open for the next packets of the same file."""
        if url in self.files:
            self.files.move_to_end(url)
            return self.files[url], False
        opening = self.opening.pop(url, None)
        f = opening.result() if opening is not None else cherenkov.open(url, **self.open_options)
        self.files[url] = f
        if len(self.files) > self.MAX_OPEN_FILES:
            self.files.popitem(last=False)
        return f, True

    def open_ahead(self, urls) -> None:
        """Start opening the files this worker is likely to read next: at a long round trip an open
        costs a few of them, which then overlap with the current packet."""
        for url in list(self.opening):
            if url not in urls:  # given to another worker after all
                del self.opening[url]
        for url in urls:
            if url not in self.files and url not in self.opening:
                self.opening[url] = _opener().submit(cherenkov.open, url, **self.open_options)

    def profile(self, dataset: str, tree: str):
        # one access profile per dataset: the processor's branches are learned once per worker
        return self.profiles.setdefault((dataset, tree), cherenkov.AccessProfile())


_opener_pool = None


def _opener() -> ThreadPoolExecutor:
    global _opener_pool
    if _opener_pool is None:
        _opener_pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="cherenkov-open-ahead")
    return _opener_pool


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
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    outputs = PacketOutputs(job.outputs, packet)
    try:
        state = _state(job)
        f, opened_now = state.file(packet.url)
        state.open_ahead(packet.open_ahead)
        before = dict.fromkeys(_COUNTERS, 0) if opened_now else _counters(f)
        tree = f[packet.tree]
        folder = BlockFolder(packet.first_chunk)
        chunks = tree.chunks(job.step_size, packet.entry_start, packet.entry_stop, profile=state.profile(packet.dataset, packet.tree))
        for i, chunk in enumerate(chunks):
            if i >= len(packet.chunks) or (chunk.entry_start, chunk.entry_stop) != packet.chunks[i]:
                raise RuntimeError(f"{packet}: the reader's chunk {i} is {chunk.entry_start}..{chunk.entry_stop}, not the planned one")
            chunk.metadata = {"dataset": packet.dataset, "file": packet.url, "tree": packet.tree}
            folder.add(outputs.take(state.processor(chunk), chunk))
        if folder.next != packet.first_chunk + len(packet.chunks):
            raise RuntimeError(f"{packet}: the reader gave {folder.next - packet.first_chunk} chunks, not {len(packet.chunks)}")
        events_written = outputs.close()
        after = _counters(f)
    except Exception as e:
        outputs.abandon()
        bad_file = isinstance(e, (cherenkov.FormatError, cherenkov.SourceError, cherenkov.NotFoundError))
        raise PacketError(f"{type(e).__name__}: {e}", bad_file, traceback.format_exc()) from e
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
        events_written=events_written,
    )
    return PacketResult(packet.id, folder.blocks, stats, f"{socket.gethostname()}:{os.getpid()}")


def run(job: Job, work):
    """A packet of `job`, or a task of it that runs itself (`work.run()`: merging output files)."""
    return run_packet(job, work) if isinstance(work, Packet) else work.run()


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

    def adopt(self, files) -> None:
        # reuse the files the driver opened for their metadata
        state = _state(self.job)
        for info in files:
            state.files[info.url] = info.file

    def workers(self) -> list[str]:
        return ["main"]

    def submit(self, worker: str, job: Job, work, done) -> None:
        future: Future = Future()
        try:
            future.set_result(run(job, work))
        except Exception as e:
            future.set_exception(e)
        done(future)

    def lost(self, error: BaseException) -> bool:
        return False

    def replace(self, worker: str) -> None:
        pass

    def close(self) -> None:
        _local.state = None


class LocalProcesses:
    """`workers` local processes (spawned, so nothing is inherited by fork); each re-opens files by URL.

    Each worker is a one-process pool, so a packet goes to a known process, and a process that dies
    takes down only its own pool, which is replaced."""

    name = "processes"
    pickles = True

    def __init__(self, workers: int | None = None):
        self.num_workers = workers or os.cpu_count() or 1
        self.pools: dict[str, ProcessPoolExecutor] = {}

    def _new_pool(self, worker: str) -> None:
        self.pools[worker] = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))

    def start(self, job: Job) -> None:
        for slot in range(self.num_workers):
            self._new_pool(f"process-{slot}")
            self.pools[f"process-{slot}"].submit(warm_up, job)  # starts the process now

    def adopt(self, files) -> None:
        pass  # the workers open files themselves

    def workers(self) -> list[str]:
        return list(self.pools)

    def submit(self, worker: str, job: Job, work, done) -> None:
        try:
            future = self.pools[worker].submit(run, job, work)
        except BrokenProcessPool as e:  # the process died after its last packet
            future = Future()
            future.set_exception(e)
        future.add_done_callback(done)

    def lost(self, error: BaseException) -> bool:
        return isinstance(error, BrokenProcessPool)

    def replace(self, worker: str) -> None:
        """A new process in place of `worker` (which died), under a new id: process-0 becomes process-0.1."""
        self.pools.pop(worker).shutdown(wait=False, cancel_futures=True)
        slot, _, replaced = worker.partition(".")
        self._new_pool(f"{slot}.{int(replaced or 0) + 1}")

    def close(self) -> None:
        for pool in self.pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
        self.pools.clear()


class Dask:
    """A Dask distributed cluster: an existing `distributed.Client`, or a `LocalCluster` made for the
    call (`workers` processes, one thread each; `processes=False` runs them as threads here).

    A packet is sent to a chosen worker thread but may run elsewhere if that worker is gone; Dask
    re-runs the tasks of a worker that dies."""

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

    def adopt(self, files) -> None:
        pass  # the workers open files themselves

    def workers(self) -> list[str]:
        # asking the scheduler is a round trip: once a second is enough to follow workers coming and going
        if time.monotonic() - self._listed_at > 1.0:
            info = self.client.scheduler_info(n_workers=-1)["workers"]
            self._workers = [f"{address}#{t}" for address, w in info.items() for t in range(w.get("nthreads", 1))]
            self._listed_at = time.monotonic()
        return self._workers

    def submit(self, worker: str, job: Job, work, done) -> None:
        address = worker.rsplit("#", 1)[0]
        future = self.client.submit(
            run,
            job,
            work,
            key=f"cherenkov-{type(work).__name__.lower()}-{job.id}-{work.id}-{work.attempts}",
            workers=[address],
            allow_other_workers=True,
            pure=False,
        )
        future.add_done_callback(done)

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
