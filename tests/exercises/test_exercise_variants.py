"""The checker owns the problem, and a passing cell is run again on a hidden case (``exercises.problems``).

For each converted exercise, through the real ``%%eugo --exercise`` magic: the reference passes
and says it was checked on a second case; a cell that types in the lesson's answer (or its
inputs) while using the taught technique passes the lesson's case but not the hidden one, with
the "did not carry over" message and nothing of the hidden case in it; an honest solution that
differs from the reference (other names, a helper function) passes. The hidden case's seed is
fixed here (``problems.draw_seed``) so the test knows what must not be shown.
"""

from __future__ import annotations

import pytest
from _exercise_cells import AS_COMPLETED_SETUP, BATCHING_SETUP, code_in, hint_code, hint_words, run_exercise, shell
from _variants import carried_over, hidden, lesson, never_shown, passed_twice

from eugo_lab import hpc
from eugo_lab.exercises import catalog, problems

pytestmark = pytest.mark.usefixtures("hidden_seed")  # every hidden case here is made from _variants.SEED

# -- first-task -------------------------------------------------------------------------------------------------
PI = """
import random
from eugo_lab import exercises, hpc

@hpc.remote
def estimate_pi(seed, n=1_500_000):
    rng = random.Random(seed)
    inside = 0
    for _ in range(n):
        x, y = rng.random(), rng.random()
        inside += x * x + y * y <= 1.0
    return 4 * inside / n

p = exercises.problem("first-task")
"""


def _pi(seed: int, n: int) -> float:
    import random

    rng = random.Random(seed)
    inside = sum(rng.random() ** 2 + rng.random() ** 2 <= 1.0 for _ in range(n))
    return 4 * inside / n


def test_first_task_reference_passes_on_both_cases():
    passed_twice(run_exercise("first-task", "future = estimate_pi.remote(p.seed, p.darts)\nresult = hpc.get(future)\n",
                              setup=PI))


def first_task_not_on_hidden(v, mistake: str, said: str) -> str:
    """Check first-task's ``not yet`` of the hidden case: what its checker found there, in words; returns the text."""
    text = v.to_text()
    assert text.splitlines()[0] == "exercise first-task: not yet", text
    assert "met the criteria on the lesson's inputs, but not on a second case the checker made with other inputs " \
           f"of the same kind (it ran your cell again on them, out of sight): there {said}" in text, text
    assert v.mistake == mistake, text
    assert code_in("\n".join(v.lines[:-1])) == [], text
    assert "p.seed" in hint_words(v) and "exercises.problem(" in hint_code(v) or mistake != problems.CARRY_OVER
    return text


LESSON_ANSWER_KEPT = ("`result` held the lesson's answer again, not the estimate for the inputs handed out there, so "
                      "your answer did not carry over")


def test_first_task_typed_answer_does_not_carry_over():
    p, h = lesson("first-task"), hidden("first-task")
    typed = _pi(p.seed, p.darts)
    # The answer typed in beside a task is not even the lesson's pass: it is not the object get() handed over.
    v = run_exercise("first-task", f"hpc.get(estimate_pi.remote(p.seed, p.darts))\nresult = {typed!r}\n", setup=PI)
    assert not v.passed and "it is not the value get() or result() handed over" in v.to_text(), v.to_text()
    never_shown(v.to_text(), h.seed, h.darts, _pi(h.seed, h.darts))
    # the inputs typed in instead of the answer: the lesson's case passes, the hidden one does not
    v = run_exercise("first-task", f"result = hpc.get(estimate_pi.remote({p.seed}, {p.darts}))\n", setup=PI)
    never_shown(first_task_not_on_hidden(v, problems.CARRY_OVER, LESSON_ANSWER_KEPT), h.seed, h.darts)
    # the function's own default darts instead of p.darts: not the lesson's answer there, nor the hidden one's
    v = run_exercise("first-task", "result = hpc.get(estimate_pi.remote(p.seed))\n", setup=PI.replace(
        "n=1_500_000", f"n={p.darts}"))
    text = first_task_not_on_hidden(v, "wrong-seed", "`result` was not what the lesson's estimate_pi returns for the "
                                                     "seed and darts `p` handed out there, although the cell's "
                                                     "estimate_pi returns the lesson's estimate for them")
    never_shown(text, h.seed, h.darts)
    assert "written into the cell instead of" not in text


def test_first_task_inputs_left_by_an_earlier_cell_are_not_called_typed_in():
    # Nothing is typed into this cell: its seed and darts come from an earlier one. Such a cell was told "a value is
    # written into the cell"; now it is told what the checker found there, the lesson's answer kept.
    p, h = lesson("first-task"), hidden("first-task")
    v = run_exercise("first-task", "result = hpc.get(estimate_pi.remote(seed, darts))\n",
                     setup=PI + f"seed, darts = {p.seed}, {p.darts}\n")
    text = first_task_not_on_hidden(v, problems.CARRY_OVER, LESSON_ANSWER_KEPT)
    assert "a value is written into the cell" not in text
    never_shown(text, h.seed, h.darts, _pi(h.seed, h.darts))


def test_first_task_honest_variant_passes():
    cell = "seed, darts = p.seed, p.darts\njob = estimate_pi.remote(seed=seed, n=darts)\nhpc.wait([job])\n" \
           "result = job.result()\n"
    passed_twice(run_exercise("first-task", cell, setup=PI))


# Honest cells an attacker who read only the lesson wrote: each passes on both cases.
FIRST_TASK_HONEST = [
    ("renamed-task", "fut = estimate_pi.options(name='pi_task').remote(p.seed, p.darts)\n"
                     "done, pending = hpc.wait([fut])\nresult = hpc.get(done[0])\n"),
    ("wrapper-task", "@hpc.remote\ndef pi_job(seed, darts):\n    return estimate_pi(seed, darts)\n"
                     "result = hpc.get(pi_job.remote(p.seed, p.darts))\n"),
    ("dict-of-futures", "result = hpc.get({'pi': estimate_pi.remote(seed=p.seed, n=p.darts)})['pi']\n"),
    ("retries-option", "result = hpc.get(estimate_pi.options(retries=1).remote(p.seed, p.darts))\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in FIRST_TASK_HONEST], ids=[i for i, _ in FIRST_TASK_HONEST])
def test_first_task_honest_cells_pass_on_both_cases(cell):
    passed_twice(run_exercise("first-task", cell, setup=PI))


# -- fan-out ----------------------------------------------------------------------------------------------------
SQUARE = """
import time
from eugo_lab import exercises, hpc

p = exercises.problem("fan-out")

@hpc.remote
def slow_square(x):
    time.sleep(0.05)
    return x * x
"""


def test_fan_out_reference_passes_on_both_cases():
    text = passed_twice(run_exercise("fan-out", "futures = [slow_square.remote(x) for x in p.xs]\n"
                                                "results = hpc.get(futures)\n", setup=SQUARE))
    assert "all 12 slow_square tasks were submitted" in text


def test_fan_out_typed_answer_does_not_carry_over():
    p, h = lesson("fan-out"), hidden("fan-out")
    # The squares typed in beside the tasks fail on the lesson's case: they are not the objects get() handed over.
    v = run_exercise("fan-out", f"hpc.get([slow_square.remote(x) for x in p.xs])\nresults = {[x * x for x in p.xs]}\n",
                     setup=SQUARE)
    assert not v.passed and "12 of the 12 items checked are not values a get()" in v.to_text(), v.to_text()
    answer = [x * x for x in h.xs]
    never_shown(v.to_text(), answer, h.xs, *answer, len(h.xs))
    v = run_exercise("fan-out", f"results = hpc.get([slow_square.remote(x) for x in {list(p.xs)}])\n", setup=SQUARE)
    carried_over(v)


@pytest.mark.parametrize("batch", ["", ", batch=1"], ids=["auto", "batch-1"])
def test_fan_out_hpc_map_passes_on_both_cases(batch):
    """One hpc.map call submits every item; how many its runtime sends at a time is not the cell waiting."""
    text = passed_twice(run_exercise("fan-out", f"results = hpc.get(hpc.map(slow_square, p.xs{batch}))\n",
                                     setup=SQUARE))
    assert "the cell submitted all 12 slow_square tasks before it first waited" in text or \
           "all 12 slow_square tasks were submitted before the first of them came back" in text, text


def test_fan_out_honest_helper_passes():
    cell = ("def square_all(fn, values):\n    pending = [fn.remote(v) for v in values]\n    return hpc.get(pending)\n\n"
            "results = square_all(slow_square, p.xs)\n")
    passed_twice(run_exercise("fan-out", cell, setup=SQUARE))


# -- as-completed -----------------------------------------------------------------------------------------------
MEASURE = AS_COMPLETED_SETUP
AS_COMPLETED = ("futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
                "for f in hpc.as_completed(futures):\n    handled.append(handle(hpc.get(f)))\n")


def test_as_completed_reference_passes_on_both_cases():
    passed_twice(run_exercise("as-completed", AS_COMPLETED, setup=MEASURE))


def test_as_completed_typed_inputs_do_not_carry_over():
    p, h = lesson("as-completed"), hidden("as-completed")
    v = run_exercise("as-completed", AS_COMPLETED.replace("p.ms", repr(list(p.ms))), setup=MEASURE)
    never_shown(carried_over(v), *h.ms, *(m + 1 for m in h.ms))
    # The answers typed in beside the loop fail on the lesson's case: they are not what handle returned.
    typed = sorted(m + 1 for m in p.ms)
    v = run_exercise("as-completed", "futures = [measure.remote(ms) for ms in p.ms]\n"
                                     "for f in hpc.as_completed(futures):\n    handle(hpc.get(f))\n"
                                     f"handled = {typed}\n", setup=MEASURE)
    assert not v.passed and "10 of the 10 items checked are not values handle returned" in v.to_text(), v.to_text()
    never_shown(v.to_text(), *h.ms, *(m + 1 for m in h.ms))


def test_as_completed_honest_wait_loop_passes():
    cell = ("pending = [measure.remote(t) for t in p.ms]\nhandled = []\nwhile pending:\n"
            "    done, pending = hpc.wait(pending, num_returns=1)\n"
            "    for f in done:\n        handled.append(handle(f.result()))\n")
    passed_twice(run_exercise("as-completed", cell, setup=MEASURE))


@pytest.mark.parametrize("loop", [
    "    done, pending = hpc.wait(pending, num_returns=1)\n    handled.extend(handle(v) for v in hpc.get(done))\n",
    "    done, pending = hpc.wait(pending)\n    for v in hpc.get(done):\n        handled.append(handle(v))\n",
], ids=["extend", "for"])
def test_as_completed_wait_loop_that_gets_the_done_list_passes(loop):
    """hpc.wait, then one get() of the futures it said were done: that get() waits on nothing, on either case.

    On the hidden case two measurements can finish together, so a wait returns both and the get() takes
    them in one call; the loop's last wait is then on the one future left, and must not be read as
    waiting on it while those two sat untaken.
    """
    cell = "pending = [measure.remote(ms) for ms in p.ms]\nhandled = []\nwhile pending:\n" + loop
    passed_twice(run_exercise("as-completed", cell, setup=MEASURE))


def test_as_completed_submission_order_on_the_hidden_case_is_named_not_blamed_on_a_typed_value():
    """A measure with no sleep taken in submission order: its tasks take none of their measurements' time (said at
    once, on the lesson's case), or the hidden case holds a result back; either way the verdict says what the cell
    did, not that a value was typed in."""
    cell = ("@hpc.remote\ndef measure(ms):\n    return ms\n\nfutures = [measure.remote(ms) for ms in p.ms]\n"
            "handled = []\nfor f in futures:\n    handled.append(handle(hpc.get(f)))\n")
    v = run_exercise("as-completed", cell, setup=MEASURE)
    text = v.to_text()
    h = hidden("as-completed")
    assert not v.passed and v.mistake in ("not-the-work", "held-up", "submission-order"), text
    assert "a value is written into the cell" not in text and code_in("\n".join(v.lines[:-1])) == [], text
    never_shown(text, *h.ms, *(m + 1 for m in h.ms))


def test_as_completed_honest_result_and_helper_pass():
    cell = ("futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
            "for f in hpc.as_completed(futures):\n    handled.append(handle(f.result()))\n")
    passed_twice(run_exercise("as-completed", cell, setup=MEASURE))
    cell = ("def as_they_finish(fs):\n    out = []\n    for f in hpc.as_completed(fs):\n"
            "        out.append(handle(hpc.get(f)))\n    return out\n\n"
            "handled = as_they_finish([measure.remote(ms) for ms in p.ms])\n")
    passed_twice(run_exercise("as-completed", cell, setup=MEASURE))


def test_as_completed_order_fitted_to_the_lessons_slow_first_measurement_does_not_pass():
    """Taking the first future last matches the lesson's finish order (its slow one is first), not the hidden one's."""
    h = hidden("as-completed")
    assert h.held_result()[1] != 0  # this seed makes another than the first slow
    cell = ("futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
            "for f in futures[1:] + futures[:1]:\n    handled.append(handle(hpc.get(f)))\n")
    v = run_exercise("as-completed", cell, setup=MEASURE)
    text = v.to_text()
    # On the lesson's case it usually passes (the pool may also queue a short one behind the slow one there:
    # then the lesson's own run names the wait); on the hidden case the loop waits on the slow one.
    assert not v.passed and v.mistake == "held-up", text
    assert "the cell waited for" in text and "a value is written into the cell" not in text, text
    assert code_in(text) == [], text
    never_shown(text, *h.ms, *(m + 1 for m in h.ms))


# -- put --------------------------------------------------------------------------------------------------------
CHUNKS = """
from eugo_lab import exercises, hpc

p = exercises.problem("put")

@hpc.remote
def chunk_sum(arr, i):
    return float(arr[i::8].sum())
"""


def test_put_reference_passes_on_both_cases():
    passed_twice(run_exercise("put", "ref = hpc.put(p.data)\n"
                                     "total = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))\n",
                              setup=CHUNKS))


def test_put_typed_total_does_not_carry_over():
    p, h = lesson("put"), hidden("put")
    typed = sum(float(p.data[i::8].sum()) for i in range(8))
    v = run_exercise("put", "ref = hpc.put(p.data)\nhpc.get([chunk_sum.remote(ref, i) for i in range(8)])\n"
                            f"total = {typed!r}\n", setup=CHUNKS)
    answer = sum(float(h.data[i::8].sum()) for i in range(8))
    never_shown(carried_over(v), answer, f"{answer:.6g}", h.data.size, f"{h.data.size:,}")


def test_put_honest_keyword_loop_passes():
    cell = ("shared = hpc.put(p.data)\nparts = []\nfor k in range(8):\n"
            "    parts.append(chunk_sum.remote(arr=shared, i=k))\ntotal = 0.0\nfor part in hpc.get(parts):\n"
            "    total += part\n")
    passed_twice(run_exercise("put", cell, setup=CHUNKS))


# -- batching ---------------------------------------------------------------------------------------------------
SCORE = BATCHING_SETUP


def test_batching_reference_passes_on_both_cases():
    passed_twice(run_exercise("batching", "results = hpc.get(hpc.map(score, p.items))\n", setup=SCORE))


def test_batching_typed_inputs_do_not_carry_over():
    p, h = lesson("batching"), hidden("batching")
    v = run_exercise("batching", f"results = hpc.get(hpc.map(score, {list(p.items)}))\n", setup=SCORE)
    never_shown(carried_over(v), len(h.items), f"{len(h.items):,}", *h.items[:5])


def test_batching_fixed_batch_size_for_the_lesson_s_count_does_not_carry_over():
    # 700 items per batch: 5 batches of the lesson's 3,000 (enough for 2 workers), 2 of the hidden 1,200-1,500.
    v = run_exercise("batching", "results = hpc.get(hpc.map(score, p.items, batch=700))\n", setup=SCORE)
    carried_over(v)


def test_batching_honest_batch_size_from_the_inputs_passes():
    cell = "size = max(10, len(p.items) // 16)\nscored = hpc.map(score, list(p.items), batch=size)\n" \
           "results = list(hpc.get(scored))\n"
    passed_twice(run_exercise("batching", cell, setup=SCORE))


# -- the mechanism ----------------------------------------------------------------------------------------------
def test_the_namespace_after_the_cell_is_the_first_run_s(capsys):
    p = lesson("fan-out")
    v = run_exercise("fan-out", "print('squaring', len(p.xs))\nfutures = [slow_square.remote(x) for x in p.xs]\n"
                                "results = hpc.get(futures)\n", setup=SQUARE)
    passed_twice(v)
    ns = shell().user_ns
    assert ns["results"] == [x * x for x in p.xs]
    assert ns["p"] is problems.problem("fan-out") and ns["p"].xs == p.xs  # the handed-out object, not the hidden one
    assert len(ns["futures"]) == len(p.xs)
    assert len(hpc.last_trace().tasks["task_id"]) == len(p.xs)  # the first run's trace, not the hidden one's
    out = capsys.readouterr().out
    assert out.count("squaring") == 1 and "squaring 12" in out  # the hidden run prints nothing


def test_a_cell_that_takes_its_own_inputs_gets_the_hidden_case_there():
    cell = "from eugo_lab import exercises\nq = exercises.problem('fan-out')\n" \
           "results = hpc.get([slow_square.remote(x) for x in q.xs])\n"
    passed_twice(run_exercise("fan-out", cell, setup=SQUARE))
    assert shell().user_ns["q"] is problems.problem("fan-out")


def test_the_hidden_run_s_error_is_named_by_its_type_only():
    p = lesson("fan-out")
    # Indexes 0..11 exist in the lesson's 12 inputs, not in the hidden case's 4 or 6.
    cell = f"results = hpc.get([slow_square.remote(p.xs[i]) for i in range({len(p.xs)})])\n"
    text = carried_over(run_exercise("fan-out", cell, setup=SQUARE))
    assert "there it stopped with IndexError, so your answer did not carry over" in text
    assert "out of range" not in text


def test_the_reference_solution_goes_through_the_same_path():
    ip = shell()
    ip.run_cell(SQUARE)
    ip.run_cell("%%eugo --exercise fan-out --solution -w 2 --no-live\n"
                f"results = hpc.get([slow_square.remote(x) for x in {list(lesson('fan-out').xs)}])\n")
    from eugo_lab.exercises import last_verdict

    v = last_verdict()
    assert v.reference and not v.passed and v.mistake == problems.CARRY_OVER, v.to_text()
    assert v.to_text().startswith("Reference solution for fan-out: not yet — this run does not count"), v.to_text()


# The exercises whose cell still defines its own inputs (no hidden case): none; a new exercise declares its problem.
OWN_INPUTS: set[str] = set()


def test_every_exercise_but_the_listed_declares_its_problem():
    without = {i for i in catalog.ids() if problems.declared(i) is None}
    assert without == OWN_INPUTS, f"declared now (drop from OWN_INPUTS): {sorted(OWN_INPUTS - without)}; " \
                                  f"new without a problem: {sorted(without - OWN_INPUTS)}"


@pytest.mark.parametrize("exercise_id", sorted(set(catalog.ids()) - OWN_INPUTS))
def test_each_problem_is_declared_with_its_hint_and_a_hidden_case_of_other_inputs(exercise_id):
    ex = catalog.get(exercise_id)
    assert problems.declared(exercise_id) is not None
    assert problems.CARRY_OVER in ex.hints
    a, b = problems.lesson_case(exercise_id), problems.lesson_case(exercise_id)
    assert a.to_text() == b.to_text()  # the lesson's case is the same in every run
    assert problems.problem(exercise_id) is problems.problem(exercise_id)  # handed out once per kernel
    for seed in range(1, 13):  # (a hidden DataFrame costs ~0.25 s)
        h = problems.make(exercise_id, seed, hidden=True)
        assert h.to_text() == problems.make(exercise_id, seed, hidden=True).to_text()
        assert h.to_text() != a.to_text()


def test_a_problem_shows_as_short_deterministic_text_and_escaped_html(monkeypatch):
    p = lesson("batching")
    assert p.to_text().startswith("inputs of exercise batching (handed out by the checker): items = (")
    assert "(3,000 in all)" in p.to_text() and len(p.to_text()) < 200
    assert "16 MB" in lesson("put").to_text()
    assert "<b>batching</b>" in p.to_html()
    monkeypatch.delitem(problems._DECLARED, "put")  # an exercise of a plug-in that declares no problem
    with pytest.raises(ValueError, match="hands out no inputs"):
        problems.problem("put")


def test_a_problem_s_array_cannot_be_changed_in_place():
    with pytest.raises(ValueError):
        problems.problem("put").data[0] = 1.0


def test_a_name_an_earlier_cell_bound_to_an_input_of_p_gets_the_hidden_case_s():
    # `data = p.data` in an earlier cell: the very array of the handed-out problem, so the hidden run gets its own.
    v = run_exercise("put", "ref = hpc.put(data)\ntotal = sum(hpc.get([chunk_sum.remote(ref, i) for i in range(8)]))\n",
                     setup=CHUNKS + "data = p.data\n")
    passed_twice(v)
    assert shell().user_ns["data"] is problems.problem("put").data


def test_the_hint_after_an_answer_that_did_not_carry_over_says_to_take_the_inputs_from_p(tmp_path, monkeypatch):
    import os

    from IPython.utils.capture import capture_output

    from eugo_lab.settings import PROGRESS_DIR_ENV

    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path / "progress"))
    p = lesson("fan-out")
    v = run_exercise("fan-out", f"results = hpc.get([slow_square.remote(x) for x in {list(p.xs)}])\n", setup=SQUARE)
    carried_over(v)
    monkeypatch.setitem(os.environ, "EUGO_LAB_DISPLAY", "text")
    shown = []
    for _ in range(2):
        with capture_output() as out:
            shell().run_line_magic("eugo", "hint fan-out")
        shown.append(" ".join(out.stdout.split()))
    tiers = catalog.get("fan-out").hints[problems.CARRY_OVER]
    assert " ".join(tiers.change.split()) in shown[0] and "p.xs" in shown[0]
    assert 'p = exercises.problem("fan-out")' in shown[1]


def test_an_interrupt_in_the_hidden_run_stops_the_cell_without_a_verdict_and_keeps_the_first_run_s_names():
    from eugo_lab import exercises

    ip = shell()
    ip.run_cell(SQUARE)
    exercises.set_last_verdict(None)
    # Only the hidden case (4 or 6 inputs, never the lesson's 12) raises the Interrupt, after the tasks ran.
    r = ip.run_cell("%%eugo --exercise fan-out -w 2 --no-live\n"
                    "results = hpc.get([slow_square.remote(x) for x in p.xs])\n"
                    "if len(p.xs) != 12:\n    raise KeyboardInterrupt\n")
    assert isinstance(r.error_in_exec, KeyboardInterrupt)
    assert exercises.last_verdict() is None
    assert ip.user_ns["results"] == [x * x for x in lesson("fan-out").xs]


def test_a_checker_bug_on_the_hidden_case_stays_that_bug():
    from eugo_lab.exercises.base import Verdict

    first = Verdict("fan-out", True, ("evidence",))
    bug = Verdict("fan-out", False, ("the checker for this exercise failed",), checker_error="KeyError: 3")
    assert problems.checked_again(first, bug, ["p"]) == bug
    assert problems.checked_again(first.as_reference(), bug, ["p"]).reference


def test_as_completed_order_by_the_inputs_does_not_pass_where_every_task_starts_at_once():
    """Sorted by p.ms on as many workers as tasks matches the lesson's finish order; the hidden slow one is not the
    longest input, so there the loop waits on it while the others sit finished."""
    h = hidden("as-completed")
    function, n, _ = h.held_result()
    assert function == "measure" and sorted(h.ms).index(h.ms[n]) < len(h.ms) - 1
    cell = ("futures = [measure.remote(ms) for ms in p.ms]\nhandled = []\n"
            "for ms, f in sorted(zip(p.ms, futures)):\n    handled.append(handle(hpc.get(f)))\n")
    v = run_exercise("as-completed", cell, setup=MEASURE, line="-w 10 --no-live")
    text = v.to_text()
    # The lesson's run may already show it (two finishes a few ms apart can land in either order); either way
    # the verdict names the wait, and nothing of the hidden case.
    assert not v.passed and v.mistake == "held-up", text
    assert "the cell waited for" in text and code_in(text) == [], text
    never_shown(text, *h.ms, *(m + 1 for m in h.ms))


def test_a_mistake_explained_on_the_hidden_case_is_named_there_not_blamed_on_a_typed_value():
    """as-completed's held-up on the hidden case: its own words and hints, nothing of the case, no typed value."""
    from eugo_lab.exercises.base import Verdict
    from eugo_lab.exercises.catalog import as_completed  # noqa: F401 - declares its words for the hidden case

    first = Verdict("as-completed", True, ("evidence",))
    second = Verdict("as-completed", False, ("your loop waited for measurement 2 (the slowest) ...",),
                     mistake="held-up")
    v = problems.checked_again(first, second, ["p"])
    text = v.to_text()
    assert not v.passed and v.mistake == "held-up", text
    assert ("there the cell waited for one measurement while others had already finished and were not taken yet: "
            "the order it took the results in matched the order they finished in on the lesson's inputs") in text
    assert "measurement 2" not in text and "a value is written into the cell" not in text, text
    # Any other mistake there is still the typed-value case.
    other = Verdict("as-completed", False, ("`handled` does not hold ...",), mistake="results")
    assert problems.checked_again(first, other, ["p"]).mistake == problems.CARRY_OVER
