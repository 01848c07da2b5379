"""Every exercise, one module per topic; loaded on first use (importing this package imports none of them).

A module registers its exercises with :func:`eugo_lab.exercises.base.exercise` when imported
(every module of this package is found and imported on first use); its docstring shows the
lesson's starter cell and reference solution. Course order comes from each exercise's lesson path.
"""

from __future__ import annotations

from eugo_lab.discovery import import_submodules
from eugo_lab.exercises.base import Exercise, registered, unknown


def _load() -> dict[str, Exercise]:
    """Every registered exercise, after importing each topic module of this package (once)."""
    import_submodules(__name__)
    return registered()


def get(exercise_id: str) -> Exercise:
    """The exercise ``exercise_id``; :class:`~eugo_lab.exercises.base.UnknownExerciseError` lists close ids."""
    found = _load()
    ex = found.get(str(exercise_id).strip())
    if ex is None:
        raise unknown(str(exercise_id), list(found))
    return ex


def all_exercises() -> list[Exercise]:
    """Every exercise, in course order (by lesson path, then id)."""
    return sorted(_load().values(), key=lambda e: (e.lesson, e.id))


def ids() -> list[str]:
    """Every exercise id, sorted."""
    return sorted(_load())
