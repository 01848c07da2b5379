"""One cause, one piece of advice: findings that a data finding explains are folded into it.

(A Slow submission spent pickling arguments is a data finding of the driver's side: it explains
the scheduling overhead of those tasks, which batching would not remove.)

A large argument sent by value, or large results sent back, make a task's round trip long
whatever its body does: the same time then also reads as scheduling overhead ("batch=3"), as
serialization in general, as a slow submission loop, as a long tail of 28 us tasks, or as a
chain of tasks that seem to wait for each other. Those are not separate wins: the data finding
says so in its verdict, lists them in ``evidence["explains"]``, and they leave the report.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, units_of
from eugo_lab.analysis.findings.finding import Finding

# What each folded finding is called in the explaining finding's verdict.
_WHAT = {
    Code.TASKS_TOO_SMALL: "their scheduling overhead",
    Code.SERIALIZATION: "the workers' time pickling",
    Code.SLOW_SUBMISSION: "the slow submission loop",
    Code.LONG_TAIL: "the long tail",
    Code.CRITICAL_PATH: "the chain of tasks the run seemed to wait on",
}


def _functions_of(ctx: Context, task_ids: list[int]) -> tuple[set[str], np.ndarray]:
    idx = np.array(units_of(ctx, task_ids), dtype=np.int64)
    return {ctx.fname(int(f)) for f in ctx.units.function[idx]}, idx


def _explains(ctx: Context, data: Finding, f: Finding) -> bool:
    """Whether ``data`` (a Repeated argument, Large results, or a Slow submission spent pickling) explains ``f``."""
    if data.code == Code.SLOW_SUBMISSION:
        # The driver pickling each task's arguments at .remote(): batching items would pickle the same bytes.
        return f.code == Code.TASKS_TOO_SMALL and f.evidence.get("function") in data.evidence.get("functions", ())
    fn = data.evidence["function"]
    if f.code == Code.TASKS_TOO_SMALL or f.code == Code.SERIALIZATION:
        return f.evidence.get("function") == fn
    if f.code == Code.SLOW_SUBMISSION:
        return (data.code == Code.REPEATED_ARGUMENT and f.evidence.get("cause") == "pickling"
                and fn in f.evidence.get("functions", ()))
    if f.code == Code.LONG_TAIL:
        names, idx = _functions_of(ctx, f.evidence["tasks"])
        # The tail is not body time (splitting the bodies cannot shorten it): it is the data's round trip.
        return names == {fn} and float(ctx.units.body[idx].sum()) < 0.5 * f.evidence["tail"]
    if f.code == Code.CRITICAL_PATH:
        # A chain whose bodies are a small part of it: its time is the data's (each task ready only after the
        # previous copy was pickled, or a result waiting to be read), not work to partition or fan out.
        names, idx = _functions_of(ctx, f.evidence["tasks"])
        return names == {fn} and float(ctx.units.body[idx].sum()) < 0.5 * f.evidence["length"]
    return False


def _explainers(found: list[Finding]) -> list[Finding]:
    """The findings that can explain others, the data findings first (the one that saves most first)."""
    data = sorted((f for f in found if f.code in (Code.REPEATED_ARGUMENT, Code.LARGE_RESULTS)),
                  key=lambda f: -(f.saves or 0.0))
    return data + [f for f in found if f.code == Code.SLOW_SUBMISSION and f.evidence.get("cause") == "pickling"]


def fold(ctx: Context, found: list[Finding]) -> list[Finding]:
    """``found`` with the findings another explains folded into the one that explains them (see ``_explains``)."""
    data = _explainers(found)
    if not data:
        return found
    owner: dict[int, Finding] = {}
    for f in found:
        by = next((d for d in data if d is not f and _explains(ctx, d, f)), None)
        if by is not None:
            owner[id(f)] = by
    folded: dict[int, list[Finding]] = {id(d): [] for d in data}
    out = []
    for f in found:
        by = owner.get(id(f))
        if by is None:
            out.append(f)
            continue
        while id(by) in owner:  # explained by a finding that is itself explained: the first cause says it
            by = owner[id(by)]
        folded[id(by)].append(f)
    result = []
    for f in out:
        inner = folded.get(id(f))
        if inner:
            what = [_WHAT[g.code] for g in inner]
            listed = what[0] if len(what) == 1 else ", ".join(what[:-1]) + " and " + what[-1]
            f = dataclasses.replace(
                f, verdict=f"{f.verdict} The same cause explains {listed}: not listed as separate fixes.",
                evidence={**f.evidence, "explains": [str(g.code) for g in inner]})
        result.append(f)
    return result
