"""The ``batching`` exercise, as a table of cells run through ``%%eugo --exercise``.

The reference and an honest variant pass; typical mistakes and shortcuts (a list scored in
the notebook beside a decoy call) each fail with their own message.
"""

from __future__ import annotations

import pytest
from _exercise_cells import hint_code, not_yet_for, run_exercise

SETUP = """
from eugo_lab import exercises, hpc

p = exercises.problem("batching")

@hpc.remote
def score(x):
    return sum((x * k) % 7 for k in range(200))

def score_here(x):
    return sum((x * k) % 7 for k in range(200))

items = p.items
"""
REFERENCE = "results = hpc.get(hpc.map(score, items))\n"

PASS = {
    "reference": (REFERENCE, "3000 items in "),
    # other names, a batch size of the learner's choosing, the futures kept first
    "honest-own-batch-size": ("futs = hpc.map(score, list(items), batch=100)\nresults = list(hpc.get(futs))\n",
                              "3000 items in 30 score tasks: 100 items per task on average (at least 10) and 15.0 "
                              "batches per worker on 2 workers (at least 2)"),
}
NOT_YET = {
    "starter-one-task-per-item": ("results = hpc.get([score.remote(x) for x in items])\n", "one-per-item",
                                  "3000 tasks for 3000 items: one task per item"),
    "one-giant-batch": ("results = hpc.get(hpc.map(score, items, batch=3000))\n", "too-few-batches",
                        "all 3000 items went in 1 task, so only 1 worker could get work"),
    "sorted-results": ("results = sorted(hpc.get(hpc.map(score, items)))\n", "results", "in order"),
    "scored-in-the-notebook": ("results = [score_here(x) for x in items]\n", "local",
                               "no task ran in this cell, so the scores of the 3000 items came from the notebook"),
    # shortcuts: the right list, not what the tasks returned
    "shortcut-decoy-on-a-few-items": ("hpc.get(hpc.map(score, range(40), batch=10))\n"
                                      "results = [score_here(x) for x in items]\n", "not-from-tasks",
                                      # the 6 multiples of 7 under 40 score 0, which no item does (none is one)
                                      "`results` was not computed from the tasks' results: 34 of its 3000 values "
                                      "are among what the 40 score tasks of this cell returned"),
    "shortcut-decoy-of-another-function": ("noop = hpc.remote(lambda xs: 0)\n"
                                           "hpc.get([noop.remote(None) for _ in range(8)])\n"
                                           "results = [score_here(x) for x in items]\n", "local",
                                           "no score task ran in this cell (only tasks of <lambda>)"),
}


@pytest.mark.parametrize(("cell", "evidence"), list(PASS.values()), ids=list(PASS))
def test_passes(cell, evidence):
    v = run_exercise("batching", cell, setup=SETUP)
    text = v.to_text()
    assert v.passed and text.startswith("exercise batching: passed\n  " + evidence.split(":")[0]), text
    assert evidence in text, text
    assert "`results` is the 3000 results the score tasks returned, in item order" in text


@pytest.mark.parametrize(("cell", "mistake", "message"), list(NOT_YET.values()), ids=list(NOT_YET))
def test_not_yet(cell, mistake, message):
    not_yet_for(run_exercise("batching", cell, setup=SETUP), mistake, message)


def test_the_evidence_follows_the_batches():
    # Another batch size, other numbers in the same sentence: it is computed from the trace, not fixed.
    text = run_exercise("batching", "results = hpc.get(hpc.map(score, items, batch=150))\n", setup=SETUP).to_text()
    assert "3000 items in 20 score tasks: 150 items per task on average" in text, text
    assert "10.0 batches per worker" in text and "30 score tasks" not in text


def test_the_one_per_item_verdict_keeps_the_code_for_the_hint():
    v = run_exercise("batching", "results = hpc.get([score.remote(x) for x in items])\n", setup=SETUP)
    assert "hpc.map(score, p.items)" in hint_code(v)
    assert any(d.startswith("Scheduling overhead finding: ") for d in v.details)


def test_on_one_worker_the_batches_are_counted_for_two():
    v = run_exercise("batching", "results = hpc.get(hpc.map(score, items, batch=1000))\n", setup=SETUP,
                     line="-w 1 --no-live")
    assert not v.passed and "(counted for 2: this run had 1)" in v.to_text(), v.to_text()


def test_reference_on_one_worker_passes():
    v = run_exercise("batching", REFERENCE, setup=SETUP, line="-w 1 --no-live")
    assert v.passed and "on 2 workers" in v.to_text(), v.to_text()


# Technique, not name: the items sent as hand-made batches pass, whatever the batch function is called
# (an attacker who read only the lesson found both rejected with "scored here in the notebook").
HAND_MADE = {
    "same-name-taking-a-list": (
        "@hpc.remote\ndef score(xs):\n    return [sum((x * k) % 7 for k in range(200)) for x in xs]\n"
        "size = max(10, len(items) // 24)\n"
        "chunks = [items[i:i + size] for i in range(0, len(items), size)]\n"
        "results = [s for part in hpc.get([score.remote(c) for c in chunks]) for s in part]\n", "score"),
    "a-batch-function-calling-the-lessons-score": (
        "@hpc.remote\ndef score_batch(xs):\n    return [score(x) for x in xs]\n"
        "size = max(10, len(items) // 24)\n"
        "chunks = [items[i:i + size] for i in range(0, len(items), size)]\n"
        "results = [s for part in hpc.get([score_batch.remote(c) for c in chunks]) for s in part]\n", "score_batch"),
}


@pytest.mark.parametrize(("cell", "function"), list(HAND_MADE.values()), ids=list(HAND_MADE))
def test_hand_made_batches_pass(cell, function):
    v = run_exercise("batching", cell, setup=SETUP)
    text = v.to_text()
    assert v.passed, text
    assert f"`results` is the 3000 results the {function} tasks returned, in item order" in text, text
    assert "here in the notebook" not in text
