"""Detector: a large object captured by a task function (Ray's anti-pattern "closure capturing large objects").

A task function that reads a big global array (or a closure cell holding one) carries it
inside its own pickle: it travels to every worker with the function's code (the local pool:
once per worker process; Dask and Ray: with every task), and no task argument shows it, so
the repeated-argument finding cannot see it. The trace records what each function's
payload carried and how often it was sent (``Trace.functions_shipped``); this detector
flags a function whose captured globals and closures carry at least ``CAPTURE_MIN_BYTES``
and that the region shipped, priced with what ``hpc.put`` would save: the object stored
once, every send after the first no longer copying it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.serialization import REPEAT_MIN_BYTES
from eugo_lab.analysis.report import WARNING
from eugo_lab.analysis.timeline import bandwidth
from eugo_lab.contract.serialization import BOUND_PREFIX
from eugo_lab.units import fmt_bytes

# The repeated-argument finding's threshold: from 1 MB, each copy costs milliseconds.
CAPTURE_MIN_BYTES = REPEAT_MIN_BYTES


def detect(ctx: Context) -> list[Finding]:
    """One finding per shipped function whose captured globals/closure cells carry ``CAPTURE_MIN_BYTES`` or more."""
    out: list[Finding] = []
    u = ctx.units
    for f in ctx.trace.functions_shipped:
        if f.captured_bytes < CAPTURE_MIN_BYTES or f.sends < 1 or not f.captured:
            continue
        name, size = f.captured[0]
        sent = f.captured_bytes * f.sends
        saved = sent - f.captured_bytes  # hpc.put stores it once
        copy_s = f.captured_bytes / bandwidth(ctx.trace)
        bound = name.startswith(BOUND_PREFIX)
        what = f"its {name} ({fmt_bytes(size, '.3g')}, bound by functools.partial)" if bound \
            else f"the global {name!r} ({fmt_bytes(size, '.3g')})"
        verdict = (f"{f.function}() carries {what} inside its pickled "
                   f"code: the function was sent to workers {f.sends} time{'' if f.sends == 1 else 's'} "
                   f"({fmt_bytes(sent, '.3g')} of captured data in all), and no task argument shows it.")
        if bound:
            advice = ("Store it once with ref = hpc.put(data) and pass ref as a task argument "
                      "(fn.remote(ref, item) for each item) instead of binding the object with functools.partial: "
                      "workers then map it instead of receiving a copy with every new function object.")
        else:
            advice = (f"Store it once with ref = hpc.put({name}) and pass ref to {f.function}.remote(ref, ...), "
                      f"reading the argument instead of the global: workers then map it instead of receiving a copy "
                      "with the function.")
        finding = Finding(Code.CAPTURED_OBJECT, "Serialization", WARNING, verdict, advice,
                          {"function": f.function, "variable": name, "bytes": int(size),
                           "captured_bytes": int(f.captured_bytes), "sends": int(f.sends), "sent_bytes": int(sent),
                           "saved_bytes": int(saved), "saved_s": saved / bandwidth(ctx.trace),
                           "captured": [list(c) for c in f.captured]})
        code = ctx.trace.functions.index(f.function) if f.function in ctx.trace.functions else -1
        idx = np.flatnonzero(u.function == code)
        if len(idx) == 0:
            out.append(finding)
            continue
        # Each send delays the first task it carries (one per worker on the local pool, every task on Dask
        # and Ray) by the copy; with hpc.put that copy is gone (its one store is the put's own pickle).
        first = idx[np.argsort(u.ready[idx], kind="stable")][: f.sends]
        pre = ctx.replay.pre.copy()
        pre[first] = np.maximum(pre[first] - copy_s, 0.0)
        fixed = dataclasses.replace(ctx.replay, pre=pre)
        out.append(priced(ctx, finding, fixed, f"pass {f.function}()'s captured {name!r} once with hpc.put"))
    return out
