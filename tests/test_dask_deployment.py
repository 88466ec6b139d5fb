"""`cherenkov.process` on Dask as a deployment runs it (docs/deployment.md): a scheduler and
workers started as separate processes (`dask scheduler`, `dask worker` on 127.0.0.1), and a
multi-process `LocalCluster` whose worker is killed mid-job; both give the in-process result, bit
for bit. Each is bounded in time and stops its processes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cherenkov
import pytest
from cherenkov.processing import Dask
from cherenkov_lab.servers import free_port
from conftest import TESTDATA
from test_processing import HZZ, NANO, STEP, Analysis, KillOnce, assert_identical, make_dataset

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.skipif(
    not all((TESTDATA / n).exists() for n in [NANO] + HZZ), reason=f"{TESTDATA} lacks {NANO} or the uproot-HZZ files"
)
TESTS = Path(__file__).resolve().parent
START_TIMEOUT = 60  # seconds for the scheduler and workers to come up on a loaded machine


@pytest.fixture(scope="module")
def dataset():
    # The shared files themselves: read-only, nothing served.
    names = {f"nano-{i}.root": NANO for i in range(3)} | {f"hzz-{i}.root": n for i, n in enumerate(HZZ)}
    return make_dataset(lambda name: str(TESTDATA / names[name]))


@pytest.fixture(scope="module")
def reference(dataset):
    return cherenkov.process(dataset, Analysis(), executor="in-process", step_size=STEP)


def stop(processes: list[subprocess.Popen]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 20
    for p in processes:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def test_a_scheduler_and_workers_started_as_separate_processes(dataset, reference, tmp_path):
    dask = Path(sys.executable).parent / "dask"  # the command a deployment runs
    if not dask.exists():
        pytest.skip(f"no `dask` command beside {sys.executable}")
    port = free_port()
    # The workers import the processor's module (a deployment ships the analysis code likewise).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    logs = [open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "worker-0", "worker-1")]
    scheduler = [str(dask), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0", "--no-show"]
    processes = [subprocess.Popen(scheduler, stdout=logs[0], stderr=subprocess.STDOUT, env=env)]
    try:
        for i in (1, 2):
            worker = [str(dask), "worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1"]
            worker += ["--host", "127.0.0.1", "--no-dashboard", "--local-directory", str(tmp_path / f"w{i}"), "--name", f"w{i}"]
            processes.append(subprocess.Popen(worker, stdout=logs[i], stderr=subprocess.STDOUT, env=env))
        with distributed.Client(f"tcp://127.0.0.1:{port}", timeout=START_TIMEOUT) as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
            result, report = cherenkov.process(dataset, Analysis(), executor=client, step_size=STEP, return_report=True)
            assert len({s for s in client.run(os.getpid).values()}) == 2
    finally:
        stop(processes)
        for log in logs:
            log.close()
    assert_identical(result, reference)
    assert report.entries == 3 * 2000 + 3 * 2421 and report.failures == []
    assert len(report.workers) == 2 and all(s.packets > 0 for s in report.workers.values())


def test_a_local_cluster_worker_killed_mid_job_costs_nothing_but_time(dataset, reference, tmp_path):
    executor = Dask(workers=2, processes=True)
    result, report = cherenkov.process(dataset, KillOnce(str(tmp_path / "killed")), executor=executor, step_size=STEP, return_report=True)
    assert (tmp_path / "killed").exists()
    assert report.entries == 3 * 2000 + 3 * 2421
    assert_identical(result, reference)
