"""The driver of `process`: learn the files' metadata (or find it kept), give idle workers packets as
the files become known, merge what comes back, copy stragglers near the end, handle failures; then
have the workers merge the event outputs' files, and hand those back as datasets."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import cherenkov
from cherenkov import _core
from cherenkov.processing.dataset import FileSpec, normalize
from cherenkov.processing.executors import Job, PacketError, WorkerStats, make_executor, pickled
from cherenkov.processing.merge import DatasetMerge
from cherenkov.processing.metadata import Learned, MetadataStore, OpenFailure, cache_dir, learn
from cherenkov.processing.outputs import MergeTask, OutputOptions, finish, forget_manifests, plan_merges
from cherenkov.processing.packets import FileInfo, Packet, Packetizer
from cherenkov.processing.report import PacketFailure, ProcessingError, Report
from cherenkov.progress import Progress, ProgressUpdate

#: How often the driver looks again at workers and running packets when nothing else happens.
POLL_SECONDS = 0.25
#: How long every worker may sit idle while work is left before the job fails as stuck, and how
#: long packets the driver holds as handed out may go unanswered while the executor runs nothing of
#: the job before they are handed out again (their task or its result was lost on the way).
STALL_SECONDS = 60.0
#: How often, at most, the driver asks the executor what it runs (for Dask a scheduler round trip).
CHECK_SECONDS = 1.0


#: A future cancelled (Dask's raise an asyncio.CancelledError, which is no Exception).
_CANCELLED = (concurrent.futures.CancelledError, asyncio.CancelledError)


@dataclass(eq=False)  # compared by identity: the same packet may be held twice (a retry, a copy)
class _Held:
    """A packet handed out to a worker, as the driver holds it until its answer comes."""

    packet: Packet
    submitted: float  # time.monotonic()
    future: object = None  # what the executor's `submit` returned (to cancel a copy that lost)


def process(
    dataset: Mapping,
    processor: Callable,
    *,
    tree: str = "Events",
    executor="processes",
    workers: int | None = None,
    step_size: int = 100_000,
    target_seconds: float = 5.0,
    retries: int = 2,
    skip_bad_files: bool = False,
    progress: bool | None = None,
    callback: Callable[[ProgressUpdate], None] | None = None,
    open_options: dict | None = None,
    memory_budget: int = 256 << 20,
    return_report: bool = False,
    output_dir: str | os.PathLike | None = None,
    output_format: str = "ttree",
    output_compression=505,
    output_max_size: int | None = None,
):
    """Run `processor` over every chunk of every file of `dataset`; returns {dataset name: merged output}
    (None for a dataset with no entries), or (that, `Report`) with `return_report=True`.

    dataset: {name: [file, ...]} or {name: {"files": [...], "tree": "T"}}; a file is a path or URL
        (local, http(s)://, root://) or a list of replicas (the first is read). `tree` is the default tree.
    processor: called with each `cherenkov.LazyChunk` (about `step_size` entries of whole clusters;
        `chunk["Muon_pt"]` reads a branch, so the reader learns which branches are used, and
        `chunk.metadata` gives the dataset, file and tree). It returns histograms (hist or
        boost-histogram), numbers, arrays or lists (concatenated in entry order), or dicts of those;
        see `cherenkov.processing.merge`. For worker processes it is pickled (cloudpickle if installed).
    executor: "in-process" (one packet at a time here: for debugging), "processes" (`workers` local
        processes), "dask" (a LocalCluster of `workers` processes made for the call), a
        `distributed.Client`, or an executor object (`InProcess()`, `LocalProcesses(n)`,
        `Dask(client, workers, processes)`). Every executor gives the same result, bit for bit.
    target_seconds: how long a packet should take on the worker that gets it, once its speed is known.
    retries: how many times a failed packet is retried (on another worker when there is one); a worker
        that dies counts as a failure of its packet, which is retried and counted once.
    skip_bad_files: if a file cannot be opened or read (after retries), go on without the rest of it
        and list it in `Report.bad_files`; otherwise raise `ProcessingError` naming it.
    progress: a progress bar per dataset (entries/s, MB/s, ETA); None (default): when stderr is a terminal.
    callback: called with a `ProgressUpdate` after every finished packet; `update.partial()` gives
        the results merged so far.
    open_options: keyword arguments for `cherenkov.open` (`cherenkov.file.OPEN_OPTIONS`: connections,
        timeout, cache, ...). With a disk cache (``cache=`` or ``$CHERENKOV_CACHE``) the files'
        metadata is kept there for every later job; else in this process.
    memory_budget: bytes a worker's read-ahead holds at most while it runs a packet.
    output_dir: where workers write the events a processor returns as `cherenkov.Events` (a folder
        every worker can reach): each such output comes back as a `cherenkov.Dataset` in its place,
        saved as `output_dir/<dataset>/<output>/dataset.json` beside its files (see
        `cherenkov.processing.outputs`). One job at a time per `output_dir`.
    output_format: "ttree" or "rntuple"; output_compression: as `cherenkov.recreate` takes it.
    output_max_size: when given, the workers then merge each output's consecutive files into files
        of at most this many bytes (`cherenkov.merge`, in parallel: one merge per target file).

    The files' metadata is learned once (all files opened at once, a bounded number together) and
    kept, so a second job over the same files opens none of them for it; workers are sent what
    they need with their packets. Packets start as soon as their file is known.
    """
    specs = normalize(dataset, tree)
    executor = make_executor(executor, workers)
    options = dict(open_options or {})
    outputs = None
    if output_dir is not None:
        outputs = OutputOptions(os.path.abspath(output_dir), output_format, output_compression, output_max_size)
        forget_manifests(outputs, {spec.dataset for spec in specs})
    processor_sent = pickled(processor) if executor.pickles else processor
    job = Job(uuid.uuid4().hex[:12], processor_sent, step_size, options, memory_budget, outputs)
    run = _Run(job, executor, retries, skip_bad_files, MetadataStore(cache_dir(options)))
    start = time.perf_counter()
    executor.start(job)  # workers boot while the files are learned
    run.report.reused_workers = getattr(executor, "reused", 0)
    try:
        merges = run.process(specs, target_seconds, progress, callback)
        out = {name: m.result for name, m in merges.items()}
        if outputs is not None and outputs.max_size:
            out = run.merge_outputs(out, outputs, progress, callback)
    finally:
        run.stop_learning()
        executor.close()
    run.report.elapsed_seconds = time.perf_counter() - start
    if outputs is not None:
        out = {name: _finish_outputs(result, outputs, name, specs, processor) for name, result in out.items()}
    return (out, run.report) if return_report else out


def _finish_outputs(result, outputs: OutputOptions, dataset: str, specs: list[FileSpec], processor: Callable):
    """Event outputs of `dataset` as saved Datasets, with the job's provenance."""
    named = processor if hasattr(processor, "__qualname__") else type(processor)  # a function or an instance
    provenance = {
        "inputs": [spec.url if isinstance(spec.url, str) else list(spec.url) for spec in specs if spec.dataset == dataset],
        "processor": f"{named.__module__}.{named.__qualname__}",
        "cherenkov": cherenkov.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return finish(result, outputs, dataset, provenance)


class _Run:
    """The driver: learn files, give idle workers packets, merge what comes back, handle failures."""

    def __init__(self, job: Job, executor, retries: int, skip_bad_files: bool, store: MetadataStore):
        self.job, self.executor, self.store = job, executor, store
        self.retries, self.skip_bad_files = retries, skip_bad_files
        self.report = Report(executor=executor.name)
        self.events: queue.Queue = queue.Queue()  # files learned, packets finished
        self.running: dict[str, list[_Held]] = {}  # worker -> the packets handed out to it, in order
        self.merged: set[int] = set()  # packet ids: each packet is merged once, whatever happens
        self.bad: set[int] = set()  # files given up
        self.seen: dict[str, float] = {}  # worker -> when it was first listed (for its idle time)
        self.last_done: dict[str, float] = {}  # worker -> when its last packet came back
        self.gone: set[str] = set()
        self.last_answer = time.monotonic()  # when a packet last came back
        self.silent_since: float | None = None  # since when packets are held that the executor does not run
        self.checked_at = -1e9
        self.started = time.time()
        self.stopping = threading.Event()

    # ---- learning the files ----------------------------------------------------------------------

    def _learn(self, specs: list[FileSpec]) -> None:
        """In a thread: every file's metadata, as events, then None."""
        try:
            opened = lambda spec: cherenkov.open(spec.url, **self.job.open_options)  # noqa: E731
            for i, item in learn(specs, self.store, opened, keep_files=not self.executor.pickles):
                if self.stopping.is_set():
                    return
                self.events.put(("learned", i, item))
        finally:
            self.events.put(("learned", None, None))

    def stop_learning(self) -> None:
        self.stopping.set()

    def learned(self, i: int, item: Learned | OpenFailure) -> None:
        spec = self.specs[i]
        merge = self.merges[spec.dataset]
        if isinstance(item, OpenFailure):
            message = _core.redact(f"{spec.url}: {type(item.error).__name__}: {item.error}")
            if not self.skip_bad_files:
                raise ProcessingError(f"cannot open {message} (skip_bad_files=True goes on without it)") from item.error
            self.report.bad_files[_core.redact(str(spec.url))] = message
            merge.skip_file(self.positions[i])
            return
        if item.file is not None:
            self.executor.adopt(spec.url, item.file)
        self.report.metadata_opened += item.opened
        self.report.metadata_requests += item.requests
        self.report.metadata_bytes += item.nbytes
        self.report.files += 1
        info = FileInfo(spec, i, self.positions[i], item.meta, item.meta.chunks(self.job.step_size))
        self.files[i] = info
        self.packetizer.add_file(info)
        merge.start_file(info.position, len(info.chunks))
        self.feedback.grow(spec.dataset, item.meta.num_entries)

    # ---- the loop ------------------------------------------------------------------------------

    def process(self, specs, target_seconds, progress, callback) -> dict[str, DatasetMerge]:
        """Every packet of every file of `specs`, merged into one DatasetMerge per dataset."""
        self.specs = specs
        counts = Counter(spec.dataset for spec in specs)
        seen = Counter()
        self.positions = []
        for spec in specs:
            self.positions.append(seen[spec.dataset])
            seen[spec.dataset] += 1
        self.merges = {name: DatasetMerge(n) for name, n in counts.items()}
        self.files: dict[int, FileInfo] = {}
        self.packetizer = Packetizer(target_seconds, metadata=lambda info: self.store.metadata(info.spec))
        self.feedback = Progress(
            dict.fromkeys(self.merges, 0), progress, callback, lambda: {n: m.partial() for n, m in self.merges.items()}
        )
        learning = threading.Thread(target=self._learn, args=(specs,), name="cherenkov-learn", daemon=True)
        learning.start()
        try:
            self.loop(time.monotonic())
        finally:
            self.stop_learning()
            self.feedback.close()
        unfinished = [name for name, m in self.merges.items() if not m.done]
        if unfinished:  # every chunk is merged or skipped exactly once, so this is a bug, not bad luck
            raise ProcessingError(f"internal error: datasets {unfinished} did not receive all their chunks")
        return self.merges

    def loop(self, start: float) -> None:
        learning = True
        stalled_since = None
        while True:
            self.hand_out()
            if not learning and self.packetizer.exhausted() and not self.needed_running():
                break  # without event outputs, copies whose twin answered are not waited for
            # Workers present, none holding a packet, work left: the handing out is stuck (a bug);
            # an error that says where beats a job that waits for ever.
            stuck = not learning and not any(self.running.values()) and bool(self.executor.workers())
            stalled_since = (stalled_since or time.monotonic()) if stuck else None
            if stuck and time.monotonic() - stalled_since > STALL_SECONDS:
                raise ProcessingError(
                    f"internal error: {len(self.executor.workers())} workers idle for {STALL_SECONDS:g} s while work is left: "
                    f"{self.packetizer.describe()}"
                )
            self.find_lost(time.monotonic())
            try:
                event = self.events.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue  # workers may have come or gone, a packet may have become a straggler
            while event is not None:  # and whatever else came meanwhile, before handing out again
                if event[0] == "learned" and event[1] is None:
                    learning = False
                    self.report.open_seconds = time.monotonic() - start
                elif event[0] == "learned":
                    self.learned(event[1], event[2])
                else:
                    self.finished(*event[1:])
                try:
                    event = self.events.get_nowait()
                except queue.Empty:
                    event = None
        self.finish(time.monotonic())

    def needed_running(self) -> bool:
        """Is a packet running whose result is still needed? With event outputs, every one is: a
        copy whose twin answered still writes into `output_dir`, which must be still once the job
        returns (its files kept, another job's may start)."""
        if self.job.outputs is not None:
            return any(self.running.values())
        return any(h.packet.id not in self.merged for held in self.running.values() for h in held)

    def finished(self, worker: str, entry: _Held, future) -> None:
        self.last_answer, self.silent_since = time.monotonic(), None
        held = self.running.get(worker, [])
        lost = entry not in held  # it was given up as lost, and handed out again
        if not lost:
            held.remove(entry)
        try:
            result = future.result()
        except _CANCELLED as e:
            if not lost and entry.packet.id not in self.merged:  # not a twin cancelled by `cancel_twins`
                self.failed(worker, entry.packet, e)
        except Exception as e:
            if not lost:
                self.failed(worker, entry.packet, e)
        else:
            self.done(worker, entry.packet, result)

    def find_lost(self, now: float) -> None:
        """Packets the driver holds as handed out while the executor runs none of them, for
        `STALL_SECONDS` without an answer, were lost on the way (a task the cluster forgot, a
        result or callback dropped): they are handed out again, as failures, instead of being
        waited for for ever. An answer that comes after all (from a task that could not be
        cancelled) still counts, if it is the first."""
        if now - self.checked_at < min(CHECK_SECONDS, STALL_SECONDS / 4):
            return
        self.checked_at = now
        needed = [(w, h) for w, held in self.running.items() for h in held if h.packet.id not in self.merged]
        quiet = self.events.empty() and now - self.last_answer >= min(CHECK_SECONDS, STALL_SECONDS / 4)
        executing = getattr(self.executor, "executing", lambda futures: None)  # an executor object may not say
        if not needed or not quiet or executing([h.future for _, h in needed]):
            self.silent_since = None
            return
        self.silent_since = self.silent_since or now
        if now - self.silent_since < STALL_SECONDS:
            return
        self.silent_since = None
        for worker, entry in needed:
            self.hand_again(worker, entry, f"no answer for {STALL_SECONDS:g} s and no worker runs it: lost on the way")

    def hand_again(self, worker: str, entry: _Held, why: str) -> None:
        """`entry`, held by `worker`, will not answer: cancelled where it may wait, and handed out
        again as a failure (of its attempt, and counted as such)."""
        self.running[worker].remove(entry)
        if entry.future is not None:
            entry.future.cancel()
        self.failed(worker, entry.packet, PacketError(why, False, ""))

    def hand_out(self) -> None:
        workers = self.executor.workers()
        now = time.monotonic()
        for worker in workers:
            self.seen.setdefault(worker, now)
        present = set(workers)
        for worker, held in list(self.running.items()):
            if held and worker not in present:
                # A Dask worker that died or left: its packets were given to it alone (see
                # `Dask.submit`), so they are handed out again.
                if worker not in self.gone:
                    self.gone.add(worker)
                    self.report.lost_workers.append(worker)
                self.packetizer.forget_worker(worker)
                for entry in [h for h in held if h.future is None or not h.future.done()]:  # else its answer is on its way
                    self.hand_again(worker, entry, "its worker left the cluster")
        for worker in workers:
            held = self.running.setdefault(worker, [])
            while len(held) < self.packetizer.holds(worker, [h.packet for h in held], len(workers)):
                packet = self.packetizer.next_packet(worker, workers, [h.packet for h in held])
                if packet is None and not held:
                    packet = self.packetizer.straggler(worker, self.queues(), now)
                    self.report.copies += packet is not None
                if packet is None:
                    break
                entry = _Held(packet, now)
                held.append(entry)
                entry.future = self.executor.submit(
                    worker, self.job, packet, lambda f, w=worker, e=entry: self.events.put(("finished", w, e, f))
                )

    def queues(self) -> list[tuple[str, Packet, float]]:
        """Every packet held and still needed: (worker, packet, when it started or is expected to
        start). A worker runs its packets one after the other, from when its last one ended."""
        out = []
        for worker, held in self.running.items():
            start = self.last_done.get(worker, 0.0)
            for entry in held:
                start = max(start, entry.submitted)
                if entry.packet.id not in self.merged:
                    out.append((worker, entry.packet, start))
                start += self.packetizer.expected_seconds(worker, entry.packet) or 0.0
        return out

    def finish(self, end: float) -> None:
        """Idle time per worker: from when it was first listed to the end, less its busy time."""
        for worker, stats in self.report.workers.items():
            stats.idle_seconds = max(0.0, end - self.seen.get(worker, end) - stats.wall_seconds)

    # ---- results -------------------------------------------------------------------------------

    def done(self, worker: str, packet: Packet, result) -> None:
        stats = self.report.workers.get(worker, WorkerStats())
        self.report.workers[worker] = stats + result.stats
        self.last_done[worker] = time.monotonic()
        if packet.id in self.merged:
            self.report.discarded = self.report.discarded + result.stats  # the other copy answered first
            return
        self.merged.add(packet.id)
        self.report.copies_won += packet.copy
        self.cancel_twins(packet)
        for level, index, value in result.blocks:
            self.merges[packet.dataset].add(packet.position, level, index, value)
        self.report.entries += packet.num_entries
        self.report.packets += 1
        if result.first_output is not None:
            first = result.first_output - self.started
            self.report.first_output_seconds = min(self.report.first_output_seconds or first, first)
        changed = _core.redact(str(packet.url))
        if result.stale_metadata and changed not in self.report.changed_files:
            self.store.forget(self.specs[packet.file_index])
            self.report.changed_files.append(changed)
        self.packetizer.completed(worker, packet, result.stats.wall_seconds, result.profile, result.waited, result.gap)
        self.feedback.advance(packet.dataset, packet.num_entries, result.stats.bytes, result.stats.events_written)

    def failed(self, worker: str, packet: Packet, error: BaseException) -> None:
        described = str(error) if isinstance(error, PacketError) else f"{type(error).__name__}: {error}"
        failure = PacketFailure(packet.id, packet.url, (packet.entry_start, packet.entry_stop), worker, described)
        self.report.failures.append(failure)
        if self.executor.lost(error) and worker not in self.gone:  # once, for all the packets it held
            self.gone.add(worker)
            self.report.lost_workers.append(worker)
            self.executor.replace(worker)
            self.packetizer.forget_worker(worker)
        if packet.id in self.merged or any(h.packet.id == packet.id for held in self.running.values() for h in held):
            return  # a copy answered, or may still answer
        if isinstance(error, PacketError) and error.changed:
            self.store.forget(self.specs[packet.file_index])  # the next job learns it anew
            raise ProcessingError(
                f"{failure}: the file changed on its server since its metadata was learned; that metadata is dropped: run the job again"
            ) from error
        bad_file = isinstance(error, PacketError) and error.bad_file
        if packet.file_index in self.bad:
            self.skip(packet)  # the file was given up while this packet ran
        elif packet.attempts < self.retries:
            self.report.retries += 1
            self.packetizer.failed(worker, packet)
        elif bad_file and self.skip_bad_files:
            self.bad.add(packet.file_index)
            self.report.bad_files[_core.redact(str(packet.url))] = described
            for p in [packet] + self.packetizer.drop_file(packet.file_index):
                self.skip(p)
        else:
            detail = f"\nworker traceback:\n{error.worker_traceback}" if isinstance(error, PacketError) else ""
            hint = " (skip_bad_files=True goes on without the file)" if bad_file else ""
            raise ProcessingError(f"{failure} (failed {packet.attempts + 1} times){hint}{detail}") from error

    def cancel_twins(self, packet: Packet) -> None:
        """The other copies of `packet`, which answered: cancelled where they wait to run (a
        worker's queue), so that they take no worker's time. Not with event outputs: a copy
        running on Dask would go on writing, unwaited for."""
        if self.job.outputs is not None:
            return
        for held in self.running.values():
            for entry in held:
                if entry.packet.id == packet.id and entry.future is not None:
                    entry.future.cancel()  # its answer comes back as cancelled, and is dropped

    def skip(self, packet: Packet) -> None:
        self.merged.add(packet.id)
        self.merges[packet.dataset].skip(packet.position, packet.first_chunk, packet.first_chunk + len(packet.chunks))
        self.report.skipped_entries += packet.num_entries
        self.feedback.skipped(packet.dataset, packet.num_entries)

    # ---- merging event outputs' files --------------------------------------------------------------

    def merge_outputs(self, out: dict, outputs: OutputOptions, progress, callback) -> dict:
        """Each event output's files merged into files of `outputs.max_size` by the workers, one
        merge per target file, all at once; a failed merge is retried like a packet."""
        start = time.perf_counter()
        tasks: list[MergeTask] = []
        for name, result in out.items():
            out[name], planned = plan_merges(result, outputs, len(tasks))
            tasks += planned
        feedback = Progress({"merging": len(tasks)}, progress, callback)
        try:
            self.run_merges(tasks, feedback)
        finally:
            feedback.close()
        self.report.merges = len(tasks)
        self.report.merge_seconds = time.perf_counter() - start
        return out

    def run_merges(self, tasks: list[MergeTask], feedback: Progress) -> None:
        """One merge at a time per worker (a merge is a whole file's work: no read-ahead to overlap)."""
        pending = list(tasks)
        running: dict[str, MergeTask] = {}
        finished: queue.Queue = queue.Queue()
        while pending or running:
            workers = self.executor.workers()
            for worker in workers:
                if worker in running:
                    continue
                task = next((t for t in pending if worker not in t.failed_on or t.failed_on >= set(workers)), None)
                if task is None:
                    continue
                pending.remove(task)
                running[worker] = task
                self.executor.submit(worker, self.job, task, lambda f, w=worker, t=task: finished.put((w, t, f)))
            if not running:
                time.sleep(POLL_SECONDS)
                continue
            worker, task, future = finished.get()
            del running[worker]
            try:
                future.result()
            except Exception as e:
                if self.executor.lost(e):
                    self.report.lost_workers.append(worker)
                    self.executor.replace(worker)
                if task.attempts >= self.retries:
                    raise ProcessingError(f"merging {task.inputs} into {task.target} failed {task.attempts + 1} times: {e}") from e
                task.attempts += 1
                task.failed_on.add(worker)
                self.report.retries += 1
                pending.append(task)
            else:
                feedback.advance("merging", 1, 0)
