"""Exactness read from Numba's typed IR (eugo_lab.jit.exact), and results compared to the last bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _jit_corpus import (  # loops the differential test runs
    cube_sum,
    digits,
    float_mean,
    float_sum,
    int32_accumulate_into,
    int32_sum_typed,
    int64_sum,
    int_float_max,
    int_start_float_sum,
    largest_or_given,
)
from _jit_corpus import int64_compared_with_float as count_above  # here over a float array

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


def flat_rows(m):
    n, k = m.shape
    flat = m.ravel()
    out = np.zeros(n)
    for i in range(n):
        for j in range(k):
            out[i] += flat[i * k + j]
    return out


def test_a_python_int_accumulator_is_not_proven_and_the_reason_names_its_line():
    (why,) = _reasons(cube_sum, 10)
    assert why.startswith(_line(cube_sum, 4)) and "`s` is a Python int that can outgrow 64 bits" in why, why
    assert why.endswith("Numba's int64 would wrap")


@pytest.mark.parametrize("fn,args", [
    (count_above, (np.ones(3), 0.5)),  # a counter that adds a constant
    (int64_sum, (np.ones(3, np.int64),)),  # NumPy int64 wraps as compiled code does
    (int32_accumulate_into, (np.ones(3, np.int32), np.zeros(1, np.int32))),  # int32 arithmetic stored back as int32
    (np_roots, (np.ones(3),)),  # correctly rounded, nan for a negative in both
    (flat_rows, (np.ones((2, 3)),)),  # index arithmetic
])
def test_exact_code_is_proven(fn, args):
    assert _reasons(fn, *args) == []


@pytest.mark.parametrize("fn,args,said", [
    (int32_sum_typed, (np.ones(3, np.int32),), "int32 values: NumPy keeps int32"),
    (roots, (np.ones(3),), "math.sqrt raises ValueError for a negative number"),
    (half_powers, (np.ones(3),), "`**` on floats"),
    (float_mean, (np.ones(3),), "NumPy gives inf, nan or 0 for a zero divisor"),
    (int_start_float_sum, (np.ones(3),), "`s` holds an int here and a float elsewhere"),
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
    assert not jit.bit_identical(1, 1.0) and jit.bit_identical(np.float64(0.5), np.float64(0.5))
    # A NumPy scalar is not a Python number of the same value: np.float64(0.5) / 0 is inf, 0.5 / 0 raises.
    assert not jit.bit_identical(np.float64(0.5), 0.5) and not jit.bit_identical(np.int64(1), 1)
    assert not jit.bit_identical(np.True_, True) and not jit.bit_identical((1.0, np.float64(2.0)), (1.0, 2.0))
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


def test_a_global_array_and_a_mixed_max_are_not_proven():
    assert "global array `W` is frozen" in _reasons(reads_global, np.ones(3))[0]
    assert "max() of an int and a float" in _reasons(int_float_max, 3, 2.5)[0]


def test_abs_of_a_64_bit_int_is_not_proven_and_a_small_one_is():
    # Before: the analysis itself failed on this loop ("could not be analysed"); abs(-2**63) is 2**63 in Python
    # and wraps to -2**63 in int64, where this loop returns 0 instead of 19.
    (why,) = _reasons(digits, -2 ** 63)
    assert why.startswith(_line(digits, 3)) and "`v` is a Python int that can outgrow 64 bits" in why
    assert _reasons(digits, 12345) == []


def _compiled(fn, *args):
    """``fn`` compiled for ``args``' types as the JIT keeps it: its result cast to plain Python's types."""
    types = jit.numba_types(args)
    d = jit.compile_for(fn, types)
    reasons, casts = exact.read(d, types, args)
    return reasons, casts, exact.with_casts(d, casts, fn)


def test_a_result_that_is_numpys_on_some_paths_comes_back_with_plain_pythons_type_on_each():
    # Before: compiled code returned a Python float for all, where plain Python returns np.float64 once the loop
    # ran (and 0.0 / 0 raises where np.float64(0.0) / 0 gives nan).
    reasons, casts, f = _compiled(float_sum, np.ones(2))
    assert reasons == [] and isinstance(casts, exact.PathCast), casts
    for a in (np.ones(3), np.array([]), np.array([0.0]), np.array([-0.0]), np.array([1.0, -1.0]),
              np.array([math.nan])):
        plain, got = float_sum(a), f(a)
        assert type(got) is type(plain) and jit.bit_identical(got, plain), (a, plain, got)


def test_a_result_of_another_type_on_some_paths_is_not_compiled_even_when_asked_for(monkeypatch):
    reasons, casts, _ = _compiled(largest_or_given, np.ones(2), 0.5)
    assert isinstance(casts, exact.ResultTypeVaries) and "`m` is a float64 NumPy scalar on some paths" in casts
    assert reasons and reasons[0] == casts
    # optimize=True keeps unproven code whose trial matched, but not this: a trial where plain returns x (a Python
    # float) matches, and a later call where an element is larger would return float where plain gives np.float64.
    monkeypatch.setattr(jit, "MIN_PLAIN_SECONDS", 0.0)
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    jit.reset()
    w = jit.Optimized(largest_or_given, "exact-result-type")
    assert w(np.zeros(3), 5.0) == 5.0
    verdict = jit._verdicts["exact-result-type"][0]
    assert not verdict.compiled and verdict.code == "result-type", verdict
    got = w(np.array([9.0]), 5.0)
    assert type(got) is np.float64 and got == 9.0
    from eugo_lab.jit.verdicts import advice_for

    assert "optimize=True" not in advice_for("not-proven", casts)
    jit.reset()


def test_optimize_true_casts_a_numpy_result_back_on_later_calls(monkeypatch):
    monkeypatch.setattr(jit, "MIN_PLAIN_SECONDS", 0.0)
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    jit.reset()
    w = jit.Optimized(float_sum, "exact-cast-later")
    w(np.ones(4))
    assert jit._verdicts["exact-cast-later"][0].compiled
    for a in (np.ones(4) * 0.5, np.zeros(4), np.array([1.0, -1.0, 0.0, 0.0])):
        got, plain = w(a), float_sum(a)
        assert type(got) is type(plain) and jit.bit_identical(got, plain)
    jit.reset()


def element_compared(a, b):
    for _ in range(a.shape[0]):
        pass
    return a[0] > 0.5, b[0] * 0.5, b[0] * 2


def test_numpy_operations_give_numpys_result_types():
    # A comparison of NumPy scalars is an np.bool_, an int64 times a float an np.float64 (the model had the
    # operands' promotion: float64 for the comparison, int64 for the product, and a cast to it changed the value).
    a, b = np.array([0.75, 0.0]), np.array([3, 1], dtype=np.int64)
    reasons, casts, f = _compiled(element_compared, a, b)
    assert reasons == [] and casts == (np.bool_, np.float64, np.int64), (reasons, casts)
    got, plain = f(a, b), element_compared(a, b)
    assert [type(x) for x in got] == [type(x) for x in plain] and jit.bit_identical(got, plain)
