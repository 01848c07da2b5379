"""The runtime's optimizations in one ``%%eugo`` cell: automatic, eager (``--optimize``) or off (``--no-optimize``).

Kept out of ``runner.py`` so the runner's edit is a few calls. What runs here:

- **automatic** (no option): the runtime's automatic JIT (:mod:`eugo_lab.jit.auto`) is on for
  every task, as it is outside cells; and the cell's own top-level functions, called in the
  driver, go through it too: :meth:`CellOptimizer.transform` decorates each plain top-level
  ``def`` of the cell, so the name is bound to a :class:`~eugo_lab.jit.auto.CellFunction` when
  the ``def`` runs, and after the cell every name still bound to one is given back its plain
  function (later plain-Python cells see the function they defined). Left alone, with a line
  in the report saying why: decorated functions (the decorator decides), generators,
  closures, functions that print or write globals (:func:`~eugo_lab.jit.auto.static_reason`);
  methods are never touched (only the cell's top level is). The report has one line per
  function: applied, declined with the reason, or not tried with the reason.
- ``--optimize``: before the main run, the runtime wraps every submitted function in the eager
  JIT trial (``Runtime.optimize``) and the ``batch="auto"`` counters are read; after it, the
  report is built from the trace, the counters' difference and the thread guard's plan for
  this runtime (``eugo_lab.optimizations.report``).
- ``--no-optimize``: nothing is wrapped (``Runtime.auto_optimize`` off for the cell) and no report.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

from eugo_lab.backends.local_process import usable_cores
from eugo_lab.contract import cellrecord
from eugo_lab.contract.base import engine
from eugo_lab.hpc import coalesce
from eugo_lab.jit import auto
from eugo_lab.optimizations import report as opt_report
from eugo_lab.threadguard import limits as thread_guard

# A new wrapper per run, so each run's trace carries the workers' verdicts (see hpc.optimized).
_generations = itertools.count(1)
# The name the cell's decorated top-level functions call while the cell runs (in the user namespace then only).
HOOK = "__eugo_cell_jit__"


def guard_plan(rt: Any) -> thread_guard.GuardPlan | None:
    """The thread guard's plan for ``rt``'s workers (None for the threads backend: one process)."""
    d = engine(rt.backend_name)
    if d is not None and d.in_process:
        return None
    info = rt.backend.info()
    be = rt.backend
    if d is not None and d.local:  # what the pool gave its workers (threads_per_worker=, or cores / workers)
        explicit = be.explicit_threads_per_worker
        return thread_guard.plan(usable_cores(), info.workers, explicit=explicit)
    # Dask and Ray: the guard applies to the workers we started here (the embedded Dask cluster, local Ray),
    # task slots = worker processes x threads each; an address (or a cluster passed in) is not ours.
    external = bool(rt.options.get("address")) or not _started_here(be)
    slots = info.workers * max(1, int(getattr(info, "threads_per_worker", 1) or 1))
    return thread_guard.plan(usable_cores(), slots, external=external)


def _started_here(backend: Any) -> bool:
    """True when this process started the engine's workers (so they got the guard's environment)."""
    # The embedded Dask cluster's worker processes, a local Ray: each engine says (Backend.started_workers_here).
    return bool(getattr(backend, "started_workers_here", False))


def _task_functions(trace: Any) -> list[str]:
    """The names of the functions ``trace`` has tasks of (none without a trace)."""
    return list(getattr(trace, "functions", None) or ()) if trace is not None else []


def _delta(before: dict[str, Any], after: list[Any]) -> list[Any]:
    out = []
    for s in after:
        b = before.get(s.function)
        if b is None:
            out.append(s)
            continue
        out.append(coalesce.CoalesceStats(s.function, s.calls - b.calls, s.plain_tasks - b.plain_tasks,
                                          s.batches - b.batches, s.batched_calls - b.batched_calls,
                                          s.largest_batch, s.per_call, s.mode))
    return out


class CellOptimizer:
    """One cell's optimizations: :meth:`transform` on its AST, :meth:`running` around each run, then :meth:`finish`."""

    def __init__(self, opts: Any = None) -> None:
        self.report: opt_report.OptimizationReport | None = None
        self._before: dict[str, Any] = {}
        self.explicit = bool(getattr(opts, "optimize", False))
        self.off = bool(getattr(opts, "no_optimize", False))
        # --profile measures the code as written: the cell's own functions stay plain (as tasks do while
        # a profile is taken), unless --optimize asks for the trial, whose run is profiled on purpose.
        self.profiled = bool(getattr(opts, "profile", False)) and not self.explicit
        self._cell: dict[str, Any] = {}  # name -> CellFunction made in this cell
        self._left: dict[str, tuple[str, str]] = {}  # name -> (code, detail) of a top-level def left plain
        self._runtime_off = False
        self._ns: dict | None = None

    def transform(self, tree: ast.Module) -> ast.Module:
        """Decorate each plain top-level ``def`` with the hook (none with ``--no-optimize`` or ``--profile``)."""
        if self.off or self.profiled:
            return tree
        for node in tree.body:
            if isinstance(node, ast.AsyncFunctionDef):
                self._left[node.name] = ("not-plain", "an async function")
            elif isinstance(node, ast.FunctionDef):
                if node.decorator_list:
                    self._left[node.name] = ("not-plain", "a decorated function: its decorator decides how it runs")
                    continue
                hook = ast.copy_location(ast.Name(id=HOOK, ctx=ast.Load()), node)
                node.decorator_list = [hook]  # line numbers unchanged: the hook sits on the def's own line
        return ast.fix_missing_locations(tree)

    def _wrap(self, fn: Any) -> Any:
        """The hook: ``fn`` under the automatic JIT, or ``fn`` itself with the reason noted."""
        if self._runtime_off:
            return fn
        why = auto.static_reason(fn)
        name = getattr(fn, "__name__", "?")
        if why is not None:
            self._left[name] = why
            self._cell.pop(name, None)
            return fn
        wrapped = auto.CellFunction(fn, auto.cell_key(fn), self._ns, eager=self.explicit)
        self._cell[name] = wrapped
        self._left.pop(name, None)
        return wrapped

    @contextlib.contextmanager
    def running(self, rt: Any, shell: Any = None) -> Iterator[None]:
        """Optimizations on (or off) for the body's run on ``rt``; the cell's functions given back after it."""
        self._before = {s.function: s for s in coalesce.all_stats()}
        record = cellrecord.target()  # the cell's: the runtime notes there what this run submitted and wraps
        record.opted_out.clear()
        record.opted_in.clear()
        ns = self._ns = getattr(shell, "user_ns", None)
        was_auto = getattr(rt, "auto_optimize", True)
        self._runtime_off = not was_auto
        gen = next(_generations)
        if self.explicit:
            rt.optimize = gen
        record.generation = gen
        if self.off:
            rt.auto_optimize = False
        if ns is not None:
            ns[HOOK] = self._wrap
        try:
            yield
        finally:
            rt.optimize = 0
            rt.auto_optimize = was_auto
            record.generation = 0
            if ns is not None:
                ns.pop(HOOK, None)
                for name, wrapped in self._cell.items():
                    if ns.get(name) is wrapped:
                        ns[name] = wrapped.fn

    def _cell_items(self, ran_as_tasks: Any = ()) -> list[opt_report.Optimization]:
        """One line per top-level function of the cell: its verdict, or why it was not tried.

        ``ran_as_tasks``: names of the trace's functions. A decorated ``def`` among them is an
        ``@hpc.remote`` function whose tasks have their own line (compiled, declined, not tried):
        a second line saying its decorator decides would contradict it.
        """
        from eugo_lab.jit.checked import cached_times, parse_phase
        from eugo_lab.jit.verdicts import FunctionVerdict, partial_of

        items = []
        for name, wrapped in self._cell.items():
            calls, cpu = wrapped.watched()
            if not wrapped.verdicts:
                if not calls and cpu == 0.0:
                    continue  # defined, never called in this cell: nothing to say
                items.append(opt_report.not_tried(name, "too-little-cpu", f"{calls} call{'s' if calls != 1 else ''} "
                                                  f"used {opt_report.fmt_time(cpu)} of CPU; it is tried after "
                                                  f"{opt_report.fmt_time(auto.MIN_CPU_S)}"))
                continue
            last = wrapped.verdicts[-1]
            status, code, detail = parse_phase(last) or ("declined", "compile-error", "")
            times = {}
            for said in wrapped.verdicts:  # the trial's times (a later re-check names only the plain one)
                _, t, _ = cached_times(said)
                times = {**(t or {}), **times} if said is not last else {**times, **(t or {})}
            parsed = [x for x in map(parse_phase, wrapped.verdicts) if x is not None]
            partial = partial_of(parsed)
            if partial is not None:  # compiled for some arguments, plain for others: the compiled verdict leads
                status, code, detail = next(x for x in reversed(parsed) if x[0] == "compiled")
            v = FunctionVerdict(name, status, code, detail, workers=1, compiles=1 if "compile" in times else 0,
                                plain_s=times.get("plain"), compile_s=times.get("compile"),
                                compiled_s=times.get("compiled"), partial=partial)
            item = opt_report.jit_item(v, None)
            items.append(item)
        tasks = set(ran_as_tasks)
        for name, (code, detail) in self._left.items():
            if name not in tasks:
                items.append(opt_report.not_tried(name, code, detail))
        return items

    def finish(self, rt: Any, trace: Any, hot: Any = None) -> opt_report.OptimizationReport | None:
        """Build the report of the run traced in ``trace`` (None: nothing to say, or ``--no-optimize``).

        ``--optimize``: the full report; ``hot``: the profile's hot functions, by default those of
        the run's own profile (an ``--optimize`` run is profiled), which the report words next to
        each JIT verdict. Automatic: one line per function. Either is what
        ``hpc.last_optimizations()`` returns until the next cell or ``hpc.trace()`` region (the
        report is put in the cell's record, whose trace ``trace`` is).
        """
        if self.off:
            cellrecord.contribute(opt_report.OPTIMIZATIONS, None)  # --no-optimize: the latest cell optimized nothing
            return None
        if not self.explicit:
            record = cellrecord.target()
            off = opt_report.RUNTIME_OFF if self._runtime_off else opt_report.PROFILED_OFF if self.profiled else ""
            self.report = opt_report.automatic(trace, self._cell_items(_task_functions(trace)),
                                               _delta(self._before, coalesce.all_stats()), set(record.opted_out), off,
                                               requested=set(record.opted_in))
            cellrecord.contribute(opt_report.OPTIMIZATIONS, self.report)  # hpc.last_optimizations(): these lines
            return self.report
        if hot is None and getattr(trace, "profiles", ()):
            try:
                from eugo_lab.profile.model import Profile

                hot = Profile.from_trace(trace).hot_functions(limit=None)
            except Exception:  # noqa: BLE001 - the report stands without the profile's evidence
                hot = None
        note = "threads backend: one process, its BLAS threads are shared by the cell; nothing to limit"
        report = opt_report.build(trace, guard_plan(rt), _delta(self._before, coalesce.all_stats()), hot=hot,
                                  threads_note=note)
        report = opt_report.OptimizationReport(
            tuple(opt_report.with_driver_calls(report.items, self._cell_items(_task_functions(trace)))), report.mode)
        self.report = report
        cellrecord.contribute(opt_report.OPTIMIZATIONS, report)
        return report
