"""The ``straggler`` exercise, as a table of cells run through ``%%eugo --exercise``.

The reference and an honest variant pass; typical mistakes and shortcuts (a total not made of
the tasks' results beside a decoy call) each fail with their own message. Every criterion is a
count or a value, so none of these verdicts depends on how busy the machine is.
"""

from __future__ import annotations

import pytest
from _exercise_cells import not_yet_for, passed_with, run_exercise

from eugo_lab.exercises import measure
from eugo_lab.exercises.catalog.straggler import reference_total

# The lesson's inputs, handed out by the checker (p.ranges: 7 ranges of 200,000 numbers and one of 4,000,000):
# 27 ordinary pieces in all. A passing cell is run again on a hidden case (tests/exercises/test_variants_course1.py).
SETUP = """
from eugo_lab import exercises, hpc

p = exercises.problem("straggler")

@hpc.remote(optimize=False)
def work(start, stop):
    return sum(i * i % 7 for i in range(start, stop))

ranges = p.ranges
"""
TOTAL = reference_total(5_400_000)
REFERENCE = ("pieces = [(a, min(a + 200_000, e)) for s, e in ranges for a in range(s, e, 200_000)]\n"
             "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n")
STARTER = "total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))\n"

PASS = {
    "reference": (REFERENCE, "27 work tasks; their results show each covered about 200,000 numbers"),
    # other names, half-size pieces, the futures kept in a list first
    "honest-half-pieces": ("bits = [(x, min(x + 100_000, hi)) for lo, hi in ranges for x in range(lo, hi, 100_000)]\n"
                           "futs = [work.remote(*b) for b in bits]\n"
                           "total = sum(hpc.get(futs))\n",
                           "54 work tasks; their results show each covered about 100,000 numbers"),
    # technique, not name: its own function around the submissions, and hand-made batches of work calls
    "honest-wrapper": ("def run_all(pieces):\n    return hpc.get([work.remote(s, e) for s, e in pieces])\n"
                       + REFERENCE.splitlines()[0] + "\ntotal = sum(run_all(pieces))\n",
                       "27 work tasks; their results show each covered about 200,000 numbers"),
    "honest-hand-made-batches": ("@hpc.remote(optimize=False)\ndef batch(bits):\n"
                                 "    return sum(work(s, e) for s, e in bits)\n"
                                 "ps = [(a, min(a + 100_000, e)) for s, e in ranges for a in range(s, e, 100_000)]\n"
                                 "total = sum(hpc.get([batch.remote(ps[i:i + 2]) for i in range(0, len(ps), 2)]))\n",
                                 "27 batch tasks; their results show each covered about 200,000 numbers"),
}
NOT_YET = {
    "starter-giant-left-whole": (STARTER, "giant",
                                 "one work task covered about 4,000,000 numbers, 20x the median task's 200,000"),
    "crumbs": ("pieces = [(a, min(a + 5_000, e)) for s, e in ranges for a in range(s, e, 5_000)]\n"
               "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n", "too-small",
               "1080 tasks: the pieces are so small"),
    "misses-a-range": ("total = sum(hpc.get([work.remote(s, e) for s, e in ranges[:-1]]))\n", "results",
                       "`total` is not the sum over all of `p.ranges`"),
    "waits-for-each-piece": ("pieces = [(a, min(a + 200_000, e)) for s, e in ranges for a in range(s, e, 200_000)]\n"
                             "total = sum(hpc.get(work.remote(s, e)) for s, e in pieces)\n", "serial",
                             "the cell waited after each work task it submitted"),
    # two uneven halves: neither is 3x the median, but the larger holds the run up
    "too-few-pieces": ("total = sum(hpc.get([work.remote(0, 4_000_000), work.remote(4_000_000, 5_400_000)]))\n",
                       "giant", "the 2 pieces, handed out in the order submitted on 2 workers, keep them busy for "
                       "only 1.4x one worker's work"),
    # shortcuts: the right total, not made of the tasks' results
    "shortcut-work-called-in-the-notebook-beside-decoys": (
        REFERENCE.splitlines()[0] + "\nhpc.get([work.remote(0, 10) for _ in pieces])\n"
        "total = sum(work(s, e) for s, e in pieces)\n", "not-from-tasks",
        "work ran 27 times here in the notebook beside the tasks, so the value came from the notebook"),
    "shortcut-typed-total-beside-decoy": ("hpc.get([work.remote(0, 200_000) for _ in range(27)])\n"
                                          f"total = {TOTAL}\n", "not-from-tasks",
                                          "`total` was not computed from the tasks' results: the 27 work tasks "
                                          "returned values that summed give"),
    "shortcut-half-in-the-notebook": (REFERENCE.splitlines()[0] + "\n"
                                      "done = hpc.get([work.remote(s, e) for s, e in pieces[:20]])\n"
                                      "total = sum(done) + sum(sum(i * i % 7 for i in range(s, e))\n"
                                      "                        for s, e in pieces[20:])\n",
                                      "not-from-tasks", "the 20 work tasks returned values that summed give"),
    # shortcuts by name: a `work` that returns sums computed here in the notebook (the tasks only pass them back),
    # so the sizes read off its results are the notebook's, not the tasks' work
    "shortcut-work-redefined-returns-notebook-values": (
        "@hpc.remote(optimize=False)\ndef work(start, stop, value=None):\n    return value\n\n"
        "size = min(e - s for s, e in ranges)\n"
        "jobs = [(a, min(a + size, e)) for s, e in ranges for a in range(s, e, size)]\n"
        "vals = [sum(i * i % 7 for i in range(a, b)) for a, b in jobs]\n"
        "total = sum(hpc.get([work.remote(a, b, v) for (a, b), v in zip(jobs, vals)]))\n", "changed",
        "`work` is not the lesson's function: it takes the arguments start, stop and value where the lesson's "
        "takes the arguments start and stop"),
    # the same arguments, another body that returns what the lesson's would: still not the lesson's work
    "shortcut-work-redefined-same-signature": (
        "import functools\n\n@hpc.remote(optimize=False)\ndef work(start, stop):\n"
        "    return sum(i * i % 7 for i in range(start, stop)) if stop - start < 10 else NOTEBOOK[(start, stop)]\n\n"
        "size = min(e - s for s, e in ranges)\n"
        "jobs = [(a, min(a + size, e)) for s, e in ranges for a in range(s, e, size)]\n"
        "NOTEBOOK = {(a, b): sum(i * i % 7 for i in range(a, b)) for a, b in jobs}\n"
        "total = sum(hpc.get([work.remote(a, b) for a, b in jobs]))\n",
        "changed", "`work` is not the lesson's function: its code computes something other than the lesson's"),
    # another function under the lesson's name (options(name="work")): the tasks ran `fake`, whatever their label
    "shortcut-other-function-labelled-work": (
        "@hpc.remote(optimize=False)\ndef fake(start, stop, value=None):\n    return value\n\n"
        "size = min(e - s for s, e in ranges)\n"
        "jobs = [(a, min(a + size, e)) for s, e in ranges for a in range(s, e, size)]\n"
        "total = sum(hpc.get([fake.options(name='work').remote(a, b, sum(i * i % 7 for i in range(a, b)))\n"
        "                     for a, b in jobs]))\n", "changed",
        "`work` is not what the tasks ran: the work tasks ran fake"),
}


@pytest.mark.parametrize(("cell", "evidence"), list(PASS.values()), ids=list(PASS))
def test_passes(cell, evidence):
    text = passed_with(run_exercise("straggler", cell, setup=SETUP), evidence)
    assert "`total` is the sum of the" in text and " s " not in text


@pytest.mark.parametrize(("cell", "mistake", "message"), list(NOT_YET.values()), ids=list(NOT_YET))
def test_not_yet(cell, mistake, message):
    not_yet_for(run_exercise("straggler", cell, setup=SETUP), mistake, message)


def test_the_evidence_follows_the_pieces():
    # The same check with other piece sizes states other numbers: the sentences are computed, not fixed.
    cell = ("pieces = [(a, min(a + 150_000, e)) for s, e in ranges for a in range(s, e, 150_000)]\n"
            "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n")
    text = run_exercise("straggler", cell, setup=SETUP).to_text()
    assert "41 work tasks; their results show each covered about 50,000 to 150,000 numbers" in text, text
    assert "27 work tasks" not in text


def test_the_lesson_s_work_laid_out_otherwise_passes():
    # The same code with a docstring and a comment: compared by instructions, not by its text.
    setup = SETUP.replace("def work(start, stop):\n", "def work(start, stop):\n    \"\"\"The lesson's work.\"\"\"\n"
                                                      "    # add up i * i % 7 over the range\n")
    assert setup != SETUP
    passed_with(run_exercise("straggler", REFERENCE, setup=setup),
                "27 work tasks; their results show each covered about 200,000 numbers")


def test_reference_total_is_the_sum():
    assert reference_total(1000) == sum(i * i % 7 for i in range(1000))
    assert reference_total(6) == sum(i * i % 7 for i in range(6))
    assert reference_total(1000, 13) == sum(i * i % 7 for i in range(13, 1000))


def test_packed_speedup_counts_work_not_time():
    assert measure.packed_speedup([1] * 27, 2) == pytest.approx(27 / 14)
    assert measure.packed_speedup([1] * 7 + [20], 2) == pytest.approx(27 / 23)
    assert measure.packed_speedup([], 2) == 0.0
    with pytest.raises(ValueError, match="at least 1 worker"):
        measure.packed_speedup([1], 0)


def test_giant_range_on_one_worker_is_still_not_yet():
    v = run_exercise("straggler", STARTER, setup=SETUP, line="-w 1 --no-live")
    assert not v.passed and v.mistake == "giant", v.to_text()


def test_reference_on_one_worker_passes_counted_for_two():
    v = run_exercise("straggler", REFERENCE, setup=SETUP, line="-w 1 --no-live")
    assert v.passed and "(this run had 1 worker, so the check counts 2)" in v.to_text(), v.to_text()
