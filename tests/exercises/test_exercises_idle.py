"""The ``idle-cluster`` exercise on real embedded Dask clusters: the reference passes; each mistake, its message.

Every row starts its own two-worker cluster in the exercise cell, as the learner's cell does;
rows that wait for the idle timer take its timeout plus a second or two. Every row ends with
the runtime shut down, so no worker process outlives the test.
"""

from __future__ import annotations

import pytest
from _exercise_cells import check_cell, tier_code, tier_words

from eugo_lab import hpc
from eugo_lab.exercises import catalog
from eugo_lab.exercises.catalog.idle import MIN_PAUSE, PRICE, TARGET, WORKERS, longest_spell, priced

SETUP = """
import math
import random
import time
from eugo_lab import exercises, hpc
from eugo_lab.analysis import cost

p = exercises.problem("idle-cluster")
"""
HEAD = """PRICE = 0.096
hpc.init(backend="dask", workers=2, {timeout}dashboard=False)


@hpc.remote
def daily_total(day):
    rng = random.Random(day)
    return sum(rng.random() for _ in range(20_000))


with hpc.trace() as run:
    totals = hpc.get([daily_total.remote(day) for day in range(8)])
"""
WAIT = """while "idle_stop" not in hpc.cluster().extra:
    time.sleep(0.2)
stop = hpc.cluster().extra["idle_stop"]
"""
PRICED = "idle_cost = cost(run.trace, PRICE, idle=stop.idle_s).idle_cost\n"
STARTER = HEAD.format(timeout="") + """time.sleep(3)
hpc.shutdown()
idle_cost = cost(run.trace, PRICE, idle=3).idle_cost
"""
# The reference's timeout, worked out from the rules p hands out (4 s in the lesson).
FROM_P = """spell = p.target * 3600 / (2 * 0.096)
timeout = math.floor(max(spell / 1.25, spell - 1))
"""
REFERENCE = FROM_P + HEAD.format(timeout="idle_timeout=timeout, ") + WAIT + PRICED
# Honest and different: the timeout halfway between the pause and the longest that fits (3.3 s in the lesson), a
# wait on the workers' count, the cost priced by hand from the record.
HONEST = FROM_P + HEAD.format(timeout="idle_timeout=(p.min_pause + max(spell / 1.25, spell - 1)) / 2, ") + """\
for _ in range(200):
    info = hpc.cluster()
    if info.workers == 0 and "idle_stop" in info.extra:
        break
    time.sleep(0.1)
spell = info.extra["idle_stop"]
idle_cost = spell.workers * spell.idle_s * PRICE / 3600
"""
LINE = "--no-live"  # no -w: the cell's own hpc.init chooses the engine


@pytest.fixture(autouse=True)
def _stopped():
    yield
    hpc.shutdown()


def row(cell: str, passes: bool, says: str, mistake: str | None, setup: str = ""):
    return check_cell("idle-cluster", cell, passes, says, mistake, setup=SETUP + setup, line=LINE)


def test_registered_with_its_lesson_and_its_numbers_fit():
    assert catalog.get("idle-cluster").lesson == "04-scaling-a-real-workload/06-what-an-idle-cluster-costs.ipynb"
    assert priced(longest_spell(4)) <= TARGET < priced(longest_spell(5))  # the reference fits, one more second not
    assert longest_spell(3) == 3.75 and longest_spell(8) == 9 and MIN_PAUSE < 3
    assert priced(3600.0, 1) == pytest.approx(PRICE) and WORKERS == 2


def test_the_reference_passes():
    v = row(REFERENCE, True, "idle timer stopped the cluster", None)
    assert "4 s idle timeout" in v.to_text() and "worker processes are gone" in v.to_text()


def test_an_honest_variant_passes():
    row(HONEST, True, "3.3125 s idle timeout", None)


def test_the_starter_has_no_timeout():
    row(STARTER, False, "no idle timeout", "no-timeout")


def test_shut_down_by_hand():
    by_hand = "hpc.shutdown()\nidle_cost = cost(run.trace, PRICE, idle=4).idle_cost\n"
    row(HEAD.format(timeout="idle_timeout=4, ") + by_hand, False, "shut down by hand", "by-hand")


def test_a_cell_that_ends_before_the_timer_fires():
    row(HEAD.format(timeout="idle_timeout=4, ") + "idle_cost = cost(run.trace, PRICE, idle=4).idle_cost\n",
        False, "still up when the cell ended", "still-up")


def test_a_timeout_over_the_target():
    row(HEAD.format(timeout='idle_timeout="10s", ') + "idle_cost = 0.0\n", False, "over the 0.0003 USD target",
        "over-budget")


def test_a_timeout_too_short_for_a_pause():
    row(HEAD.format(timeout="idle_timeout=1, ") + "idle_cost = 0.0\n", False, "2 s pause", "too-short")


def test_the_timeout_priced_instead_of_the_measured_idle_time():
    row(HEAD.format(timeout="idle_timeout=3, ") + WAIT + "idle_cost = cost(run.trace, PRICE, idle=3).idle_cost\n",
        False, "the price of the 3 s timeout", "priced-timeout")


def test_a_typed_number():
    row(HEAD.format(timeout="idle_timeout=3, ") + WAIT + "idle_cost = 0.00021\n", False,
        "which no idle stop the runtime recorded comes to", "typed")


def test_a_not_yet_never_states_the_price_of_the_idle_spell():
    # The answer is the recorded idle time priced: a not yet gives the idle time (the input), never its price.
    from _exercise_cells import shell

    v = row(HEAD.format(timeout="idle_timeout=3, ") + WAIT + "idle_cost = 0.00021\n", False,
            "the timer measured", "typed")
    stop = shell().user_ns["stop"]
    answer = priced(stop.idle_s, stop.workers)
    for text in (v.to_text(), v.to_text(precise=True)):
        assert f"{answer:.3g}" not in text and f"{answer:.4g}" not in text, text


def test_a_value_from_an_earlier_cell():
    earlier = (HEAD.format(timeout="idle_timeout=2, ") + WAIT
               + "old_cost = cost(run.trace, PRICE, idle=stop.idle_s).idle_cost\n")
    row(HEAD.format(timeout="idle_timeout=3, ") + WAIT + "idle_cost = old_cost\n", False,
        "recorded before this cell ran", "earlier", setup=earlier)


def test_a_cluster_started_before_the_cell():
    row(HEAD.split("\n\n\n", 1)[1] + "idle_cost = 0.0\n", False, "started before this cell", "not-started-here",
        setup='hpc.init(backend="dask", workers=2, idle_timeout=4, dashboard=False)\n')


def test_the_job_on_the_local_pool():
    row(HEAD.split("\n\n\n", 1)[1] + "idle_cost = 0.0\n", False, "local engine", "wrong-engine",
        setup="hpc.init(workers=2)\n")


def test_no_job():
    row('hpc.init(backend="dask", workers=2, idle_timeout=4, dashboard=False)\nidle_cost = 0.0\n', False,
        "no daily_total task ran", "no-job")


def test_every_mistake_has_two_tiers():
    for key in catalog.get("idle-cluster").hints:
        assert tier_words("idle-cluster", key) and tier_code("idle-cluster", key)
