"""The GIL finding: on the threads engine, a function's tasks waited for the interpreter lock, not for I/O.

All tasks of the threads engine run in one Python process, which runs Python bytecode on one
thread at a time. A pure-Python function there gets no speedup however many threads run it; only
code that releases the lock (I/O, sleep, NumPy on large arrays, compiled code) runs side by side.
The wait is read by :mod:`eugo_lab.analysis.gil` (an upper bound from the other tasks' CPU time),
together with the run-queue wait the threads' hand-overs of the lock cause.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis import gil
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import WARNING, fmt_pct
from eugo_lab.units import fmt_seconds as fmt_s

# A function's bodies waited for the lock or a core a fifth of their time or more (the same bar
# as the run queue's Contention), over at least 10 ms in all: under that, hand-overs of the lock
# between threads doing mostly I/O cost little.
GIL_SHARE = 0.2
GIL_MIN_S = 0.01


def gil_wait(ctx: Context) -> list[Finding]:
    """One finding per function whose tasks on a shared interpreter mostly waited for it (see ``GIL_SHARE``)."""
    if not gil.shares_interpreter(ctx.trace.meta) or ctx.workers < 2:
        return []
    u, out = ctx.units, []
    waited = ctx.gil_wait + np.nan_to_num(u.runq)
    for f in np.unique(u.function):
        sel = u.function == f
        body, wait, cpu = float(u.body[sel].sum()), float(waited[sel].sum()), float(u.cpu[sel].sum())
        if body <= 0 or wait < GIL_MIN_S or wait < GIL_SHARE * body:
            continue
        name = f"{ctx.fname(f)}()"
        verdict = (f"{name} ran on {ctx.workers} threads of one Python process and computed {fmt_pct(cpu / body)} "
                   f"of its tasks' time; they waited {fmt_pct(wait / body)} ({fmt_s(wait)}) for the interpreter "
                   "lock (the GIL) or a core while another thread ran. Python runs one thread at a time: that "
                   "wait is neither work nor I/O.")
        advice = ("Threads help only where tasks release the GIL (I/O, sleep, NumPy on large arrays, compiled "
                  "code). For Python code like this, run processes: %%eugo -b local, or hpc.init(backend=\"local\").")
        ev = {"function": name, "wall": body, "cpu": cpu, "gil_wait": float(ctx.gil_wait[sel].sum()),
              "runq": float(np.nansum(u.runq[sel])), "wait_ratio": wait / body}
        out.append(Finding(Code.GIL_WAIT, "Contention", WARNING, verdict, advice, ev, related=("Compute-bound",)))
    return out
