"""The ``first-task`` exercise: the reference passes; each typical mistake gets its own ``not yet``."""

from __future__ import annotations

import pytest
from _exercise_cells import check_cell, code_in, run_exercise

from eugo_lab.exercises import catalog, problems

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
    assert f"the same value as the plain call {CALL}" in text
    again = run_exercise("first-task", "result = hpc.get(estimate_pi.remote(p.seed, p.darts))\n", setup=SETUP)
    assert again.to_text() == text  # nothing in the evidence varies between runs


def test_plain_call_runs_nothing_on_a_worker():
    v = run_exercise("first-task", "result = estimate_pi(p.seed, p.darts)\nprint(result)\n", setup=SETUP)
    assert first_line(v) == "exercise first-task: not yet", v.to_text()
    assert "no task ran on a worker" in v.to_text()
    assert "plain call, so it ran right here in the notebook" in v.to_text()
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
     "but the cell never took a task's value: no get() or result() asked for a future", "not-taken"),
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
