"""A graded value must be the very objects the tasks' get() handed over (``steps.fetched``), through the real magic.

The shortcut: run the right tasks and take their values (the trace shows tasks and gets), then
throw the values away and compute the graded variable again in the notebook (inline, with a helper
of another name, with NumPy). The values are equal; the objects are not the ones get() returned.
Honest cells that keep the fetched objects in another shape pass.
"""

from __future__ import annotations

import pytest
from _exercise_cells import AS_COMPLETED_SETUP, BATCHING_SETUP, check_cell, not_yet_for, run_exercise

from eugo_lab.exercises import problems

SEED = 12_345  # the hidden case's seed (a passing cell is run again on it)


@pytest.fixture(autouse=True)
def hidden_seed(monkeypatch):
    monkeypatch.setattr(problems, "draw_seed", lambda: SEED)


PI = """
import random
from eugo_lab import exercises, hpc

def pi_plain(seed, n):
    rng = random.Random(seed)
    inside = 0
    for _ in range(n):
        x, y = rng.random(), rng.random()
        inside += x * x + y * y <= 1.0
    return 4 * inside / n

@hpc.remote
def estimate_pi(seed, n=1_500_000):
    return pi_plain(seed, n)

p = exercises.problem("first-task")
"""
NOT_HANDED_ONE = ("holds the right value, but it is not the value get() or result() handed over from the "
                  "estimate_pi task")


def test_first_task_value_computed_again_by_a_helper_is_not_yet():
    v = run_exercise("first-task", "future = estimate_pi.remote(p.seed, p.darts)\nr = hpc.get(future)\n"
                                   "result = pi_plain(p.seed, p.darts)\n", setup=PI)
    text = not_yet_for(v, "decoy", NOT_HANDED_ONE)
    assert "an equal value the notebook made itself (computed again, or kept from before)" in text


@pytest.mark.parametrize("body", [
    "future = estimate_pi.remote(p.seed, p.darts)\nresult = future.result()\n",
    "future = estimate_pi.remote(p.seed, p.darts)\nresult = float(hpc.get(future))\n",  # float() of a float: itself
    "def fetch(seed, darts):\n    return hpc.get(estimate_pi.remote(seed, darts))\n\nresult = fetch(p.seed, p.darts)\n",
])
def test_first_task_honest_ways_to_keep_the_value_pass(body):
    check_cell("first-task", body, True, "taken with get()", None, setup=PI)


SQUARE = """
import time
from eugo_lab import exercises, hpc

p = exercises.problem("fan-out")

def sq(x):
    return x * x

@hpc.remote
def slow_square(x):
    time.sleep(0.05)
    return x * x
"""
NOT_HANDED = "holds the right values, but 12 of the 12 items checked are not values a get() or result() of this cell " \
             "handed over from the slow_square tasks: they are equal values the notebook made itself"


@pytest.mark.parametrize("after", [
    "results = [x * x for x in p.xs]\n",  # inline
    "results = [sq(x) for x in p.xs]\n",  # a helper of another name
    "import numpy as np\nresults = (np.array(p.xs) ** 2).tolist()\n",  # NumPy
])
def test_fan_out_values_thrown_away_and_computed_again_are_not_yet(after):
    v = run_exercise("fan-out", "futures = [slow_square.remote(x) for x in p.xs]\nresults = hpc.get(futures)\n"
                     + after, setup=SQUARE)
    not_yet_for(v, "decoy", NOT_HANDED)


@pytest.mark.parametrize("body", [
    # kept in a dict by input, then listed in the inputs' order
    "futures = {x: slow_square.remote(x) for x in p.xs}\nby_x = hpc.get(futures)\nresults = [by_x[x] for x in p.xs]\n",
    "futures = [slow_square.remote(x) for x in p.xs]\nresults = [r for r in hpc.get(futures)]\n",
    "def run_all(xs):\n    fs = [slow_square.remote(x) for x in xs]\n    return hpc.get(fs)\n\n"
    "results = run_all(p.xs)\n",
    "futures = [slow_square.remote(x) for x in p.xs]\nresults = [f.result() for f in futures]\n",
])
def test_fan_out_honest_ways_to_keep_the_values_pass(body):
    check_cell("fan-out", body, True, "the tasks returned, in submission order", None, setup=SQUARE)


SCORE = BATCHING_SETUP


def test_batching_scores_computed_again_are_not_yet():
    v = run_exercise("batching", "results = hpc.get(hpc.map(score, p.items))\n"
                                 "results = [sum((x * k) % 7 for k in range(200)) for x in p.items]\n", setup=SCORE)
    not_yet_for(v, "not-from-tasks", "holds the right values, but 3000 of the 3000 items checked are not values a "
                                     "get() or result() of this cell handed over from the score tasks")


@pytest.mark.parametrize("body", [
    "results = [s for s in hpc.get(hpc.map(score, p.items))]\n",
    "results = [f.result() for f in hpc.map(score, p.items)]\n",
])
def test_batching_honest_ways_to_keep_the_scores_pass(body):
    check_cell("batching", body, True, "results the score tasks returned", None, setup=SCORE)


def test_every_score_is_an_object_of_its_own():
    """The checker's items make no score a CPython-shared int (a multiple of 7 scores 0): identity can decide."""
    from eugo_lab.exercises import catalog
    from eugo_lab.exercises.catalog.batching import score_of
    from eugo_lab.tracing.returned import identifiable

    catalog.get("batching")
    for case in (problems.lesson_case("batching"), problems.make("batching", SEED, hidden=True)):
        assert all(identifiable(score_of(x)) for x in case.items)
    catalog.get("fan-out")
    for case in (problems.lesson_case("fan-out"), problems.make("fan-out", SEED, hidden=True)):
        assert all(identifiable(x * x) for x in case.xs)


MEASURE = AS_COMPLETED_SETUP
SUBMIT = "futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"


def test_as_completed_handle_fed_the_inputs_instead_of_the_results_is_not_yet():
    body = SUBMIT + "for f in hpc.as_completed(futures):\n    hpc.get(f)\nhandled = [handle(ms) for ms in p.ms]\n"
    not_yet_for(run_exercise("as-completed", body, setup=MEASURE), "decoy",
                "`handled` holds what handle returned, but 10 of the 10 calls behind it were given other values than "
                "the objects a get() or result() of this cell handed over from the measure tasks")


@pytest.mark.parametrize("body", [
    SUBMIT + "for f in hpc.as_completed(futures):\n    handle(hpc.get(f))\nhandled = [ms + 1 for ms in p.ms]\n",
    SUBMIT + "for f in hpc.as_completed(futures):\n    handled.append(hpc.get(f) + 1)\n",  # handle left out
])
def test_as_completed_answers_not_made_by_handle_are_not_yet(body):
    not_yet_for(run_exercise("as-completed", body, setup=MEASURE), "decoy",
                "`handled` holds the right answers, but 10 of the 10 items checked are not values handle returned "
                "in this cell")


@pytest.mark.parametrize("body", [
    SUBMIT + "for f in hpc.as_completed(futures):\n    r = f.result()\n    handled.append(handle(r))\n"
             "handled = sorted(handled)\n",  # any order is allowed
    SUBMIT + "by_future = {}\nfor f in hpc.as_completed(futures):\n    by_future[f] = handle(hpc.get(f))\n"
             "handled = list(by_future.values())\n",
])
def test_as_completed_honest_ways_to_keep_handle_s_answers_pass(body):
    check_cell("as-completed", body, True, "handle() of the 10 values the measure tasks returned", None,
               setup=MEASURE)


def test_every_measurement_is_an_object_of_its_own():
    from eugo_lab.exercises import catalog
    from eugo_lab.tracing.returned import identifiable

    catalog.get("as-completed")
    for case in (problems.lesson_case("as-completed"), problems.make("as-completed", SEED, hidden=True)):
        assert all(identifiable(m) and identifiable(m + 1) for m in case.ms)
