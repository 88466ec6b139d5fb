"""A packet the driver believes running that no worker runs (its answer dropped on the way, its
Dask task cancelled) is handed out again instead of being waited for for ever: on every executor,
the job ends, bounded in time, with the result of a job where nothing was lost. Near the end, the
packets queued behind a stuck one are copied to idle workers too."""

import cherenkov
import pytest
import test_dask_deployment
from cherenkov.processing import Dask, InProcess, LocalProcesses, driver
from cherenkov.processing.packets import Packetizer
from conftest import TESTDATA, bounded
from test_processing import HZZ, NANO, STEP, Analysis, assert_identical, fake_files, packetizer_of

pytestmark = pytest.mark.skipif(
    not all((TESTDATA / n).exists() for n in [NANO] + HZZ), reason=f"{TESTDATA} lacks {NANO} or the uproot-HZZ files"
)
LOST = 3  # the packet whose first answer is lost
STALL = 1.0  # seconds: how long the driver waits for it (60 s by default)
# Fixtures: the shared files themselves (read-only), and their in-process result.
dataset, reference = test_dask_deployment.dataset, test_dask_deployment.reference


def first_try(work) -> bool:
    return getattr(work, "id", None) == LOST and work.attempts == 0 and not work.copy


def dropping(base: type) -> type:
    """`base`, whose first answer for packet `LOST` never reaches the driver (the task ran; its
    result, or the callback that brings it, was lost)."""

    class Dropping(base):
        def submit(self, worker, job, work, done):
            return super().submit(worker, job, work, (lambda future: None) if first_try(work) else done)

    return Dropping


def run_bounded(dataset, executor):
    return bounded(
        lambda: cherenkov.process(dataset, Analysis(), executor=executor, step_size=STEP, return_report=True),
        60 + 20 * STALL,
        "a job with a lost packet",
    )


@pytest.mark.parametrize("kind", ["in-process", "processes", "dask"])
def test_a_packet_whose_answer_is_lost_is_handed_out_again(kind, dataset, reference, client, monkeypatch):
    monkeypatch.setattr(driver, "STALL_SECONDS", STALL)
    monkeypatch.setattr(Packetizer, "straggler", lambda *args: None)  # no copy of it answers in its place
    executor = {"in-process": lambda: dropping(InProcess)(), "processes": lambda: dropping(LocalProcesses)(2)}.get(
        kind, lambda: dropping(Dask)(client)
    )()
    result, report = run_bounded(dataset, executor)
    assert [f.packet for f in report.failures] == [LOST] and "lost on the way" in report.failures[0].error
    assert report.retries == 1 and report.lost_workers == []
    assert report.entries == 3 * 2000 + 3 * 2421
    assert_identical(result, reference)


def test_a_dask_task_cancelled_under_the_driver_is_retried(dataset, reference, client):
    """Dask cancels a future when its client loses the scheduler, or when someone else cancels it:
    its answer is an asyncio.CancelledError (no Exception), a failure like any other."""

    class Cancelling(Dask):
        def submit(self, worker, job, work, done):
            future = super().submit(worker, job, work, done)
            if first_try(work):
                future.cancel()
            return future

    result, report = run_bounded(dataset, Cancelling(client))
    assert [f.packet for f in report.failures] == [LOST] and "CancelledError" in report.failures[0].error
    assert report.retries == 1
    assert_identical(result, reference)


def test_packets_queued_behind_a_stuck_one_are_copied_to_idle_workers():
    packetizer = packetizer_of(fake_files([200]))
    packetizer.rate.update(a=100.0, b=100.0)  # entries per second: a packet of 100 takes 1 s
    running, queued = packetizer.next_packet("a", ["a", "b"]), packetizer.next_packet("a", ["a", "b"])
    assert packetizer.exhausted()
    held = [("a", running, 0.0), ("a", queued, 1.0)]  # the second starts when the first ends
    # Early on, copying the running one gains nothing; the one queued behind it would end sooner on b.
    copy = packetizer.straggler("b", held, now=0.01)
    assert copy is not None and copy.id == queued.id and copy.copy
    # "a" is stuck: its running packet, long overdue, is copied too.
    assert packetizer.straggler("b", held, now=10.0).id == running.id
    assert packetizer.straggler("b", held, now=20.0) is None  # one copy of each at most
