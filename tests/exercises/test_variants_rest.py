"""``idle-cluster`` and ``capstone`` own their problem, and a passing cell is run again on a hidden case.

Through the real ``%%eugo --exercise`` magic, per exercise: the lesson's reference passes on both
cases; a cell that types in an answer fitted to the lesson's inputs passes the lesson's case but not
the hidden one, with the "did not carry over" message and nothing of the hidden case in it; honest
solutions unlike the reference pass both; the mistakes the exercise names are still named. The hidden
case's seed is fixed here (``problems.draw_seed``) so the test knows what must not be shown.
"""

from __future__ import annotations

import pytest
from _exercise_cells import code_in, hint_code, hint_words, run_exercise
from _variants import carried_over, hidden, lesson, never_shown, passed_twice

from eugo_lab import hpc

pytestmark = pytest.mark.usefixtures("hidden_seed")  # every hidden case here is made from _variants.SEED


@pytest.fixture(autouse=True)
def _stopped():
    yield
    hpc.shutdown()  # no cluster or pool outlives a test


def not_yet(v, mistake: str, says: str) -> str:
    """Check a ``not yet`` on the lesson's case: its mistake, its sentence, no code, hints for it."""
    text = v.to_text()
    assert not v.passed and v.mistake == mistake, text
    assert says in text, text
    assert code_in("\n".join(v.lines[:-1])) == [], text
    assert hint_words(v) and hint_code(v)
    return text


# -- idle-cluster ---------------------------------------------------------------------------------------------------
IDLE_SETUP = """
import math
import random
import time
from eugo_lab import exercises, hpc
from eugo_lab.analysis import cost

p = exercises.problem("idle-cluster")
"""
# The reference's timeout, worked out from p: the longest whose idle spell the target buys, in whole seconds.
IDLE_FROM_P = """PRICE = 0.096
spell = p.target * 3600 / (2 * PRICE)
timeout = math.floor(max(spell / 1.25, spell - 1))
"""
IDLE_JOB = """hpc.init(backend="dask", workers=2, idle_timeout={timeout}, dashboard=False)


@hpc.remote
def daily_total(day):
    rng = random.Random(day)
    return sum(rng.random() for _ in range(20_000))


with hpc.trace() as run:
    totals = hpc.get([daily_total.remote(day) for day in range(8)])
"""
IDLE_WAIT = """while "idle_stop" not in hpc.cluster().extra:
    time.sleep(0.2)
stop = hpc.cluster().extra["idle_stop"]
idle_cost = cost(run.trace, PRICE, idle=stop.idle_s).idle_cost
"""
IDLE_REFERENCE = IDLE_FROM_P + IDLE_JOB.format(timeout="timeout") + IDLE_WAIT


def _idle(cell: str):
    return run_exercise("idle-cluster", cell, setup=IDLE_SETUP, line="--no-live")


def _idle_hidden_values() -> tuple:
    h = hidden("idle-cluster")
    return f"{h.target:.3g} USD", f"{h.target:g}", f"a {h.min_pause:g} s pause"


def test_idle_cluster_reference_passes_on_both_cases():
    text = passed_twice(_idle(IDLE_REFERENCE))
    assert "you set a 4 s idle timeout" in text and "within the 0.0003 USD target, and above the 2 s pause" in text
    never_shown(text, *_idle_hidden_values())


def test_idle_cluster_no_timeout_that_meets_the_lesson_s_rules_meets_the_hidden_case_s():
    from eugo_lab.exercises.catalog.idle import longest_spell, priced

    p, h = lesson("idle-cluster"), hidden("idle-cluster")
    assert (p.target, p.min_pause) == (0.0003, 2.0)  # the rules the lesson's prose states
    assert h.target < p.target and h.min_pause < p.min_pause
    # the shortest timeout the lesson allows is over the hidden target; the hidden case still has whole seconds
    assert priced(longest_spell(p.min_pause)) > h.target
    assert h.min_pause <= 1 and priced(longest_spell(1)) <= h.target


@pytest.mark.parametrize("typed", ["4", "2", '"3s"'], ids=["the-reference-s-4", "the-lesson-s-pause", "a-string"])
def test_idle_cluster_a_timeout_typed_for_the_lesson_does_not_carry_over(typed):
    cell = "PRICE = 0.096\n" + IDLE_JOB.format(timeout=typed) + IDLE_WAIT
    never_shown(carried_over(_idle(cell)), *_idle_hidden_values())


IDLE_HONEST = {
    # halfway between the pause and the longest timeout that fits, waiting on the workers' count, priced by hand
    "halfway-and-priced-by-hand": (
        "PRICE = 0.096\nbuys = p.target * 3600 / 2 / PRICE\nlongest = buys / 1.25 if buys <= 5 else buys - 1\n"
        + IDLE_JOB.format(timeout="(p.min_pause + longest) / 2")
        + "for _ in range(300):\n    info = hpc.cluster()\n    if info.workers == 0 and 'idle_stop' in info.extra:\n"
          "        break\n    time.sleep(0.1)\nrecord = info.extra['idle_stop']\n"
          "idle_cost = record.workers * record.idle_s * PRICE / 3600\n"),
    # tenths of a second up from the pause while the spell still fits (with a margin), as a string
    "searched-in-tenths-as-a-string": (
        "PRICE = 0.096\n\ndef bill(t):\n    return 2 * (t + min(1.0, t / 4)) * PRICE / 3600\n\n"
        "t = p.min_pause\nwhile bill(t + 0.1) < 0.99 * p.target:\n    t += 0.1\n"
        + IDLE_JOB.format(timeout='f"{t:.1f}s"') + IDLE_WAIT),
}


@pytest.mark.parametrize("cell", list(IDLE_HONEST.values()), ids=list(IDLE_HONEST))
def test_idle_cluster_honest_cells_pass_on_both_cases(cell):
    passed_twice(_idle(cell))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    ("PRICE = 0.096\n" + IDLE_JOB.format(timeout="None") + "time.sleep(3)\nhpc.shutdown()\n"
     "idle_cost = cost(run.trace, PRICE, idle=3).idle_cost\n", "no-timeout", "no idle timeout"),
    ("PRICE = 0.096\n" + IDLE_JOB.format(timeout="p.min_pause / 2") + "idle_cost = 0.0\n", "too-short",
     "a 2 s pause (p.min_pause) between two cells would stop the cluster"),
    ("PRICE = 0.096\n" + IDLE_JOB.format(timeout="p.min_pause * 5") + "idle_cost = 0.0\n", "over-budget",
     "over the 0.0003 USD target (p.target)"),
    (IDLE_FROM_P + IDLE_JOB.format(timeout="timeout") + IDLE_WAIT.replace("idle=stop.idle_s", "idle=timeout"),
     "priced-timeout", "the price of the 4 s timeout"),
], ids=["starter-no-timeout", "shorter-than-the-pause", "over-the-target", "the-timeout-priced"])
def test_idle_cluster_named_mistakes_are_still_named(cell, mistake, says):
    text = not_yet(_idle(cell), mistake, says)
    never_shown(text, *_idle_hidden_values())
