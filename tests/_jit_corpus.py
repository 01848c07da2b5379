"""Small loop functions where compiled code and CPython could part: the corpus of tests/jit/test_jit_differential.py.

Each is registered with the kinds of its arguments (see ``KINDS`` in the test): ``f`` a float, ``i``
a Python int of any size, ``n`` a loop count, ``N`` a loop count up to 70,000 (where sums of cubes
outgrow 64 bits), ``x`` a small int (shifts, powers), ``a`` a float64 array, ``m`` a 2-D one, ``b``
an int64 array, ``c`` an int32 array, ``u`` a uint8 array, ``g`` a float32 array, ``e`` an int8
array, ``w`` a uint64 array, ``O`` a fresh output array like the array argument before it. Written to
probe the edges: integer overflow through sums, products, powers and shifts; mixed int/float; float
accumulation; ``** 0.5`` against ``math.sqrt``; abs, negation, copysign; early returns; NaN, inf and
-0.0; in-place writers; NumPy int32 arithmetic that wraps; division by zero; Python ints mixed with
narrow NumPy ints; module globals that change; NumPy scalar results.
"""

# The loops are written as a learner writes them, loop variables unused where a count is all they are for.
# ruff: noqa: B007

from __future__ import annotations

import math

import numpy as np

CORPUS: list[tuple[object, str]] = []


def case(kinds: str):
    """Register a corpus function with the kinds of its arguments."""
    def add(fn):
        CORPUS.append((fn, kinds))
        return fn
    return add


# -- Python ints that grow: sums, products, powers, shifts --------------------------------------------------------
@case("N")
def cube_sum(n):
    s = 0
    for i in range(n):
        s += i * i * i
    return s


@case("N")
def square_sum(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


@case("N")
def index_sum(n):
    s = 0
    for i in range(n):
        s += i
    return s


@case("n")
def counter(n):
    c = 0
    for i in range(n):
        c += 1
    return c


@case("n")
def counter_by_three(n):
    c = 0
    for i in range(n):
        c += 3
    return c


@case("n")
def countdown(n):
    c = 0
    for i in range(n):
        c -= 2
    return c


@case("n")
def factorial(n):
    t = 1
    for i in range(1, n + 1):
        t *= i
    return t


@case("n")
def power_of_three(n):
    t = 1
    for i in range(n):
        t = t * 3
    return t


@case("n")
def doubling(n):
    t = 1
    for i in range(n):
        t += t
    return t


@case("n")
def shift_left(n):
    t = 1
    for i in range(n):
        t = t << 1
    return t


@case("n")
def fibonacci(n):
    a, b = 0, 1
    for i in range(n):
        a, b = b, a + b
    return a


@case("ix")
def power(i, x):
    return i ** x


@case("ix")
def shift(i, x):
    return i << x


@case("ix")
def shift_right(i, x):
    return i >> x


@case("i")
def square(i):
    return i * i


@case("i")
def cube(i):
    return i * i * i


@case("ii")
def product(i, j):
    return i * j


@case("ii")
def int_sum(i, j):
    return i + j


@case("ii")
def int_difference(i, j):
    return i - j


@case("i")
def negate(i):
    return -i


@case("i")
def absolute(i):
    return abs(i)


@case("ii")
def floor_div(i, j):
    return i // j


@case("ii")
def modulo(i, j):
    return i % j


@case("ii")
def true_div(i, j):
    return i / j


@case("i")
def const_power(i):
    return i ** 3


@case("i")
def const_shift(i):
    return i << 5


@case("ii")
def and_or(i, j):
    return (i & j) | (i ^ j)


@case("in")
def repeated_add(i, n):
    s = 0
    for k in range(n):
        s += i
    return s


@case("in")
def repeated_mul(i, n):
    s = 1
    for k in range(n):
        s *= i
    return s


@case("n")
def collatz_steps(n):
    x = n + 1
    steps = 0
    while x != 1 and steps < 1000:
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        steps += 1
    return steps


@case("n")
def triangular_index(n):
    t = 0
    for i in range(n):
        t = i * (i + 1) // 2
    return t


@case("n")
def modular_accumulator(n):
    s = 0
    for i in range(n):
        s = (s + i * i) % 1000003
    return s


@case("n")
def max_index(n):
    m = 0
    for i in range(n):
        m = max(m, i)
    return m


@case("nx")
def geometric(n, x):
    t = 1
    for i in range(n):
        t *= x
    return t


@case("i")
def digits(i):
    c = 0
    v = abs(i)
    while v > 0:
        v //= 10
        c += 1
    return c


# -- mixed int and float -------------------------------------------------------------------------------------------
@case("if")
def int_plus_float(i, f):
    return i + f


@case("if")
def int_times_float(i, f):
    return i * f


@case("if")
def int_less_than_float(i, f):
    return i < f


@case("if")
def int_equals_float(i, f):
    return i == f


@case("i")
def int_to_float(i):
    return float(i)


@case("f")
def float_to_int(f):
    return int(f)


@case("nf")
def float_counter(n, f):
    s = 0.0
    for i in range(n):
        s += f
    return s


@case("n")
def int_then_float(n):
    s = 0
    for i in range(n):
        s += 0.5
    return s


@case("n")
def mean_of_indices(n):
    s = 0
    for i in range(n):
        s += i
    return s / n


@case("a")
def int_start_float_sum(a):
    s = 0
    for i in range(a.shape[0]):
        s += a[i]
    return s


@case("b")
def int64_elements_over_float(b):
    t = 0.0
    for i in range(b.shape[0]):
        t += b[i] * 0.5
    return t


@case("bf")
def int64_compared_with_float(b, f):
    c = 0
    for i in range(b.shape[0]):
        if b[i] > f:
            c += 1
    return c


@case("n")
def harmonic(n):
    s = 0.0
    for i in range(1, n + 1):
        s += 1.0 / i
    return s


@case("nf")
def scaled_index(n, f):
    s = 0.0
    for i in range(n):
        s += i * f
    return s


# -- float accumulation, NaN, inf, -0.0 ----------------------------------------------------------------------------
@case("a")
def float_sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s


@case("a")
def float_sum_backwards(a):
    s = 0.0
    for i in range(a.shape[0] - 1, -1, -1):
        s += a[i]
    return s


@case("a")
def float_product(a):
    p = 1.0
    for i in range(a.shape[0]):
        p *= a[i]
    return p


@case("a")
def sum_of_squares(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
    return s


@case("a")
def kahan_sum(a):
    s = 0.0
    c = 0.0
    for i in range(a.shape[0]):
        y = a[i] - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


@case("a")
def float_mean(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s / a.shape[0]


@case("a")
def float_mean_len(a):
    s = 0.0
    for x in a:
        s += x
    return s / len(a)


@case("a")
def running_max(a):
    m = -math.inf
    for i in range(a.shape[0]):
        m = max(m, a[i])
    return m


@case("a")
def running_min(a):
    m = math.inf
    for i in range(a.shape[0]):
        m = min(m, a[i])
    return m


@case("a")
def running_max_if(a):
    m = -math.inf
    for i in range(a.shape[0]):
        if a[i] > m:
            m = a[i]
    return m


@case("a")
def nan_count(a):
    c = 0
    for i in range(a.shape[0]):
        if math.isnan(a[i]):
            c += 1
    return c


@case("a")
def inf_count(a):
    c = 0
    for i in range(a.shape[0]):
        if math.isinf(a[i]):
            c += 1
    return c


@case("a")
def finite_sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        if math.isfinite(a[i]):
            s += a[i]
    return s


@case("a")
def negative_zero_count(a):
    c = 0
    for i in range(a.shape[0]):
        if a[i] == 0.0 and math.copysign(1.0, a[i]) < 0:
            c += 1
    return c


@case("a")
def positive_count(a):
    c = 0
    for i in range(a.shape[0]):
        if a[i] > 0:
            c += 1
    return c


@case("a")
def sum_of_positive(a):
    s = 0.0
    for i in range(a.shape[0]):
        if a[i] > 0.0:
            s += a[i]
    return s


@case("a")
def alternating_sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        if i % 2 == 0:
            s += a[i]
        else:
            s -= a[i]
    return s


@case("ff")
def float_add(f, g):
    return f + g


@case("ff")
def float_sub(f, g):
    return f - g


@case("ff")
def float_mul(f, g):
    return f * g


@case("ff")
def float_div(f, g):
    return f / g


@case("ff")
def float_floordiv(f, g):
    return f // g


@case("ff")
def float_mod(f, g):
    return f % g


@case("ff")
def float_pow(f, g):
    return f ** g


@case("f")
def float_square_pow(f):
    return f ** 2


@case("f")
def float_neg(f):
    return -f


@case("f")
def float_abs(f):
    return abs(f)


@case("f")
def float_fabs(f):
    return math.fabs(f)


@case("ff")
def float_copysign(f, g):
    return math.copysign(f, g)


@case("ff")
def float_max(f, g):
    return max(f, g)


@case("ff")
def float_min(f, g):
    return min(f, g)


@case("f")
def zero_minus(f):
    return 0.0 - f


@case("f")
def times_zero(f):
    return f * 0.0


@case("f")
def plus_zero(f):
    return f + 0.0


@case("f")
def minus_zero_add(f):
    return f + -0.0


@case("ff")
def float_compare(f, g):
    return (f < g, f <= g, f == g, f != g)


@case("f")
def is_nan(f):
    return f != f


@case("ff")
def hypot_by_hand(f, g):
    return math.sqrt(f * f + g * g)


@case("f")
def half_power(f):
    return f ** 0.5


@case("f")
def square_root(f):
    return math.sqrt(f)


@case("f")
def np_square_root(f):
    return np.sqrt(f)


@case("f")
def natural_log(f):
    return math.log(f)


@case("f")
def exponential(f):
    return math.exp(f)


@case("f")
def floor_of(f):
    return math.floor(f)


@case("f")
def reciprocal(f):
    return 1.0 / f


@case("f")
def halve(f):
    return f / 2.0


@case("fn")
def float_over_count(f, n):
    return f / n


@case("fn")
def float_floordiv_count(f, n):
    return f // n


@case("ff")
def clamp(f, g):
    if f > g:
        return g
    return f


@case("ff")
def clamp_abs(f, g):
    return min(abs(f), abs(g))


@case("f")
def sign(f):
    if f > 0:
        return 1.0
    if f < 0:
        return -1.0
    return f


# -- ** 0.5 against math.sqrt over arrays --------------------------------------------------------------------------
@case("aO")
def sqrt_power_into(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] ** 0.5
    return out


@case("aO")
def sqrt_math_into(a, out):
    for i in range(a.shape[0]):
        out[i] = math.sqrt(a[i])
    return out


@case("aO")
def sqrt_numpy_into(a, out):
    for i in range(a.shape[0]):
        out[i] = np.sqrt(a[i])
    return out


@case("aO")
def sqrt_abs_into(a, out):
    for i in range(a.shape[0]):
        out[i] = math.sqrt(abs(a[i]))
    return out


@case("a")
def distance_sum(a):
    s = 0.0
    for i in range(a.shape[0] - 1):
        d = a[i + 1] - a[i]
        s += (d * d) ** 0.5
    return s


@case("a")
def rms(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
    return math.sqrt(s)


@case("a")
def norm_numpy(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
    return np.sqrt(s)


# -- abs, negation, copysign over arrays ---------------------------------------------------------------------------
@case("aO")
def abs_into(a, out):
    for i in range(a.shape[0]):
        out[i] = abs(a[i])
    return out


@case("aO")
def negate_into(a, out):
    for i in range(a.shape[0]):
        out[i] = -a[i]
    return out


@case("aO")
def copysign_into(a, out):
    for i in range(a.shape[0]):
        out[i] = math.copysign(1.0, a[i])
    return out


@case("aO")
def abs_difference_chain(a, out):
    if a.shape[0]:
        out[0] = a[0]
    for i in range(1, a.shape[0]):
        out[i] = abs(out[i - 1] - a[i])
    return out


@case("aO")
def relu_into(a, out):
    for i in range(a.shape[0]):
        out[i] = max(a[i], 0.0)
    return out


@case("aO")
def relu_branch_into(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] if a[i] > 0.0 else 0.0
    return out


@case("aO")
def np_maximum_into(a, out):
    for i in range(a.shape[0]):
        out[i] = np.maximum(a[i], 0.0)
    return out


@case("aO")
def np_abs_into(a, out):
    for i in range(a.shape[0]):
        out[i] = np.abs(a[i])
    return out


@case("aO")
def fabs_into(a, out):
    for i in range(a.shape[0]):
        out[i] = math.fabs(a[i])
    return out


@case("aO")
def negative_zero_into(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * -0.0
    return out


@case("b")
def int64_abs_sum(b):
    s = 0
    for i in range(b.shape[0]):
        s += abs(b[i])
    return s


@case("b")
def int64_negated(b):
    s = 0
    for i in range(b.shape[0]):
        s -= b[i]
    return s


# -- early returns -------------------------------------------------------------------------------------------------
@case("af")
def first_above(a, f):
    for i in range(a.shape[0]):
        if a[i] > f:
            return i
    return -1


@case("af")
def first_value_above(a, f):
    for i in range(a.shape[0]):
        if a[i] > f:
            return a[i]
    return f


@case("a")
def first_nan(a):
    for i in range(a.shape[0]):
        if a[i] != a[i]:
            return i
    return -1


@case("a")
def is_sorted(a):
    for i in range(1, a.shape[0]):
        if a[i - 1] > a[i]:
            return False
    return True


@case("b")
def first_negative(b):
    for i in range(b.shape[0]):
        if b[i] < 0:
            return b[i]
    return 0


@case("n")
def first_square_over(n):
    for i in range(n):
        if i * i > n:
            return i
    return n


@case("in")
def early_product(i, n):
    t = 1
    for k in range(n):
        t *= i
        if t > 1000:
            return t
    return t


@case("a")
def sum_until_negative(a):
    s = 0.0
    for i in range(a.shape[0]):
        if a[i] < 0:
            return s
        s += a[i]
    return s


@case("ab")
def find_index(a, b):
    for i in range(b.shape[0]):
        if b[i] >= 0 and b[i] < a.shape[0]:
            return a[b[i]]
    return 0.0


# -- in-place writers ----------------------------------------------------------------------------------------------
@case("a")
def scale_in_place(a):
    for i in range(a.shape[0]):
        a[i] = a[i] * 2.0


@case("a")
def cumulative_in_place(a):
    for i in range(1, a.shape[0]):
        a[i] += a[i - 1]
    return a


@case("aO")
def smooth_into(a, out):
    for i in range(1, a.shape[0] - 1):
        out[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
    return out


@case("aO")
def difference_into(a, out):
    for i in range(a.shape[0] - 1):
        out[i] = a[i + 1] - a[i]
    return out


@case("aO")
def reverse_into(a, out):
    n = a.shape[0]
    for i in range(n):
        out[n - 1 - i] = a[i]
    return out


@case("aO")
def ratio_into(a, out):
    for i in range(1, a.shape[0]):
        out[i] = a[i] / a[i - 1]
    return out


@case("aO")
def clip_into(a, out):
    for i in range(a.shape[0]):
        v = a[i]
        if v > 1.0:
            v = 1.0
        elif v < -1.0:
            v = -1.0
        out[i] = v
    return out


@case("bO")
def int64_double_into(b, out):
    for i in range(b.shape[0]):
        out[i] = b[i] * 2
    return out


@case("bO")
def int64_prefix_into(b, out):
    s = 0
    for i in range(b.shape[0]):
        s += b[i]
        out[i] = s
    return out


@case("bO")
def int64_float_into(b, out):
    for i in range(b.shape[0]):
        out[i] = b[i] / 3
    return out


@case("a")
def out_of_bounds_write(a):
    out = np.zeros(3)
    for i in range(a.shape[0]):
        out[i] = a[i]
    return out


@case("a")
def out_of_bounds_read(a):
    s = 0.0
    for i in range(a.shape[0] + 1):
        s += a[i]
    return s


@case("an")
def read_at(a, n):
    return a[n]


@case("a")
def histogram_counts(a):
    counts = np.zeros(10, np.int64)
    for i in range(a.shape[0]):
        v = a[i]
        if 0.0 <= v < 1.0:
            counts[int(v * 10)] += 1
    return counts


# -- NumPy int arrays: int64 and int32, wrapping -------------------------------------------------------------------
@case("b")
def int64_sum(b):
    s = 0
    for i in range(b.shape[0]):
        s += b[i]
    return s


@case("b")
def int64_product(b):
    p = 1
    for i in range(b.shape[0]):
        p *= b[i]
    return p


@case("b")
def int64_square_sum(b):
    s = 0
    for i in range(b.shape[0]):
        s += b[i] * b[i]
    return s


@case("b")
def int64_floordiv_pairs(b):
    s = 0
    for i in range(1, b.shape[0]):
        s += b[i] // b[i - 1]
    return s


@case("b")
def int64_mod_pairs(b):
    s = 0
    for i in range(1, b.shape[0]):
        s += b[i] % b[i - 1]
    return s


@case("b")
def int64_shift_sum(b):
    s = 0
    for i in range(b.shape[0]):
        s += b[i] << 3
    return s


@case("b")
def int64_max(b):
    m = b[0] if b.shape[0] else 0
    for i in range(b.shape[0]):
        m = max(m, b[i])
    return m


@case("b")
def int64_true_div(b):
    s = 0.0
    for i in range(1, b.shape[0]):
        s += b[i] / b[i - 1]
    return s


@case("c")
def int32_sum(c):
    s = 0
    for i in range(c.shape[0]):
        s += c[i]
    return s


@case("c")
def int32_sum_typed(c):
    s = np.int32(0)
    for i in range(c.shape[0]):
        s += c[i]
    return s


@case("cO")
def int32_accumulate_into(c, out):
    for i in range(c.shape[0]):
        out[0] += c[i]
    return out


@case("cO")
def int32_square_into(c, out):
    for i in range(c.shape[0]):
        out[i] = c[i] * c[i]
    return out


@case("cO")
def int32_add_pairs_into(c, out):
    for i in range(1, c.shape[0]):
        out[i] = c[i] + c[i - 1]
    return out


@case("c")
def int32_product(c):
    p = 1
    for i in range(c.shape[0]):
        p *= c[i]
    return p


@case("c")
def int32_pair_sum(c):
    s = 0
    for i in range(1, c.shape[0]):
        s += c[i] + c[i - 1]
    return s


@case("c")
def int32_count_positive(c):
    n = 0
    for i in range(c.shape[0]):
        if c[i] > 0:
            n += 1
    return n


@case("c")
def int32_max(c):
    m = 0
    for i in range(c.shape[0]):
        if c[i] > m:
            m = c[i]
    return m


@case("c")
def int32_to_float_sum(c):
    s = 0.0
    for i in range(c.shape[0]):
        s += c[i]
    return s


@case("c")
def int32_negated(c):
    s = 0
    for i in range(c.shape[0]):
        s += -c[i]
    return s


@case("cO")
def int32_abs_into(c, out):
    for i in range(c.shape[0]):
        out[i] = abs(c[i])
    return out


@case("u")
def uint8_sum(u):
    s = 0
    for i in range(u.shape[0]):
        s += u[i]
    return s


@case("uO")
def uint8_add_into(u, out):
    for i in range(u.shape[0]):
        out[i] = u[i] + 200
    return out


@case("uO")
def uint8_subtract_into(u, out):
    for i in range(1, u.shape[0]):
        out[i] = u[i] - u[i - 1]
    return out


@case("c")
def int32_divide(c):
    s = 0.0
    for i in range(1, c.shape[0]):
        s += c[i] / c[i - 1]
    return s


@case("ci")
def int32_store_python_int(c, i):
    out = np.zeros(1, np.int32)
    out[0] = i
    return out


# -- float32 -------------------------------------------------------------------------------------------------------
@case("g")
def float32_sum(g):
    s = 0.0
    for i in range(g.shape[0]):
        s += g[i]
    return s


@case("g")
def float32_typed_sum(g):
    s = np.float32(0.0)
    for i in range(g.shape[0]):
        s += g[i]
    return s


@case("gO")
def float32_half_into(g, out):
    for i in range(g.shape[0]):
        out[i] = g[i] * 0.5
    return out


@case("gO")
def float32_square_into(g, out):
    for i in range(g.shape[0]):
        out[i] = g[i] * g[i]
    return out


# -- division by zero ----------------------------------------------------------------------------------------------
@case("ff")
def divide_or_zero(f, g):
    if g == 0.0:
        return 0.0
    return f / g


@case("ii")
def int_divide_or_zero(i, j):
    if j == 0:
        return 0
    return i // j


@case("a")
def reciprocal_sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += 1.0 / a[i]
    return s


@case("a")
def normalised_first(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] / a[0]
    return out


@case("n")
def divide_by_index(n):
    s = 0.0
    for i in range(n):
        s += 1.0 / i
    return s


@case("n")
def int_divide_by_index(n):
    s = 0
    for i in range(n):
        s += 100 // (i - 3)
    return s


@case("n")
def modulo_by_index(n):
    s = 0
    for i in range(n):
        s += 7 % (i - 1)
    return s


@case("f")
def divide_python_float(f):
    x = 1.0
    return x / f


@case("ff")
def float_modulo_loop(f, g):
    s = 0.0
    for i in range(3):
        s += f % g
    return s


# -- 2-D arrays and index arithmetic ---------------------------------------------------------------------------------
@case("m")
def row_sums(m):
    n, k = m.shape
    out = np.zeros(n)
    for i in range(n):
        t = 0.0
        for j in range(k):
            t += m[i, j]
        out[i] = t
    return out


@case("m")
def flat_index_sum(m):
    n, k = m.shape
    flat = m.ravel()
    s = 0.0
    for i in range(n):
        for j in range(k):
            s += flat[i * k + j]
    return s


@case("m")
def transpose_trace(m):
    n = min(m.shape[0], m.shape[1])
    s = 0.0
    for i in range(n):
        s += m[i, i]
    return s


@case("m")
def cell_count(m):
    c = 0
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            c += 1
    return c


@case("m")
def weighted_index_sum(m):
    s = 0
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            s += i * j
    return s


# -- tuples and several results -------------------------------------------------------------------------------------
@case("a")
def min_and_max(a):
    lo = math.inf
    hi = -math.inf
    for i in range(a.shape[0]):
        if a[i] < lo:
            lo = a[i]
        if a[i] > hi:
            hi = a[i]
    return lo, hi


@case("n")
def count_and_sum(n):
    c = 0
    s = 0
    for i in range(n):
        c += 1
        s += i
    return c, s


@case("a")
def sum_and_count_positive(a):
    s = 0.0
    c = 0
    for i in range(a.shape[0]):
        if a[i] > 0:
            s += a[i]
            c += 1
    return s, c


@case("f")
def bool_result(f):
    return f > 0.0 and f < 1.0


@case("ff")
def tuple_swap(f, g):
    return g, f


@case("bb")
def dot_int64(b, c):
    s = 0
    for i in range(min(b.shape[0], c.shape[0])):
        s += b[i] * c[i]
    return s


@case("aa")
def dot_float(a, b):
    s = 0.0
    for i in range(min(a.shape[0], b.shape[0])):
        s += a[i] * b[i]
    return s


@case("aa")
def max_abs_difference(a, b):
    m = 0.0
    for i in range(min(a.shape[0], b.shape[0])):
        d = abs(a[i] - b[i])
        if d > m:
            m = d
    return m


@case("a")
def array_sum_method(a):
    return a.sum()


@case("a")
def whole_array_expression(a):
    return a * 2.0 + 1.0


@case("a")
def count_bool_sum(a):
    c = 0
    for i in range(a.shape[0]):
        c += a[i] > 0.5
    return c


@case("n")
def bool_counter(n):
    c = 0
    for i in range(n):
        c += i % 3 == 0
    return c


@case("ix")
def masked_shift(i, x):
    return (i >> x) & 255


@case("i")
def int_bool(i):
    return bool(i)


@case("i")
def int_to_int(i):
    return int(i) + 1


@case("if")
def int_float_max(i, f):
    return max(i, f)


@case("nf")
def count_or_float(n, f):
    if n > 10:
        return n
    return f


@case("n")
def flag_then_count(n):
    c = False
    for _ in range(n):
        c = c + 1
    return c


# -- a fixed-width NumPy int with a Python int (NEP 50: NumPy 2 raises where it does not fit the dtype) -----------
@case("ei")
def int8_minus_k_into(a, k):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] - k
    return out


@case("ui")
def uint8_plus_k_into(a, k):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] + k
    return out


@case("ci")
def int32_times_k_into(a, k):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] * k
    return out


@case("ei")
def int8_and_k_into(a, k):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] & k
    return out


@case("wi")
def uint64_plus_k_into(a, k):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] + k
    return out


@case("e")
def int8_minus_constant_into(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] - 100
    return out


@case("e")
def int8_plus_out_of_range_constant_into(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] + 200
    return out


# -- module globals (frozen by Numba when it compiles, read by Python at each call; kind G rebinds SCALE) ----------
SCALE = 0.5


@case("aG")
def scaled_sum_of_global(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * SCALE
    return s


@case("aG")
def scaled_global_into(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] * SCALE + math.pi
    return out


# -- NumPy scalar results (Numba boxes them as Python numbers; a float32 must come back a float32) ----------------
@case("g")
def float32_sum_typed_start(a):
    s = np.float32(0.0)
    for i in range(a.shape[0]):
        s = s + a[i]
    return s


@case("g")
def float32_sum_and_count(a):
    s = np.float32(0.0)
    n = 0
    for i in range(a.shape[0]):
        s = s + a[i]
        n += 1
    return s, n


@case("g")
def float32_first_or_zero(a):
    if a.shape[0] > 0:
        return a[0]
    return 0.0


@case("c")
def int32_last(a):
    x = np.int32(0)
    for i in range(a.shape[0]):
        x = a[i]
    return x


@case("aiG")
def global_sum_and_tripled_int(a, n):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * SCALE
    return s, n * 3


@case("in")
def count_up_from(start, n):
    c = start
    for _ in range(n):
        c += 1
    return c


# -- NumPy float64/int64/bool results against Python numbers (same value, another type: ``x / 0`` then differs) ------
@case("a")
def float_sum_or_start(a):
    # A Python float 0.0 for an empty array, an np.float64 once an element was added.
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s


@case("b")
def int64_sum_or_start(b):
    s = 0
    for i in range(b.shape[0]):
        s += b[i]
    return s


@case("a")
def np_float64_start_sum(a):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        s += a[i]
    return s


@case("a")
def python_float_of_elements(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += float(a[i])
    return s


@case("a")
def float_of_sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return float(s)


@case("a")
def last_is_positive(a):
    r = False
    for i in range(a.shape[0]):
        r = a[i] > 0.0
    return r


@case("a")
def first_above_half(a):
    for i in range(a.shape[0]):
        pass
    return a.shape[0] > 0 and a[0] > 0.5


@case("b")
def int64_element_times_half(b):
    s = 0.0
    for i in range(b.shape[0]):
        s = b[i] * 0.5
    return s


@case("b")
def int64_element_over_two(b):
    s = 0.0
    for i in range(b.shape[0]):
        s = b[i] / 2
    return s


@case("af")
def largest_or_given(a, x):
    # A Python float (the argument) on one path, an np.float64 on the other: no cast fits both.
    m = x
    for i in range(a.shape[0]):
        if a[i] > m:
            m = a[i]
    return m


@case("a")
def sum_and_python_count(a):
    s = 0.0
    c = 0
    for i in range(a.shape[0]):
        s += a[i]
        c += 1
    return s, c


@case("a")
def np_sum_and_element_tuple(a):
    s = np.float64(0.0)
    for i in range(a.shape[0]):
        s += a[i]
    return s, s > 1.0


@case("a")
def negated_sum(a):
    s = -0.0
    for i in range(a.shape[0]):
        s -= a[i]
    return s


@case("u")
def uint8_count_nonzero(u):
    c = 0
    for i in range(u.shape[0]):
        if u[i] != 0:
            c += 1
    return c


# -- NumPy int32 shifts, products and floor division (NumPy keeps int32 and wraps; compiled code works in int64) ---
@case("cO")
def int32_shift_left_into(c, out):
    for i in range(c.shape[0]):
        out[i] = c[i] << 3
    return out


@case("cO")
def int32_shift_right_into(c, out):
    for i in range(c.shape[0]):
        out[i] = c[i] >> 2
    return out


@case("cO")
def int32_product_into(c, out):
    for i in range(1, c.shape[0]):
        out[i] = c[i] * c[i - 1]
    return out


@case("cO")
def int32_floor_divide_by_constant_into(c, out):
    for i in range(c.shape[0]):
        out[i] = c[i] // 3
    return out


@case("cO")
def int32_floor_divide_pairs_into(c, out):
    # A zero divisor: NumPy gives 0 (and warns), compiled code with Python's error model raises.
    for i in range(1, c.shape[0]):
        out[i] = c[i] // c[i - 1]
    return out


@case("c")
def int32_shifted_sum(c):
    s = 0
    for i in range(c.shape[0]):
        s += c[i] << 1
    return s


@case("c")
def int32_running_product(c):
    p = np.int32(1)
    for i in range(c.shape[0]):
        p = p * c[i]
    return p
