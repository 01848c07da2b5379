"""Task functions shared by the test modules: one definition of each.

Importable by worker processes (the local pool passes the driver's ``sys.path`` on, cluster
processes get ``tests/`` on ``PYTHONPATH`` from ``_clusters.worker_env``), like ``_memory``.
Like ``_processes``, this module must not import ``conftest``.

The ``@hpc.remote`` tasks keep the names tests see in traces and errors (``square()``,
``nap()``...). They are bound to their own names, as in the test modules they came from, so
they still travel to workers by value; the plain function of each is ``task.__wrapped__``
(calling the task itself also runs it here, as plain Python). Functions a test defines on
purpose where it is (closures, captured variables, a name only that test asserts, a script
run in a subprocess) stay in that test.
"""

from __future__ import annotations

import os
import time

from eugo_lab import hpc


def spin(seconds: float) -> None:
    """Keep a core busy for ``seconds`` (a CPU-bound task body; ``time.sleep`` would free the core)."""
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass


@hpc.remote
def square(x):
    return x * x


@hpc.remote
def add(a, b=0):
    return a + b


@hpc.remote
def total(values):
    if isinstance(values, dict):
        return sum(values.values())
    return sum(values)


@hpc.remote
def nap(seconds, value=None):
    time.sleep(seconds)
    return value


@hpc.remote
def whoami(seconds=0.0):
    time.sleep(seconds)
    return os.getpid()


@hpc.remote
def pid_of(x):
    """``(x, pid)`` after 50 ms inside a ``work`` phase: which process ran each task."""
    with hpc.phase("work"):
        time.sleep(0.05)
    return x, os.getpid()


@hpc.remote
def pid_met(x, folder, workers=2, timeout=120.0):
    """``(x, pid)`` once ``workers`` distinct processes have run one of these (a barrier in ``folder``).

    A task that waits here holds its worker, so the engine must hand the others to another
    worker: a run of these tasks uses at least ``workers`` processes however slowly the
    engine starts its second one (a fixed sleep only makes that likely).
    """
    from pathlib import Path

    with hpc.phase("work"):
        Path(folder, str(os.getpid())).touch()
        deadline = time.monotonic() + timeout
        while len(list(Path(folder).iterdir())) < workers and time.monotonic() < deadline:
            time.sleep(0.01)
    return x, os.getpid()
