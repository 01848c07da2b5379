"""The same large argument sent by value, counted by what was sent: small arguments beside it may differ."""

from __future__ import annotations

import numpy as np

from eugo_lab import analysis, hpc
from eugo_lab.hpc.arg_identity import large_argument_key

N = 1_000_000  # 8 MB of float64


@hpc.remote
def pct(data, q):
    return float(np.percentile(data, q))


def test_the_key_names_the_large_argument_not_the_small_ones():
    a = np.arange(N, dtype=np.float64)
    k = large_argument_key((a, 99), {})
    assert k > 0
    assert large_argument_key((a, 99.9), {}) == k  # a different small argument: the same key
    assert large_argument_key((a,), {"q": [25, 50, 99.9]}) == k
    assert large_argument_key(([a, 0.5],), {}) == k  # inside a short list too
    assert large_argument_key((a.copy(), 99), {}) != k  # an equal copy is another object
    b = np.arange(N, dtype=np.float64)
    b[N // 2] = -1.0
    assert large_argument_key((b, 99), {}) != k
    assert large_argument_key((1, 2.5, None), {}) == 0  # nothing large to name
    table = list(range(200_000))
    assert large_argument_key((table, 3), {}) == large_argument_key((table, 4), {})


def test_percentiles_of_one_array_count_every_task(local2):
    data = np.random.default_rng(0).random(N)
    levels = [50, 90, 95, 99, 99.9, 75, 25, 10]  # ints and a float: the pickles differ by a few bytes
    with hpc.trace() as t:
        hpc.get([pct.remote(data, q) for q in levels])
    sizes = set(t.trace.tasks["bytes_in"].tolist())
    assert len(sizes) > 1  # the case that split the count by exact size
    f = analysis.analyze(t.trace).finding("repeated-argument")
    assert f is not None and f.evidence["count"] == 8, f
    assert "argument 8 times" in f.verdict


def test_different_arrays_of_one_size_are_not_a_repeated_argument(local2):
    with hpc.trace() as t:
        # A new array per call, freed after it was sent: the next may get the same address.
        hpc.get([pct.remote(np.random.default_rng(i).random(N), 50) for i in range(4)])
    assert analysis.analyze(t.trace).finding("repeated-argument") is None
