"""The ``as-completed`` exercise: the reference passes; waiting in submission order and getting all first do not."""

from __future__ import annotations

import pytest
from _exercise_cells import AS_COMPLETED_SETUP, check_cell, code_in, hint_code, run_exercise

from eugo_lab.exercises import problems

SETUP = AS_COMPLETED_SETUP


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
    # How many later results were done meanwhile depends on the machine's timing: the record's count is said.
    assert "the cell called get() at cell line 5 on one future after another in submission order: it waited for " \
           "measurement 1 while " in text and " later results were already done" in text, text
    assert "hpc.as_completed(futures)" in hint_code(v) and code_in(text) == []


def test_getting_all_before_handling():
    v = run_exercise("as-completed", "futures = [measure.remote(ms) for ms in p.ms]\n"
                                     "handled = [handle(r) for r in hpc.get(futures)]\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "took no measure task's value (with get(), result() or await) before the last of the 10 tasks " \
           "finished" in text, text
    assert "none of their results reached the notebook to be handled while the slow one still ran. Its first " \
           "take was get() of 10 futures at cell line 3." in text, text


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
     "handled = [handle(r) for r in hpc.get(futures)]\n", False, "Its first take was get() of 10 futures",
     "all-at-once"),
    ("mistake-some-missing", "futures = [measure.remote(ms) for ms in p.ms]\n"
     "handled = [handle(hpc.get(f)) for f in futures[:5]]\n", False, "does not hold handle's answer", "results"),
    ("shortcut-empty-as-completed-loop", SUBMIT + "for f in hpc.as_completed(futures):\n    pass\n"
     "handled = [handle(r) for r in hpc.get(futures)]\n", False,
     "the cell took no measure task's value (with get(), result() or await) before the last of the 10 "
     "tasks finished, so none of their results reached the notebook to be handled while the slow one still ran. "
     "Its first take was get() of 10 futures at cell line 6. Its as_completed loop took no value itself.",
     "all-at-once"),
    # Serial cells: a wait before every task was submitted, so the tasks never ran side by side. The order
    # of the waits alone would pass (nothing finished sat behind a running one), so the record of the
    # submissions and waits decides.
    ("shortcut-get-after-each-remote", "handled = []\nfor ms in p.ms:\n"
     "    handled.append(handle(hpc.get(measure.remote(ms))))\n", False,
     "the cell waited (get() on measurement 1 at cell line 4) when it had submitted only 1 of the 10 measure "
     "tasks, and submitted the other 9 after that wait began", "submit-first"),
    ("shortcut-slow-one-alone-first", "handled = []\nfirst = measure.remote(p.ms[0])\n"
     "handled.append(handle(hpc.get(first)))\n"
     "for f in hpc.as_completed([measure.remote(ms) for ms in p.ms[1:]]):\n    handled.append(handle(hpc.get(f)))\n",
     False, "the cell waited (get() on measurement 1 at cell line 4) when it had submitted only 1 of the 10 "
     "measure tasks, and submitted the other 9 after that wait began", "submit-first"),
    ("shortcut-slow-one-held-back", "small = [measure.remote(ms) for ms in p.ms[1:]]\nhandled = []\n"
     "for f in hpc.as_completed(small):\n    handled.append(handle(hpc.get(f)))\n"
     "handled.append(handle(hpc.get(measure.remote(p.ms[0]))))\n", False,
     "the cell waited (as_completed() that yielded measurement ",
     "submit-first"),
    ("shortcut-slow-one-held-back-count", "small = [measure.remote(ms) for ms in p.ms[1:]]\nhandled = []\n"
     "for f in hpc.as_completed(small):\n    handled.append(handle(hpc.get(f)))\n"
     "handled.append(handle(hpc.get(measure.remote(p.ms[0]))))\n", False,
     "at cell line 4) when it had submitted only 9 of the 10 measure tasks, and submitted the other 1 after that "
     "wait began", "submit-first"),
    ("shortcut-serial-slow-one-last", "handled = []\nslow = max(range(len(p.ms)), key=lambda i: p.ms[i])\n"
     "for i, ms in enumerate(p.ms):\n    if i != slow:\n        handled.append(handle(hpc.get(measure.remote(ms))))\n"
     "handled.append(handle(hpc.get(measure.remote(p.ms[slow]))))\n", False,
     "the cell waited (get() on measurement 1 at cell line 6) when it had submitted only 1 of the 10 measure "
     "tasks, and submitted the other 9 after that wait began", "submit-first"),
    ("shortcut-other-task", "@hpc.remote\ndef quick(ms):\n    return ms\n\n"
     "futures = [quick.remote(ms) for ms in p.ms]\nhandled = []\nfor f in futures:\n"
     "    handled.append(handle(hpc.get(f)))\n", False,
     "no measure task ran in this cell (only tasks of quick)", "local"),
    # hpc.wait, then one get() of the list of done futures: a get of finished futures waits on nothing.
    ("honest-wait-then-get-the-done-list", "pending = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
     "while pending:\n    done, pending = hpc.wait(pending, num_returns=1)\n"
     "    handled.extend(handle(v) for v in hpc.get(done))\n", True,
     "results taken in completion order by hpc.wait", None),
    ("shortcut-decoy-tasks", "futures = [measure.remote(p.ms[1]) for ms in p.ms]\n"
     "for f in hpc.as_completed(futures):\n    hpc.get(f)\nhandled = [ms + 1 for ms in p.ms]\n", False,
     "`handled` was not computed from the tasks' results: 1 of its 10 values are handle() of one of the 10 values "
     "the measure tasks returned", "decoy"),
    ("shortcut-never-taken", SUBMIT + "handled = [handle(ms) for ms in p.ms]\n", False,
     "but the cell never took a measure task's value with get()", "not-taken"),
    # Orders of the learner's own choosing, not the order the tasks finish in: the runtime's record of
    # which future each wait was on, and when each result arrived, shows a finished result left waiting.
    ("shortcut-wait-each-in-order", SUBMIT + "for f in futures:\n    hpc.wait([f])\n"
     "    handled.append(handle(hpc.get(f)))\n", False,
     "the cell waited for measurement 1 (the slowest), with a wait() on it alone at cell line 5, while "
     "measurement", "held-up"),
    ("shortcut-poll-done-in-order", SUBMIT + "for f in futures:\n    while not f.done():\n        pass\n"
     "    handled.append(handle(hpc.get(f)))\n", False,
     "the cell waited for measurement 1 (the slowest), calling done() on it until it said True at cell line 5, "
     "while measurement", "held-up"),
    ("shortcut-reversed", SUBMIT + "for f in reversed(futures):\n    handled.append(handle(hpc.get(f)))\n", False,
     "taking its value with get() or result() at cell line 5, while measurement", "held-up"),
    # Sorting by the inputs uses the known durations, not completion: on 2 workers the short ones finish in
    # the order they were submitted, which is not the order of their durations.
    ("shortcut-sorted-by-duration", SUBMIT + "for ms, f in sorted(zip(p.ms, futures)):\n"
     "    handled.append(handle(hpc.get(f)))\n", False,
     "not the order the tasks finished in, so finished results waited unhandled behind a running one", "held-up"),
    # measure redefined without its sleep: every task returns at once, so any order "matches" completion
    ("shortcut-measure-without-the-measurement", "@hpc.remote\ndef measure(ms):\n    return ms\n\n" + SUBMIT
     + "for f in hpc.as_completed(futures):\n    handled.append(handle(hpc.get(f)))\n", False,
     "finished in less time than the measurements in p.ms take", "not-the-work"),
    ("honest-as-completed-result", SUBMIT + "for f in hpc.as_completed(futures):\n"
     "    handled.append(handle(f.result()))\n", True, "results taken in completion order by hpc.as_completed",
     None),
    ("honest-helper", "def handle_as_they_finish(fs):\n    out = []\n    for f in hpc.as_completed(fs):\n"
     "        out.append(handle(hpc.get(f)))\n    return out\n\n"
     "handled = handle_as_they_finish([measure.remote(ms) for ms in p.ms])\n", True,
     "results taken in completion order by hpc.as_completed", None),
]


@pytest.mark.parametrize("cell,passes,says,mistake", [c[1:] for c in CELLS], ids=[c[0] for c in CELLS])
def test_cells(cell, passes, says, mistake):
    check_cell("as-completed", cell, passes, says, mistake, setup=SETUP)


def test_a_wait_made_by_a_library_is_not_given_as_a_line_of_the_cell():
    """get() called by a thread pool is recorded at the pool's line: the verdict says it is outside the cell."""
    v = run_exercise("as-completed", "import concurrent.futures as cf\n" + SUBMIT
                     + "with cf.ThreadPoolExecutor(len(futures)) as ex:\n    vals = list(ex.map(hpc.get, futures))\n"
                       "handled = [handle(x) for x in vals]\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed and "in code outside the cell (thread.py:" in text, text
    assert " at thread.py" not in text and code_in("\n".join(v.lines[:-1])) == [], text


# -- the recorded order, on built traces: what measure.held_up reads ------------------------------------------
def _four(waits):
    """Four measure tasks submitted at 0 (task 1 slow, received at 0.4; 2-4 at 0.1, 0.2, 0.3), and ``waits``:
    ``(kind, start, end, task[, futures])`` blocks of the driver."""
    from trace_builder import TraceBuilder

    b = TraceBuilder()
    for tid, end in ((1, 0.4), (2, 0.1), (3, 0.2), (4, 0.3)):
        b.task("measure", start=0.0, end=end, submit=0.0, received=end, task_id=tid, worker=0 if tid == 1 else 1)
    for kind, start, end, task, *futures in waits:  # a 5th element: how many futures the call was on
        b.block(start, end, kind=kind, task=task, source="/tmp/cell.py:4", futures=futures[0] if futures else 1)
    return b.build()


def test_held_up_names_the_wait_on_a_running_task_while_earlier_finished_ones_sat():
    from eugo_lab.exercises import measure

    in_order = _four([("get", 0.01, 0.4, 1), ("get", 0.41, 0.41, 2), ("get", 0.42, 0.42, 3), ("get", 0.43, 0.43, 4)])
    held = measure.held_up(in_order, "measure")
    assert held == measure.HeldUp(waited_on=1, kind="get", source="cell.py:4", finished=(2, 3, 4), slowest=True)
    polled = _four([("done", 0.01, 0.4, 1), ("get", 0.41, 0.41, 1), ("get", 0.42, 0.42, 2)])
    assert measure.held_up(polled, "measure").kind == "done"
    # Reversed: waits on 4 (finished at 0.3) while 2 and 3 had finished; 1 was still running then.
    backwards = _four([("get", 0.01, 0.3, 4), ("get", 0.31, 0.31, 3), ("get", 0.32, 0.32, 2), ("get", 0.33, 0.4, 1)])
    held = measure.held_up(backwards, "measure")
    assert (held.waited_on, held.finished, held.slowest) == (4, (2, 3), False)


def test_held_up_is_none_in_completion_order_for_ties_and_for_results_already_taken():
    from eugo_lab.exercises import measure

    as_finished = _four([("as_completed", 0.01, 0.1, 2), ("get", 0.1, 0.1, 2), ("as_completed", 0.12, 0.2, 3),
                         ("get", 0.2, 0.2, 3), ("as_completed", 0.22, 0.3, 4), ("get", 0.3, 0.3, 4),
                         ("as_completed", 0.32, 0.4, 1), ("get", 0.4, 0.4, 1)])
    assert measure.held_up(as_finished, "measure") is None
    # Each taken before the next wait began, the last waited on by a get(): nothing sat finished meanwhile.
    taken_first = _four([("get", 0.01, 0.1, 2), ("get", 0.11, 0.2, 3), ("get", 0.21, 0.3, 4), ("get", 0.31, 0.4, 1)])
    assert measure.held_up(taken_first, "measure") is None
    # A wait on several futures (hpc.wait of the pending ones) waits on none in particular.
    many = _four([("wait", 0.01, 0.1, -1), ("get", 0.1, 0.1, 2), ("wait", 0.11, 0.2, -1), ("get", 0.2, 0.2, 3),
                  ("wait", 0.21, 0.3, -1), ("get", 0.3, 0.3, 4), ("wait", 0.31, 0.4, -1), ("get", 0.4, 0.4, 1)])
    assert measure.held_up(many, "measure") is None
    # A wait on 1 that timed out before any other finished held nothing back; the loop then took them as they came.
    timed_out = _four([("wait", 0.01, 0.05, 1), ("as_completed", 0.05, 0.1, 2), ("get", 0.1, 0.1, 2),
                       ("as_completed", 0.12, 0.2, 3), ("get", 0.2, 0.2, 3), ("as_completed", 0.22, 0.3, 4),
                       ("get", 0.3, 0.3, 4), ("as_completed", 0.32, 0.4, 1), ("get", 0.4, 0.4, 1)])
    assert measure.held_up(timed_out, "measure") is None
    # Within a tie (a fraction of the typical gap between finishes), which finished first is the machine's timing.
    from trace_builder import TraceBuilder

    b = TraceBuilder()
    for tid, end in ((1, 0.100), (2, 0.101), (3, 0.2), (4, 0.3)):
        b.task("measure", start=0.0, end=end, submit=0.0, received=end, task_id=tid)
    for start, end, task in ((0.01, 0.101, 2), (0.102, 0.102, 1), (0.11, 0.2, 3), (0.21, 0.3, 4)):
        b.block(start, end, task=task)
    assert measure.held_up(b.build(), "measure") is None


def test_spans_writes_runs_as_ranges():
    from eugo_lab.exercises import measure

    assert measure.spans((2, 3, 4, 5, 6, 7, 8, 9, 10)) == "2-10"
    assert measure.spans([9, 2, 4, 5, 6]) == "2, 4-6 and 9"
    assert measure.spans((3, 4)) == "3 and 4"
    assert measure.spans((7,)) == "7" and measure.spans((1, 3, 4, 6)) == "1, 3, 4 and 6"


def test_the_hidden_case_makes_a_measurement_slow_where_neither_its_place_nor_p_ms_tell():
    from eugo_lab.exercises.catalog import as_completed

    cases = [problems.make("as-completed", seed, hidden=True) for seed in range(1, 80)]
    held = [p.held_result() for p in cases]
    assert {h[1] for h in held} == set(range(as_completed.HIDDEN_N)), held  # any place
    for p, (function, n, seconds) in zip(cases, held):
        assert function == "measure" and round(seconds * 1000) in as_completed.HIDDEN_SLOW_MS
        assert len(p.ms) == as_completed.HIDDEN_N and set(p.ms) <= set(as_completed.HIDDEN_SHORT_MS)
        assert p.ms[n] != max(p.ms)  # never the longest input: sorting by p.ms does not put it last
        assert "_held" not in p.to_text() and "held" not in dict(p.fields())  # not an input the cell sees
    assert problems.lesson_case("as-completed").held_result() is None


def test_a_get_of_several_done_futures_covers_the_ones_finished_by_its_end():
    """hpc.wait then hpc.get(done): the get() names no task, but it took its count of futures finished by then."""
    from eugo_lab.exercises import measure

    # 2 and 3 finish, one get() of 2 futures takes them, then 4, then the loop's last wait is on 1 alone.
    waited = _four([("wait", 0.01, 0.2, -1, 4), ("get", 0.2, 0.2, -1, 2), ("wait", 0.21, 0.3, -1, 2),
                    ("get", 0.3, 0.3, 4), ("wait", 0.31, 0.4, 1), ("get", 0.4, 0.4, 1)])
    assert measure.held_up(waited, "measure") is None
    # Without that get() of 2, the same last wait on 1 is held up behind 2 and 3.
    untaken = _four([("wait", 0.01, 0.2, -1, 4), ("wait", 0.21, 0.3, -1, 2), ("get", 0.3, 0.3, 4),
                     ("wait", 0.31, 0.4, 1), ("get", 0.4, 0.4, 1)])
    assert measure.held_up(untaken, "measure").finished == (2, 3)
    # A get() of 2 futures covers 2 at most, and only ones finished by its end: 3 and 4 still sat untaken.
    short = _four([("get", 0.1, 0.1, -1, 2), ("get", 0.35, 0.4, 1)])
    assert measure.held_up(short, "measure").finished == (3, 4)
    assert measure.uncovered([2, 3, 4], {2: 0.1, 3: 0.2, 4: 0.3}, [(0.25, 5)], 0.0) == [4]
    assert measure.uncovered([2, 3, 4], {2: 0.1, 3: 0.2, 4: 0.3}, [(0.35, 2)], 0.0) == [4]


def _submitted(tasks, waits):
    """``measure`` tasks ``(task id, submit, batch)`` (start/end after submit) and driver ``(kind, start, task)``."""
    from trace_builder import TraceBuilder

    b = TraceBuilder()
    for tid, submit, batch in tasks:
        b.task("measure", start=submit + 0.01, end=submit + 0.05, submit=submit, task_id=tid, batch=batch)
    for kind, start, task in waits:
        b.block(start, start + 0.05, kind=kind, task=task, source="/tmp/cell.py:6")
    return b.build()


def test_a_wait_between_submissions_is_read_from_the_driver_s_calls():
    from eugo_lab.exercises import measure

    # get() right after each .remote(): the first wait began after 1 of 3 submissions.
    serial = _submitted([(1, 0.0, -1), (2, 0.1, -1), (3, 0.2, -1)], [("get", 0.01, 1), ("get", 0.11, 2)])
    assert measure.wait_between_submissions(serial, "measure") == measure.WaitBetween(
        kind="get", futures=1, source="cell.py:6", task=1, submitted=1, total=3)
    # All submitted, then the waits: none between.
    fanned = _submitted([(1, 0.0, -1), (2, 0.001, -1), (3, 0.002, -1)], [("get", 0.01, 1), ("get", 0.06, 2)])
    assert measure.wait_between_submissions(fanned, "measure") is None
    # hpc.map: items 1-4 (consecutive ids, batch tasks 5-8) sent 2 at a time while the driver waits in one get():
    # the driver made one call, so its items count as submitted at the first send.
    mapped = _submitted([(1, 0.0, 5), (2, 0.0, 6), (3, 0.06, 7), (4, 0.07, 8)], [("get", 0.001, -1)])
    assert measure.driver_submits(mapped, "measure") == dict.fromkeys((1, 2, 3, 4), 1000.0)  # T0 + 0
    assert measure.wait_between_submissions(mapped, "measure") is None
    # Two maps with a get() between them: the second's ids start after the first's batch ids, so it is a call
    # of its own, made after that wait.
    two = _submitted([(1, 0.0, 3), (2, 0.0, 4), (5, 0.2, 7), (6, 0.2, 8)], [("get", 0.001, -1)])
    assert measure.wait_between_submissions(two, "measure").submitted == 2


def test_where_keeps_a_library_s_line_apart_from_the_cell_s():
    from eugo_lab.exercises import measure

    assert measure.where("cell line 5") == " at cell line 5"
    assert measure.where("thread.py:58") == " in code outside the cell (thread.py:58)"


def test_values_taken_before_the_last_result_count_a_get_of_the_done_list():
    """hpc.get(done) of 2 finished futures before the last result came took results while one still ran."""
    from eugo_lab.exercises import measure

    waited = _four([("wait", 0.01, 0.2, -1, 4), ("get", 0.2, 0.2, -1, 2), ("wait", 0.21, 0.3, -1, 2),
                    ("get", 0.3, 0.3, -1, 1), ("wait", 0.31, 0.4, 1), ("get", 0.4, 0.4, 1)])
    last = measure.last_received(waited, "measure")
    assert measure.values_taken_before(waited, last) == 3 and measure.taken_singly_before(waited, last) == 1
    # One get() of all four returns with the last result, never before it.
    at_once = _four([("get", 0.01, 0.4, -1, 4)])
    assert measure.values_taken_before(at_once, measure.last_received(at_once, "measure")) == 0
