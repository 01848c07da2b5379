"""The ``put`` exercise: the reference passes; the array by value and a put per task do not."""

from __future__ import annotations

import pytest
from _exercise_cells import check_cell, code_in, hint_words, run_exercise, tier_code

from eugo_lab.exercises import problems

SETUP = """
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("put")
data = p.data

@hpc.remote
def chunk_sum(arr, i):
    return float(arr[i::8].sum())
"""


def test_reference_passes():
    v = run_exercise("put", "ref = hpc.put(data)\ntotal = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))\n",
                     setup=SETUP)
    assert v.passed, v.to_text()
    text = v.to_text()
    assert text.startswith("exercise put: passed\n"
                           "  all 8 chunk_sum tasks read the one stored copy of the array on their workers "
                           "(1 hpc.put)\n  their arguments came to "), text
    assert text.endswith(" in all, under 10% of the array's 16 MB, and the function carried no copy of it\n"
                         "  `total` is the sum of the 8 values the tasks returned\n  " + problems.SECOND_CASE), text


def test_by_value_names_the_bytes_shipped():
    v = run_exercise("put", "total = sum(hpc.get([chunk_sum.remote(data, i) for i in range(8)]))\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "the 8 chunk_sum tasks were sent 128 MB of arguments in all, about 16 MB each" in text, text
    assert "ref = hpc.put(p.data)" in tier_code("put", "by-value") and code_in(text) == []


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


REF = "ref = hpc.put(data)\n"
GLOBAL_READER = """
@hpc.remote
def chunk_sum(arr, i):
    return float(data[i::8].sum())
"""
# One row per cell: (id, cell, passes, what the verdict must say, the mistake it names).
CELLS = [
    ("reference", REF + "total = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))\n", True,
     "all 8 chunk_sum tasks read the one stored copy", None),
    ("honest-keyword-and-loop", "shared = hpc.put(data)\nparts = []\nfor k in range(8):\n"
     "    parts.append(chunk_sum.remote(arr=shared, i=k))\ntotal = 0.0\nfor p in hpc.get(parts):\n"
     "    total += p\n", True, "`total` is the sum of the 8 values the tasks returned", None),
    ("mistake-by-value", "total = sum(hpc.get([chunk_sum.remote(data, i) for i in range(8)]))\n", False,
     "array went by value with every task", "by-value"),
    ("mistake-put-per-task", "total = sum(hpc.get([chunk_sum.remote(hpc.put(data), i) for i in range(8)]))\n",
     False, "the cell called put 8 times", "put-per-task"),
    ("mistake-too-few", REF + "total = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(7)]))\n", False,
     "`total` is not the sum of the array", "results"),
    ("shortcut-decoy-tasks", REF + "hpc.get([chunk_sum.remote(ref, 0) for i in range(8)])\n"
     "total = float(data.sum())\n", False,
     "`total` was not computed from the tasks' results: the 8 chunk_sum tasks returned values that summed give",
     "decoy"),
    ("shortcut-global-in-the-function", GLOBAL_READER + REF
     + "total = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))\n", False,
     "the chunk_sum function was pickled at 16 MB and sent", "no-put"),
    ("shortcut-put-never-passed", GLOBAL_READER + REF
     + "total = sum(hpc.get([chunk_sum.remote(None, i) for i in range(8)]))\n", False,
     "it carried the array with it", "no-put"),
]


@pytest.mark.parametrize("cell,passes,says,mistake", [c[1:] for c in CELLS], ids=[c[0] for c in CELLS])
def test_cells(cell, passes, says, mistake):
    check_cell("put", cell, passes, says, mistake, setup=SETUP)


def test_the_bytes_line_states_what_this_run_shipped():
    positional = run_exercise("put", REF + "total = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))\n",
                              setup=SETUP)
    keywords = run_exercise("put", REF + "total = sum(hpc.get([chunk_sum.remote(arr=ref, i=i) for i in range(8)]))\n",
                            setup=SETUP)
    assert positional.passed and keywords.passed, (positional.to_text(), keywords.to_text())

    def shipped(v):
        (line,) = [ln for ln in v.lines if ln.startswith("their arguments came to ")]
        return line.split(" in all")[0]

    # Keyword arguments pickle their names too: the line follows the bytes the trace counted, not a fixed phrase.
    assert shipped(positional) != shipped(keywords)
    assert shipped(positional).removeprefix("their arguments came to ") == positional.details[0].split(" of ")[0]
