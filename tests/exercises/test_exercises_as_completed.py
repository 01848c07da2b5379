"""The ``as-completed`` exercise: the reference passes; waiting in submission order and getting all first do not."""

from __future__ import annotations

import pytest
from _exercise_cells import check_cell, code_in, hint_code, run_exercise

from eugo_lab.exercises import problems

SETUP = """
import time
from eugo_lab import exercises, hpc

p = exercises.problem("as-completed")

@hpc.remote
def measure(ms):
    time.sleep(ms / 1000)
    return ms

def handle(r):
    time.sleep(0.02)
    return r + 1
"""


def test_reference_passes():
    v = run_exercise("as-completed", "futures = [measure.remote(ms) for ms in p.ms]\n"
                                     "handled = []\n"
                                     "for f in hpc.as_completed(futures):\n"
                                     "    handled.append(handle(hpc.get(f)))\n", setup=SETUP)
    assert v.passed, v.to_text()
    assert v.to_text() == ("exercise as-completed: passed\n"
                           "  all 10 answers in `handled` are handle() of the 10 values the measure tasks returned\n"
                           "  the first result was taken by itself before the last task finished\n"
                           "  results taken in completion order by hpc.as_completed; no Submission order finding\n"
                           "  " + problems.SECOND_CASE)


def test_waiting_in_submission_order_names_the_line():
    v = run_exercise("as-completed", "futures = [measure.remote(ms) for ms in p.ms]\n"
                                     "handled = []\n"
                                     "for f in futures:\n"
                                     "    handled.append(handle(hpc.get(f)))\n", setup=SETUP)
    text = v.to_text()
    assert text.startswith("exercise as-completed: not yet\n"), text
    assert "your loop called get() at cell line 5 in submission order" in text
    assert "hpc.as_completed(futures)" in hint_code(v) and code_in(text) == []


def test_getting_all_before_handling():
    v = run_exercise("as-completed", "futures = [measure.remote(ms) for ms in p.ms]\n"
                                     "handled = [handle(r) for r in hpc.get(futures)]\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "waited for all 10 results at once (get() of 10 futures at cell line 3)" in text, text
    assert "nothing was handled while the slow task ran" in text


def test_one_worker_needs_completion_order_and_says_why():
    cell = ("futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
            "for f in futures:\n    handled.append(handle(hpc.get(f)))\n")
    v = run_exercise("as-completed", cell, setup=SETUP, line="-w 1 --no-live")
    assert not v.passed and "this run had 1 worker" in v.to_text()
    v = run_exercise("as-completed", cell.replace("in futures", "in hpc.as_completed(futures)"), setup=SETUP,
                     line="-w 1 --no-live")
    assert v.passed and "(1 worker: checked by the way results were taken)" in v.to_text(), v.to_text()


def test_missing_results():
    v = run_exercise("as-completed", "futures = [measure.remote(ms) for ms in p.ms]\n"
                                     "handled = [handle(hpc.get(f)) for f in futures[:5]]\n", setup=SETUP)
    assert not v.passed and "`handled` does not hold handle's answer for each of the 10 results" in v.to_text()


SUBMIT = "futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
WAIT_LOOP = ("pending = [measure.remote(ms) for ms in p.ms]\nhandled = []\nwhile pending:\n"
             "    done, pending = hpc.wait(pending, num_returns=1)\n"
             "    for f in done:\n        handled.append(handle(f.result()))\n")
# One row per cell: (id, cell, passes, what the verdict must say, the mistake it names).
CELLS = [
    ("reference", SUBMIT + "for f in hpc.as_completed(futures):\n    handled.append(handle(hpc.get(f)))\n", True,
     "results taken in completion order by hpc.as_completed", None),
    ("honest-wait-loop", WAIT_LOOP, True, "results taken in completion order by hpc.wait", None),
    ("mistake-submission-order", SUBMIT + "for f in futures:\n    handled.append(handle(hpc.get(f)))\n", False,
     "in submission order", "submission-order"),
    ("mistake-all-at-once", "futures = [measure.remote(ms) for ms in p.ms]\n"
     "handled = [handle(r) for r in hpc.get(futures)]\n", False, "waited for all 10 results at once",
     "all-at-once"),
    ("mistake-some-missing", "futures = [measure.remote(ms) for ms in p.ms]\n"
     "handled = [handle(hpc.get(f)) for f in futures[:5]]\n", False, "does not hold handle's answer", "results"),
    ("shortcut-empty-as-completed-loop", SUBMIT + "for f in hpc.as_completed(futures):\n    pass\n"
     "handled = [handle(r) for r in hpc.get(futures)]\n", False,
     "took no result by itself before the last task finished: it waited for all 10 results at once (get() of "
     "10 futures at cell line 6) and only then handled them, so nothing was handled while the slow task ran. "
     "The as_completed loop took no value itself.", "all-at-once"),
    ("shortcut-decoy-tasks", "futures = [measure.remote(p.ms[1]) for ms in p.ms]\n"
     "for f in hpc.as_completed(futures):\n    hpc.get(f)\nhandled = [ms + 1 for ms in p.ms]\n", False,
     "`handled` was not computed from the tasks' results: 1 of its 10 values are handle() of one of the 10 values "
     "the measure tasks returned", "decoy"),
    ("shortcut-never-taken", SUBMIT + "handled = [handle(ms) for ms in p.ms]\n", False,
     "but the cell never took a measure task's value with get()", "not-taken"),
]


@pytest.mark.parametrize("cell,passes,says,mistake", [c[1:] for c in CELLS], ids=[c[0] for c in CELLS])
def test_cells(cell, passes, says, mistake):
    check_cell("as-completed", cell, passes, says, mistake, setup=SETUP)
