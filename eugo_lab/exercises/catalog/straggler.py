"""Exercise ``straggler`` (Course 1, lesson 6): split the oversized input so no task dominates.

Starter cell (graded ``not yet``: the last range is 20 times the others and ends alone)::

    %%eugo --exercise straggler
    from eugo_lab import hpc

    @hpc.remote
    def work(start, stop):
        return sum(i * i % 7 for i in range(start, stop))

    ranges = [(i * 1_000_000, (i + 1) * 1_000_000) for i in range(7)] + [(7_000_000, 27_000_000)]
    total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))

Reference solution (same first lines, then)::

    pieces = [(a, min(a + 1_000_000, e)) for s, e in ranges for a in range(s, e, 1_000_000)]
    total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))

Criteria: ``total`` equals the sum over every range of ``ranges`` computed here (the ranges
above when the cell has none); no Straggler,
Long tail or Partition (critical path) finding, and no task over ``STRAGGLER_RATIO`` times the
median task and 50 ms longer (measured in this trace, as the Straggler finding counts); no
Scheduling overhead finding and at most ``MAX_TASKS`` tasks (pieces too small cost more to
schedule than to run); the replay on 2 workers (on this run's workers when it had more)
predicts at least ``MIN_REPLAYED_SPEEDUP``.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis.findings import STRAGGLER_FLOOR_S, STRAGGLER_RATIO, Code
from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise

END = 27_000_000
PIECE = 1_000_000  # the ordinary range: the giant one is 20 of them
FUNCTION = "work"
# A range of 1,000,000 numbers takes ~10-50 ms here (this VM's speed drifts): long enough that a
# worker's cold start (tens of ms on its first task) stays under 3x the median, so a correct split
# never reads as a straggler. 27 such pieces cover the input; 200 tasks of 135,000 numbers are still
# worth sending, far below that the round trip (0.1-0.5 ms) is a large share of every task.
MAX_TASKS = 200
# Equal pieces replay at 1.7-1.9x on 2 workers (a cold start included); the giant range left whole
# replays at ~1.3x.
MIN_REPLAYED_SPEEDUP = 1.5
# The tail findings, all of which name the one task that ran on while the others were done.
TAIL_FINDINGS = (Code.STRAGGLER, Code.LONG_TAIL, Code.CRITICAL_PATH)


def reference_total(end: int = END, start: int = 0) -> int:
    """``sum(i * i % 7 for i in range(start, end))`` in closed form: ``i * i % 7`` repeats every 7 numbers."""
    period = [i * i % 7 for i in range(7)]

    def upto(n: int) -> int:
        full, rest = divmod(n, 7)
        return full * sum(period) + sum(period[:rest])

    return upto(end) - upto(start)


def _ranges(a: Attempt) -> list[tuple[int, int]]:
    """The lesson's ``ranges`` (from this cell or an earlier one), else the ones in this module's docstring.

    A lesson may scale the sizes (the criteria are ratios and counts); the total is then checked
    against its own ranges, and the advice names its ordinary range size.
    """
    given = a.namespace.get("ranges")
    try:
        pairs = [(int(s), int(e)) for s, e in given]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        pairs = []
    if pairs and all(0 <= s < e for s, e in pairs):
        return pairs
    return [(i * PIECE, (i + 1) * PIECE) for i in range(7)] + [(7 * PIECE, END)]


_SOLUTION = ("pieces = [(a, min(a + 1_000_000, e)) for s, e in ranges for a in range(s, e, 1_000_000)]\n"
             "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))")
HINTS = {
    DEFAULT: Hint("Cut every range into pieces the size of an ordinary range, so the giant one becomes many "
                  "ordinary tasks, then submit all the pieces and add up their results.", _SOLUTION),
    "results": Hint("The pieces must cover every range exactly once: each piece starts where the previous one "
                    "stopped, and the last stops at the range's end.", _SOLUTION),
    "local": Hint("Submit each piece as a work task with .remote, then add up the results.", _SOLUTION),
    "too-small": Hint("Cut the ranges less finely: pieces of about an ordinary range's size give a few dozen "
                      "tasks, each worth its scheduling.", _SOLUTION),
    "giant": Hint("Split the oversized range (and every range) into pieces of about the ordinary size, so "
                  "no single task holds up the run.", _SOLUTION),
    "serial": Hint("Submit every piece before waiting for any: build the list of futures first, then one get().",
                   _SOLUTION),
}


@exercise("straggler", lesson="01-distributed-python/06-stragglers-and-partitions.ipynb",
          title="Split the oversized input", hints=HINTS)
def straggler(a: Attempt) -> Verdict:
    """Grade partitioning: the right total from pieces of similar size, neither one giant nor thousands of crumbs."""
    total = a.require("total")
    ranges = _ranges(a)
    piece = int(np.median([e - s for s, e in ranges]))
    if not measure.same_result(total, sum(reference_total(e, s) for s, e in ranges)):
        return a.not_yet("`total` is not the sum over all of `ranges`: the pieces must cover every range exactly "
                         "once (each piece starts where the previous one stopped).", mistake="results")
    n = measure.tasks(a.trace, FUNCTION)
    if n == 0:
        return a.not_yet("no work task ran on a worker: the pieces were computed here in the notebook.",
                         mistake="local")
    tiny = a.report.finding(Code.TASKS_TOO_SMALL)
    if tiny is not None or n > MAX_TASKS:
        why = " (the Scheduling overhead finding)" if tiny is not None else ""
        return a.not_yet(f"{n} tasks: the pieces are so small that scheduling each one is a large share of its "
                         f"work{why}; the ordinary ranges hold {piece:,} numbers, and under {MAX_TASKS} tasks "
                         "each is worth sending.", mistake="too-small")
    u = measure.dispatch_units(a.trace, FUNCTION)
    med = float(np.median(u.body)) if len(u) else 0.0
    slowest = float(u.body.max()) if len(u) else 0.0
    ratio = slowest / med if med > 0 else 0.0
    # As the Straggler finding counts: over 3x the median *and* 50 ms more (a preempted 6 ms task is no giant).
    dominant = ratio > STRAGGLER_RATIO and slowest - med >= STRAGGLER_FLOOR_S
    tail = [code for code in TAIL_FINDINGS if a.report.finding(code) is not None]
    if tail or dominant:
        names = {Code.STRAGGLER: "Straggler", Code.LONG_TAIL: "Long tail", Code.CRITICAL_PATH: "Partition"}
        said = f" ({', '.join(names[c] for c in tail)})" if tail else ""
        return a.not_yet(f"one task ran far longer than the others{said}: the oversized range was left whole, so "
                         f"the other workers finished early and waited for it (an ordinary range holds {piece:,} "
                         "numbers).", mistake="giant", details=(f"slowest task {fmt_x(ratio)} the median",))
    w = max(a.workers, 2)
    replayed = a.replayed_speedup(w)
    on = f"on {w} workers" + (" (this run had 1 worker, so the check uses the replay)" if a.workers < 2 else "")
    if replayed < MIN_REPLAYED_SPEEDUP:
        return a.not_yet(f"the pieces look even, yet the replay {on} predicts only {fmt_x(replayed)}, under "
                         f"{fmt_x(MIN_REPLAYED_SPEEDUP)}: the pieces ran one after another, as if each was "
                         "waited for before the next was submitted.", mistake="serial")
    return a.passed(f"{n} tasks, none over {STRAGGLER_RATIO:g}x the median; no Straggler, Long tail or Partition "
                    "finding and no Scheduling overhead finding",
                    f"the replay {on} predicts over {fmt_x(MIN_REPLAYED_SPEEDUP)}; the total equals the reference",
                    details=(f"slowest task {ratio:.1f}x the median", f"replayed speedup {fmt_x(replayed)}"))
