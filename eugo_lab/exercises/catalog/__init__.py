"""Every exercise, one module per topic; loaded on first use (importing this package imports none of them).

A module registers its exercises with :func:`eugo_lab.exercises.base.exercise` when imported;
its docstring shows the lesson's starter cell and reference solution.
"""

from __future__ import annotations

import importlib

from eugo_lab.exercises.base import Exercise, registered, unknown

#: Topic modules of this package, in course order.
MODULES = ("basics", "fan_out", "as_completed", "put", "batching", "straggler", "pandas", "clusters", "gpu", "geo",
           "geo_sizing", "optimizations")

_loaded = False


def _load() -> dict[str, Exercise]:
    global _loaded
    if not _loaded:
        for name in MODULES:
            importlib.import_module(f"{__name__}.{name}")
        _loaded = True
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
