"""Exercises checked on measured behaviour: ``%%eugo --exercise ID`` runs a cell and grades its trace.

- :mod:`eugo_lab.exercises.base`: ``@exercise``, :class:`Attempt`, :class:`Verdict`;
- :mod:`eugo_lab.exercises.catalog`: every exercise (``get(id)``, ``all_exercises()``);
- :mod:`eugo_lab.progress`: the learner's progress store (shared with the checklists and the server extension);
- :mod:`eugo_lab.exercises.listing`: what ``%eugo exercises`` shows;
- :mod:`eugo_lab.exercises.hints`: ``%eugo hint [ID]``, the next tier of an exercise's hint (words, then code);
- :mod:`eugo_lab.exercises.problems`: an exercise's inputs, handed out by the checker (``problem(ID)``), and
  the hidden second case a passing cell is run on again.

``last_verdict()`` is the verdict of the most recent exercise cell.

In a lesson: the starter cell (tag ``starter``) starts with ``%%eugo --exercise ID`` and the
reference solution (tag ``solution``, source hidden) with ``%%eugo --exercise ID --solution``,
which grades it the same way but never saves it to the learner's progress; each catalog
module's docstring holds them. A ``%%eugo`` cell's own output cannot be compared by nbval (its summary HTML carries
timings), so to pin the reference's verdict put ``exercises.last_verdict()`` in the next cell
under ``# NBVAL_CHECK_OUTPUT``: a shown :class:`Verdict` is deterministic text and HTML (the
reference's lines state counts and criteria, never seconds). ``%eugo exercises`` depends on
the learner's progress, so its output is not for ``NBVAL_CHECK_OUTPUT``.
"""

from __future__ import annotations

from eugo_lab.contract import cellrecord
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, UnknownExerciseError, Verdict, exercise
from eugo_lab.exercises.problems import problem

#: The verdict in the cell record: an exercise cell puts its own; other cells and regions carry the latest one on.
VERDICT = cellrecord.register(cellrecord.Slot("verdict", "the Verdict of the latest %%eugo --exercise cell"))


def last_verdict() -> Verdict | None:
    """The :class:`Verdict` of the most recent ``%%eugo --exercise`` cell in this kernel, or None."""
    return cellrecord.read(VERDICT)


def set_last_verdict(v: Verdict | None) -> None:
    """Keep ``v`` as the verdict :func:`last_verdict` returns (the cell runner, after grading a cell)."""
    cellrecord.contribute(VERDICT, v)


__all__ = ["exercise", "Attempt", "Verdict", "NotYet", "Hint", "DEFAULT", "UnknownExerciseError", "last_verdict",
           "problem"]
