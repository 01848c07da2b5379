"""Cost optimization: what the running runtime and the last run cost, and where to right-size.

Prices are per worker-hour: ``price=``, else the runtime's rate (``hpc.init(price_per_worker_hour=...)``,
the ``EUGO_LAB_PRICE_PER_WORKER_HOUR`` setting), else the lessons' round number
:data:`~eugo_lab.hpc.counters.DEFAULT_PRICE` as an example of what rented workers cost (a pool on
your own machine bills nothing, and the evidence says so). A teaching estimate in the learner's
currency, where an idle worker bills like a busy one; every cost quoted names its rate.
"""

from __future__ import annotations

import math

from eugo_lab.analysis.cost import cheapest_workers, cost
from eugo_lab.analysis.findings import GOOD_EFFICIENCY, IDLE_CLUSTER_SHARE
from eugo_lab.analysis.report import fmt_pct
from eugo_lab.analysis.simulate import replay, replay_of
from eugo_lab.checklists.model import Checklist, Item, register
from eugo_lab.checklists.subject import Subject
from eugo_lab.hpc.counters import DEFAULT_PRICE, counters
from eugo_lab.hpc.counters import rate as billing_rate
from eugo_lab.units import fmt_seconds as fmt_s

# Idle for under a second is the gap between two cells, not an idle cluster.
IDLE_FLOOR_S = 1.0
# A cheaper worker count must save at least a tenth of the cost to be worth changing the run.
RIGHT_SIZE_SAVING = 0.1
# What the local pool and the other engines without one should be told to do instead.
NO_TIMEOUT_ADVICE = ("end the notebook with hpc.shutdown() (or %eugo stop), or start an engine that stops itself: "
                     "hpc.init(backend='dask', idle_timeout='10m')")


def money(x: float) -> str:
    """A cost with two significant digits in plain decimals, however small (``0.0012``)."""
    if x <= 0 or not math.isfinite(x):
        return "0" if x == 0 else f"{x:g}"
    if x >= 0.01:
        return f"{x:.2f}"
    return f"{x:.{1 - math.floor(math.log10(x))}f}"


def price_text(price: float) -> str:
    """A price as given: ``0.10``, ``0.096`` (two decimals would print 0.096 as 0.10, a price nobody quoted)."""
    return f"{price:.2f}" if round(price, 2) == price else f"{price:.3g}"


def workers(n: int) -> str:
    """``1 worker``, ``4 workers``."""
    return f"{n} worker{'s' if n != 1 else ''}"


def _price(s: Subject) -> tuple[float, str]:
    """The price per worker-hour to put on the subject, and the words that name it beside a cost."""
    if s.price is not None:
        return float(s.price), f"at {price_text(float(s.price))} per worker-hour"
    try:
        r = billing_rate(s.runtime())
    except ValueError as exc:  # a malformed price setting: the example rate, and why
        return DEFAULT_PRICE, f"at an example {price_text(DEFAULT_PRICE)} per worker-hour ({exc})"
    if r.per_worker_hour is not None:
        return r.per_worker_hour, f"at {price_text(r.per_worker_hour)} per worker-hour ({r.source})"
    return DEFAULT_PRICE, (f"if rented at an example {price_text(DEFAULT_PRICE)} per worker-hour (on your own "
                           "machine: no bill; price= sets a rate)")


def idle_now(s: Subject) -> tuple[bool | None, str]:
    """The running runtime's idle time and what it cost."""
    rt = s.runtime()
    if rt is None:
        return True, "no runtime is running: nothing is billing"
    c = counters(rt)
    price, at = _price(s)
    idle_cost = c.workers * c.idle / 3600.0 * price
    total = c.workers * c.elapsed / 3600.0 * price
    head = (f"the runtime ({c.backend}, {workers(c.workers)}) has been idle {fmt_s(c.idle)} of its {fmt_s(c.elapsed)}: "
            f"{money(idle_cost)} of its {money(total)} {at}")
    share = c.idle / c.elapsed if c.elapsed > 0 else 0.0
    if c.idle >= IDLE_FLOOR_S and share >= IDLE_CLUSTER_SHARE:
        return False, f"{head}, paid for nothing; shut it down when the work is done (hpc.shutdown())"
    return True, head


def idle_timeout(s: Subject) -> tuple[bool | None, str]:
    """Whether the running engine stops itself after a while without tasks."""
    rt = s.runtime()
    if rt is None:
        return None, "not measured: no runtime is running (start one with hpc.init() to check its settings)"
    timeout = getattr(rt.backend, "idle_timeout", None)
    if timeout:
        return True, (f"the {rt.backend_name} cluster shuts itself down after {fmt_s(float(timeout))} without tasks; "
                      "the next task starts a new one")
    if rt.backend_name == "dask":
        return False, ("this Dask runtime has no idle timeout: start it with hpc.init(backend='dask', "
                       "idle_timeout='10m'), or shut it down yourself (hpc.shutdown())")
    return False, f"the {rt.backend_name} runtime has no idle timeout and keeps its workers until you stop it: " \
                  f"{NO_TIMEOUT_ADVICE}"


def waste_in_run(s: Subject) -> tuple[bool | None, str]:
    """The share of the last run's bill paid for workers that sat idle inside it."""
    tr = s.trace
    if tr is None:
        return None, s.no_trace("what the run paid for idle workers")
    price, at = _price(s)
    c = cost(tr, price)
    share = c.wasted_in_run / c.run_cost if c.run_cost > 0 else 0.0
    head = (f"{workers(c.workers)} for {fmt_s(c.wall_time)} cost {money(c.run_cost)} {at}; {fmt_pct(share)} of that "
            f"({money(c.wasted_in_run)}) paid for workers with nothing to do")
    if share > 1 - GOOD_EFFICIENCY:
        return False, f"{head}: fewer workers, or the fixes in the performance tuning checklist, cut it"
    return True, head


def right_size(s: Subject) -> tuple[bool | None, str]:
    """The cheapest worker count that meets the deadline (default: as fast as the traced run), from the replay."""
    tr = s.trace
    if tr is None:
        return None, s.no_trace("the cheapest worker count")
    price, at = _price(s)
    w = tr.n_workers
    now = replay(replay_of(tr), w)
    deadline = s.deadline if s.deadline is not None else max(tr.wall_time, now)
    how = "the deadline you gave" if s.deadline is not None else "as fast as this run"
    best = cheapest_workers(tr, deadline, price)
    rate = price / 3600.0
    here = f"this run: {workers(w)}, about {fmt_s(now)} for {money(w * now * rate)} {at}"
    if best.workers is None:
        return False, f"{best.reason} ({here}); the work needs splitting finer, or a later deadline"
    if best.workers == w or best.cost >= (1 - RIGHT_SIZE_SAVING) * w * now * rate:
        return True, (f"{workers(w)} is the cheapest count that meets {fmt_s(deadline)} ({how}): about {fmt_s(now)} "
                      f"for {money(w * now * rate)} {at}")
    verb = "is" if best.workers == 1 else "are"
    return False, (f"{workers(best.workers)} {verb} cheapest for {fmt_s(deadline)} ({how}): about "
                   f"{fmt_s(best.wall_time)} for {money(best.cost)} ({here}); "
                   f"run with hpc.init(workers={best.workers})")


COST = register(Checklist(
    id="cost-optimization",
    order=3,  # its place on the course page (courses/index.ipynb)
    title="Cost optimization checklist",
    purpose=("Keep compute spend predictable without giving up throughput: what to check weekly, how to stop paying "
             "for idle clusters, and where to right-size."),
    aliases=("cost",),
    items=(
        Item("idle-now", "No runtime sits idle after its work",
             "A cluster bills for every minute it is up, busy or not. The idle hours after the work are the easiest "
             "money to save.", idle_now, "runtime"),
        Item("idle-timeout", "The runtime stops itself when nobody uses it",
             "People forget. A timeout shuts the workers down after a quiet spell, so a notebook left open overnight "
             "does not bill until morning.", idle_timeout, "runtime"),
        Item("waste-in-run", "Workers are busy for most of the run",
             "Inside a run, a waiting worker costs as much as a computing one. A low share of busy time is money "
             "spent on idle cores.", waste_in_run, "trace"),
        Item("right-size", "The worker count is the cheapest that meets your deadline",
             "Past the point where the work stops scaling, each extra worker adds cost and little speed. The replay "
             "of your run predicts where that point is.", right_size, "trace"),
        Item("weekly-review", "Once a week, you look at what each runtime cost and how long it sat idle",
             "Spend drifts slowly: a new job, a bigger dataset, a cluster someone left up. A weekly look catches it "
             "while it is small."),
        Item("price-known", "You know the price per worker-hour of the machines you use",
             "Every cost here is workers x hours x price. With a wrong price the right-sizing advice is wrong too."),
    ),
))
