"""``%%eugo --exercise ID``: run the cell exactly as ``%%eugo`` does, then check it and show the verdict.

The verdict comes after the cell's summary (deterministic text/plain, and HTML with the measured
details; the precise text in a terminal), is saved to the progress store and is
``eugo_lab.exercises.last_verdict()``. A cell that raised is graded ``not yet`` (naming the
error) and its error is re-raised after the verdict, as ``%%eugo`` does. A store that cannot be
written costs a warning, not the cell.

An exercise that declares its inputs (:mod:`eugo_lab.exercises.problems`) is graded against
the checker's own copy of them; a cell that meets the criteria there is run a second time,
traced as its own run and showing nothing, on a hidden case of other inputs: in the namespace
as it was before the cell, with the names that held the problem (or one of its tuples or arrays) rebound
to the hidden one's. Afterwards the namespace is the first run's again, and the verdict says the hidden case
passed too, or is ``not yet`` saying the answer did not carry over (nothing of the hidden
case in it). An Interrupt during the second run stops the cell without a verdict.

With ``--solution`` (the lesson's reference solution) the cell is graded the same way, its
verdict says it is the reference and does not count, and nothing is saved: running a lesson
top to bottom, hidden cells included, never marks its exercises passed.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

from eugo_lab import exercises, progress
from eugo_lab.cellrun.options import CellOptions
from eugo_lab.cellrun.runner import cell_source, run_cell, run_quietly
from eugo_lab.contract import cellrecord, given
from eugo_lab.exercises import base, problems
from eugo_lab.hpc import session
from eugo_lab.render import display


def run_exercise_cell(shell: Any, cell: str, opts: CellOptions, ex: base.Exercise, solution: bool = False) -> Any:
    """Run ``cell`` under ``%%eugo`` with ``opts`` and grade it as exercise ``ex`` (the magic looked it up).

    ``solution``: the cell is the lesson's reference solution; graded and shown, never saved.
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    before = dict(shell.user_ns)  # references, not ids: an id can be reused once its object is freed

    def attempt(trace: Any, namespace: dict[str, Any], error: BaseException | None, ran_on: dict[str, Any],
                problem: Any, sent: given.Given, analysed: Any = None) -> base.Attempt:
        # The cell's own puts and refused requests, from its trace (never a count kept by the process).
        return base.Attempt(ex.id, trace, namespace, error,
                            puts=len(trace.puts["ref"]) if trace is not None else 0,
                            refused=len(trace.refused) if trace is not None else 0, before=ran_on,
                            assigned=assigned, analysed=analysed, problem=problem, given=sent)

    assigned: frozenset[str] = frozenset()

    def check(summary: Any, error: BaseException | None, out_mode: str) -> None:
        nonlocal assigned
        assigned = base.bound_names(cell_source())  # the cell as it was compiled: IPython syntax made Python once
        own = problems.lesson_case(ex.id) if problems.declared(ex.id) else None  # the checker's copy
        verdict = base.grade(ex, attempt(summary.trace, shell.user_ns, error, before, own, sent, summary.report))
        if verdict.passed and own is not None:
            verdict = second_case(verdict)
        if solution:
            verdict = verdict.as_reference()
        exercises.set_last_verdict(verdict)
        if out_mode == "text":
            print(verdict.to_text(precise=True))
        else:
            display.publish(verdict.to_text(), verdict.to_html(precise=True))
        if verdict.checker_error is None and not verdict.reference:  # neither is the learner's attempt
            save(verdict)

    def second_case(first: base.Verdict) -> base.Verdict:
        seed = problems.draw_seed()
        hidden = problems.make(ex.id, seed, hidden=True)  # the cell's copy; the checker grades with its own
        ns = shell.user_ns
        kept = dict(ns)  # the first run's namespace: what the learner has after the cell
        start = {**before, **problems.rebinding(before, ex.id, hidden)}
        # The same dict, refilled: functions of earlier cells read their globals from it, so they see the hidden case.
        ns.clear()
        ns.update(start)
        try:
            held = hidden.held_result()  # the checker's own secret of the hidden case, if it keeps one
            with problems.serving(ex.id, hidden), (
                    _holding_result(*held) if held is not None else contextlib.nullcontext()):
                with given.collecting() as sent_hidden:
                    error, trace, record = run_quietly(shell, cell, opts, native_api=ex.native_api)
            seen = dict(ns)
        finally:
            ns.clear()
            ns.update(kept)
        if isinstance(error, KeyboardInterrupt):
            raise error
        # Graded on its own record: a checker that reads the --gpu ledger or the cell's predictions reads this run's.
        with cellrecord.reading(record):
            second = base.grade(ex, attempt(trace, seen, error, start, problems.make(ex.id, seed, hidden=True),
                                            sent_hidden))
        # The names the message points at: those that held the problem before the cell or after its first run.
        return problems.checked_again(first, second, problems.holding({**before, **kept}, ex.id), error)

    # An exercise grades what eugo_lab.hpc ran unless it is written in Dask's or Ray's own API (ex.native_api):
    # otherwise a cell that called an engine's own API is not recorded from it, and its verdict says the runtime
    # ran nothing. The main run records which of the cell's functions ran here in the notebook (a checker reads it).
    # What the cell's submissions send by value is noted while it runs (a task that hands back a number it was sent).
    with given.collecting() as sent:
        return run_cell(shell, cell, opts, after=check, native_api=ex.native_api, watch=True,
                        values_of=ex.values_of)


def save(verdict: base.Verdict) -> None:
    """Record ``verdict`` in the progress store; a store that cannot be written is a warning."""
    try:
        progress.record_exercise(verdict.exercise_id, verdict.passed, verdict.evidence(), mistake=verdict.mistake)
    except (OSError, progress.ProgressError) as exc:
        warnings.warn(f"eugo: your result was not saved to {progress.progress_path()}: {exc}", stacklevel=2)


@contextlib.contextmanager
def _holding_result(function: str, nth: int, seconds: float) -> Iterator[None]:
    """While the block runs, call ``nth`` (from 0) of ``function`` submitted hands its result back ``seconds`` late.

    A hidden case's secret (:meth:`eugo_lab.exercises.problems.Problem.held_result`): that task runs as the
    cell wrote it, and its result reaches the notebook as if it had run that much longer, so a loop that
    orders results by its own reading of the inputs cannot match the order they finish in.
    """
    left = [nth]

    def observe(runtime: session.Runtime, tid: int, name: str) -> None:
        if name == function:
            if left[0] == 0:
                runtime.hand_back_late(tid, seconds)
            left[0] -= 1

    with session.observing_submissions(observe):
        yield
