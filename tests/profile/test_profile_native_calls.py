"""Time inside machine code that keeps the GIL (a Numba-compiled kernel) is native, never the caller's bytecode.

The thread sampler cannot take a sample while such code runs: it finds the caller just back from
the call. Before, that time counted as the caller's Python bytecode, and a loop that already
calls a compiled kernel was named a JIT candidate.
"""

from __future__ import annotations

import functools
import types

import numba
import numpy as np
import pytest

from eugo_lab import hpc
from eugo_lab.optimizations.report import jit_candidates
from eugo_lab.profile import callees


@numba.njit(cache=False)
def kernel(a):
    s = 0.0
    for i in range(a.size):
        s += a[i] * a[i] ** 0.5
    return s


def calls_the_kernel(a, times):
    t = 0.0
    for _ in range(times):
        t += kernel(a)  # ~40 ms of machine code a call, the GIL held throughout
    return t


def tiny(x):
    return x + 1


def calls_python(n):
    t = 0
    for i in range(n):
        t += abs(tiny(i) % 7 - 3)  # bytecode, with a C call (abs) on the same line
    return t


def test_callees_are_read_from_the_instructions_and_judged_by_what_runs():
    def caller(a, f):
        return kernel(a) + np.sqrt(a)[0] + a.sum() + sorted(a)[0] + tiny(1) + f(2) + np.linalg.norm(a)

    offsets = callees._callees(caller.__code__)
    frame = types.SimpleNamespace(f_globals=globals(), f_builtins=__builtins__ if isinstance(__builtins__, dict)
                                  else vars(__builtins__), f_locals={"a": np.ones(3), "f": tiny},
                                  f_code=caller.__code__)
    kinds = {callees._value(e, frame, frame.f_locals)[1].__name__: callees.kind_of(
        callees._value(e, frame, frame.f_locals)[1]) for e in offsets.values()}
    assert kinds == {"kernel": "native", "sqrt": "native", "sum": "native", "sorted": "native", "tiny": "python",
                     "norm": "python"}  # f is tiny too; NumPy's norm is Python code over C calls
    assert callees.kind_of(functools.partial(tiny, 1)) == callees.PYTHON
    assert callees.kind_of(functools.partial(kernel, 1)) == callees.NATIVE
    assert callees.kind_of(int) == callees.UNKNOWN  # a class: its __init__ may be either


@pytest.fixture(scope="module")
def profiled():
    hpc.init(backend="local", workers=1)
    try:
        a = np.random.default_rng(0).random(4_000_000)
        kernel(a[:10])
        warm = hpc.remote(calls_the_kernel).options(optimize=False)
        hpc.get(warm.remote(a, 1))  # compiled on the worker before the profile starts
        py = hpc.remote(calls_python).options(optimize=False)
        with hpc.profile() as region:
            hpc.get([warm.remote(a, 15), py.remote(800_000)])
        return region.report
    finally:
        hpc.shutdown()


def test_a_loop_over_a_compiled_kernel_is_native_time_and_no_jit_candidate(profiled):
    (caller,) = [h for h in profiled.hot_functions(None) if h.function == "calls_the_kernel"]
    assert caller.self_share > 0.2 and caller.native_share >= 0.8 * caller.self_share, caller
    assert "calls_the_kernel" not in jit_candidates(profiled.hot_functions(None))


def test_a_bytecode_loop_that_calls_short_c_functions_stays_python(profiled):
    hot = {h.function: h for h in profiled.hot_functions(None)}
    own = hot["calls_python"].self_share + hot["tiny"].self_share
    native = hot["calls_python"].native_share + hot["tiny"].native_share
    assert own > 0.1 and native <= 0.3 * own, hot
    assert "calls_python" in jit_candidates(profiled.hot_functions(None))
