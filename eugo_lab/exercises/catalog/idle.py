"""Exercise ``idle-cluster`` (Course 4, lesson 6): choose an idle timeout for a bill target, let it stop the cluster.

The lesson starts an embedded Dask cluster with ``idle_timeout=``, watches it stop itself, and
prices the idle spell at a published price. The exercise applies that to a bill target: one idle
spell of a two-worker cluster may add at most ``p.target`` dollars at ``PRICE`` per worker-hour,
and the cluster must survive a pause of ``p.min_pause`` seconds between two cells. The checker hands
out both (:mod:`eugo_lab.exercises.problems`): 0.0003 USD and 2 s in the lesson; in the hidden case a
target of 0.0001-0.00012 USD (a timeout of at most 1.5-1.8 s) and a pause of 0.5 or 1 s, so no timeout
that meets the lesson's rules meets the hidden case's, and its run waits less for the timer.

Starter cell (graded ``not yet``): it sets ``PRICE`` (0.096 USD per worker-hour, published: AWS EC2
m5.large on demand, us-east-1) and takes ``p``, starts ``hpc.init(backend="dask", workers=2)``
with no idle timeout, runs eight ``daily_total`` tasks in a traced block, sleeps 3 s, shuts the runtime
down by hand and prices a typed 3 s of idle time into ``idle_cost``.

Reference solution (a timeout worked out from the target; the cell waits for the timer and prices
the idle time it measured)::

    spell = p.target * 3600 / (2 * PRICE)  # the idle seconds the target buys on 2 workers
    timeout = math.floor(max(spell / 1.25, spell - 1))  # the timer's last look: a quarter, at most 1 s
    hpc.init(backend="dask", workers=2, idle_timeout=timeout, dashboard=False)
    ... the same job ...
    while "idle_stop" not in hpc.cluster().extra:  # the timer stops the cluster
        time.sleep(0.2)
    stop = hpc.cluster().extra["idle_stop"]
    idle_cost = cost(run.trace, PRICE, idle=stop.idle_s).idle_cost

Criteria, in the order checked, each a fact of the runtime (never a duration window): the
cell's ``daily_total`` tasks ran, on the Dask engine, on a runtime the cell itself started; its
configured ``idle_timeout`` is at least ``p.min_pause`` and keeps the longest idle spell it allows
(the timeout plus one check of the timer, see :func:`longest_spell`) within ``p.target`` at
``PRICE``; the runtime's idle timer stopped the cluster during this cell (an ``IdleStop`` in
:attr:`~eugo_lab.hpc.session.Runtime.idle_stops`: a cluster shut down by hand leaves none), and
the workers' processes it recorded are gone; ``idle_cost`` equals that record's idle seconds x
its workers x ``PRICE`` (not the timeout priced, not an earlier cell's spell, not a typed number).
Then the same on the hidden case.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import psutil

from eugo_lab.exercises import measure, problems
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise
from eugo_lab.hpc import session

FUNCTION = "daily_total"
#: Published price: AWS EC2 On-Demand pricing page, m5.large (2 vCPU), Linux, US East (N. Virginia), USD per hour.
PRICE = 0.096
WORKERS = 2
TARGET = 0.0003  # USD: the most one idle spell may add to the bill (the lesson's)
MIN_PAUSE = 2.0  # seconds the cluster must stay up between two cells (the lesson's)
# The hidden case: targets that buy 1.875-2.25 s of idle time on 2 workers (a timeout of at most 1.5-1.8 s),
# under the lesson's shortest allowed timeout (2 s), so a timeout typed for the lesson is over budget there;
# its pause (0.5 or 1 s) leaves whole seconds (1 s) and the pause itself as honest choices. The hidden run waits
# about 2 s for the timer where the lesson's reference waits about 5.
HIDDEN_TARGETS = (0.0001, 0.00011, 0.00012)
HIDDEN_PAUSES = (0.5, 1.0)
# Two costs priced from the same measured float agree to rounding; anything else differs far more.
SAME_COST = 1e-9


@problems.declare("idle-cluster")
@dataclass(frozen=True, repr=False)
class IdleProblem(problems.Problem):
    """The bill target of one idle spell (USD) and the pause between two cells the cluster must survive (s)."""

    target: float
    min_pause: float

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> IdleProblem:
        """The lesson's 0.0003 USD and 2 s, or a smaller target and a shorter pause from ``rng``."""
        if not hidden:
            return cls(TARGET, MIN_PAUSE)
        return cls(rng.choice(HIDDEN_TARGETS), rng.choice(HIDDEN_PAUSES))


def timer_step(timeout: float) -> float:
    """How often the Dask backend's idle timer checks (its loop waits this long between looks)."""
    return min(1.0, timeout / 4)


def longest_spell(timeout: float) -> float:
    """The longest idle spell a timeout allows: the timer fires at its first check after ``timeout``."""
    return timeout + timer_step(timeout)


def priced(seconds: float, workers: int = WORKERS) -> float:
    """What ``workers`` idle for ``seconds`` cost at :data:`PRICE` per worker-hour."""
    return workers * seconds * PRICE / 3600.0


_WAIT = ("while \"idle_stop\" not in hpc.cluster().extra:  # the timer stops the cluster\n"
         "    time.sleep(0.2)\n"
         "stop = hpc.cluster().extra[\"idle_stop\"]")
_PRICE = "idle_cost = cost(run.trace, PRICE, idle=stop.idle_s).idle_cost"
_INIT = ("import math\n\n"
         "spell = p.target * 3600 / (2 * PRICE)  # the idle seconds the target buys on 2 workers\n"
         "timeout = math.floor(max(spell / 1.25, spell - 1))  # the timer looks every quarter, at most every 1 s\n"
         "hpc.init(backend=\"dask\", workers=2, idle_timeout=timeout, dashboard=False)")
_SOLUTION = f"{_INIT}\n# ... the job, as in the starter ...\n{_WAIT}\n{_PRICE}"
HINTS = {
    DEFAULT: Hint("Start the cluster with an idle timeout that fits the target, let the timer stop it instead of "
                  "shutting it down yourself, then price the idle seconds the timer measured.", _SOLUTION),
    "no-job": Hint(f"Keep the starter's job: the {FUNCTION} tasks, submitted with .remote, inside the trace.",
                   _SOLUTION),
    "wrong-engine": Hint("Start the Dask engine in this cell, before the job: the local pool has no idle timer.",
                         _INIT),
    "not-started-here": Hint("Start the cluster in this exercise cell, with the timeout you chose: a cluster "
                             "started earlier keeps the timeout someone else chose.", _INIT),
    "no-timeout": Hint("Give the runtime an idle timeout when you start it: in seconds, or a string such as '4s'.",
                       _INIT),
    "too-short": Hint("Choose a timeout of at least p.min_pause seconds, so a pause between two cells does not "
                      "stop the cluster under you.", _INIT),
    "over-budget": Hint("Work backwards from the target, p.target: it buys a number of idle worker-seconds at the "
                        "price; split them over the workers, and leave room for the timer's last check (up to a "
                        "quarter of the timeout, at most one second).", _INIT),
    "by-hand": Hint("Leave the cluster alone after the job and wait until its idle timer stops it: shutting it "
                    "down yourself is the habit a timeout replaces.", _WAIT),
    "still-up": Hint("Wait in the cell until the runtime reports the idle stop, so the timer fires before the "
                     "cell ends.", _WAIT),
    "priced-timeout": Hint("Price the idle seconds the timer measured when it fired, which the stop record holds, "
                           "not the timeout you set: the timer fires at its first check after the timeout.", _PRICE),
    "earlier": Hint("Price the idle stop of the cluster this cell started, read after the timer fired in this "
                    "cell, not a stop an earlier cell recorded.", f"{_WAIT}\n{_PRICE}"),
    "typed": Hint("Compute the idle cost from the run's trace and the stop record with the cost analysis, "
                  "instead of writing a number.", _PRICE),
    problems.CARRY_OVER: Hint("Work the timeout out from p.target and p.min_pause, the rules the checker hands out, "
                              "instead of a timeout chosen for the lesson's numbers and written into the cell.",
                              "p = exercises.problem(\"idle-cluster\")\n" + _INIT),
}


def _money(x: float) -> str:
    return f"{x:.3g} USD"


def _matches(value: float, cost: float) -> bool:
    return math.isclose(value, cost, rel_tol=SAME_COST, abs_tol=0.0)


def _gone(stop: Any) -> bool:
    """The stop closed the workers' process and none of the worker processes it listed still runs."""
    return stop.exit_code is not None and not any(p and psutil.pid_exists(p) for p in stop.worker_pids)


@exercise("idle-cluster", lesson="04-scaling-a-real-workload/06-what-an-idle-cluster-costs.ipynb",
          title="Choose an idle timeout for a bill target", hints=HINTS)
def idle_cluster(a: Attempt) -> Verdict:
    """Grade a cluster started with a timeout that fits the target, stopped by its timer, its idle spell priced."""
    value = a.require("idle_cost")
    n = measure.tasks(a.trace, FUNCTION)
    if n == 0:
        return a.not_yet(f"no {FUNCTION} task ran in this cell: there was no job for the cluster to finish before "
                         "it went idle.", mistake="no-job")
    a.require_engine("dask", n, ", which has no idle timer: the Dask engine was not started in the cell.")
    rt = session.latest()
    if rt is None or rt.backend_name != "dask" or rt.started_at < a.trace.t0:
        return a.not_yet("your tasks ran on a Dask cluster started before this cell, so its idle timeout is not "
                         "one this cell chose.", mistake="not-started-here")
    timeout = getattr(rt.backend, "idle_timeout", None)
    if timeout is None:
        return a.not_yet(f"the cluster ran your {measure.plural(n, 'task')} with no idle timeout: left alone, it "
                         f"bills {_money(priced(3600.0))} every hour until someone stops it.", mistake="no-timeout")
    p = problems.given(a)  # the checker's own copy of the rules the run was handed
    spell = longest_spell(timeout)
    if timeout < p.min_pause:
        return a.not_yet(f"the idle timeout is {timeout:g} s: a {p.min_pause:g} s pause (p.min_pause) between two "
                         "cells would stop the cluster, and the next cell would wait for a new one.",
                         mistake="too-short")
    if priced(spell) > p.target:
        return a.not_yet(f"the idle timeout is {timeout:g} s: the timer fires at its first check after it, up to "
                         f"{spell:g} s of idle time on {WORKERS} workers, which costs {_money(priced(spell))} at "
                         f"{PRICE:g} USD per worker-hour, over the {_money(p.target)} target (p.target).",
                         mistake="over-budget")
    stops = [s for s in rt.idle_stops if s.at >= a.trace.t0]
    if not stops:
        if rt.stopped_by == "shutdown":
            return a.not_yet(f"the cluster had a {timeout:g} s idle timeout, but it was shut down by hand before "
                             "the timer fired: the runtime recorded no idle stop in this cell.", mistake="by-hand")
        return a.not_yet(f"the cluster had a {timeout:g} s idle timeout, but it was still up when the cell ended: "
                         "the timer had not fired yet, so there is no idle spell to price.", mistake="still-up")
    stop = stops[-1]
    if not _gone(stop):
        return a.not_yet(f"the idle timer fired after {stop.idle_s:.2f} s, but the workers' processes were not all "
                         "gone after the close.")
    want = priced(stop.idle_s, stop.workers)
    got = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    # The idle time and the price are the inputs; their product is the answer, said only by the pass.
    measured = f"the timer measured {stop.idle_s:.2f} s idle on {measure.plural(stop.workers, 'worker')}"
    if got is None or not _matches(float(got), want):
        shown = f"{float(got):.4g}" if got is not None else repr(value)[:40]
        if got is not None and _matches(float(got), priced(timeout, stop.workers)):
            return a.not_yet(f"`idle_cost` is {shown}, the price of the {timeout:g} s timeout, but {measured}: the "
                             "timer fires at its first check after the timeout.", mistake="priced-timeout")
        if got is not None and any(_matches(float(got), priced(s.idle_s, s.workers)) for s in session.idle_stops()
                                   if s.at < a.trace.t0):
            return a.not_yet(f"`idle_cost` is {shown}, the price of an idle stop recorded before this cell ran; "
                             f"in this cell {measured}.", mistake="earlier")
        return a.not_yet(f"`idle_cost` is {shown}, which no idle stop the runtime recorded comes to: {measured}.",
                         mistake="typed")
    return a.passed(
        f"you set a {timeout:g} s idle timeout: at most {spell:g} s idle on {WORKERS} workers, "
        f"{_money(priced(spell))}, within the {_money(p.target)} target, and above the {p.min_pause:g} s pause",
        f"the runtime's idle timer stopped the cluster after {stop.idle_s:.2f} s without tasks; its "
        f"{measure.plural(len(stop.worker_pids), 'worker process', 'worker processes')} are gone",
        f"`idle_cost` {_money(want)} is that idle time priced at the published {PRICE:g} USD per worker-hour",
        details=(f"{measure.plural(n, FUNCTION + ' task')} ran first",),
    )
