"""The ``fan-out`` exercise: the reference passes; the typical mistakes get their own ``not yet``."""

from __future__ import annotations

import pytest
from _exercise_cells import check_cell, code_in, run_exercise

from eugo_lab.exercises import catalog

FUNC = """
import time
from eugo_lab import exercises, hpc
p = exercises.problem("fan-out")

@hpc.remote
def slow_square(x):
    time.sleep(0.05)
    return x * x
"""


def cell(body: str) -> str:
    """A whole exercise cell: the function, then ``body`` (line numbers: line 1 is the %%eugo line)."""
    return FUNC.lstrip("\n") + body


def test_reference_passes():
    v = run_exercise("fan-out", cell("futures = [slow_square.remote(x) for x in p.xs]\n"
                                     "results = hpc.get(futures)\n"))
    assert v.passed, v.to_text()
    assert v.to_text().splitlines()[0] == "exercise fan-out: passed"
    assert "all 12 slow_square tasks were submitted before the first of them came back" in v.to_text()
    assert "`results` is the 12 values the tasks returned, in submission order, taken with 1 get() call" in v.to_text()
    assert "s " not in v.to_text().split("\n", 1)[0]


def test_get_inside_the_loop_names_the_line():
    body = ("results = []\n"
            "for x in p.xs:\n"
            "    results.append(hpc.get(slow_square.remote(x)))\n")
    v = run_exercise("fan-out", cell(body))
    text = v.to_text()
    assert text.splitlines()[0] == "exercise fan-out: not yet", text
    # line 1 is %%eugo, the function is lines 2-9, the loop's get() is line 12
    assert "your loop called get() at cell line 12 after each task" in text, text
    assert "the Blocking finding" in text and v.mistake == "blocking-loop"
    assert code_in(text) == [], text


def test_local_loop_without_remote():
    v = run_exercise("fan-out", cell("results = [slow_square(x) for x in p.xs]\n"))
    assert not v.passed
    assert "no slow_square task ran on a worker" in v.to_text()
    assert "slow_square ran 12 times here in the notebook" in v.to_text() and code_in(v.to_text()) == []


def test_wrong_results_and_missing_variable():
    v = run_exercise("fan-out", cell("out = hpc.get([slow_square.remote(x) for x in p.xs])\n"))
    assert not v.passed and "did not define `results`" in v.to_text()
    v = run_exercise("fan-out", cell("results = hpc.get([slow_square.remote(x) for x in p.xs[:11]])\n"))
    assert not v.passed and "is not the 12 squares" in v.to_text()


def test_error_in_the_cell_is_not_yet_naming_it():
    v = run_exercise("fan-out", cell("results = hpc.get([slow_square.remote(x) for x in p.xs])\n1 / 0\n"))
    assert v.to_text().splitlines()[0] == "exercise fan-out: not yet"
    assert "ZeroDivisionError: division by zero" in v.to_text()


def test_registered_with_its_lesson():
    ex = catalog.get("fan-out")
    assert ex.lesson == "01-distributed-python/02-fan-out-without-blocking.ipynb"
    assert ex.title == "Submit all, get once"


def test_on_one_worker_the_replay_decides_and_says_so():
    v = run_exercise("fan-out", cell("futures = [slow_square.remote(x) for x in p.xs]\n"
                                     "results = hpc.get(futures)\n"), line="-w 1 --no-live")
    assert v.passed, v.to_text()
    assert "the replay on 2 workers (this run had 1 worker, so the check uses the replay)" in v.to_text()
    v = run_exercise("fan-out", cell("results = []\nfor x in p.xs:\n"
                                     "    results.append(hpc.get(slow_square.remote(x)))\n"), line="-w 1 --no-live")
    assert not v.passed and "your loop called get() at cell line 12 after each task" in v.to_text(), v.to_text()


SUBMIT = "futures = [slow_square.remote(x) for x in p.xs]\n"
# One row per cell: (id, body after the function, passes, what the verdict must say, the mistake it names).
CELLS = [
    ("reference", SUBMIT + "results = hpc.get(futures)\n", True, "taken with 1 get() call", None),
    ("honest-wait-then-get", "pending = [slow_square.remote(n) for n in p.xs]\n"
     "hpc.wait(pending, num_returns=len(pending))\nresults = [f.result() for f in pending]\n", True,
     "`results` is the 12 values the tasks returned, in submission order, taken with 12 get() calls", None),
    ("mistake-blocking-loop", "results = []\nfor x in p.xs:\n    results.append(hpc.get(slow_square.remote(x)))\n",
     False, "after each task, so 12 tasks ran one at a time", "blocking-loop"),
    ("mistake-local", "results = [slow_square(x) for x in p.xs]\n", False, "no slow_square task ran", "local"),
    ("mistake-too-few", "results = hpc.get([slow_square.remote(x) for x in p.xs[:11]])\n", False,
     "is not the 12 squares", "results"),
    ("shortcut-decoy-tasks", "hpc.get([slow_square.remote(p.xs[0]) for x in p.xs])\n"
     "results = [x * x for x in p.xs]\n", False,
     "`results` was not computed from the tasks' results: 1 of its 12 values are among what the 12 slow_square "
     "tasks returned: the graded value must be what this cell's tasks returned", "decoy"),
    ("shortcut-never-taken", SUBMIT + "results = [x * x for x in p.xs]\n", False,
     "but the cell took only 0 values of theirs with get()", "not-taken"),
    # A wait between submissions, read from the driver's own calls: no Blocking finding (more than one task
    # was out each time), yet the tasks after the wait were not in flight with those before it.
    ("shortcut-two-at-a-time", "results = []\nfor i in range(0, len(p.xs), 2):\n"
     "    results += hpc.get([slow_square.remote(x) for x in p.xs[i:i + 2]])\n", False,
     "the cell waited (get() on 2 futures at cell line 12) when it had submitted only 2 of the 12 slow_square "
     "tasks, and submitted the other 10 after that wait began, so they were never all in flight together.",
     "waited-between"),
    ("shortcut-one-ahead", "nxt = slow_square.remote(p.xs[0])\nresults = []\nfor i in range(len(p.xs)):\n"
     "    cur = nxt\n    if i + 1 < len(p.xs):\n        nxt = slow_square.remote(p.xs[i + 1])\n"
     "    results.append(hpc.get(cur))\n", False,
     "the cell waited (get() on task 1 at cell line 16) when it had submitted only 2 of the 12 slow_square tasks",
     "waited-between"),
    # hpc.map: one call submits every item, whatever window its runtime sends at a time.
    ("honest-map", "results = hpc.get(hpc.map(slow_square, p.xs))\n", True,
     "`results` is the 12 values the tasks returned, in submission order, taken with 1 get() call", None),
    ("honest-map-batch-1", "results = hpc.get(hpc.map(slow_square, p.xs, batch=1))\n", True,
     "taken with 1 get() call", None),
    # Other functions' tasks: the verdict names them, and does not say a loop ran slow_square in the notebook.
    ("shortcut-one-task-for-all", "@hpc.remote\ndef all_squares(xs):\n    time.sleep(0.05 * len(xs))\n"
     "    return [x * x for x in xs]\n\nresults = hpc.get(all_squares.remote(list(p.xs)))\n", False,
     "no slow_square task ran in this cell (only tasks of all_squares)", "local"),
    ("shortcut-decoy-function", "@hpc.remote\ndef decoy(x):\n    time.sleep(0.05)\n    return 0\n\n"
     "hpc.get([decoy.remote(x) for x in p.xs])\nresults = [x * x for x in p.xs]\n", False,
     "no slow_square task ran in this cell (only tasks of decoy)", "local"),
]


@pytest.mark.parametrize("body,passes,says,mistake", [c[1:] for c in CELLS], ids=[c[0] for c in CELLS])
def test_cells(body, passes, says, mistake):
    check_cell("fan-out", cell(body), passes, says, mistake)



def test_the_replay_line_names_the_run_s_workers():
    v = run_exercise("fan-out", cell(SUBMIT + "results = hpc.get(futures)\n"), line="-w 3 --no-live")
    assert v.passed, v.to_text()
    assert "the replay on 3 workers predicts" in v.to_text() and "on 2 workers" not in v.to_text()


def test_a_get_per_task_in_notebook_threads_waits_between_submissions():
    """Each thread submits one task and waits on it: the first wait began before the last submission.

    How many were in flight at once depends on how the threads were scheduled, so the verdict says "never all in
    flight together" only when the record shows it (else what to do instead); the wait itself it always names.
    """
    body = ("import concurrent.futures as cf\nwith cf.ThreadPoolExecutor(len(p.xs)) as ex:\n"
            "    results = list(ex.map(lambda x: hpc.get(slow_square.remote(x)), p.xs))\n")
    v = run_exercise("fan-out", cell(body))
    text = v.to_text()
    assert not v.passed and v.mistake == "waited-between", text
    assert "when it had submitted only " in text and "after that wait began" in text, text
    assert text.count("never all in flight together") + text.count("should come before the first wait") == 1, text
