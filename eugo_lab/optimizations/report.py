"""What the runtime did for you: every automatic optimization of a run, applied or declined, with numbers and why.

One :class:`OptimizationReport` per ``%%eugo`` cell: ``--optimize`` (:func:`build`) or, without
it, what the automatic JIT did (:func:`automatic`); ``hpc.last_optimizations()`` returns the
latest, and the cell summary's ``optimizations`` attribute holds it. It is built from data only — the
run's trace (JIT verdicts travel as phases, ``hpc.map`` batches as the trace's batch
column), the thread guard's plan and the ``batch="auto"`` counters — so it is tested with
hand-made inputs, and the renderers (``eugo_lab.render.optimizations``) only format it.

Each :class:`Optimization` carries a ``precise`` line (measured times: terminal and HTML)
and a ``bucketed`` line (times rounded to 1-2-5 steps, no counts that depend on timing:
the deterministic ``text/plain``).

The profile hook: :func:`jit_candidates` takes "the hot functions" as data (anything with
``function``, ``self_share`` and ``python_share``, like the profiler's ``HotFunction``) and
says which a JIT could help; :func:`build` words the profile's evidence next to each verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eugo_lab.contract import cellrecord
from eugo_lab.jit.auto import MIN_CPU_S
from eugo_lab.jit.checked import SKIPPED, split_compiled_detail, unproven_of
from eugo_lab.jit.verdicts import FunctionVerdict, advice_for, explain, verdicts_from_trace
from eugo_lab.offload.cost import fmt_time
from eugo_lab.optimizations import earlier
from eugo_lab.threadguard.limits import GuardPlan, describe

# A function is worth a JIT trial when at least this share of its own time is Python bytecode
# (the rest is C: NumPy already runs compiled code there and a JIT has nothing to remove).
MIN_PYTHON_SHARE = 0.5


@dataclass(frozen=True)
class Optimization:
    """One optimization the runtime applied or declined."""

    kind: str  # "jit" | "threads" | "batch" | "map"
    target: str  # the function, or "workers"
    applied: bool
    precise: str  # the line with measured numbers
    bucketed: str  # the same with times bucketed and timing-dependent counts left out (deterministic)
    reason: str = ""  # why declined, in plain words
    advice: str = ""  # what would help
    numbers: dict[str, Any] = field(default_factory=dict)  # before/after and counts, for programs
    tried: bool = True  # False: the automatic JIT looked at it and did not try it (reason says why)


@dataclass(frozen=True)
class OptimizationReport:
    """Every optimization of one run; ``items`` in a fixed order (JIT, batching, threads)."""

    items: tuple[Optimization, ...]
    mode: str = "--optimize"  # or "automatic": what the runtime did on its own, without annotation
    # What was in force where the automatic JIT was off (hpc.init(optimize=False), --profile), naming the functions
    # declared optimize=True that ran their own JIT all the same; "" where ``mode`` says it. The heading and the
    # summary's "optimize:" show it instead of the mode.
    in_force: str = ""

    @property
    def applied(self) -> list[Optimization]:
        """The optimizations that changed how the code ran."""
        return [o for o in self.items if o.applied]

    @property
    def declined(self) -> list[Optimization]:
        """The ones tried and not kept (or not applicable), each with its reason."""
        return [o for o in self.items if not o.applied]

    def find(self, target: str, kind: str | None = None) -> Optimization | None:
        """The item for ``target`` (a function name), optionally of one ``kind``."""
        return next((o for o in self.items if o.target == target and (kind is None or o.kind == kind)), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {"items": [dict(o.__dict__) for o in self.items]}

    def __repr__(self) -> str:
        return f"<OptimizationReport: {len(self.applied)} applied, {len(self.declined)} declined>"


def bucket_ratio(x: float) -> str:
    """``937.0`` -> ``~1000x`` (1-2-5 steps), so the deterministic text does not flicker between runs."""
    if not x or not math.isfinite(x) or x <= 0:
        return "?"
    exp = math.floor(math.log10(x))
    mant = x / 10**exp
    step = min((1, 2, 5, 10), key=lambda m: abs(math.log(mant / m)))
    return f"~{step * 10**exp:g}x"


def jit_candidates(hot: Iterable[Any], min_python_share: float = MIN_PYTHON_SHARE) -> dict[str, float]:
    """``{function: python share of its own time}`` for hot functions a JIT could speed up.

    ``hot``: the profile's hot functions (``function``, ``self_share``, ``python_share``).
    """
    out = {}
    for h in hot:
        own = float(getattr(h, "self_share", 0.0))
        py = float(getattr(h, "python_share", own))
        if own > 0 and py / own >= min_python_share:
            out[str(h.function)] = py / own
    return out


def jit_item(v: FunctionVerdict, python_share: float | None) -> Optimization:
    """The report's line for the JIT's verdict ``v`` (``python_share``: the function's time in Python, if known)."""
    def t(s: float | None, bucket: bool) -> str:
        return fmt_time(s, bucket) if s is not None else "?"

    workers = f"{v.workers} worker{'s' if v.workers != 1 else ''}, " + \
        ("no new compile" if v.cached else "one compile each")
    # The profile's evidence goes in the precise line only: a short task may get no sample in one run and
    # some in the next, so the deterministic text/plain cannot depend on it.
    prof = prof_b = ""
    if python_share is not None:
        prof = f"; profile: {python_share:.0%} of its own time in Python bytecode" + \
            (" (what a JIT speeds up)" if python_share >= MIN_PYTHON_SHARE else " (the rest is C code: NumPy)")
    numbers = {"plain_s": v.plain_s, "compile_s": v.compile_s, "compiled_s": v.compiled_s, "speedup": v.speedup,
               "workers": v.workers, "compiles": v.compiles, "later_s": v.later_s, "later_calls": v.later_calls}
    later = ""
    if v.later_s is not None and v.later_calls:
        later = f"; after: median of {v.later_calls} later call{'s' if v.later_calls != 1 else ''} " \
                f"(trial's compiled run {t(v.compiled_s, False)})"
    if v.status == SKIPPED:
        what, helps = explain(v.code)
        # The detail holds measured shares and call times: the precise line only.
        precise = f"{v.function}: not tried: {what}" + (f" ({v.detail})" if v.detail else "") + prof
        bucketed = f"{v.function}: not tried: {what}"
        return Optimization("jit", v.function, False, precise, bucketed, what, helps, numbers, tried=False)
    if v.status == "compiled":
        checked, simd_line = split_compiled_detail(v.detail)
        unproven = unproven_of(v.detail)
        what = f" ({checked})" if checked and checked != "nothing" else ""
        simd = f"; machine code: {simd_line}" if simd_line else ""
        numbers["checked"], numbers["simd"], numbers["proven"] = checked, simd_line, not unproven
        # Each worker checked one call (its trial) against the plain function: code not proven exact is right on
        # those calls, and nothing is known of the others.
        calls = f"{v.workers} call{'s' if v.workers != 1 else ''}"

        def proof(b: bool) -> str:
            if not unproven:
                return f", exact for every input (proven from its compiled code); result checked{what}"
            said = f"checked on {calls}{what}" if not b else "checked on its trial calls"
            return f", {said}, not proven for all inputs: {unproven}"

        def line(b: bool) -> str:
            # One number per fact: the median of the calls after the swap (the trial's run where there were none),
            # in both forms; the bucketed one rounds it to 1-2-5 steps so its text/plain reads the same run to run.
            after = v.after_s
            sp = v.plain_s / after if v.plain_s and after else 0.0
            ratio = bucket_ratio(sp) if b else f"{sp:.0f}x"
            how = "compiled earlier on these workers, reused" if v.cached else (
                f"compiled in {t(v.compile_s, b)}" if v.compile_s else
                # (no compile of its own: the code compiled for the same types with integers of another size)
                "reused the code compiled for other integer sizes")
            return f"{v.function}: {how}; {t(v.plain_s, b)} -> {t(after, b)} per call ({ratio}){proof(b)}{simd}"
        part = ""
        if v.partial is not None:
            # Each argument signature has its own verdict: say what ran plain, not only what ran compiled.
            p_what, _ = explain(v.partial[0])
            part = (f"; compiled for some calls only: calls with other argument types or integer sizes ran plain, "
                    f"{p_what}" + (f" ({v.partial[1]})" if v.partial[1] else ""))
            numbers["partial"] = v.partial[0]
        return Optimization("jit", v.function, True, f"{line(False)}{part} ({workers}){later}{prof}",
                            line(True) + part + prof_b, numbers=numbers)
    what = explain(v.code)[0]
    helps = advice_for(v.code, v.detail)  # about the reason given, not one advice for every decline
    detail = f" ({v.detail})" if v.detail else ""
    mixed = " on some workers" if v.status == "mixed" else ""
    text = f"{v.function}: not compiled{mixed}: {what}{detail}; it ran unchanged. What would help: {helps}"
    timing = ""
    if v.code in ("differs", "not-faster") and v.plain_s and v.compiled_s:
        timing = f" [plain {t(v.plain_s, False)}, compiled {t(v.compiled_s, False)}]"
    return Optimization("jit", v.function, False, text + timing + prof, text + prof_b, what + detail, helps, numbers)


def _batch_item(s: Any) -> Optimization:
    per = s.per_call
    numbers = {"calls": s.calls, "plain_tasks": s.plain_tasks, "batches": s.batches, "largest_batch": s.largest_batch,
               "per_call_s": per, "backend_tasks": s.backend_tasks}
    if s.batches:
        precise = (f"{s.function}: batch=\"auto\": {s.calls} .remote() calls in {s.backend_tasks} backend tasks "
                   f"({s.batches} batches, largest {s.largest_batch} calls); measured {fmt_time(per)} a call")
        # (no batch count or time here: both depend on timing, and this line must read the same every run)
        bucketed = (f"{s.function}: batch=\"auto\": {s.calls} .remote() calls coalesced into fewer backend tasks "
                    "(each call under 1 ms)")
        return Optimization("batch", s.function, True, precise, bucketed, numbers=numbers)
    if s.mode == "slow":
        why = f"a call takes {fmt_time(per)}, long enough to be its own task"
        why_b = f"a call takes about {fmt_time(per, True)}, long enough to be its own task"
    else:
        why = why_b = "the calls never waited: each went out while a worker was free"
    return Optimization("batch", s.function, False, f"{s.function}: batch=\"auto\": not batched: {why}",
                        f"{s.function}: batch=\"auto\": not batched: {why_b}", why, "", numbers)


def map_batches(trace: Any, exclude: Sequence[str] = ()) -> list[Optimization]:
    """The ``hpc.map`` calls of a run, from the trace's batch column: items, batches, the largest batch."""
    import numpy as np

    t = trace.tasks
    batch = np.asarray(t["batch"])
    mask = (batch >= 0) & trace.first_attempts()
    if not mask.any():
        return []
    fns = np.asarray(t["function"])[mask]
    ids = batch[mask]
    out = []
    for f in np.unique(fns).tolist():
        name = trace.functions[int(f)]
        if name in exclude:
            continue
        b = ids[fns == f]
        _, sizes = np.unique(b, return_counts=True)
        items, n = int(b.size), int(sizes.size)
        numbers = {"items": items, "batches": n, "largest_batch": int(sizes.max())}
        precise = (f"hpc.map({name}): {items} items in {n} batches (largest {int(sizes.max())} items): "
                   f"{items - n} fewer tasks")
        bucketed = f"hpc.map({name}): {items} items sent in batches sized from their measured time"
        out.append(Optimization("map", name, n < items, precise, bucketed, numbers=numbers))
    return out


def build(trace: Any, guard: GuardPlan | None, coalesced: Iterable[Any] = (), hot: Iterable[Any] | None = None,
          threads_note: str = "") -> OptimizationReport:
    """The report of one run: JIT verdicts (from ``trace``), batching, the thread guard.

    ``coalesced``: ``batch="auto"`` counters of this run (``CoalesceStats``); ``hot``: the
    profile's hot functions when the run was profiled (``None``: no profile); ``threads_note``:
    used instead of the guard line where no guard applies (the threads backend).
    """
    shares = None
    if hot is not None:
        hot = list(hot)
        shares = {str(h.function): (float(h.python_share) / float(h.self_share) if h.self_share else 0.0)
                  for h in hot}
    items = [jit_item(v, shares.get(v.function) if shares else None) for v in verdicts_from_trace(trace)]
    coalesced = [s for s in coalesced if s.calls]
    items += [_batch_item(s) for s in coalesced]
    items += map_batches(trace, exclude=[s.function for s in coalesced])
    if guard is not None:
        line = describe(guard)
        items.append(Optimization("threads", "workers", guard.applied, line, line,
                                  "" if guard.applied else line.split(": ", 1)[1],
                                  numbers={"threads": guard.threads, "cores": guard.cores, "workers": guard.workers,
                                           "default": guard.default, "source": guard.source}))
    elif threads_note:
        items.append(Optimization("threads", "workers", False, threads_note, threads_note, threads_note))
    return OptimizationReport(tuple(items))


# The one line of a cell or region where the runtime's automatic JIT was off.
RUNTIME_OFF = "automatic JIT off for this runtime (hpc.init(optimize=False)): every function ran as plain Python"
# The same for a --profile cell: a profile measures the code as written, so nothing is wrapped while it is taken.
PROFILED_OFF = "automatic JIT off while profiling (--profile measures the code as written): every function ran as " \
    "plain Python"


def not_tried(function: str, code: str, detail: str = "") -> Optimization:
    """A line for a function the automatic JIT did not try (``code``: see :func:`~eugo_lab.jit.verdicts.explain`)."""
    what, helps = explain(code)
    precise = f"{function}: not tried: {what}" + (f" ({detail})" if detail else "")
    return Optimization("jit", function, False, precise, f"{function}: not tried: {what}", what, helps,
                        {"code": code}, tried=False)


def unjudged(trace: Any, judged: Iterable[str], opted_out: Iterable[str] = ()) -> list[Optimization]:
    """Functions of ``trace`` with no JIT verdict: declared ``optimize=False``, or still short of :data:`MIN_CPU_S`."""
    import numpy as np

    t = trace.tasks
    if not len(t["function"]):
        return []
    judged, off = set(judged), set(opted_out)
    fns = np.asarray(t["function"])
    cpu = np.asarray(t["cpu"]) if "cpu" in t else np.asarray(t["end"]) - np.asarray(t["start"])
    out = []
    for f in np.unique(fns).tolist():
        name = trace.functions[int(f)]
        if name in judged:
            continue
        if name in off:
            out.append(not_tried(name, "opted-out"))
            continue
        before = earlier.recall(trace, name)
        if before is not None:  # decided earlier in these worker processes: its calls said nothing new
            out.append(before)
            continue
        mine = fns == f
        used = float(cpu[mine].sum())
        n = int(mine.sum())
        calls = f"{n} call{'s' if n != 1 else ''} used {fmt_time(used)} of CPU in this cell"
        # The JIT judges a function per process: enough CPU in one worker and still no verdict means its calls
        # were never caught by the sampler, not that they were too few.
        workers = np.asarray(t["worker"])[mine] if "worker" in t else np.zeros(n, dtype=int)
        most = max((float(cpu[mine][workers == w].sum()) for w in np.unique(workers).tolist()), default=0.0)
        if most >= MIN_CPU_S:
            out.append(not_tried(name, "never-sampled", f"{calls}, {fmt_time(most)} of it in one process"))
        else:
            out.append(not_tried(name, "too-little-cpu", f"{calls}; it is tried after {fmt_time(MIN_CPU_S)} in one "
                                                         "process"))
    return out


def _off_report(trace: Any, off: str, requested: Iterable[str]) -> OptimizationReport:
    """The report of a run with the automatic JIT off: its one line, and the ``optimize=True`` functions' own.

    A function declared ``@hpc.remote(optimize=True)`` asked for its JIT itself: it ran its own trial (and,
    compiled, its compiled code) while the automatic JIT was off, so the off line names it as the exception
    and its verdict (from this trace, or said by the same workers earlier) has its line.
    """
    ran = set(getattr(trace, "functions", None) or ()) if trace is not None else set()
    asked = sorted(n for n in set(requested) if n in ran)
    why = "by hpc.init(optimize=False)" if off == RUNTIME_OFF else "while profiling"
    if not asked:
        return OptimizationReport((Optimization("jit", "runtime", False, off, off, off, tried=False),), "automatic",
                                  f"automatic JIT off {why}")
    names = ", ".join(asked)
    line = off.rsplit(": every function", 1)[0] + (
        f": every function ran as plain Python except {names}, declared @hpc.remote(optimize=True), which ran "
        f"{'its' if len(asked) == 1 else 'their'} own JIT as asked")
    items = [Optimization("jit", "runtime", False, line, line, line, tried=False)]
    own = [jit_item(v, None) for v in verdicts_from_trace(trace) if v.function in asked]
    earlier.remember(trace, own)
    said = {o.target for o in own}
    own += [o for o in (earlier.recall(trace, n) for n in asked if n not in said) if o is not None]
    return OptimizationReport(tuple(items + own), "automatic",
                              f"automatic JIT off {why}; optimize=True on {names}")


def with_driver_calls(items: Sequence[Optimization], cell_items: Sequence[Optimization]) -> list[Optimization]:
    """``items`` (the tasks' lines) then ``cell_items`` (the notebook's own calls), one line per function.

    A cell's function can run both as tasks and in the notebook's process: each side has its own verdict,
    and two lines of one function made the heading count it twice. Its cell line is folded into its task
    line instead, after "in the notebook:"; it counts as applied where either side ran compiled, and as tried
    where either side was tried.
    """
    out = list(items)
    at = {o.target: i for i, o in enumerate(out) if o.kind == "jit"}
    for c in cell_items:
        i = at.get(c.target) if c.kind == "jit" else None
        if i is None:
            at[c.target] = len(out)
            out.append(c)
            continue
        o = out[i]
        tail = c.target + ": "

        def rest(text: str, tail: str = tail) -> str:
            return text[len(tail):] if text.startswith(tail) else text
        out[i] = dataclasses.replace(o, precise=f"{o.precise}; in the notebook: {rest(c.precise)}",
                                     bucketed=f"{o.bucketed}; in the notebook: {rest(c.bucketed)}",
                                     numbers={**o.numbers, "in_notebook": dict(c.numbers)},
                                     applied=o.applied or c.applied, tried=o.tried or c.tried,
                                     reason=o.reason or c.reason, advice=o.advice or c.advice)
    return out


def automatic(trace: Any, cell_items: Sequence[Optimization] = (), coalesced: Iterable[Any] = (),
              opted_out: Iterable[str] = (), off: str = "",
              requested: Iterable[str] = ()) -> OptimizationReport | None:
    """What the runtime did on its own in one cell (no ``--optimize``): one line per function; None: none ran.

    ``cell_items``: the lines of the cell's own functions run in the driver; ``opted_out``: names
    declared ``optimize=False``; ``off``: the one line to show when the runtime's JIT is off
    (``hpc.init(optimize=False)``, ``--profile``); ``requested``: names declared ``optimize=True``
    submitted in the run (their own JIT ran even where the automatic one was off).
    """
    if off:
        return _off_report(trace, off, requested)
    verdicts = verdicts_from_trace(trace) if trace is not None else []
    items = [jit_item(v, None) for v in verdicts]
    if trace is not None:
        earlier.remember(trace, items)
    items += unjudged(trace, [v.function for v in verdicts], opted_out) if trace is not None else []
    items = with_driver_calls(items, cell_items)
    items += [_batch_item(s) for s in coalesced if s.calls]
    return OptimizationReport(tuple(items), "automatic") if items else None


def _of_region(record: cellrecord.CellRecord) -> OptimizationReport | None:
    """What the automatic JIT did in the run traced in ``record.trace`` when no cell said (a region, a native cell).

    ``record.jit``: the JIT's state when the run's region closed (never hooked in: no report);
    ``record.opted_out``: the functions declared ``optimize=False`` submitted while the record was open.
    """
    if record.jit == "unhooked":
        return None
    off = RUNTIME_OFF if record.jit == "off" else ""
    return automatic(record.trace, (), (), set(record.opted_out), off, set(record.opted_in))


#: The latest cell's or region's report in its cell record (``hpc.last_optimizations()`` reads it): a cell puts
#: its own (``None`` for ``--no-optimize``); a run that did not (a region) gets it derived from its trace.
OPTIMIZATIONS = cellrecord.register(cellrecord.Slot(
    "optimizations", "the OptimizationReport of the record's trace (hpc.last_optimizations())",
    follows_trace=True, derive=_of_region))
