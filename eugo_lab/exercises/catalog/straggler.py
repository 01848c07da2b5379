"""Exercise ``straggler`` (Course 1, lesson 6): split the oversized input so no task dominates.

Starter cell (graded ``not yet``: the last range is 20 times the others and ends alone)::

    %%eugo --exercise straggler
    from eugo_lab import hpc

    @hpc.remote
    def work(start, stop):
        return sum(i * i % 7 for i in range(start, stop))

    ranges = [(i * 200_000, (i + 1) * 200_000) for i in range(7)] + [(1_400_000, 5_400_000)]
    total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))

Reference solution (same first lines, then)::

    pieces = [(a, min(a + 200_000, e)) for s, e in ranges for a in range(s, e, 200_000)]
    total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))

Criteria: ``total`` equals the sum over ``range(5_400_000)`` computed here; no Straggler,
Long tail or Partition (critical path) finding, and no task over ``STRAGGLER_RATIO`` times the
median task and 50 ms longer (measured in this trace, as the Straggler finding counts); no
Scheduling overhead finding and at most ``MAX_TASKS`` tasks (pieces too small cost more to
schedule than to run); the replay on 2 workers (on this run's workers when it had more)
predicts at least ``MIN_REPLAYED_SPEEDUP``.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis.findings import STRAGGLER_FLOOR_S, STRAGGLER_RATIO
from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import measure
from eugo_lab.exercises.base import Attempt, Verdict, exercise

END = 5_400_000
FUNCTION = "work"
# 27 equal pieces cover the input; 200 tasks of 27,000 numbers (~1 ms each) are still worth
# sending, far below that the round trip (0.1-0.5 ms) is a large share of every task.
MAX_TASKS = 200
# Equal pieces replay at ~1.9x on 2 workers; the giant range left whole replays at ~1.2x.
MIN_REPLAYED_SPEEDUP = 1.6
# The tail findings, all of which name the one task that ran on while the others were done.
TAIL_FINDINGS = ("straggler", "long-tail", "critical-path")


def reference_total(end: int = END) -> int:
    """``sum(i * i % 7 for i in range(end))`` in closed form: ``i * i % 7`` repeats every 7 numbers."""
    period = [i * i % 7 for i in range(7)]
    full, rest = divmod(end, 7)
    return full * sum(period) + sum(period[:rest])


@exercise("straggler", lesson="01-distributed-python/06-stragglers-and-partitions.ipynb",
          title="Split the oversized input")
def straggler(a: Attempt) -> Verdict:
    """Grade partitioning: the right total from pieces of similar size, neither one giant nor thousands of crumbs."""
    total = a.require("total")
    if not measure.same_result(total, reference_total()):
        return a.not_yet(f"`total` is not the sum over range({END:_}): the pieces must cover every range exactly "
                         "once (each piece starts where the previous one stopped).")
    n = measure.tasks(a.trace, FUNCTION)
    if n == 0:
        return a.not_yet("no work task ran on a worker; submit each piece with work.remote(s, e).")
    tiny = a.report.finding("tasks-too-small")
    if tiny is not None or n > MAX_TASKS:
        return a.not_yet(f"{n} tasks: the pieces are so small that scheduling them costs about as much as their "
                         f"work (Scheduling overhead). Split only as far as needed: pieces the size of the "
                         f"ordinary ranges (200,000 numbers) give a few dozen tasks; keep it under {MAX_TASKS}.")
    u = measure.dispatch_units(a.trace, FUNCTION)
    med = float(np.median(u.body)) if len(u) else 0.0
    slowest = float(u.body.max()) if len(u) else 0.0
    ratio = slowest / med if med > 0 else 0.0
    # As the Straggler finding counts: over 3x the median *and* 50 ms more (a preempted 6 ms task is no giant).
    dominant = ratio > STRAGGLER_RATIO and slowest - med >= STRAGGLER_FLOOR_S
    tail = [code for code in TAIL_FINDINGS if a.report.finding(code) is not None]
    if tail or dominant:
        names = {"straggler": "Straggler", "long-tail": "Long tail", "critical-path": "Partition"}
        said = f" ({', '.join(names[c] for c in tail)})" if tail else ""
        return a.not_yet(f"one task ran far longer than the others{said}: the oversized range was left whole, so "
                         "the other workers finished early and waited for it. Split every range into pieces of "
                         "about 200,000 numbers so no task dominates.",
                         details=(f"slowest task {fmt_x(ratio)} the median",))
    w = max(a.workers, 2)
    replayed = a.replayed_speedup(w)
    on = f"on {w} workers" + (" (this run had 1 worker, so the check uses the replay)" if a.workers < 2 else "")
    if replayed < MIN_REPLAYED_SPEEDUP:
        return a.not_yet(f"the pieces look even, yet the replay {on} predicts only {fmt_x(replayed)}, under "
                         f"{fmt_x(MIN_REPLAYED_SPEEDUP)}: submit all pieces before waiting for any of them.")
    return a.passed(f"{n} tasks, none over {STRAGGLER_RATIO:g}x the median; no Straggler, Long tail or Partition "
                    "finding and no Scheduling overhead finding",
                    f"the replay {on} predicts over {fmt_x(MIN_REPLAYED_SPEEDUP)}; the total equals the reference",
                    details=(f"slowest task {ratio:.1f}x the median", f"replayed speedup {fmt_x(replayed)}"))
