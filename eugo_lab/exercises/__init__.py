"""Exercises checked on measured behaviour: ``%%eugo --exercise ID`` runs a cell and grades its trace.

- :mod:`eugo_lab.exercises.base`: ``@exercise``, :class:`Attempt`, :class:`Verdict`;
- :mod:`eugo_lab.exercises.catalog`: every exercise (``get(id)``, ``all_exercises()``);
- :mod:`eugo_lab.exercises.progress`: the learner's progress store (shared with the server extension);
- :mod:`eugo_lab.exercises.listing`: what ``%eugo exercises`` shows.

``last_verdict()`` is the verdict of the most recent exercise cell.
"""

from __future__ import annotations

from eugo_lab.exercises.base import Attempt, NotYet, UnknownExerciseError, Verdict, exercise

_last: Verdict | None = None


def last_verdict() -> Verdict | None:
    """The :class:`Verdict` of the most recent ``%%eugo --exercise`` cell in this kernel, or None."""
    return _last


def _set_last_verdict(v: Verdict | None) -> None:
    global _last
    _last = v


__all__ = ["exercise", "Attempt", "Verdict", "NotYet", "UnknownExerciseError", "last_verdict"]
