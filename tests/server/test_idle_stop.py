"""Why a runtime stopped: the embedded Dask cluster's idle-stop record, and a region that calls hpc.init.

A traced region (a ``%%eugo`` cell) that starts a new runtime keeps recording on it; the Dask
engine records each stop of its idle timer (what it measured, which worker processes it
closed), which a cluster shut down by hand never gets; the runtime started last stays readable
after it stopped.
"""

from __future__ import annotations

import time

import psutil
import pytest

from eugo_lab import hpc
from eugo_lab.checklists.catalog.cost import price_text
from eugo_lab.hpc import session


@hpc.remote
def square(x):
    return x * x


@pytest.fixture(autouse=True)
def _stopped():
    yield
    hpc.shutdown()


def _wait_for_stop(limit: float = 30.0):
    deadline = time.monotonic() + limit
    while "idle_stop" not in hpc.cluster().extra:
        assert time.monotonic() < deadline, "the idle timer never stopped the cluster"
        time.sleep(0.1)
    return hpc.cluster().extra["idle_stop"]


def test_a_region_that_starts_a_runtime_records_its_tasks_and_the_idle_stop():
    hpc.init(workers=1)
    first = session.current()
    with hpc.trace() as t:
        hpc.init(backend="dask", workers=2, idle_timeout=2, dashboard=False)
        assert hpc.get([square.remote(i) for i in range(4)]) == [0, 1, 4, 9]
        stop = _wait_for_stop()
    rt = session.latest()
    assert first.successor is rt and rt.recorder is first.recorder
    assert len(t.trace) == 4 and t.trace.meta["backend"] == "dask"
    assert t.trace.n_workers == 2  # the stopped cluster has no workers now: the trace counts those that ran
    assert stop.timeout == 2 and stop.idle_s >= 2 and stop.workers == 2 and len(stop.worker_pids) == 2
    assert stop.exit_code is not None and not any(psutil.pid_exists(p) for p in stop.worker_pids)
    assert rt.idle_stops == (stop,) and session.idle_stops()[-1] is stop and rt.stopped_by is None
    assert t.trace.t0 <= stop.at


def test_a_cluster_shut_down_by_hand_records_no_idle_stop():
    hpc.init(backend="dask", workers=1, idle_timeout=30, dashboard=False)
    assert hpc.get(square.remote(3)) == 9
    rt = session.current()
    hpc.shutdown()
    assert session.current(start=False) is None and session.latest() is rt
    assert rt.stopped_by == "shutdown" and rt.idle_stops == ()


def test_a_price_prints_as_it_was_given():
    assert price_text(0.1) == "0.10" and price_text(0.096) == "0.096" and price_text(1.5) == "1.50"
