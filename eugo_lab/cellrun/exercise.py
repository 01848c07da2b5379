"""``%%eugo --exercise ID``: run the cell exactly as ``%%eugo`` does, then check it and show the verdict.

The verdict comes after the cell's summary (deterministic text/plain, and HTML with the measured
details; the precise text in a terminal), is saved to the progress store and is
``eugo_lab.exercises.last_verdict()``. A cell that raised is graded ``not yet`` (naming the
error) and its error is re-raised after the verdict, as ``%%eugo`` does. A store that cannot be
written costs a warning, not the cell.

With ``--solution`` (the lesson's reference solution) the cell is graded the same way, its
verdict says it is the reference and does not count, and nothing is saved: running a lesson
top to bottom, hidden cells included, never marks its exercises passed.
"""

from __future__ import annotations

import warnings
from typing import Any

from eugo_lab import exercises, progress
from eugo_lab.cellrun.options import CellOptions
from eugo_lab.cellrun.runner import run_cell
from eugo_lab.exercises import base, catalog
from eugo_lab.render import display


def run_exercise_cell(shell: Any, cell: str, opts: CellOptions, exercise_id: str, solution: bool = False) -> Any:
    """Run ``cell`` under ``%%eugo`` with ``opts`` and grade it as ``exercise_id`` (already validated).

    ``solution``: the cell is the lesson's reference solution; graded and shown, never saved.
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    ex = catalog.get(exercise_id)
    before = dict(shell.user_ns)  # references, not ids: an id can be reused once its object is freed
    assigned = base.bound_names(shell.transform_cell(cell))  # IPython syntax (magics, !cmd) made Python first

    def check(summary: Any, error: BaseException | None, out_mode: str) -> None:
        # The cell's own puts and refused requests, from its trace (never a count kept by the process).
        trace = summary.trace
        attempt = base.Attempt(ex.id, trace, shell.user_ns, error,
                               puts=len(trace.puts["ref"]) if trace is not None else 0,
                               refused=len(trace.refused) if trace is not None else 0, before=before,
                               assigned=assigned, analysed=summary.report)
        verdict = base.grade(ex, attempt)
        if solution:
            verdict = verdict.as_reference()
        exercises.set_last_verdict(verdict)
        if out_mode == "text":
            print(verdict.to_text(precise=True))
        else:
            display.publish(verdict.to_text(), verdict.to_html(precise=True))
        if verdict.checker_error is None and not verdict.reference:  # neither is the learner's attempt
            save(verdict)

    # An exercise grades what eugo_lab.hpc ran unless it is written in Dask's or Ray's own API (ex.native_api):
    # otherwise a cell that called an engine's own API is not recorded from it, and its verdict says the runtime
    # ran nothing.
    return run_cell(shell, cell, opts, after=check, native_api=ex.native_api)


def save(verdict: base.Verdict) -> None:
    """Record ``verdict`` in the progress store; a store that cannot be written is a warning."""
    try:
        progress.record_exercise(verdict.exercise_id, verdict.passed, verdict.evidence(), mistake=verdict.mistake)
    except (OSError, progress.ProgressError) as exc:
        warnings.warn(f"eugo: your result was not saved to {progress.progress_path()}: {exc}", stacklevel=2)
