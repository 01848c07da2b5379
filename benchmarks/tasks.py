"""Task bodies shared by every engine.

They live in an importable module (not ``__main__``) because Ray, Dask and ipyparallel
workers are separate interpreters that unpickle functions by reference: the runner puts
the repository root on ``PYTHONPATH`` so they can import ``benchmarks.tasks``.
"""

from __future__ import annotations

import time


def noop(x):
    """The tiny task: all cost is the engine's overhead."""
    return x


def run_batch(items):
    """A hand-made batch (Dask, Ray): one task runs ``noop`` over many items."""
    return [noop(x) for x in items]


#: The file whose existence releases :func:`gated` items (set by the block harness before an engine starts).
GATE_ENV = "EUGO_BENCH_GATE"
_gate_open = False  # per worker process: once the gate was seen open, items return at once


def gated(x):
    """Return ``x`` once the file named by ``$EUGO_BENCH_GATE`` exists: holds a map's items pending."""
    global _gate_open
    if not _gate_open:
        import os

        path = os.environ[GATE_ENV]
        while not os.path.exists(path):
            time.sleep(0.001)
        _gate_open = True
    return x


def array_sum(a):
    """Touch the array (strided, so the task is dominated by getting the array there)."""
    return float(a[::4096].sum())


def spin(n: int) -> int:
    """Pure-Python CPU work: ``n`` loop iterations (holds the GIL throughout)."""
    acc = 0
    for i in range(n):
        acc = (acc + i * i) % 1_000_003
    return acc


def burn(n: int) -> tuple[float, float, int]:
    """CPU-bound task; returns (CPU seconds, wall seconds, worker pid) measured inside the task.

    CPU time (process_time) does not grow while another engineer's job holds the core,
    so wall - CPU inside a task is time stolen from it: that separates "the engine
    scheduled badly" from "the machine was busy".
    """
    import os

    c, t = time.process_time(), time.perf_counter()
    spin(n)
    return time.process_time() - c, time.perf_counter() - t, os.getpid()


def nap(seconds: float) -> float:
    """Sleep-based task for the simulator check: its duration does not depend on free cores."""
    time.sleep(seconds)
    return seconds


def calibrate_spin(seconds: float) -> int:
    """Iterations of :func:`spin` that take about ``seconds`` of CPU on this machine, now."""
    n = 20_000
    while True:
        c = time.process_time()
        spin(n)
        took = time.process_time() - c
        if took > 0.05:
            return max(1, int(n * seconds / took))
        n *= 4


def filled(spec):
    """A result of ``spec = (nbytes, i)``: ``nbytes`` of float64, every value ``i`` (large-result scenarios)."""
    import numpy as np

    nbytes, i = spec
    return np.full(nbytes // 8, float(i))


def touch_pages(a):
    """Read one value per 4 KiB page of a large array argument (every page is mapped or copied in)."""
    return float(a[::512].sum())
