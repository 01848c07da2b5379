"""The ``partitions`` exercise, as a table of cells run through ``%%eugo --exercise``.

The reference and honest variants pass; typical mistakes and shortcuts each fail with their
own message and hint tiers. Every criterion is a count or a value read off what the tasks
returned, so none of these verdicts depends on how busy the machine is.
"""

from __future__ import annotations

import pytest
from _exercise_cells import not_yet_for, passed_with, run_exercise

from eugo_lab.exercises import catalog
from eugo_lab.exercises.catalog.partitions import MIN_BUSY, reference_total

# The lesson's function and inputs (p.rows: 4,000 rows, about 8 million steps), on the 2 workers of -w 2. Every
# cell takes N from p itself (ROWS_LINE): an int of an earlier cell is not rebound for the hidden case's run
# (tests/exercises/test_variants_course1.py), where a passing cell runs again.
SETUP = """
from eugo_lab import exercises, hpc

p = exercises.problem("partitions")

@hpc.remote(optimize=False)
def load(start, stop):
    return sum(k * k % 7 for n in range(start, stop) for k in range(n))

workers = 2
"""
ROWS_LINE = "N = p.rows\n"
TOTAL = reference_total(4_000)
STARTER = ("cuts = [N * i // workers for i in range(workers + 1)]\n"
           "total = sum(hpc.get([load.remote(a, b) for a, b in zip(cuts, cuts[1:])]))\n")
REFERENCE = ("cuts = [N * i // (8 * workers) for i in range(8 * workers + 1)]\n"
             "pieces = sorted(zip(cuts, cuts[1:]), reverse=True)\n"
             "total = sum(hpc.get([load.remote(a, b) for a, b in pieces]))\n")


def ranges_in_order(k: int) -> str:
    """``k`` equal ranges of rows, submitted in row order (the costly last rows last)."""
    return (f"cuts = [N * i // {k} for i in range({k} + 1)]\n"
            "total = sum(hpc.get([load.remote(a, b) for a, b in zip(cuts, cuts[1:])]))\n")


PASS = {
    "reference": (REFERENCE, "16 load tasks, 8.0 per worker on 2 workers"),
    # one range per worker, but the cuts placed so each holds half the steps: other names, futures kept first
    "honest-equal-work": ("edges = [round(N * (j / workers) ** 0.5) for j in range(workers + 1)]\n"
                          "futs = [load.remote(lo, hi) for lo, hi in zip(edges, edges[1:])]\n"
                          "total = sum(hpc.get(futs))\n", "2 load tasks, 1.0 per worker on 2 workers"),
    # enough equal ranges in row order: the last wave is short although the costly rows come last
    "honest-eight-in-order": (ranges_in_order(8), "8 load tasks, 4.0 per worker"),
    # technique, not name: its own function around the submissions, and hand-made batches of load calls
    "honest-wrapper": ("def run(pieces):\n    return hpc.get([load.remote(a, b) for a, b in pieces])\n"
                       "cuts = [N * i // 16 for i in range(17)]\n"
                       "total = sum(run(sorted(zip(cuts, cuts[1:]), reverse=True)))\n", "16 load tasks"),
    "honest-hand-made-batches": ("@hpc.remote(optimize=False)\ndef batch(pieces):\n"
                                 "    return sum(load(a, b) for a, b in pieces)\n"
                                 "cuts = [N * i // 32 for i in range(33)]\n"
                                 "pieces = sorted(zip(cuts, cuts[1:]), reverse=True)\n"
                                 "total = sum(hpc.get([batch.remote(pieces[i::8]) for i in range(8)]))\n",
                                 "8 batch tasks, 4.0 per worker"),
}
NOT_YET = {
    "starter-one-range-per-worker": (STARTER, "uneven", "keep them busy 67% of the run, under 85%: the largest "
                                     "piece holds 75% of the work"),
    "four-in-row-order": (ranges_in_order(4), "uneven", "your 4 pieces, handed out in the order submitted to 2 "
                          "workers, keep them busy 80% of the run"),
    "one-task": ("total = hpc.get(load.remote(0, N))\n", "uneven", "keeps them busy 50% of the run"),
    "crumbs": (ranges_in_order(400), "too-small", "400 tasks for 4,000 rows: so many pieces"),
    "misses-the-last-rows": ("cuts = [N * i // 16 for i in range(16)]\n"
                             "total = sum(hpc.get([load.remote(a, b) for a, b in zip(cuts, cuts[1:])]))\n",
                             "results", "`total` is not the sum over all 4,000 rows"),
    "waits-for-each-piece": ("cuts = [N * i // 16 for i in range(17)]\n"
                             "total = sum(hpc.get(load.remote(a, b)) for a, b in zip(cuts, cuts[1:]))\n",
                             "serial", "the cell waited after each of the 16 load tasks it submitted"),
    "added-up-in-the-notebook": ("total = sum(k * k % 7 for n in range(N) for k in range(n))\n", "local",
                                 "no task ran in this cell, so the total came from the notebook"),
    # load called in the notebook for the graded value, decoy load tasks of the right name beside it
    "shortcut-load-called-in-the-notebook-beside-decoys": (
        "cuts = [N * i // 16 for i in range(17)]\n"
        "hpc.get([load.remote(0, 10) for _ in range(16)])\n"
        "total = sum(load(a, b) for a, b in zip(cuts, cuts[1:]))\n", "not-from-tasks",
        "load ran 16 times here in the notebook beside the tasks, so the value came from the notebook"),
    # shortcuts: the right total, not made of this cell's tasks' results
    "shortcut-typed-total-beside-decoy": ("hpc.get([load.remote(0, 100) for _ in range(16)])\n"
                                          f"total = {TOTAL}\n", "not-from-tasks",
                                          "`total` was not computed from the tasks' results: the 16 load tasks "
                                          "returned values that summed give"),
    "shortcut-half-in-the-notebook": ("done = hpc.get([load.remote(0, 2_000), load.remote(2_000, 3_000)])\n"
                                      "total = sum(done) + sum(k * k % 7 for n in range(3_000, N) for k in range(n))\n",
                                      "not-from-tasks", "the 2 load tasks returned values that summed give"),
    "shortcut-copied-from-an-earlier-cell": ("hpc.get([load.remote(0, 10), load.remote(10, 20)])\ntotal = earlier\n",
                                             "not-from-tasks", "the 2 load tasks returned values that summed give"),
    # shortcut by name: a `load` that returns sums computed here in the notebook, cut to equal work; its results
    # would read as even pieces while the workers computed nothing
    "shortcut-load-redefined-returns-notebook-values": (
        "import math\n\n@hpc.remote(optimize=False)\ndef load(start, stop, value=None):\n"
        "    \"\"\"Returns the value computed in the notebook.\"\"\"\n    return value\n\n"
        "cuts = [round(N * math.sqrt(i / 8)) for i in range(9)]\nspans = list(zip(cuts, cuts[1:]))\n"
        "vals = [sum(k * k % 7 for n in range(a, b) for k in range(n)) for a, b in spans]\n"
        "total = sum(hpc.get([load.remote(a, b, v) for (a, b), v in zip(spans, vals)]))\n", "changed",
        "`load` is not the lesson's function: it takes the arguments start, stop and value where the lesson's "
        "takes the arguments start and stop"),
}
# An earlier cell that computed the total honestly, for the row that copies it.
EARLIER = "earlier = sum(hpc.get([load.remote(a, a + 250) for a in range(0, p.rows, 250)]))\n"


@pytest.mark.parametrize(("cell", "evidence"), list(PASS.values()), ids=list(PASS))
def test_passes(cell, evidence):
    text = passed_with(run_exercise("partitions", ROWS_LINE + cell, setup=SETUP), evidence)
    assert "`total` is the sum of the" in text and " ms" not in text and " s " not in text
    assert "notebook" not in text


def test_the_typed_total_beside_decoys_is_not_said_to_be_computed_here():
    # Nothing of the cell's ran in the notebook: the verdict must not claim it did.
    v = run_exercise("partitions", ROWS_LINE + NOT_YET["shortcut-typed-total-beside-decoy"][0], setup=SETUP)
    assert "here in the notebook" not in v.to_text(precise=True), v.to_text()


@pytest.mark.parametrize(("cell", "mistake", "message"), list(NOT_YET.values()), ids=list(NOT_YET))
def test_not_yet(cell, mistake, message):
    setup = SETUP + (EARLIER if "earlier" in cell else "")
    not_yet_for(run_exercise("partitions", ROWS_LINE + cell, setup=setup), mistake, message)


def test_the_evidence_follows_the_pieces():
    # Another count, other numbers in the same sentences: computed from the trace, not fixed.
    text = run_exercise("partitions", ROWS_LINE + REFERENCE.replace("8 * workers", "3 * workers"),
                        setup=SETUP).to_text()
    assert "6 load tasks, 3.0 per worker on 2 workers" in text, text
    assert "16 load tasks" not in text


def test_the_starter_on_one_worker_is_counted_for_two():
    v = run_exercise("partitions", ROWS_LINE + STARTER.replace("workers", "1"), setup=SETUP, line="-w 1 --no-live")
    assert not v.passed and v.mistake == "uneven", v.to_text()
    assert "(this run had 1 worker, so the check counts 2)" in v.to_text()


def test_the_reference_on_one_worker_passes_counted_for_two():
    v = run_exercise("partitions", ROWS_LINE + REFERENCE, setup=SETUP, line="-w 1 --no-live")
    assert v.passed and "(this run had 1 worker, so the check counts 2)" in v.to_text(), v.to_text()


def test_the_busy_share_says_it_is_replayed_and_the_measured_one_is_apart():
    # The criterion's share is replayed from the pieces' results; the measured share (time) is a detail, named so.
    v = run_exercise("partitions", ROWS_LINE + REFERENCE, setup=SETUP)
    text = passed_with(v, "replayed by the work each piece's result shows")
    assert "the pieces would keep the workers busy 100% of a run" in text, text
    assert any(d.startswith("measured: workers computing ") for d in v.details), v.details


def test_reference_total_is_the_sum():
    for rows in (0, 1, 7, 50, 333):
        assert reference_total(rows) == sum(k * k % 7 for n in range(rows) for k in range(n))


def test_the_threshold_sits_between_the_starter_and_the_reference():
    from eugo_lab.exercises.measure import packed_speedup

    halves = [reference_total(1_000), reference_total(2_000) - reference_total(1_000)]
    assert packed_speedup(halves, 2) / 2 < MIN_BUSY
    cuts = [2_000 * i // 16 for i in range(17)]
    pieces = sorted(zip(cuts, cuts[1:]), reverse=True)
    work = [reference_total(b) - reference_total(a) for a, b in pieces]
    assert packed_speedup(work, 2) / 2 > 0.98


def test_registered_with_its_lesson():
    ex = catalog.get("partitions")
    assert ex.lesson == "01-distributed-python/07-partitions.ipynb"
    assert {"uneven", "too-small", "serial", "not-from-tasks", "results", "local"} <= set(ex.hints)
