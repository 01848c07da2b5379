"""The ``capstone`` exercise, as a table of cells run through ``%%eugo --exercise``.

One pipeline with four mistakes (a get() in the submit loop, a task per sensor, one giant day,
the readings sent with every task). The reference and honest variants that fix things another
way pass; every partial fix is ``not yet`` and lists exactly what remains; each mistake and each
shortcut (a total computed in the notebook beside decoy tasks, values copied from the earlier
run, tasks that only hand back what the notebook computed, no tasks at all) fails with a message
of its own. Every criterion is a count, a size or a value, so none of these verdicts depends on
how busy the machine is.
"""

from __future__ import annotations

import pytest
from _exercise_cells import code_in, hint_code, hint_words, not_yet_for, run_exercise, tier_code, tier_words
from _lesson_cells import CAPSTONE_SETUP as SETUP

from eugo_lab.exercises import problems
from eugo_lab.exercises.catalog import capstone
from eugo_lab.exercises.catalog.capstone import HINTS, reference

PER_SENSOR = "gains = hpc.get([gain.remote(sensor) for sensor in range(p.sensors)])\n"
MAPPED = "gains = hpc.get(hpc.map(gain, range(p.sensors)))\n"
STORED = "stored = hpc.put(readings)\n"
PIECES = ("day = min(stop - start for start, stop in days)\n"
          "pieces = [(a, min(a + day, stop)) for start, stop in days for a in range(start, stop, day)]\n")
STARTER = PER_SENSOR + ("total = 0.0\nfor start, stop in days:\n"
                        "    total += hpc.get(score.remote(readings, gains, start, stop))\n")
REFERENCE = MAPPED + STORED + PIECES + ("futures = [score.remote(stored, gains, a, b) for a, b in pieces]\n"
                                        "total = sum(hpc.get(futures))\n")
# The earlier run of the broken pipeline, as the lesson shows it before the exercise.
EARLIER_RUN = SETUP + STARTER

PASS = {
    "reference": (REFERENCE, "20 of the 20 score tasks read the one stored copy of the readings"),
    # batches of sensors submitted by hand, pieces half a day long, results taken as they finish
    "honest-batches-by-hand-and-as-completed": (
        "def gains_of(sensors):\n    return [gain(s) for s in sensors]\n\n"
        "batches = hpc.remote(gains_of)\n"
        "parts = hpc.get([batches.remote(range(s, min(s + 200, p.sensors))) for s in range(0, p.sensors, 200)])\n"
        "gains = [g for part in parts for g in part]\n"
        "ref = hpc.put(readings)\n"
        "half = (days[0][1] - days[0][0]) // 2\n"
        "futs = [score.remote(ref, gains, a, min(a + half, e)) for s, e in days for a in range(s, e, half)]\n"
        "total = 0.0\nfor f in hpc.as_completed(futs):\n    total += hpc.get(f)\n",
        "2000 gains in 10 gains_of tasks, 200 sensors per task on average"),
    # every task its own slice of the readings instead of a stored copy; fixed map batches
    "honest-slices-instead-of-put": (
        "gains = hpc.get(hpc.map(gain, range(p.sensors), batch=100))\n" + PIECES
        + "futures = [score.remote(readings[a:b], gains, 0, b - a) for a, b in pieces]\n"
          "total = sum(hpc.get(futures))\n",
        "each score task received only its own readings: 16"),
}

NOT_YET = {
    # the starter: all four at once, the hint answers the first
    "starter-four-mistakes": (STARTER, "blocking", [
        "4 of 4 mistakes remain; %eugo hint answers the first one below.",
        "the wait in the loop: the driver still waits in get() 11 times between submitting the 12 score tasks "
        "(cell line 5), and each wait holds back every submission after it",
        "the tiny tasks: the 2000 gains still came from 2000 gain tasks, one sensor per task",
        "the straggler: one score task still covered about 900,000 readings, 9x the median task's 100,000",
        "the data sent with every task: the 16 MB readings array is still sent with each of the 12 score tasks, "
        "192 MB of arguments in all"]),
    # one fix at a time: what is left, and what is fixed already
    "only-the-wait-fixed": (PER_SENSOR + "futures = [score.remote(readings, gains, s, e) for s, e in days]\n"
                            "total = sum(hpc.get(futures))\n", "tiny", [
                                "3 of 4 mistakes remain (fixed: the wait in the loop)",
                                "the tiny tasks: the 2000 gains still came from 2000 gain tasks",
                                "the straggler: one score task still covered about 900,000 readings",
                                "still sent with each of the 12 score tasks"]),
    "two-of-four-remain": (MAPPED + "futures = [score.remote(readings, gains, s, e) for s, e in days]\n"
                           "total = sum(hpc.get(futures))\n", "straggler", [
                               "2 of 4 mistakes remain (fixed: the wait in the loop, the tiny tasks); %eugo hint "
                               "answers the first one below.",
                               "the straggler: one score task still covered about 900,000 readings",
                               "the 16 MB readings array is still sent with each of the 12 score tasks"]),
    "only-the-data-remains": (MAPPED + PIECES + "futures = [score.remote(readings, gains, a, b) for a, b in pieces]\n"
                              "total = sum(hpc.get(futures))\n", "by-value", [
                                  "1 of 4 mistakes remains (fixed: the wait in the loop, the tiny tasks, the "
                                  "straggler).",
                                  "the 16 MB readings array is still sent with each of the 20 score tasks, 320 MB of "
                                  "arguments in all"]),
    # the other ways each mistake can remain
    "waits-for-each-gain": ("gains = [hpc.get(gain.remote(s)) for s in range(2000)]\n" + STORED + PIECES
                            + "total = sum(hpc.get([score.remote(stored, gains, a, b) for a, b in pieces]))\n",
                            "blocking", ["2 of 4 mistakes remain",
                                         "between submitting the 2000 gain tasks (cell line 2)",
                                         "the tiny tasks: the 2000 gains still came from 2000 gain tasks"]),
    "waits-for-each-day": (MAPPED + STORED + "total = 0.0\nfor s, e in days:\n"
                           "    parts = [score.remote(stored, gains, a, min(a + 100_000, e)) for a in range(s, e, "
                           "100_000)]\n    total += sum(hpc.get(parts))\n", "blocking", [
                               "1 of 4 mistakes remains",
                               "the driver still waits in get() 11 times between submitting the 20 score tasks"]),
    "crumbs": (MAPPED + STORED + "futures = [score.remote(stored, gains, a, a + 2_000) for a in range(0, 2_000_000, "
               "2_000)]\ntotal = sum(hpc.get(futures))\n", "crumbs",
               ["the tiny tasks: 1000 score tasks, over 250: pieces of 2,000 readings on average"]),
    "one-task-for-everything": (MAPPED + STORED + "total = hpc.get(score.remote(stored, gains, 0, 2_000_000))\n",
                                "straggler", ["the straggler: the 1 score task, handed out in the order submitted on "
                                              "2 workers, keeps them busy for only 1x one worker's work"]),
    "put-per-task": (MAPPED + PIECES + "futures = [score.remote(hpc.put(readings), gains, a, b) for a, b in pieces]\n"
                     "total = sum(hpc.get(futures))\n", "put-per-task",
                     ["the cell stored the readings with put 20 times"]),
    "score-reads-the-global": (MAPPED + PIECES + "@hpc.remote\ndef score_global(unused, gains, start, stop):\n"
                               "    total = 0.0\n    for i in range(start, stop):\n"
                               "        total += readings[i] * gains[i % 2000]\n    return total\n\n"
                               "total = sum(hpc.get([score_global.remote(None, gains, a, b) for a, b in pieces]))\n",
                               "captured", ["the score_global function reads the global `readings` and was "
                                            "pickled with it"]),
    # wrong results
    "a-day-missing": (REFERENCE.replace("for start, stop in days ", "for start, stop in days[:-1] "), "results",
                      ["`total` is not the sum of all 2,000,000 readings"]),
    "gains-out-of-order": (REFERENCE.replace("range(p.sensors)))", "reversed(range(p.sensors))))"), "results",
                           ["`gains` is not the gain of each of the 2000 sensors"]),
    # shortcuts
    "shortcut-all-in-the-notebook": ("gains = [gain(s) for s in range(2000)]\n"
                                     "total = score(readings, gains, 0, 2_000_000)\n", "local",
                                     ["no task ran in this cell (gain ran 2,000 times and score 1 time here in "
                                      "the notebook), so none of the pipeline's four mistakes is fixed"]),
    "shortcut-total-beside-decoys": (MAPPED + STORED
                                     + "hpc.get([score.remote(stored, gains, 0, 10) for _ in range(20)])\n"
                                       "total = float(np.dot(readings, np.tile(gains, 1000)))\n", "decoy",
                                     ["`total` was not computed from the tasks' results: the 20 score tasks returned "
                                      "values that summed give"]),
    "shortcut-typed-total": (MAPPED + f"total = {reference()[2]!r}\n", "local",
                             ["no score task ran in this cell, only the gain tasks: `total` did not come from "
                              "scoring tasks"]),
    "shortcut-tasks-hand-back-the-scores": (
        MAPPED + PIECES + "echo = hpc.remote(lambda v: v)\n"
        "total = sum(hpc.get([echo.remote(score(readings, gains, a, b)) for a, b in pieces]))\n", "decoy",
        ["`total` is the sum of what the <lambda> tasks returned, but they never received the readings"]),
    "shortcut-tasks-hand-back-the-gains": (
        "here = [gain(s) for s in range(2000)]\n"
        "gains = hpc.get(hpc.map(lambda g: g, here))\n" + STORED + PIECES
        + "total = sum(hpc.get([score.remote(stored, gains, a, b) for a, b in pieces]))\n", "decoy",
        ["but <lambda> never calls gain: gain ran 2,000 times here in the notebook, so the gains were computed "
         "there and the tasks only handed them back"]),
    # gain computed in the notebook for the graded gains, decoy gain tasks of the right name beside them
    "shortcut-gains-in-the-notebook-beside-decoy-gain-tasks": (
        "hpc.get([gain.remote(s) for s in range(20)])\ngains = [gain(s) for s in range(2000)]\n" + STORED + PIECES
        + "total = sum(hpc.get([score.remote(stored, gains, a, b) for a, b in pieces]))\n", "decoy",
        ["gain ran 2,000 times here in the notebook beside the tasks, so the value came from the notebook"]),
}


@pytest.mark.parametrize(("cell", "evidence"), list(PASS.values()), ids=list(PASS))
def test_passes(cell, evidence):
    v = run_exercise("capstone", cell, setup=SETUP)
    text = v.to_text()
    assert v.passed and text.startswith("exercise capstone: passed\n  no wait held up the loop: "), text
    assert evidence in text, text
    assert "both equal the reference computed here" in text, text
    assert text.splitlines()[-1] == "  " + problems.SECOND_CASE, text  # and on the hidden case


@pytest.mark.parametrize(("cell", "mistake", "says"), list(NOT_YET.values()), ids=list(NOT_YET))
def test_not_yet(cell, mistake, says):
    v = run_exercise("capstone", cell, setup=SETUP)
    text = not_yet_for(v, mistake, says[0])
    for line in says[1:]:
        assert line in text, text


def test_a_value_left_by_the_earlier_run_is_copied_not_computed():
    # The lesson runs the broken pipeline before the exercise: its `gains` and `total` are right, and not this cell's.
    v = run_exercise("capstone", MAPPED + "earlier = total\ntotal = earlier\n", setup=EARLIER_RUN)
    not_yet_for(v, "copied", "`total` is the value an earlier cell left (the first run of the pipeline)")


def test_gains_left_by_the_earlier_run_do_not_count_as_batched():
    v = run_exercise("capstone", "gains = gains\n" + STORED + PIECES
                     + "total = sum(hpc.get([score.remote(stored, gains, a, b) for a, b in pieces]))\n",
                     setup=EARLIER_RUN)
    not_yet_for(v, "copied", "`gains` is the value an earlier cell left (the first run of the pipeline)")


def test_the_mistakes_are_listed_in_the_checklists_order_and_the_hint_answers_the_first():
    v = run_exercise("capstone", STARTER, setup=SETUP)
    order = [next(i for i, line in enumerate(v.lines) if line.startswith(f"the {what}"))
             for what in ("wait in the loop", "tiny tasks", "straggler", "data sent")]
    assert order == sorted(order) == [1, 2, 3, 4], v.to_text()
    assert "Take get() out of the loop" in hint_words(v) and "total = sum(hpc.get(futures))" in hint_code(v)


def test_a_partial_fix_names_the_remaining_mistakes_only():
    v = run_exercise("capstone", MAPPED + STORED + PIECES + "total = 0.0\nfor a, b in pieces:\n"
                     "    total += hpc.get(score.remote(stored, gains, a, b))\n", setup=SETUP)
    text = v.to_text()
    assert v.lines[0] == ("1 of 4 mistakes remains (fixed: the tiny tasks, the straggler, the data sent with every "
                          "task)."), text
    assert v.mistake == "blocking" and "the driver still waits in get() 19 times between submitting the 20" in text
    assert not [line for line in v.lines[1:] if line.startswith(("the tiny tasks", "the straggler", "the data"))]


def test_on_one_worker_the_pieces_are_packed_for_two():
    v = run_exercise("capstone", REFERENCE, setup=SETUP, line="-w 1 --no-live")
    assert v.passed and "on 2 workers (this run had 1, so the check counts 2)" in v.to_text(), v.to_text()


def test_every_mistake_has_both_tiers_and_the_words_hold_no_code():
    keys = {"results", "local", "copied", "decoy", "not-taken", "blocking", "tiny", "crumbs", "straggler",
            "by-value", "captured", "put-per-task", problems.CARRY_OVER}
    assert keys | {"default"} == set(HINTS)
    for key in keys:
        assert code_in(tier_words("capstone", key)) == [], key
        assert tier_code("capstone", key).strip(), key


def test_the_reference_computation_is_the_lessons():
    import numpy as np

    readings, gains, total = reference()
    assert readings.shape == (2_000_000,) and len(gains) == 2000
    # the lesson's inputs are the ones its setup cell made before the checker handed them out
    assert np.array_equal(readings, np.random.default_rng(42).uniform(0.5, 1.5, 2_000_000))
    assert problems.lesson_case("capstone").days == tuple(
        [(d * 100_000, (d + 1) * 100_000) for d in range(11)] + [(1_100_000, 2_000_000)])
    assert gains[0] == capstone.gain_of(0) == 0.5 and all(0.5 <= g < 1.5 for g in gains)
    # reading i comes from sensor i % 2000, as in the lesson's score()
    by_sensor = np.asarray(gains)[np.arange(2_000_000) % 2000]
    assert np.isclose(total, float((readings * by_sensor).sum()), rtol=1e-12, atol=0)
