"""The detectors, in the order :func:`eugo_lab.analysis.analyze` runs them.

The order is part of the output: findings with equal savings keep it in the report (the
sort is stable), so a new detector goes where its findings should rank among equals.
Each entry names the codes its findings carry; every :class:`Code` has exactly one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eugo_lab.analysis.findings import (
    batching,
    blocking,
    boundness,
    capture,
    contention,
    critical,
    explained,
    gil_wait,
    idioms,
    imbalance,
    recursion,
    results,
    serialization,
    speedup,
    submission,
    warmup,
)
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, aims_at_engine
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.idle import idle_cluster


def _nothing(found: list[Finding]) -> tuple:
    return ()


def _everything(found: list[Finding]) -> tuple[list[Finding]]:
    """The speedup's advice weighs every other finding."""
    return (found,)


def _blocked(found: list[Finding]) -> tuple[bool]:
    """The critical path is skipped when the Blocking finding already explains the chain."""
    return (any(f.code == Code.BLOCKING for f in found),)


def _unbalanced(found: list[Finding]) -> tuple[frozenset[str]]:
    """Stragglers skip the functions whose Unbalanced partitions finding names the cause."""
    return (frozenset(f.evidence["function"] for f in found if f.code == Code.UNBALANCED_PARTITIONS),)


@dataclass(frozen=True)
class Detector:
    """One detector: the codes of its findings and the function that looks for them.

    ``find`` takes the :class:`Context` and what ``given`` draws from the findings of the
    detectors before it (some defer to those); ``leads``: its findings go before the
    others' (the speedup, which is worded from all the others and so runs last).
    """

    codes: tuple[Code, ...]
    find: Callable[..., list[Finding]]
    given: Callable[[list[Finding]], tuple] = _nothing
    leads: bool = False

    def run(self, ctx: Context, found: list[Finding]) -> list[Finding]:
        """The findings of this detector on ``ctx``, after ``found``."""
        return self.find(ctx, *self.given(found))


#: What :func:`eugo_lab.analysis.analyze` runs on a trace, in this order.
REGISTRY: tuple[Detector, ...] = (
    Detector((Code.BLOCKING,), blocking.blocking),
    Detector((Code.SUBMISSION_ORDER,), submission.submission_order),
    Detector((Code.SLOW_SUBMISSION,), submission.slow_submission),
    Detector((Code.CRITICAL_PATH,), critical.critical, _blocked),
    Detector((Code.UNBALANCED_PARTITIONS,), imbalance.unbalanced),
    Detector((Code.WARM_UP,), warmup.warm_up),
    Detector((Code.STRAGGLER,), imbalance.stragglers, _unbalanced),
    Detector((Code.LONG_TAIL,), imbalance.long_tail),
    Detector((Code.TASKS_TOO_SMALL,), batching.tasks_too_small),
    Detector((Code.RECURSION_TOO_FINE,), recursion.recursion_too_fine),
    Detector((Code.SERIALIZATION, Code.REPEATED_ARGUMENT), serialization.serialization),
    Detector((Code.LARGE_RESULTS,), results.large_results),
    Detector((Code.CAPTURED_OBJECT,), capture.detect),
    Detector((Code.IO_BOUND, Code.COMPUTE_BOUND, Code.IO_BOUND_PHASE, Code.COMPUTE_BOUND_PHASE),
             boundness.boundness),
    Detector((Code.CONTENTION,), contention.contention),
    Detector((Code.GIL_WAIT,), gil_wait.gil_wait),
    Detector((Code.SPEEDUP,), speedup.speedup, _everything, leads=True),
)

#: What :func:`eugo_lab.analysis.cost` adds: about the bill, not the trace (it takes the bill's numbers).
COST_REGISTRY: tuple[Detector, ...] = (
    Detector((Code.IDLE_CLUSTER,), idle_cluster),
)


def detect(ctx: Context) -> list[Finding]:
    """Every finding of :data:`REGISTRY` on ``ctx``, in detector order (the leading ones first).

    A cell recorded from an engine's own API gets its advice in that API (:mod:`.idioms`), each
    detector's before the next runs: the speedup quotes the other findings' fixes. A finding whose
    advice is about one of the engine's own tasks (Dask's ``finalize-``) is dropped here, for every
    detector at once: the notebook cannot change those.
    """
    api = ctx.trace.meta.get("api")
    found: list[Finding] = []
    folded = False
    for d in REGISTRY:
        if d.leads and not folded:  # the speedup weighs the findings left once one cause has one finding
            found, folded = explained.fold(ctx, found), True
        new = [f for f in d.run(ctx, found) if not aims_at_engine(ctx.trace, f)]
        new = idioms.in_engine_words(new, api, ctx.trace.meta)
        found = new + found if d.leads else found + new
    return found if folded else explained.fold(ctx, found)
