"""The Recursion too fine finding: tasks that submit tasks, down to pieces too small to pay their overhead.

A divide-and-conquer task (a quicksort that submits a task per partition, a recursive sum) is
fast only while each task's work is well above what a task costs. Recursing down to tiny pieces
makes most tasks bottom ones that run microseconds and cost a round trip each, while their
parents wait: a ported quicksort ran 3x slower than serially this way, on Eugo and on Ray alike.

Everything is read from the trace: which task submitted which (``trace.parent``), each task's own
work (its body less its waits on its children), and a bottom task's round trip (``received -
ready - body``, while its parent waits). Priced by a recursion that stops where a piece's work is
under ``CUTOFF_PER_OVERHEAD`` times the per-task overhead: each subtree below that runs inside its
root, and the run's wall is bounded by the greedy schedule (Brent: work / workers + the longest
chain), never more than measured.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import PROBLEM, WARNING, fmt_pct
from eugo_lab.analysis.timeline import child_waits
from eugo_lab.contract.row import ERROR, OK
from eugo_lab.units import fmt_seconds as fmt_s

# Bottom tasks are too small when their round trip beyond the body is at least their body (the
# Scheduling overhead finding's rule), and there are at least 10 of them.
OVERHEAD_RATIO = 1.0
MIN_BOTTOM_TASKS = 10
# A piece is worth a task of its own when its work is at least 10 times a task's overhead (the
# overhead is then at most a tenth of it): the cut-off the what-if applies.
CUTOFF_PER_OVERHEAD = 10.0


def recursion_too_fine(ctx: Context) -> list[Finding]:
    """Per function that submits itself or others from inside tasks: bottom tasks too small for their overhead."""
    t = ctx.trace
    parent = t.parent
    if not len(parent) or not (parent >= 0).any():
        return []
    tasks = t.tasks
    first = (np.asarray(tasks["attempt"]) == 1) & np.isin(np.asarray(tasks["status"]), (OK, ERROR))
    ids = np.asarray(tasks["task_id"])[first]
    own = (tasks["end"] - tasks["start"] - child_waits(t))[first]
    rt = (tasks["received"] - tasks["ready"])[first]
    fn = np.asarray(tasks["function"])[first]
    par = parent[first]
    ok = np.isfinite(own) & np.isfinite(rt)
    ids, own, rt, fn, par = ids[ok], np.clip(own[ok], 0.0, None), rt[ok], fn[ok], par[ok]
    has_kids = np.isin(ids, par[par >= 0])
    bottom = (par >= 0) & ~has_kids
    overhead = np.clip(rt - own, 0.0, None)
    small = bottom & (overhead >= OVERHEAD_RATIO * own)
    if int(small.sum()) < MIN_BOTTOM_TASKS or 2 * int(small.sum()) < int(bottom.sum()):
        return []
    ovh = float(np.median(overhead[small]))
    if ovh <= 0:
        return []
    after, kept = _with_cutoff(ids, par, own, ovh, CUTOFF_PER_OVERHEAD * ovh, ctx.workers)
    after = min(after, ctx.wall)
    saves = ctx.wall - after
    if not ctx.worth_flagging(saves):
        return []
    name = ctx.fname(int(np.bincount(fn[small]).argmax()))
    work = float(own.sum())
    n, n_small = len(ids), int(small.sum())
    body = float(np.median(own[small]))
    cutoff = CUTOFF_PER_OVERHEAD * ovh
    slower = ctx.wall / work if work > 0 else 0.0
    verdict = (f"The recursion made {n} {name}() tasks; {n_small} of them, at the bottom, ran {fmt_s(body)} each but "
               f"cost {fmt_s(ovh)} of overhead each while their parents waited: the tasks' work came to {fmt_s(work)}"
               f" and the run took {fmt_s(ctx.wall)}" + (f" ({slower:.1f}x that work)." if slower >= 1.05 else "."))
    advice = (f"Stop recursing below a size: at the top of {name}(), compute a piece directly (in the task, "
              "without submitting more tasks) when it is small, and submit tasks only for pieces of at least "
              f"{fmt_s(cutoff)} of work ({CUTOFF_PER_OVERHEAD:.0f}x a task's {fmt_s(ovh)} overhead), so each "
              "task's work pays for its overhead.")
    sev = PROBLEM if saves >= 0.5 * ctx.wall else WARNING
    ev = {"function": name, "tasks": n, "bottom_tasks": n_small, "median_body": body, "median_overhead": ovh,
          "work": work, "cutoff": cutoff, "tasks_after": kept, "share_saved": saves / ctx.wall if ctx.wall else 0.0}
    return [Finding(Code.RECURSION_TOO_FINE, "Scheduling overhead", sev, verdict, advice, ev,
                    related=("Batching",), saves=saves, wall_after=after,
                    fix=f"stop {name}()'s recursion at pieces of {fmt_s(cutoff)} of work "
                        f"({fmt_pct(kept / n)} of the tasks left)")]


def _with_cutoff(ids: np.ndarray, parent: np.ndarray, own: np.ndarray, ovh: float, cutoff: float,
                 workers: int) -> tuple[float, int]:
    """The wall time bound of the same tree with no task for a piece under ``cutoff`` of work, and its task count.

    A task whose subtree's work is under ``cutoff`` runs that subtree itself (no task below it). Each
    task left costs ``ovh`` beside its work. The greedy schedule's bound (Brent): all work and
    overhead over the workers, plus the longest chain of tasks each waiting on its slowest child.
    """
    index = {int(t): i for i, t in enumerate(ids.tolist())}
    kids: dict[int, list[int]] = {}
    for i, p in enumerate(parent.tolist()):
        if p in index:
            kids.setdefault(index[p], []).append(i)
    roots = [i for i, p in enumerate(parent.tolist()) if p not in index]
    depth = np.zeros(len(ids), dtype=np.int64)
    stack = list(roots)
    while stack:  # top-down from the tasks nobody in the trace submitted
        i = stack.pop()
        for c in kids.get(i, ()):
            depth[c] = depth[i] + 1
            stack.append(c)
    order = np.argsort(-depth, kind="stable")  # the deepest first: a task after all its children
    subtree = own.astype(float).copy()
    for i in order.tolist():
        for c in kids.get(i, ()):
            subtree[i] += subtree[c]
    chain = np.zeros(len(ids))
    # Top-down: which tasks remain (a task remains when its parent remains and split it).
    remains = np.zeros(len(ids), dtype=bool)
    split = np.zeros(len(ids), dtype=bool)  # a remaining task that still submits its children
    stack = list(roots)
    while stack:
        i = stack.pop()
        remains[i] = True
        split[i] = subtree[i] >= cutoff and bool(kids.get(i))
        if split[i]:
            stack.extend(kids[i])
    kept = int(remains.sum())
    for i in order.tolist():
        if not remains[i]:
            continue
        if split[i]:
            chain[i] = own[i] + ovh + max(chain[c] for c in kids[i])
        else:
            chain[i] = subtree[i] + ovh
    longest = max((float(chain[r]) for r in roots), default=0.0)
    total = float(own.sum()) + kept * ovh
    return total / max(workers, 1) + longest, kept
