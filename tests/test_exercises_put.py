"""The ``put`` exercise: the reference passes; the array by value and a put per task do not."""

from __future__ import annotations

from _exercise_cells import code_in, hint_words, run_exercise, tier_code

SETUP = """
import numpy as np
from eugo_lab import hpc

data = np.random.default_rng(0).random(2_000_000)

@hpc.remote
def chunk_sum(arr, i):
    return float(arr[i::8].sum())
"""


def test_reference_passes():
    v = run_exercise("put", "ref = hpc.put(data)\ntotal = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))\n",
                     setup=SETUP)
    assert v.passed, v.to_text()
    assert v.to_text() == ("exercise put: passed\n"
                           "  8 tasks shared one stored copy of the array (1 hpc.put)\n"
                           "  their arguments came to under 10% of the array's 16 MB; the total equals the sum "
                           "computed here")


def test_by_value_names_the_bytes_shipped():
    v = run_exercise("put", "total = sum(hpc.get([chunk_sum.remote(data, i) for i in range(8)]))\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "the 8 chunk_sum tasks were sent 128 MB of arguments in all, about 16 MB each" in text, text
    assert "ref = hpc.put(data)" in tier_code("put", "by-value") and code_in(text) == []


def test_put_inside_the_loop():
    v = run_exercise("put", "total = sum(hpc.get([chunk_sum.remote(hpc.put(data), i) for i in range(8)]))\n",
                     setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "the cell called put 8 times, about once per task" in text, text
    assert v.mistake == "put-per-task" and "Call put once, before the loop" in hint_words(v)


def test_wrong_total():
    v = run_exercise("put", "ref = hpc.put(data)\ntotal = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(7)]))\n",
                     setup=SETUP)
    assert not v.passed and "`total` is not the sum of the array" in v.to_text()
