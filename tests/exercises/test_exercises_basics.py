"""The ``first-task`` exercise: the reference passes; each typical mistake gets its own ``not yet``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _exercise_cells import check_cell, code_in, hint_code, hint_words, not_yet_for, passed_with, run_exercise

from eugo_lab.exercises import catalog, problems
from eugo_lab.exercises.catalog import basics

# The lesson's function, with fewer darts so each call takes milliseconds (the checker calls it too).
SETUP = """
import random
from eugo_lab import hpc

@hpc.remote
def estimate_pi(seed, n=20_000):
    rng = random.Random(seed)
    inside = 0
    for _ in range(n):
        x, y = rng.random(), rng.random()
        inside += x * x + y * y <= 1.0
    return 4 * inside / n

from eugo_lab import exercises
p = exercises.problem("first-task")
"""

catalog.get("first-task")
CASE = problems.lesson_case("first-task")
CALL = f"estimate_pi({CASE.seed}, {CASE.darts})"  # the plain call the checker makes, as its verdicts name it


def first_line(v) -> str:
    return v.to_text().splitlines()[0]


def test_reference_passes_with_deterministic_evidence():
    v = run_exercise("first-task", "future = estimate_pi.remote(p.seed, p.darts)\nresult = hpc.get(future)\n",
                     setup=SETUP)
    assert v.passed, v.to_text()
    assert first_line(v) == "exercise first-task: passed"
    text = v.to_text()
    assert "estimate_pi ran as 1 task on 1 worker" in text
    assert "the value that task returned, taken with get() (1 value taken in this cell)" in text
    assert f"the same value as the lesson's {CALL}, which the checker computed with its own copy of the function" \
        in text
    again = run_exercise("first-task", "result = hpc.get(estimate_pi.remote(p.seed, p.darts))\n", setup=SETUP)
    assert again.to_text() == text  # nothing in the evidence varies between runs


def test_plain_call_runs_nothing_on_a_worker():
    v = run_exercise("first-task", "result = estimate_pi(p.seed, p.darts)\nprint(result)\n", setup=SETUP)
    assert first_line(v) == "exercise first-task: not yet", v.to_text()
    assert "no task ran on a worker: estimate_pi ran 1 time as a plain call, so it ran right here in the notebook" \
        in v.to_text()
    # the code is the hint's
    assert "estimate_pi.remote(p.seed, p.darts)" not in v.to_text() and code_in(v.to_text()) == []
    assert v.mistake == "local" and v.to_text().endswith("run it a second time for the code.")


def test_future_instead_of_its_value():
    v = run_exercise("first-task", "result = estimate_pi.remote(p.seed, p.darts)\nprint(result)\n", setup=SETUP)
    assert first_line(v) == "exercise first-task: not yet", v.to_text()
    assert "`result` holds a future (<hpc.Future estimate_pi() task" in v.to_text()
    assert v.mistake == "future" and "%eugo hint first-task" in v.to_text()


def test_wrong_seed_names_the_value_but_never_the_answer():
    plain: dict = {}
    exec(SETUP.replace("@hpc.remote\n", ""), plain)  # the lesson's function as a plain one
    expected = plain["estimate_pi"](CASE.seed, CASE.darts)
    v = run_exercise("first-task", "result = hpc.get(estimate_pi.remote(7))\n", setup=SETUP)
    assert first_line(v) == "exercise first-task: not yet", v.to_text()
    assert f"which is not what {CALL} returns" in v.to_text()
    # A `not yet` that stated the right value would let it be typed in.
    assert repr(expected) not in v.to_text(precise=True), v.to_text(precise=True)
    assert "a task ran, with another seed or number of darts, or another value kept" in v.to_text()


def test_missing_result_variable():
    v = run_exercise("first-task", "value = hpc.get(estimate_pi.remote(p.seed, p.darts))\n", setup=SETUP)
    assert first_line(v) == "exercise first-task: not yet"
    assert "did not define `result`" in v.to_text()


def test_function_without_the_decorator():
    plain = SETUP.replace("@hpc.remote\n", "")
    v = run_exercise("first-task", "result = estimate_pi(p.seed, p.darts)\n", setup=plain)
    assert first_line(v) == "exercise first-task: not yet"
    assert "is a plain function here, without `.remote`" in v.to_text()


def test_lesson_not_run_yet():
    v = run_exercise("first-task", "result = 3.14\n", setup="globals().pop('estimate_pi', None)")
    assert first_line(v) == "exercise first-task: not yet"
    assert "this notebook has no `estimate_pi` yet" in v.to_text()


# One row per cell: (id, cell, passes, what the verdict must say, the mistake it names).
CELLS = [
    ("reference", "future = estimate_pi.remote(p.seed, p.darts)\nresult = hpc.get(future)\n", True,
     "the value that task returned, taken with get()", None),
    ("honest-result-method", "job = estimate_pi.remote(seed=p.seed, n=p.darts)\nhpc.wait([job])\n"
     "result = job.result()\n", True,
     "the value that task returned, taken with get() (1 value taken in this cell)", None),
    ("mistake-plain-call", "result = estimate_pi(p.seed, p.darts)\n", False, "plain call, so it ran right here",
     "local"),
    ("mistake-future", "result = estimate_pi.remote(p.seed, p.darts)\n", False, "`result` holds a future", "future"),
    ("mistake-wrong-seed", "result = hpc.get(estimate_pi.remote(7))\n", False, f"which is not what {CALL} returns",
     "wrong-seed"),
    ("shortcut-decoy-other-seed", "hpc.get(estimate_pi.remote(1))\nresult = estimate_pi(p.seed, p.darts)\n", False,
     "`result` was not returned by any of the 1 estimate_pi tasks of this cell: estimate_pi ran 1 time here in the "
     "notebook beside the tasks",
     "decoy"),
    ("shortcut-task-never-taken", "estimate_pi.remote(p.seed, p.darts)\nresult = estimate_pi(p.seed, p.darts)\n", False,
     "but the cell never took a task's value: no get() or result() asked for a future in this cell, and estimate_pi "
     "ran 1 time here in the notebook beside the task: `result` was computed there", "not-taken"),
    # a map's futures are not told ".remote started the task": no .remote ran
    ("mistake-map-futures", "result = hpc.map(estimate_pi, [p.seed])\n", False,
     "`result` holds the 1 future of a map, not its value: the map started the task on a worker", "future"),
]


@pytest.mark.parametrize("cell,passes,says,mistake", [c[1:] for c in CELLS], ids=[c[0] for c in CELLS])
def test_cells(cell, passes, says, mistake):
    check_cell("first-task", cell, passes, says, mistake, setup=SETUP)




def test_evidence_follows_the_number_of_tasks():
    v = run_exercise("first-task", "two = [estimate_pi.remote(p.seed, p.darts) for _ in range(2)]\n"
                                   "result = hpc.get(two)[0]\n",
                     setup=SETUP)
    assert v.passed, v.to_text()
    assert "estimate_pi ran as 2 tasks on" in v.to_text()
    assert "the value one of the 2 tasks returned, taken with get() (2 values taken in this cell)" in v.to_text()


def test_a_wrapper_task_that_calls_estimate_pi_passes():
    # An attacker who read only the lesson was told this ran "right here in the notebook": it ran in a task.
    v = run_exercise("first-task", "@hpc.remote\ndef pi_task(s, d):\n    return estimate_pi(s, d)\n"
                                   "result = hpc.get(pi_task.remote(p.seed, p.darts))\n", setup=SETUP)
    assert v.passed, v.to_text()
    assert "(inside pi_task, which calls it)" in v.to_text() and "here in the notebook" not in v.to_text()


# -- the checker owns the work: its own copy of the lesson's function -----------------------------------------------
LESSON = Path(__file__).resolve().parents[2] / "courses" / "01-distributed-python" / \
    "01-remote-functions-and-futures.ipynb"


def test_the_checkers_copy_is_the_lessons_estimate_pi():
    # The reference of every verdict: it must compute what the lesson's first cell defines, dart for dart.
    cells = json.loads(LESSON.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if "def estimate_pi" in "".join(c["source"]))
    lesson: dict = {}
    exec(source.replace("%load_ext eugo_lab\n", "").replace("@hpc.remote\n", ""), lesson)
    for seed, n in [(CASE.seed, CASE.darts), basics.PROBE, (123_456, 20_000), (7, 1)]:
        assert basics.lesson_estimate_pi(seed, n) == lesson["estimate_pi"](seed, n), (seed, n)


def _redefined(body: str) -> str:
    """An exercise cell that redefines estimate_pi (same name) with ``body``, then runs it as the reference does."""
    return ("@hpc.remote\ndef estimate_pi(seed, n=1_500_000):\n" + body
            + "result = hpc.get(estimate_pi.remote(p.seed, p.darts))\n")


# Cells that redefine the lesson's function under its name. Each was once passed as "the same value as the plain
# call": the reference came from the cell's own function. (id, body, what the cell's function returns on the probe.)
REDEFINED = [
    ("fixed-pi", "    import math\n    return round(math.pi, 5)\n", "it returns 3.14159"),
    ("fewer-darts", "    rng = random.Random(seed)\n"
                    "    inside = sum(rng.random() ** 2 + rng.random() ** 2 <= 1.0 for _ in range(1000))\n"
                    "    return 4 * inside / 1000\n", "it returns 3.152"),
    # the notebook's own plain call, smuggled into the task: right on the exercise's inputs, on no other
    ("kept-local", "    return local\n", f"it returns {basics.lesson_estimate_pi(CASE.seed, CASE.darts)!r}"),
]


@pytest.mark.parametrize("body,returns", [r[1:] for r in REDEFINED], ids=[r[0] for r in REDEFINED])
def test_a_same_named_function_is_not_the_lessons_work(body, returns):
    seed, darts = basics.PROBE
    cell = "local = estimate_pi(p.seed, p.darts)\n" + _redefined(body)
    v = run_exercise("first-task", cell, setup=SETUP)
    text = not_yet_for(v, basics.NOT_LESSONS, f"your estimate_pi is not the lesson's: for seed {seed} with "
                                              f"{darts:,} darts {returns}, but the lesson's estimate_pi returns "
                                              f"{basics.lesson_estimate_pi(seed, darts)!r} (the checker ran both)")
    assert "same value" not in text and "plain call" not in text
    # A not yet names the lesson's value on the checker's own input only, never the exercise's answer.
    assert repr(basics.lesson_estimate_pi(CASE.seed, CASE.darts)) not in text.replace(returns, "")


def test_a_function_right_on_the_probe_but_not_on_the_inputs_is_named_by_what_it_returned():
    # Throws at most 5,000 darts: the lesson's value on the checker's probe (2,345 darts), not on p's 200,000.
    body = ("    rng = random.Random(seed)\n    m = min(n, 5_000)\n"
            "    inside = sum(rng.random() ** 2 + rng.random() ** 2 <= 1.0 for _ in range(m))\n"
            "    return 4 * inside / m\n")
    v = run_exercise("first-task", _redefined(body), setup=SETUP)
    capped = basics.lesson_estimate_pi(CASE.seed, 5_000)
    not_yet_for(v, basics.NOT_LESSONS, f"your estimate_pi returns {capped!r} for seed {CASE.seed} with "
                                       f"{CASE.darts:,} darts, which is not what the lesson's estimate_pi returns "
                                       "for them (the checker ran both)")


def test_the_lessons_function_with_another_default_is_still_the_lessons():
    # SETUP's estimate_pi has n=20_000 by default: the work on explicit darts is the lesson's, so it passes.
    v = run_exercise("first-task", "result = hpc.get(estimate_pi.remote(p.seed, n=p.darts))\n", setup=SETUP)
    passed_with(v, "estimate_pi ran as 1 task on 1 worker")


# -- a task counts by the function it ran, under any name -----------------------------------------------------------
def test_a_task_renamed_with_options_is_still_estimate_pi():
    # An attacker's honest cell was told "no estimate_pi task ran (only tasks of pi_task)": it had.
    cell = ("fut = estimate_pi.options(name='pi_task').remote(p.seed, p.darts)\n"
            "done, pending = hpc.wait([fut])\nresult = hpc.get(done[0])\n")
    text = passed_with(run_exercise("first-task", cell, setup=SETUP), "estimate_pi ran as 1 task (named pi_task) on 1 "
                                                                     "worker")
    assert "inside pi_task" not in text


def test_a_renamed_decoy_beside_a_plain_call_is_still_a_decoy():
    # Renaming is not calling: a renamed task of another seed does not make the notebook's value the task's.
    cell = "hpc.get(estimate_pi.options(name='pi_task').remote(1, p.darts))\nresult = estimate_pi(p.seed, p.darts)\n"
    not_yet_for(run_exercise("first-task", cell, setup=SETUP), "decoy",
                "`result` was not returned by any of the 1 pi_task tasks of this cell: estimate_pi ran 1 time here "
                "in the notebook beside the tasks")


# -- the engine: workers are processes --------------------------------------------------------------------------------
def test_the_threads_engine_is_refused_by_name_and_the_hint_runs_on_processes():
    ref = "result = hpc.get(estimate_pi.remote(p.seed, p.darts))\n"
    try:
        v = run_exercise("first-task", ref, setup=SETUP, line="-w 2 --no-live -b threads")
        not_yet_for(v, "threads", "1 estimate_pi task ran in this notebook's own process, on the threads engine, "
                                  "whose workers are threads of it, so the work never left the notebook's process")
        assert "-b local" in hint_code(v) and "threads engine" in hint_words(v)
    finally:  # the hint's fix, which also gives the next test the local engine back
        again = run_exercise("first-task", ref, setup=SETUP, line="-w 2 --no-live -b local")
    passed_with(again, "estimate_pi ran as 1 task on 1 worker")


# -- what a not yet says is what the cell did -------------------------------------------------------------------------
def test_an_echo_task_is_named_and_the_plain_call_counted():
    # Was told "no task ran on a worker" although the echo task had.
    cell = ("@hpc.remote\ndef echo(v):\n    return v\n"
            "local = estimate_pi(p.seed, p.darts)\nresult = hpc.get(echo.remote(local))\n")
    not_yet_for(run_exercise("first-task", cell, setup=SETUP), "local",
                "the value is right, but no estimate_pi task ran on a worker (only tasks of echo): estimate_pi ran 1 "
                "time as a plain call, so it ran right here in the notebook.")


def test_a_task_never_taken_beside_no_plain_call_is_not_said_to_be_computed_here():
    # The darts thrown inline, not by estimate_pi: it never ran in the notebook, so that is not claimed.
    cell = ("fut = estimate_pi.remote(p.seed, p.darts)\nrng = random.Random(p.seed)\n"
            "inside = sum(rng.random() ** 2 + rng.random() ** 2 <= 1.0 for _ in range(p.darts))\n"
            "result = 4 * inside / p.darts\nhpc.wait([fut])\n")
    text = not_yet_for(run_exercise("first-task", cell, setup=SETUP), "not-taken",
                       "no get() or result() asked for a future in this cell, so `result` was not taken from the task.")
    assert "here in the notebook" not in text


def test_a_value_left_by_an_earlier_cell_is_not_called_a_plain_call():
    # Nothing ran in this cell: it is not told a plain call ran here.
    right = basics.lesson_estimate_pi(CASE.seed, CASE.darts)
    v = run_exercise("first-task", "result = kept\n", setup=SETUP + f"kept = {right!r}\n")
    text = not_yet_for(v, "local", "the value is right, but no task ran in this cell and estimate_pi did not run in "
                                   "the notebook either, so `result` was not computed by estimate_pi in this cell.")
    assert "plain call" not in text

