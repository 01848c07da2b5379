"""Thread oversubscription guard: BLAS threads = cores / workers in every engine's workers."""

from __future__ import annotations

import os

import pytest
from _optimize_tasks import blas_threads

from eugo_lab import hpc
from eugo_lab.backends.local_process import usable_cores
from eugo_lab.threadguard import limits as thread_guard

WORKERS = 2
EXPECTED = max(1, usable_cores() // WORKERS)


def _threads_seen(n_calls: int = 8) -> dict[int, dict[str, int]]:
    probe = hpc.remote(blas_threads)
    return dict(hpc.get([probe.remote() for _ in range(n_calls)]))


def _assert_limited(seen: dict[int, dict[str, int]], limit: int) -> None:
    assert seen, "no worker answered"
    for pid, libs in seen.items():
        blas = {k: v for k, v in libs.items() if k in ("openblas", "mkl", "blis", "openmp")}
        assert blas, f"worker {pid} loaded no BLAS: {libs}"
        assert all(v == limit for v in blas.values()), (pid, libs)


def test_plan_is_cores_over_workers_and_respects_the_user():
    p = thread_guard.plan(8, 2, env={})
    assert (p.threads, p.source, p.applied) == (4, "guard", True)
    assert thread_guard.describe(p) == "BLAS threads per worker: 4 (8 cores / 2 workers); was 8"
    p = thread_guard.plan(2, 2, env={"OMP_NUM_THREADS": "2"})
    assert p.source == "user" and p.threads is None and "OMP_NUM_THREADS=2" in thread_guard.describe(p)
    assert thread_guard.worker_env(p) == {thread_guard.USER_ENV: "OMP_NUM_THREADS=2"}
    p = thread_guard.plan(2, 2, env={thread_guard.LIMIT_ENV: "2"})
    assert (p.threads, p.source) == (2, "user")
    assert thread_guard.plan(16, 3, external=True, env={}).source == "external"


@pytest.mark.parametrize("engine", ["local", "dask", "ray"])
def test_threadpoolctl_inside_workers_shows_the_limit(engine):
    hpc.init(engine, workers=WORKERS)
    try:
        _assert_limited(_threads_seen(), EXPECTED)
    finally:
        hpc.shutdown()


def test_a_users_own_thread_setting_is_respected(monkeypatch):
    mine = EXPECTED + 1
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", str(mine))
    monkeypatch.setenv("OMP_NUM_THREADS", str(mine))
    hpc.init("local", workers=WORKERS)
    try:
        _assert_limited(_threads_seen(), mine)
    finally:
        hpc.shutdown()


def test_an_explicit_threads_per_worker_wins(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    hpc.init("local", workers=WORKERS, threads_per_worker=2)
    try:
        _assert_limited(_threads_seen(), 2)
    finally:
        hpc.shutdown()


def test_apply_once_in_a_process_already_running_numpy(monkeypatch):
    # A Dask/Ray worker has NumPy (and its BLAS) loaded before our first task: threadpoolctl sets it.
    import subprocess
    import sys

    code = ("import numpy, threadpoolctl\nfrom eugo_lab.threadguard import limits as thread_guard\n"
            "print(thread_guard.apply_once())\n"
            "print(sorted({i['num_threads'] for i in threadpoolctl.threadpool_info()}))")
    env = {**os.environ, thread_guard.LIMIT_ENV: "1", "PYTHONPATH": os.getcwd()}
    for v in thread_guard.THREAD_VARS:
        env.pop(v, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "'threadpoolctl': True" in out.stdout and out.stdout.strip().endswith("[1]"), out.stdout


def test_eugo_threads_per_worker_is_an_explicit_choice(monkeypatch):
    for v in thread_guard.THREAD_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv(thread_guard.LIMIT_ENV, "2")
    hpc.init("local", workers=WORKERS)
    try:
        _assert_limited(_threads_seen(), 2)
    finally:
        hpc.shutdown()
