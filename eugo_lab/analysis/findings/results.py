"""The Large results finding: tasks that send large results back, priced as returning a summary.

Batching is never the advice here: a batch returns all its items' results at once, so batch=2
doubles the bytes each task sends back and holds, and saves nothing of their transfer.
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import WARNING
from eugo_lab.analysis.timeline import bandwidth
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s

# A result is large from 1 MB, the size from which moving an argument costs milliseconds per
# task (findings.serialization.REPEAT_MIN_BYTES); two such results of one function make it a habit.
LARGE_RESULT_BYTES = 1_000_000
LARGE_RESULT_MIN_COUNT = 2


def large_result_units(ctx: Context, f: int) -> np.ndarray:
    """Indices of function ``f``'s single-task units whose result was at least ``LARGE_RESULT_BYTES``."""
    u = ctx.units
    return np.flatnonzero((u.function == f) & (u.n_items == 1) & (u.bytes_out >= LARGE_RESULT_BYTES))


def large_results(ctx: Context) -> list[Finding]:
    """Per function: large results sent back (see ``LARGE_RESULT_*``), priced as a summary returned instead.

    Reported when that fix is worth flagging (``Context.worth_flagging``): a result's bytes are
    often the point of the task, and only their price says whether returning less is worth it.
    """
    u, out = ctx.units, []
    bw = bandwidth(ctx.trace)
    for f in np.unique(u.function):
        idx = large_result_units(ctx, int(f))
        if len(idx) < LARGE_RESULT_MIN_COUNT:
            continue
        sizes = u.bytes_out[idx]
        # The bytes' time at the backend's bandwidth, never more than the return latency measured.
        transfer = np.minimum(sizes / bw, ctx.replay.post[idx])
        fixed = whatif.returned_small(ctx.replay, idx, u.ser[idx], transfer)
        p = ctx.predict(fixed)
        if not ctx.worth_flagging(p.saves):
            continue
        name, total = ctx.fname(int(f)), float(sizes.sum())
        verdict = (f"{len(idx)} {name}() tasks sent back results of {fmt_bytes(float(np.median(sizes)), '.3g')} "
                   f"each ({fmt_bytes(total, '.3g')} in all): pickling them took the workers "
                   f"{fmt_s(float(u.ser[idx].sum()))}, and moving them to the notebook about "
                   f"{fmt_s(float(transfer.sum()))}.")
        advice = (f"Return less from {name}(): reduce on the worker (a sum, a mean, a smaller dtype or a "
                  "downsampled array), or write the result to a file in the task and return its path. Do not batch "
                  "these tasks: a batch sends all its items' results at once, which doubles the bytes per task "
                  "with batch=2 and saves none of their transfer.")
        finding = Finding(Code.LARGE_RESULTS, "Transfer cost", WARNING, verdict, advice,
                          {"function": name, "tasks": int(len(idx)), "bytes": int(np.median(sizes)),
                           "total_bytes": int(total), "pickling": float(u.ser[idx].sum()),
                           "transfer": float(transfer.sum())},
                          related=("Serialization", "Batching"))
        out.append(priced(ctx, finding, fixed, f"return a summary of {name}()'s results instead of the results"))
    return out
