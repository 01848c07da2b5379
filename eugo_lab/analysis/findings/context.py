"""What every detector shares: the :class:`Context` of one trace, and pricing a mistake by its fix.

Every mistake is priced by :func:`priced`: the trace replayed with the fix
(:mod:`eugo_lab.analysis.whatif`). The thresholds here say when a fix is worth reporting.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.analysis import facts, whatif
from eugo_lab.analysis.breakdown import Breakdown
from eugo_lab.analysis.critical_path import CriticalPath
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.overlap import overlap_share
from eugo_lab.analysis.simulate import Replay
from eugo_lab.analysis.timeline import Units, Window, covered, merge
from eugo_lab.contract.phases import JIT_COMPILE_PHASE, bytecode_share
from eugo_lab.tracing.trace import Trace
from eugo_lab.units import fmt_seconds as fmt_s
from eugo_lab.units import plural  # noqa: F401 - the findings count through the context they already import

# -- what a fix is worth ------------------------------------------------------------------------------
# A mistake found by its cost is flagged when its fix is predicted to save at least 5% of the
# run: this VM's speed drifts by up to ~25% minute to minute, but a replay compares the
# same trace with and without the fix, so 5% is real time, not noise...
MIN_SAVES = 0.05
# ...and at least 10 ms: a saving below that is not something a learner could measure.
MIN_SAVES_S = 0.01
# Found by their own rules (a straggler, an I/O-bound phase) but worth under 3% of the run
# if fixed: shown as a note, so the list leads with what pays.
NOTE_SHARE = 0.03
# A worker's warm-up: an attempt whose measured import time (the trace's facts) explains at least 20 ms
# of its extra over its function's usual time, and that took at least twice the usual. Importing NumPy
# costs ~60 ms and pandas 0.6-0.7 s; under 20 ms nothing a learner would act on, and below twice the
# usual time the task's own variation hides it.
WARM_UP_MIN_S = 0.02
WARM_UP_RATIO = 2.0
# Honest on 1 core (Binder): findings that need parallelism say what this worker count
# would do instead, from the replay.
TWO_WORKERS = 2


@dataclass(frozen=True)
class Context:
    """Inputs every detector shares (computed once by :func:`eugo_lab.analysis.analyze`)."""

    trace: Trace
    units: Units
    window: Window
    breakdown: Breakdown
    queue: np.ndarray
    overhead: np.ndarray
    critical_path: CriticalPath
    serial_time: float
    replay: Replay
    baseline: Trace | None = None  # the same work measured on 1 worker (--compare / --scaling), if any

    @property
    def workers(self) -> int:
        """Workers of the traced engine."""
        return self.trace.n_workers

    @property
    def wall(self) -> float:
        """The analysed wall time."""
        return self.window.length

    def fname(self, code: int) -> str:
        """Function name for a function index."""
        return self.trace.functions[int(code)]

    @functools.cached_property
    def gil_wait(self) -> np.ndarray:
        """Per unit: seconds it waited for the interpreter lock (threads engine; zeros elsewhere, see :mod:`gil`)."""
        from eugo_lab.analysis import gil

        return gil.gil_waits(self.units) if gil.shares_interpreter(self.trace.meta) else np.zeros(len(self.units))

    @functools.cached_property
    def pickling_gil_wait(self) -> np.ndarray:
        """Per unit: seconds its (un)pickling waited for the interpreter lock (threads engine; zeros elsewhere).

        Those steps are timed by the wall clock: on a shared interpreter their waits are no serialization.
        """
        from eugo_lab.analysis import gil

        if not gil.shares_interpreter(self.trace.meta):
            return np.zeros(len(self.units))
        return gil.pickling_gil_waits(self.units, *facts.per_unit(self.trace, self.units, "pickling_cpu"))

    @functools.cached_property
    def overlap(self) -> np.ndarray:
        """Per unit: the share of its occupancy while another unit ran too (see :mod:`overlap`)."""
        return overlap_share(self.units)

    @functools.cached_property
    def trial_rows(self) -> np.ndarray:
        """Per row of ``trace.tasks``: whether that attempt ran a JIT trial (``JIT_COMPILE_PHASE``).

        Its time is the trial's (a plain run, a compile and a compiled run), not the function's:
        it is no straggler beside the compiled calls, and no measure of contention against them.
        """
        rows = np.zeros(len(self.trace.tasks["task_id"]), dtype=bool)
        codes = [i for i, n in enumerate(self.trace.phase_names) if n == JIT_COMPILE_PHASE]
        p = self.trace.phases
        if codes and len(p["row"]):
            rows[np.asarray(p["row"])[np.isin(p["name"], codes)]] = True
        return rows

    @functools.cached_property
    def bytecode_shares(self) -> dict[int, float]:
        """Function index -> the share of its time in Python bytecode, as the automatic JIT sampled it.

        Only for functions the JIT judged (their verdict phase says the share; the mean where several
        workers judged one). What a function's time was, not what its code looks like: a task that is
        one NumPy call spends its time in C code, a loop over elements in bytecode.
        """
        p, names = self.trace.phases, self.trace.phase_names
        share = {i: bytecode_share(str(n)) for i, n in enumerate(names)}
        codes = [i for i, v in share.items() if v is not None]
        if not codes or not len(p["row"]):
            return {}
        sel = np.flatnonzero(np.isin(p["name"], codes))
        fn = np.asarray(self.trace.tasks["function"])[np.asarray(p["row"])[sel]]
        seen: dict[int, list[float]] = {}
        for f, n in zip(fn.tolist(), np.asarray(p["name"])[sel].tolist()):
            seen.setdefault(int(f), []).append(float(share[int(n)]))  # type: ignore[arg-type]
        return {f: float(np.mean(v)) for f, v in seen.items()}

    @functools.cached_property
    def trial_units(self) -> np.ndarray:
        """Per unit: whether it holds a JIT trial's attempt (see :attr:`trial_rows`)."""
        out = np.zeros(len(self.units), dtype=bool)
        at = self.units.row_unit[np.flatnonzero(self.trial_rows)]
        out[at[at >= 0]] = True
        return out

    @functools.cached_property
    def trial_compile(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per unit: the seconds, CPU seconds and run-queue seconds of its JIT trial's compile (0 where none).

        The runtime's work, not the function's: left out of what the function's own time says about it.
        """
        n = len(self.units)
        codes = [i for i, name in enumerate(self.trace.phase_names) if name == JIT_COMPILE_PHASE]
        p = self.trace.phases
        sel = np.isin(p["name"], codes) if codes and len(p["row"]) else np.zeros(len(p["row"]), dtype=bool)
        at = self.units.row_unit[np.asarray(p["row"])[sel]] if sel.any() else np.zeros(0, dtype=np.int64)
        keep = at >= 0

        def per_unit(x: np.ndarray) -> np.ndarray:
            return np.bincount(at[keep], weights=np.nan_to_num(np.asarray(x, float)[sel][keep]), minlength=n)

        return per_unit(p["end"] - p["start"]), per_unit(p["cpu"]), per_unit(p["runq"])

    @functools.cached_property
    def warm_up(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per unit: its warm-up's extra seconds (0: none), of which unpickling, its modules, and its import seconds.

        The last two are what its worker measured its code importing (``imports``, ``import_s``; 0 where not
        recorded).

        Measured, not inferred: the worker times the imports the task's own code made (its function's and
        arguments' unpickling, its body; see ``backends.import_clock``). The function's usual time is the
        median of its units' time without their imports; a unit's extra over it is warm-up only for the
        part its import time explains (``min(extra, import_s)``), and only when that part is at least
        ``WARM_UP_MIN_S`` and the unit took ``WARM_UP_RATIO`` times the usual. The rest of a slow unit's
        extra is its own (a straggler's, say). A trace without measured import time (saved before it was
        recorded) has no warm-up. Nor has a unit that ran beside a background JIT compile: the compile
        thread imports Numba in the same process, and its slowing the task down is the Contention
        finding's (:mod:`.runtime_work`).
        """
        u = self.units
        n = len(u)
        extra, in_deser = np.zeros(n), np.zeros(n)
        seconds, known = facts.per_unit(self.trace, u, "import_s")
        counted, _ = facts.per_unit(self.trace, u, "imports")
        modules = counted.astype(np.int64)
        if not known.any():
            return extra, in_deser, modules, seconds
        took = u.deser + u.body
        own = np.maximum(took - seconds, 0.0)  # the unit's time without its imports
        single = u.n_items == 1
        known &= ~self.beside_compile
        for fn in np.unique(u.function):
            sel = (u.function == fn) & single & known
            if not sel.any():
                continue
            med, med_deser = float(np.median(own[sel])), float(np.median(u.deser[sel]))
            explained = np.minimum(np.maximum(took - med, 0.0), seconds)
            warm = sel & (took >= WARM_UP_RATIO * med) & (explained >= WARM_UP_MIN_S)
            extra[warm] = explained[warm]
            in_deser[warm] = np.minimum(np.maximum(u.deser[warm] - med_deser, 0.0), extra[warm])
        return extra, in_deser, modules, seconds

    @functools.cached_property
    def beside_compile(self) -> np.ndarray:
        """Per unit: whether its body ran beside a background JIT compile (see :mod:`.runtime_work`).

        The compile thread takes a core (and imports Numba) in the middle of the run: a task slowed by it
        is no straggler and no warm-up; the Contention finding names the compile.
        """
        from eugo_lab.analysis.findings import runtime_work  # it builds on this module

        u = self.units
        c = runtime_work.compiles(self)
        if not len(c.start) or not len(u):
            return np.zeros(len(u), dtype=bool)
        body_start = u.occ_start + u.deser
        return covered(merge(c.start, c.end), body_start, body_start + u.body) > 0

    def per_row(self, per_unit: np.ndarray, default: Any) -> np.ndarray:
        """Per row of ``trace.tasks``: the value of its unit in ``per_unit`` (``default`` for a row with no unit).

        Safe where no task became a unit (every one cancelled before it ran: rows, but no units).
        """
        ru = self.units.row_unit
        out = np.full(len(ru), default, dtype=np.asarray(per_unit).dtype if len(per_unit) else type(default))
        has = ru >= 0
        if len(per_unit) and has.any():
            out[has] = per_unit[ru[has]]
        return out

    @functools.cached_property
    def warm_rows(self) -> np.ndarray:
        """Per row of ``trace.tasks``: whether its unit is a worker's warm-up (see :attr:`warm_up`)."""
        return self.per_row(self.warm_up[0] > 0, False)

    @functools.cached_property
    def warm_body(self) -> np.ndarray:
        """Per row of ``trace.tasks``: the seconds of its body that were warm-up (imports in the body, not unpickling).

        What a straggler check takes off the body: the rest of a slow warm-up task is still its own.
        """
        extra, in_deser = self.warm_up[0], self.warm_up[1]
        return self.per_row(extra - in_deser, 0.0)

    @functools.cached_property
    def unit_of_task(self) -> dict[int, int]:
        """Task id -> index of its first measured attempt's unit (built once: findings ask it many times)."""
        return {t: i for i, t in reversed(list(enumerate(self.units.task_id.tolist())))}

    def worth_flagging(self, saves: float) -> bool:
        """A mistake found by its cost: the fix saves at least ``MIN_SAVES`` of the run and ``MIN_SAVES_S``."""
        return saves >= MIN_SAVES * self.wall and saves >= MIN_SAVES_S

    def predict(self, fixed: Replay, parallel: bool = False) -> whatif.Prediction:
        """The fix replayed on this run's workers (on 2 when ``parallel`` and the run had 1: see ``TWO_WORKERS``)."""
        w = max(self.workers, TWO_WORKERS) if parallel else self.workers
        return whatif.predict(self.replay, fixed, w)


def priced(ctx: Context, f: Finding, fixed: Replay, fix: str, parallel: bool = False) -> Finding:
    """``f`` with what its fix saves on this run (``saves``, ``wall_after``, ``fix``).

    ``parallel``: the mistake only costs time when tasks could overlap. On a 1-worker run the
    verdict then also says what 2 workers are predicted to do with and without the fix, so a
    learner on one core (Binder) still sees the mistake's price.
    """
    p = whatif.predict(ctx.replay, fixed, ctx.workers)
    after = after_fix(ctx, p)
    ev, verdict = dict(f.evidence), f.verdict
    if parallel and ctx.workers < TWO_WORKERS:
        p2 = whatif.predict(ctx.replay, fixed, TWO_WORKERS)
        ev["on_2_workers"] = {"before": p2.before, "after": p2.after, "saves": p2.saves}
        verdict += (f" On {TWO_WORKERS} workers the replay predicts {fmt_s(p2.before)} as written and "
                    f"{fmt_s(p2.after)} with the fix.")
    return dataclasses.replace(f, verdict=verdict, evidence=ev, saves=ctx.wall - after, wall_after=after, fix=fix)


def after_fix(ctx: Context, p: whatif.Prediction) -> float:
    """The measured wall time scaled by the replay's ratio (fixed / as written), never above the measured.

    A ratio, not a difference: where the replay is off for the run as written (a driver
    cost it does not model), it is off in proportion for the fixed run too, and the
    prediction can never drop below zero.
    """
    if p.before <= 0:
        return ctx.wall
    return ctx.wall * min(p.after / p.before, 1.0)


def engine_functions(trace: Trace) -> frozenset[str]:
    """The functions of ``trace`` that are the engine's own bookkeeping, not the notebook's code.

    The recording names them (``meta["engine_functions"]``: Dask's ``finalize-`` tasks, see
    :mod:`eugo_lab.native.dask_recording`; remote functions defined in Ray's own modules, see
    :mod:`eugo_lab.native.ray_recording`): their time stays in the run, but they are nobody's to fix.
    """
    return frozenset(str(f) for f in trace.meta.get("engine_functions", ()))


def aims_at_engine(trace: Trace, f: Finding) -> bool:
    """Whether finding ``f`` is about the engine's own tasks alone (see :func:`engine_functions`).

    Its subject is the function its evidence names (``function``, or ``functions`` for a finding about
    several): when every one of them is the engine's own, nothing in its advice is the notebook's to do.
    """
    own = engine_functions(trace)
    if not own:
        return False
    one, many = f.evidence.get("function"), f.evidence.get("functions")
    named = ([one] if isinstance(one, str) else []) + ([str(n) for n in many] if isinstance(many, (list, tuple))
                                                      else [])
    return bool(named) and all(n.removesuffix("()") in own for n in named)


def units_of(ctx: Context, task_ids: list[int]) -> list[int]:
    """Unit indices of these task ids (their first measured attempt's unit, when there is one)."""
    pos = ctx.unit_of_task
    return [pos[t] for t in task_ids if t in pos]


def split_fixed(ctx: Context, task_ids: list[int], piece: float) -> Replay:
    """The replay with these tasks split into pieces of about ``piece`` seconds of body each."""
    idx = units_of(ctx, task_ids)
    occ = ctx.replay.occupancy
    return whatif.split(ctx.replay, idx, [whatif.pieces_for(float(occ[i]), piece) for i in idx])


def listed(ids: list[int], limit: int = 5) -> str:
    """Up to ``limit`` ids, then how many more: ``1, 2, 3 and 4 more``."""
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
