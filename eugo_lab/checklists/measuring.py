"""``measure(NAME, fn, args, kwargs, trace)``: every item of one checklist, measured on the learner's own inputs."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eugo_lab import progress
from eugo_lab.checklists import store
from eugo_lab.checklists.model import Checklist, Item, Result, Results, get
from eugo_lab.checklists.subject import Subject


def measure(name: str, fn: Any = None, args: Any = (), kwargs: Any = None, trace: Any = None, *,
            deadline: float | None = None, price: float | None = None) -> Results:
    """Measure every item of checklist ``name`` and return the :class:`Results`.

    ``fn``, ``args``, ``kwargs``: one call of the learner's function (the readiness items time
    it and size its arguments and result; the ML guide reads an ``@hpc.remote`` function's
    ``gpus=``). ``trace``: a Trace or an ended ``hpc.trace()`` region (default: the last
    trace, :func:`eugo_lab.hpc.last_trace`). ``deadline`` (seconds) and ``price`` (per
    worker-hour) are for the cost checklist.

    The readiness checklist's task-size item measures the overhead on the running runtime
    (and starts the default one if none runs); the other items never start one.

    Each result's ``ok`` is True or False, or None when the item cannot be measured with
    what was given (or is one you tick yourself); ``evidence`` says why, with your numbers.
    Every item measured True or False is saved to your progress store as a measured tick
    with its evidence, exactly as the interactive checklist's Measure button saves it, so
    :func:`show`, ``%eugo checklist NAME`` and the JupyterLab panel show it after a restart
    (a store that cannot be written costs a warning, not the results). An unknown name, a
    value that is not a function or a bad trace raises :class:`ChecklistError`; a function
    that raises is reported in the evidence of the items that needed its call.
    """
    checklist = get(name)
    subject = Subject(fn, args, kwargs, trace, deadline=deadline, price=price)
    results = tuple(measure_item(checklist, it, subject) for it in checklist.items)
    save(checklist, results)
    return Results(checklist, results, notes=_notes(subject))


def measure_item(checklist: Checklist, item: Item, subject: Subject) -> Result:
    """One item measured; an error inside a measurement becomes its evidence, never a traceback."""
    if item.measure is None:
        return Result(item, None, "")
    try:
        ok, evidence = item.measure(subject)
    except Exception as exc:  # noqa: BLE001 - e.g. the runtime failing to start: say so on the item
        return Result(item, None, f"not measured: {type(exc).__name__}: {exc}")
    return Result(item, ok, evidence)


def save(checklist: Checklist, results: Iterable[Result], path: Path | None = None) -> None:
    """Save every result measured True or False as a measured tick, in one write (None: nothing to save)."""
    states = {r.id: (r.ok, r.evidence) for r in results if r.ok is not None}
    try:
        store.tick_many(checklist.id, states, store.MEASURED, path)
    except (OSError, progress.ProgressError) as exc:
        warnings.warn(f"eugo: the {checklist.title}'s ticks were not saved to {path or progress.progress_path()}: "
                      f"{exc}", stacklevel=3)


def _notes(subject: Subject) -> tuple[str, ...]:
    if subject.trace is not None and not subject.given_trace:
        return ("(trace: the last traced run, hpc.last_trace())",)
    return ()
