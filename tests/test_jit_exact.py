"""Exactness read from Numba's typed IR (eugo_lab.jit.exact), and results compared to the last bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eugo_lab.jit import checked as jit
from eugo_lab.jit import exact

numba = pytest.importorskip("numba")


def _reasons(fn, *args):
    d = numba.njit(fn)
    types = tuple(numba.typeof(a) for a in args)
    d.compile(types)
    return exact.unproven(d, types, args)


def _line(fn, offset):
    return f"line {fn.__code__.co_firstlineno + offset}:"


def cubes(n):
    s = 0
    for i in range(n):
        s += i * i * i
    return s


def count_above(a, x):
    c = 0
    for i in range(a.shape[0]):
        if a[i] > x:
            c += 1
    return c


def int64_sum(b):
    s = 0
    for i in range(b.shape[0]):
        s += b[i]
    return s


def int32_typed_sum(c):
    s = np.int32(0)
    for i in range(c.shape[0]):
        s += c[i]
    return s


def int32_into(c, out):
    for i in range(c.shape[0]):
        out[0] += c[i]
    return out


def roots(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = math.sqrt(a[i])
    return out


def np_roots(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = np.sqrt(a[i])
    return out


def half_powers(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] ** 0.5
    return s


def mean(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s / a.shape[0]


def starts_as_int(a):
    s = 0
    for i in range(a.shape[0]):
        s += a[i]
    return s


def flat_rows(m):
    n, k = m.shape
    flat = m.ravel()
    out = np.zeros(n)
    for i in range(n):
        for j in range(k):
            out[i] += flat[i * k + j]
    return out


def test_a_python_int_accumulator_is_not_proven_and_the_reason_names_its_line():
    (why,) = _reasons(cubes, 10)
    assert why.startswith(_line(cubes, 3)) and "`s` is a Python int that can outgrow 64 bits" in why, why
    assert why.endswith("Numba's int64 would wrap")


@pytest.mark.parametrize("fn,args", [
    (count_above, (np.ones(3), 0.5)),  # a counter that adds a constant
    (int64_sum, (np.ones(3, np.int64),)),  # NumPy int64 wraps as compiled code does
    (int32_into, (np.ones(3, np.int32), np.zeros(1, np.int32))),  # int32 arithmetic stored back as int32
    (np_roots, (np.ones(3),)),  # correctly rounded, nan for a negative in both
    (flat_rows, (np.ones((2, 3)),)),  # index arithmetic
])
def test_exact_code_is_proven(fn, args):
    assert _reasons(fn, *args) == []


@pytest.mark.parametrize("fn,args,said", [
    (int32_typed_sum, (np.ones(3, np.int32),), "int32 values: NumPy keeps int32"),
    (roots, (np.ones(3),), "math.sqrt raises ValueError for a negative number"),
    (half_powers, (np.ones(3),), "`**` on floats"),
    (mean, (np.ones(3),), "NumPy gives inf, nan or 0 for a zero divisor"),
    (starts_as_int, (np.ones(3),), "`s` holds an int here and a float elsewhere"),
])
def test_code_that_may_part_from_python_is_not_proven(fn, args, said):
    why = _reasons(fn, *args)
    assert why and said in why[0], why


def test_the_bound_of_a_python_int_argument_is_its_size():
    def square(i):
        return i * i

    assert _reasons(square, 3) == []  # below 2**8: its square fits
    assert "outgrow 64 bits" in _reasons(square, 2 ** 40)[0]


def test_results_compare_to_the_last_bit():
    assert not jit.bit_identical(-0.0, 0.0) and jit.bit_identical(math.nan, float("nan"))
    assert not jit.bit_identical(np.array([0.0, 1.0]), np.array([-0.0, 1.0]))
    assert jit.bit_identical(np.array([math.nan, -0.0]), np.array([math.nan, -0.0]))
    assert not jit.bit_identical(1, 1.0) and jit.bit_identical(np.float64(0.5), 0.5)
    assert not jit.bit_identical(True, 1)
    assert jit.difference(np.array([0.0, 1.0]), np.array([-0.0, 1.0])) == "1 of 2 values (-0.0 against 0.0)"


def cubes_up_to(a, n):
    s = 0
    for i in range(n):
        s += i * i * i
    return s + int(a.shape[0])


def test_optimize_true_keeps_unproven_code_and_says_so_and_larger_ints_run_plain(monkeypatch):
    monkeypatch.setattr(jit, "MIN_PLAIN_SECONDS", 0.0)
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    jit.reset()
    a = np.ones(4)
    w = jit.Optimized(cubes_up_to, "exact-forced")
    assert w(a, 20_000) == cubes_up_to(a, 20_000)  # the trial: same result, compiled because asked for
    verdict = jit._verdicts["exact-forced"][0]
    assert verdict.compiled, verdict
    assert "outgrow 64 bits" in jit.unproven_of(verdict.detail), verdict.detail
    # A larger Python int than the trial checked (here the sum outgrows 64 bits): the plain function runs.
    assert w(a, 300_000) == cubes_up_to(a, 300_000)
    jit.reset()


def norms(x, y):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = math.sqrt(x[i] * x[i] + y[i] * y[i])
    return out


def test_math_sqrt_of_a_value_never_negative_is_proven():
    assert _reasons(norms, np.ones(3), np.ones(3)) == []


W = np.ones(3)


def reads_global(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * W[i % 3]
    return s


def bigger(n, x):
    return max(n, x)


def test_a_global_array_and_a_mixed_max_are_not_proven():
    assert "global array `W` is frozen" in _reasons(reads_global, np.ones(3))[0]
    assert "max() of an int and a float" in _reasons(bigger, 3, 2.5)[0]


def digit_count(i):
    c = 0
    v = abs(i)
    while v > 0:
        v //= 10
        c += 1
    return c


def test_abs_of_a_64_bit_int_is_not_proven_and_a_small_one_is():
    # Before: the analysis itself failed on this loop ("could not be analysed"); abs(-2**63) is 2**63 in Python
    # and wraps to -2**63 in int64, where this loop returns 0 instead of 19.
    (why,) = _reasons(digit_count, -2 ** 63)
    assert why.startswith(_line(digit_count, 2)) and "`v` is a Python int that can outgrow 64 bits" in why
    assert _reasons(digit_count, 12345) == []
