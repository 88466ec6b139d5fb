"""The driver of `process`: open the files, give idle workers packets, merge what comes back,
handle failures."""

from __future__ import annotations

import os
import queue
import time
import uuid
from collections.abc import Callable, Mapping

import cherenkov
from cherenkov import _core
from cherenkov.processing.dataset import FileSpec, normalize
from cherenkov.processing.executors import Job, PacketError, WorkerStats, make_executor, pickled
from cherenkov.processing.merge import TreeMerge
from cherenkov.processing.outputs import MergeTask, OutputOptions, finish, forget_manifests, plan_merges
from cherenkov.processing.packets import FileInfo, Packet, Packetizer, number_chunks, open_files
from cherenkov.processing.report import PacketFailure, ProcessingError, Report
from cherenkov.progress import Progress, ProgressUpdate


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
    open_options: keyword arguments for `cherenkov.open` (connections, timeout, retries).
    output_dir: where workers write the events a processor returns as `cherenkov.Events` (a folder
        every worker can reach): each such output comes back as a `cherenkov.Dataset` in its place,
        saved as `output_dir/<dataset>/<output>/dataset.json` beside its files (see
        `cherenkov.processing.outputs`). One job at a time per `output_dir`.
    output_format: "ttree" or "rntuple"; output_compression: as `cherenkov.recreate` takes it.
    output_max_size: when given, the workers then merge each output's consecutive files into files
        of at most this many bytes (`cherenkov.merge`, in parallel: one merge per target file).
    """
    specs = normalize(dataset, tree)
    executor = make_executor(executor, workers)
    outputs = None
    if output_dir is not None:
        outputs = OutputOptions(os.path.abspath(output_dir), output_format, output_compression, output_max_size)
        forget_manifests(outputs, {spec.dataset for spec in specs})
    job = Job(
        uuid.uuid4().hex[:12],
        pickled(processor) if executor.pickles else processor,
        step_size,
        dict(open_options or {}),
        outputs,
    )
    run = _Run(job, executor, retries, skip_bad_files)
    start = time.perf_counter()
    executor.start(job)  # workers boot while the files are opened
    try:
        files = run.open(specs)
        merges = run.process(specs, files, target_seconds, progress, callback)
        out = {name: m.result for name, m in merges.items()}
        if outputs is not None and outputs.max_size:
            out = run.merge_outputs(out, outputs)
    finally:
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
    """The driver: open the files, give idle workers packets, merge what comes back, handle failures."""

    def __init__(self, job: Job, executor, retries: int, skip_bad_files: bool):
        self.job, self.executor = job, executor
        self.retries, self.skip_bad_files = retries, skip_bad_files
        self.report = Report(executor=executor.name)
        self.finished: queue.Queue = queue.Queue()
        self.running: dict[str, Packet] = {}
        self.merged: set[int] = set()  # packet ids: each packet is merged once, whatever happens

    def open(self, specs: list[FileSpec]) -> list[FileInfo]:
        """The metadata of every file, read concurrently; files that cannot be opened are reported."""
        start = time.perf_counter()
        files = []
        for item in open_files(specs, self.job.step_size, lambda url: cherenkov.open(url, **self.job.open_options)):
            if isinstance(item, FileInfo):
                files.append(item)
                continue
            message = _core.redact(f"{item.spec.url}: {type(item.error).__name__}: {item.error}")
            if not self.skip_bad_files:
                raise ProcessingError(f"cannot open {message} (skip_bad_files=True goes on without it)") from item.error
            self.report.bad_files[item.spec.url] = message
        self.report.files = len(files)
        self.report.open_seconds = time.perf_counter() - start
        if self.executor.pickles:
            for info in files:
                info.file = None  # workers elsewhere open files themselves: hold no metadata here
        self.executor.adopt(files)
        return files

    def process(self, specs, files, target_seconds, progress, callback) -> dict[str, TreeMerge]:
        """Every packet of `files`, merged into one TreeMerge per dataset."""
        chunks = number_chunks(files)
        self.merges = {spec.dataset: TreeMerge(chunks.get(spec.dataset, 0)) for spec in specs}
        totals = dict.fromkeys(self.merges, 0)
        for info in files:
            totals[info.spec.dataset] += info.num_entries
        self.packetizer = Packetizer(files, target_seconds)
        self.show, self.callback = progress, callback  # for the merges that may follow
        self.feedback = Progress(totals, progress, callback, lambda: {name: m.partial() for name, m in self.merges.items()})
        try:
            self.loop()
        finally:
            self.feedback.close()
            for info in files:
                info.file = None
        unfinished = [name for name, m in self.merges.items() if not m.done]
        if unfinished:  # every chunk is merged or skipped exactly once, so this is a bug, not bad luck
            raise ProcessingError(f"internal error: datasets {unfinished} did not receive all their chunks")
        return self.merges

    def loop(self) -> None:
        while True:
            self.hand_out()
            if not self.running:
                if self.packetizer.exhausted():
                    return
                time.sleep(0.2)  # no worker right now (a Dask cluster between workers): ask again
                continue
            worker, packet, future = self.finished.get()
            del self.running[worker]
            try:
                result = future.result()
            except Exception as e:
                self.failed(worker, packet, e)
            else:
                self.done(worker, packet, result)

    def hand_out(self) -> None:
        workers = self.executor.workers()
        for worker in workers:
            if worker in self.running:
                continue
            packet = self.packetizer.next_packet(worker, workers)
            if packet is None:
                continue
            self.running[worker] = packet
            self.executor.submit(worker, self.job, packet, lambda f, w=worker, p=packet: self.finished.put((w, p, f)))

    def done(self, worker: str, packet: Packet, result) -> None:
        if packet.id in self.merged:
            return
        self.merged.add(packet.id)
        for level, index, value in result.blocks:
            self.merges[packet.dataset].add(level, index, value)
        stats = self.report.workers.get(worker, WorkerStats())
        self.report.workers[worker] = stats + result.stats
        self.report.entries += packet.num_entries
        self.report.packets += 1
        self.packetizer.completed(worker, packet, result.stats.wall_seconds)
        self.feedback.advance(packet.dataset, packet.num_entries, result.stats.bytes, result.stats.events_written)

    def failed(self, worker: str, packet: Packet, error: BaseException) -> None:
        described = str(error) if isinstance(error, PacketError) else f"{type(error).__name__}: {error}"
        failure = PacketFailure(packet.id, packet.url, (packet.entry_start, packet.entry_stop), worker, described)
        self.report.failures.append(failure)
        if self.executor.lost(error):
            self.report.lost_workers.append(worker)
            self.executor.replace(worker)
        bad_file = isinstance(error, PacketError) and error.bad_file
        if packet.url in self.report.bad_files:
            self.skip(packet)  # the file was given up while this packet ran
        elif packet.attempts < self.retries:
            self.report.retries += 1
            self.packetizer.failed(worker, packet)
        elif bad_file and self.skip_bad_files:
            self.report.bad_files[packet.url] = described
            for p in [packet] + self.packetizer.drop_file(packet.url):
                self.skip(p)
        else:
            detail = f"\nworker traceback:\n{error.worker_traceback}" if isinstance(error, PacketError) else ""
            hint = " (skip_bad_files=True goes on without the file)" if bad_file else ""
            raise ProcessingError(f"{failure} (failed {packet.attempts + 1} times){hint}{detail}") from error

    def merge_outputs(self, out: dict, outputs: OutputOptions) -> dict:
        """Each event output's files merged into files of `outputs.max_size` by the workers, one
        merge per target file, all at once; a failed merge is retried like a packet."""
        start = time.perf_counter()
        tasks: list[MergeTask] = []
        for name, result in out.items():
            out[name], planned = plan_merges(result, outputs, len(tasks))
            tasks += planned
        feedback = Progress({"merging": len(tasks)}, self.show, self.callback)
        try:
            self.run_merges(tasks, feedback)
        finally:
            feedback.close()
        self.report.merges = len(tasks)
        self.report.merge_seconds = time.perf_counter() - start
        return out

    def run_merges(self, tasks: list[MergeTask], feedback: Progress) -> None:
        pending = list(tasks)
        running: dict[str, MergeTask] = {}
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
                self.executor.submit(worker, self.job, task, lambda f, w=worker, t=task: self.finished.put((w, t, f)))
            if not running:
                time.sleep(0.2)
                continue
            worker, task, future = self.finished.get()
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

    def skip(self, packet: Packet) -> None:
        self.merges[packet.dataset].skip(packet.first_chunk, packet.first_chunk + len(packet.chunks))
        self.report.skipped_entries += packet.num_entries
        self.feedback.skipped(packet.dataset, packet.num_entries)
