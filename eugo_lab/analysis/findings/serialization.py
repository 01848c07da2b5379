"""The Serialization findings: (un)pickling dominating the workers, or the same big argument sent again and again.

The repeated argument is priced as ``hpc.put``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.submission import SUBMIT_COST_S
from eugo_lab.analysis.report import WARNING, fmt_pct
from eugo_lab.analysis.timeline import bandwidth
from eugo_lab.units import capitalized, fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s

# Serialization dominates when (un)pickling is a fifth or more of the worker's busy time
# (then it costs as much as losing one worker in five), and at least 10 ms in total.
SERIALIZATION_SHARE = 0.2
SERIALIZATION_MIN_S = 0.01
# The same argument size shipped repeatedly: from 1 MB, re-sending costs milliseconds per
# task; three repeats rule out coincidence between two similar inputs.
REPEAT_MIN_BYTES = 1_000_000
REPEAT_MIN_COUNT = 3
# Pickling an argument at .remote() costs the driver up to ~5x what unpickling it costs a
# worker (measured here: a list of a million ints, 0.2-0.29 s to pickle through the
# future-aware pickler, 0.05-0.08 s to unpickle; bytes and arrays are a memcpy both ways).
# The put what-if credits at most 8x the unpickling (and never more than the driver's time
# between submissions), so a loop that also built something is not all credited to pickling.
PICKLE_PER_UNPICKLE = 8.0
# hpc.put pickles the object once with the plain pickler: about half a worker's unpickling
# (measured: 29 ms to put the same list).
PUT_PER_UNPICKLE = 0.5
# Sending less data removes only the (un)pickling that the bytes cost, never a task's own framing (its
# function reference, the result's envelope: ~10 us a task on this 2-core VM, whatever it carries). A
# byte costs at most this much to pickle or unpickle: the slowest measured here was a list of one-item
# lists, ~330 ns a byte to unpickle on a busy core (a list of ints ~35, a NumPy array ~1.5).
PICKLING_MAX_S_PER_BYTE = 4e-7
# Tasks that carry at most this many bytes in and out measure what (un)pickling a task costs without data.
BARE_TASK_BYTES = 1_000


def serialization(ctx: Context) -> list[Finding]:
    """(Un)pickling dominating the workers, or the same big argument shipped again and again."""
    u, out = ctx.units, []
    # Imports while unpickling the arguments on a new worker are its warm-up (the Warm-up finding's), not data.
    # On the threads engine, waiting for the interpreter lock while (un)pickling is the GIL finding's.
    warm_deser = np.minimum(ctx.warm_up[1] + ctx.pickling_gil_wait, u.deser + u.ser)
    ser = float((u.deser + u.ser - warm_deser).sum())
    busy = ser + float(u.body.sum())
    if ser >= SERIALIZATION_MIN_S and busy > 0 and ser >= SERIALIZATION_SHARE * busy:
        by_fn = {int(f): float((u.deser + u.ser - warm_deser)[u.function == f].sum()) for f in np.unique(u.function)}
        top = ctx.fname(min(by_fn, key=lambda f: (-by_fn[f], f)))
        # Bytes in by every route: the arguments, and the function payloads the region shipped (a global or
        # a partial's bound arguments travel inside the function's pickle, which no argument shows).
        shipped = sum(f.bytes_sent for f in ctx.trace.functions_shipped)
        bin_, bout = float(u.bytes_in.sum()) + shipped, float(u.bytes_out.sum())
        verdict = (f"workers spent {fmt_s(ser)} ({fmt_pct(ser / busy)} of their busy time) pickling and unpickling "
                   f"({fmt_bytes(bin_, '.3g')} in, {fmt_bytes(bout, '.3g')} out), mostly in {top}().")
        verdict = capitalized(verdict)
        advice = ("Send less: pass big inputs once with hpc.put() or let tasks load their own data, and return "
                  "summaries instead of large results.")
        finding = Finding(Code.SERIALIZATION, "Serialization", WARNING, verdict, advice,
                          {"serialization": ser, "share": ser / busy, "bytes_in": bin_, "bytes_out": bout,
                           "function": top})
        # Priced as if no byte were pickled: the most sending less can save. A task's bare framing stays.
        fixed = whatif.shorter(ctx.replay, np.arange(len(u)), bytes_pickling(ctx, u.deser + u.ser - warm_deser))
        found = priced(ctx, finding, fixed, "send less data to and from the tasks (hpc.put, summaries)")
        if ctx.worth_flagging(found.saves):  # else its time is the tasks' own overhead (tasks too small), not data
            out.append(found)
    single = u.n_items == 1
    big = single & (u.bytes_in >= REPEAT_MIN_BYTES)
    group = _argument_groups(ctx, np.flatnonzero(big))
    for f in np.unique(u.function[big]):
        sel = np.flatnonzero(big & (u.function == f))
        counts = Counter(group[i] for i in sel)
        first: dict[tuple, int] = {}
        for i in sel:
            first.setdefault(group[i], int(i))
        # The most repeated argument; ties go to the larger one, then the one sent first (deterministic).
        g, n = min(counts.items(), key=lambda kv: (-kv[1], -float(u.bytes_in[first[kv[0]]]), first[kv[0]]))
        if n < REPEAT_MIN_COUNT:
            continue
        idx = np.array([i for i in sel if group[i] == g], dtype=np.int64)
        size = float(np.median(u.bytes_in[idx]))  # the same argument; small ones beside it may differ a little
        total = float(u.bytes_in[idx].sum())
        name = ctx.fname(f)
        verdict = f"{name}() was sent a {fmt_bytes(size, '.3g')} argument {n} times ({fmt_bytes(total, '.3g')} in all)."
        advice = (f"Store it once with ref = hpc.put(data) and pass ref to {name}.remote(ref, ...): workers read "
                  "it without re-sending.")
        copies = _driver_copies(ctx, idx, size)
        if copies is not None and copies < n:
            # The local pool shares a large array sent by value to several pending tasks (backends.local_args):
            # say what happened, and what put still does better.
            verdict += (f" The local pool copied it into shared memory {_times(copies)} and gave the other tasks "
                        f"{'that copy' if copies == 1 else 'those copies'} (each its own to change, copy-on-write), "
                        "after comparing the array's bytes with the stored copy on every later call.")
            advice += " put makes the sharing explicit: no comparison per call, and it works on every engine."
        finding = Finding(Code.REPEATED_ARGUMENT, "Serialization", WARNING, verdict, advice,
                          {"function": name, "bytes": int(size), "count": n, "total_bytes": int(total),
                           **({"copies": copies} if copies is not None else {})})
        pickling = _pickling(ctx, idx, size)
        fixed = whatif.sent_once(ctx.replay, idx, pickling, u.deser[idx], keep=min(ctx.workers, len(idx)),
                                 put=_put_cost(ctx, idx, pickling),
                                 pre=_bare(ctx.replay.pre, u.bytes_in, size / bandwidth(ctx.trace)),
                                 post=_bare(ctx.replay.post, u.bytes_in, size / bandwidth(ctx.trace)))
        out.append(priced(ctx, finding, fixed, f"send {name}()'s {fmt_bytes(size, '.3g')} argument once with hpc.put"))
    return out


def bytes_pickling(ctx: Context, pickling: np.ndarray) -> np.ndarray:
    """Per unit: the part of its (un)pickling seconds ``pickling`` that its bytes cost, what sending less removes.

    Two bounds from the trace: beyond what a task carrying almost nothing took to (un)pickle in this run
    (the median over units of at most ``BARE_TASK_BYTES``; none such: 0), and at most its bytes (in, out,
    and the function payloads shipped with it) at ``PICKLING_MAX_S_PER_BYTE``. 2,000 tasks of an int
    each spent 20 ms (un)pickling 43 kB: none of it was the data.
    """
    u = ctx.units
    nbytes = (u.bytes_in + u.bytes_out).astype(float)
    for f in ctx.trace.functions_shipped:  # a payload goes with the first task of its function on each worker
        code = [i for i, name in enumerate(ctx.trace.functions) if name == f.function]
        sel = np.flatnonzero(np.isin(u.function, code))
        if not len(sel):
            continue
        if f.sends >= len(sel):
            nbytes[sel] += f.payload_bytes
        else:
            late = sel[np.argsort(-u.occ_start[sel], kind="stable")]
            first = {int(w): int(i) for i, w in zip(late, u.worker[late])}  # the last write: each worker's earliest
            nbytes[list(first.values())] += f.payload_bytes
    small = nbytes <= BARE_TASK_BYTES
    bare = float(np.median(pickling[small])) if small.any() else 0.0
    return np.minimum(np.clip(pickling - bare, 0.0, None), nbytes * PICKLING_MAX_S_PER_BYTE)


def _driver_copies(ctx: Context, idx: np.ndarray, size: float) -> int | None:
    """How many copies of a ``size``-byte argument the driver made for the units ``idx`` (None: not known).

    From the driver's serializing spans, whose bytes are what it really copied (an engine that shares
    one copy between tasks counts it once). Known only when every one of those calls has its span
    (calls under ``tracing.driver.SPAN_MIN_S`` are summed without their bytes, and a trace saved
    before the spans has none).
    """
    spans = ctx.trace.driver_spans
    if not len(spans["kind"]) or size <= 0:
        return None
    tasks = np.unique(ctx.units.task_id[idx])
    kind, task, nbytes = (np.asarray(spans[c]) for c in ("kind", "task", "bytes"))
    mine = (kind == 0) & np.isin(task, tasks)
    if len(np.unique(task[mine])) < len(tasks):
        return None
    return int(round(float(nbytes[mine].sum()) / size))


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _argument_groups(ctx: Context, idx: np.ndarray) -> dict[int, tuple]:
    """Per unit of ``idx``: what identifies its large argument, so tasks sent the same one share a group.

    The driver's record of the argument (``trace.arg_keys``: the same object, the same key)
    where there is one, so small arguments beside it that differ from call to call do not
    split the group; else (a trace from before the record, an argument the driver could
    not name) the pickle's exact size.
    """
    u = ctx.units
    k = ctx.trace.arg_keys
    key_of = dict(zip(k["task"].tolist(), k["key"].tolist()))
    return {int(i): ("arg", key_of[t]) if t in key_of else ("bytes", int(b))
            for i, t, b in zip(idx.tolist(), u.task_id[idx].tolist(), u.bytes_in[idx].tolist())}


def _pickling(ctx: Context, idx: np.ndarray, size: float) -> np.ndarray:
    """Per unit of ``idx``: the driver's seconds pickling its copy of the argument at ``.remote()``.

    Not timed by the trace, so bounded from both sides: at most the driver's time since the
    previous submission (minus a bare ``.remote()``, ``SUBMIT_COST_S``), and taken as the
    larger of moving the bytes (``size / bandwidth``) and ``PICKLE_PER_UNPICKLE`` times the
    worker's measured unpickling of the same bytes.
    """
    u = ctx.units
    ready = u.ready[idx]
    srt = np.sort(u.ready)
    prev = np.searchsorted(srt, ready, side="left") - 1
    # The first submission's copy was pickled after the region began (the driver's time before it).
    gap = ready - np.where(prev >= 0, srt[np.clip(prev, 0, None)], ctx.window.start)
    est = np.maximum(size / bandwidth(ctx.trace), PICKLE_PER_UNPICKLE * u.deser[idx])
    return np.clip(np.minimum(gap - SUBMIT_COST_S, est), 0.0, None)


def _put_cost(ctx: Context, idx: np.ndarray, pickling: np.ndarray) -> float:
    """The driver's seconds for the one copy a put (``hpc.put``, ``client.scatter``, ``ray.put``) still makes.

    Where the workers' unpickling was measured, a plain pickle of it (``PUT_PER_UNPICKLE``); where the
    engine does not time it (Dask, Ray: 0 s in the trace), one copy as this run paid for it: the median of
    the units' ``pickling``. It is a cost of its own before the loop: taking it off the first submission's
    credit lost it whenever that credit was smaller (a first submission has no gap before it), and a Dask
    cell's scatter was priced at nothing, its saving 3-9x what scattering achieved.
    """
    deser = ctx.units.deser[idx]
    if (deser > 0).any():
        return PUT_PER_UNPICKLE * float(np.median(deser[deser > 0]))
    return float(np.median(pickling)) if len(pickling) else 0.0


def _bare(latency: np.ndarray, bytes_in: np.ndarray, copy_s: float) -> float:
    """A dispatch or return latency without a big argument in flight.

    The median over small-argument units when there are any. Otherwise every measured
    latency had a copy travelling (``copy_s``: one copy's transfer time): a dispatch carried
    its own, and a result waited behind the copy the driver's one I/O thread was sending to
    the other worker. Measured on a 5 MB list to 12 tasks: 7-8 ms before dispatch and 5 ms
    before a result arrived with the copies, 0.1 ms each with hpc.put.
    """
    small = bytes_in < REPEAT_MIN_BYTES
    if small.any():
        return float(np.median(latency[small]))
    return max(float(latency.min()) - copy_s, 0.0) if len(latency) else 0.0
