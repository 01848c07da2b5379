"""Tiny functions the checklists run on the workers (imported there by reference: keep this module light)."""

from __future__ import annotations

import os


def empty_task() -> None:
    """Does nothing: its round trip is the runtime's scheduling overhead."""
    return None


def worker_threads(hold: float = 0.0) -> tuple[int, int | None, str]:
    """``(pid, BLAS threads, the limit the driver gave this worker)`` in the worker that runs it.

    ``hold``: seconds to stay busy afterwards, so that a handful of these submitted together
    land on different workers.

    Imports NumPy first (as a task of the learner's would), then asks threadpoolctl how many
    threads each loaded BLAS/OpenMP library uses; the largest count is what a matrix
    product in this worker would run with. ``None`` when threadpoolctl is not installed.
    """
    import time

    import numpy  # noqa: F401 - loads the BLAS whose threads we count

    from eugo_lab.settings import THREADS_PER_WORKER_ENV

    time.sleep(hold)
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return os.getpid(), None, os.environ.get(THREADS_PER_WORKER_ENV, "")
    counts = [int(lib.get("num_threads") or 0) for lib in threadpool_info()]
    return os.getpid(), max(counts, default=0) or None, os.environ.get(THREADS_PER_WORKER_ENV, "")
