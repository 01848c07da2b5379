"""Functions the optimization tests send to workers (importable there: tests/ is on their path)."""

from __future__ import annotations

import os

from benchmarks.stencil import smooth  # noqa: F401 - sent to workers by the JIT tests


class Box:
    """A Python object Numba cannot type."""

    def __init__(self, value):
        self.value = value


def boxed_sum(a):
    """Uses a Python object inside the function: Numba cannot compile it."""
    b = Box(0.0)
    for i in range(a.shape[0]):
        b.value += a[i]
    return b.value


def big_product(a):
    """Python's integers never overflow, Numba's 64-bit ones do: the compiled result differs."""
    t = 1
    for i in range(a.shape[0]):
        t = t * 3 + int(a[i] > 0.5)
    return t


def blas_threads():
    """``(pid, {library: threads})`` as threadpoolctl sees them inside the worker."""
    import threadpoolctl

    return os.getpid(), {i["internal_api"]: i["num_threads"] for i in threadpoolctl.threadpool_info()}


def compiles_here():
    """``(pid, Numba compiles this worker process ran)``."""
    from eugo_lab.jit import checked as jit

    return os.getpid(), jit.compile_count()


def inc(x):
    """A tiny call (~1 us): the kind batch="auto" coalesces."""
    if x == 13:
        raise ValueError("thirteen is unlucky")
    return x + 1


def slow_inc(x):
    """A call long enough (20 ms) to be its own task."""
    import time

    time.sleep(0.02)
    return x + 1
