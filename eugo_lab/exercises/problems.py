"""The checker owns the problem: an exercise's inputs, handed out by Eugo, and a hidden second case.

A cell that types its answer in, or the lesson's sizes, can meet every criterion on the
lesson's inputs. So an exercise that declares a problem is graded twice, the way PrairieLearn
gives each student a randomised variant and nbgrader keeps hidden tests:

1. **The lesson's inputs.** The exercise cell takes its inputs from Eugo,
   ``p = exercises.problem("fan-out")``, and uses ``p.xs`` where it would have typed
   ``range(12)``. The checker grades the run against its own copy of those inputs (made again
   from the same seed, :attr:`Attempt.problem <eugo_lab.exercises.base.Attempt>`), never
   against values it finds in the learner's namespace.
2. **A hidden second case.** When the run meets the criteria, ``%%eugo --exercise``
   (:mod:`eugo_lab.cellrun.exercise`) runs the cell again, traced as its own run and showing
   nothing, on a variant the learner has not seen: another seed, smaller sizes. It runs in the
   namespace as it was before the cell, with every name that held this exercise's problem
   rebound to the variant, every name bound to one of its tuples or arrays to the variant's
   (``data = p.data`` in an earlier cell), and ``exercises.problem(ID)`` called inside the
   cell hands out the variant; afterwards the namespace is the first run's again. The same
   checker grades that run against its own copy of the variant. Passed there too: the verdict says so
   (:data:`SECOND_CASE`). Not passed: ``not yet`` (:data:`CARRY_OVER`), saying the cell met the
   criteria on the lesson's inputs but not on a second case of the same kind, without the
   variant's inputs or answer; or, for a mistake the exercise declared with
   :func:`explained_on_hidden` (one a cell makes with every input taken from ``p``, such as an
   order that matched the lesson's case by chance), its own words and that mistake.

How an exercise declares its problem and variant (in its catalog module)::

    from eugo_lab.exercises import problems

    @problems.declare("fan-out")
    @dataclass(frozen=True, repr=False)
    class FanOutProblem(problems.Problem):
        xs: tuple[int, ...]          # immutable fields: the learner's copy cannot be changed in place

        @classmethod
        def make(cls, rng: random.Random, hidden: bool) -> FanOutProblem:
            n = rng.choice((4, 6)) if hidden else 12      # the hidden case is SMALL: a pass costs at most ~1.5x
            return cls(tuple(rng.sample(range(40, 100) if hidden else range(17, 40), n)))

and then:

- the checker reads ``p = problems.given(a)`` (the copy for the run it grades) and states
  its criteria from ``p`` (``len(p.xs)``, not a constant); its verdict lines name counts of
  the lesson's case, and a ``not yet`` on the hidden case is replaced by :data:`CARRY_OVER`'s
  words, so nothing of the variant is ever shown;
- ``make(rng, hidden=False)`` is the lesson's case (seeded with :data:`LESSON_SEED`: the same
  inputs on every machine); ``make(rng, hidden=True)`` a variant from a seed drawn per run.
  Every variant must differ from the lesson's case in what a typed answer would hold (other
  values, another length), and every honest solution must pass it: keep its sizes where the
  criteria still hold (enough tasks for the replay, a slow task still the slowest);
- a field holding an array is made read-only (:func:`frozen_array`) and its dataclass takes
  ``eq=False`` (an array has no single truth value); where a criterion needs a slow task to
  stay the slowest, the durations are inputs too (``as-completed``'s ``p.ms``), so the hidden
  case can be shorter and still hold; where the inputs must not tell which task finishes last, the
  hidden case makes one slow by a result handed back late instead (:func:`hold_result`, the
  checker's own, never a field: ``as-completed``);
- where the checker grades values fetched from tasks (:func:`eugo_lab.exercises.steps.fetched`), the
  inputs make every result an object of its own: a float, an int outside -5..256, a container, never
  a value CPython shares between all code (a small int, ``None``), so identity tells the values get()
  handed over from equal ones the notebook computed again (``fan-out``: squares of 17 and up);
- its hints have a :data:`CARRY_OVER` entry (what to take from ``p`` instead of typing it);
- its rows in ``tests/exercises/test_exercise_variants.py`` (the hidden seed fixed by patching
  :func:`draw_seed`): the reference passes both cases, a typed answer does not carry over and
  its message holds nothing of the hidden case, an honest solution unlike the reference passes;
- the lesson's exercise, starter and reference cells take the inputs with
  ``p = exercises.problem(ID)`` and use nothing else of the problem; one sentence of the
  lesson says these are the exercise's inputs, handed out by the checker. Pass the problem's
  values to tasks as arguments: a remote function defined in an earlier cell is pickled once,
  with the globals it read then, so it would keep the lesson's inputs in the second run.

What the second run cannot undo: effects outside the namespace (files written, objects
changed in place that existed before the cell) happen twice, and process-wide records kept
outside the cell record (:mod:`eugo_lab.contract.cellrecord`) are the second run's. What the
cell record keeps (``hpc.last_trace()``, the ``--gpu`` ledger, the cell's predictions) stays
the first run's; the second run records into a record set aside, which its grader reads
(``cellrecord.reading``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import random
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypeVar

import numpy as np

from eugo_lab.exercises.base import HINT_POINTER, Attempt, Verdict
from eugo_lab.units import fmt_bytes

#: The seed of every lesson's own case: its inputs are the same on every machine and in every run.
LESSON_SEED = 0
#: The key of the hint tiers that answer a cell whose answer did not carry over to the hidden case.
CARRY_OVER = "not-carried-over"
#: The line a passing verdict ends with when the hidden case was checked too.
SECOND_CASE = ("also checked on a second, hidden case: the checker ran your cell again on other inputs of the same "
               "kind, and it met the criteria there too")
# A tuple longer than this is shown by its first SHOWN items and its length (a problem's text stays short).
SHOWN = 12


@dataclass(frozen=True, repr=False)
class Problem:
    """An exercise's inputs and constants, made from a seed; the base of each exercise's frozen dataclass.

    Shown as deterministic text (``to_text``: each field, long tuples and arrays summarised)
    and escaped HTML. A subclass defines ``make(rng, hidden)`` and is registered with
    :func:`declare`.
    """

    exercise_id: ClassVar[str] = ""

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> Problem:
        """The lesson's case (``hidden`` False) or a small hidden variant, drawn from ``rng``."""
        raise NotImplementedError(f"{cls.__name__} must define make(rng, hidden)")

    def held_result(self) -> tuple[str, int, float] | None:
        """``(function, n, seconds)``: the hidden case's run hands call ``n`` (from 0) of ``function`` back late.

        Kept by the checker, never a field (not shown, not an input): a subclass's ``make`` sets it on
        a hidden case with :func:`hold_result` so that no reading of the inputs tells which task
        finishes last. None (the default): the run is left as it is.
        """
        return getattr(self, "_held", None)

    def fields(self) -> list[tuple[str, str]]:
        """``(name, value as text)`` for each field, in declaration order."""
        return [(f.name, _show(getattr(self, f.name))) for f in dataclasses.fields(self)]

    def to_text(self) -> str:
        """``inputs of exercise ID (handed out by the checker): name = value; ...``."""
        body = "; ".join(f"{name} = {value}" for name, value in self.fields())
        return f"inputs of exercise {self.exercise_id} (handed out by the checker): {body}"

    def to_html(self) -> str:
        """The same as HTML, every value escaped."""
        items = "".join(f"<li><code>{html.escape(n)}</code> = {html.escape(v)}</li>" for n, v in self.fields())
        return (f"<div class='eugo-problem'><p>inputs of exercise <b>{html.escape(self.exercise_id)}</b> "
                f"(handed out by the checker)</p><ul>{items}</ul></div>")

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.to_text())

    def _repr_html_(self) -> str:
        return self.to_html()


def _show(value: Any) -> str:
    """A field's value as short, deterministic text."""
    if isinstance(value, np.ndarray):
        return f"{value.size:,} {value.dtype} values ({fmt_bytes(value.nbytes, '.3g')})"
    if isinstance(value, tuple) and len(value) > SHOWN:
        head = ", ".join(repr(v) for v in value[:SHOWN])
        return f"({head}, ...) ({len(value):,} in all)"
    return repr(value)


def frozen_array(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only: a problem's array cannot be changed in place by the cell it is handed to."""
    a.flags.writeable = False
    return a


P = TypeVar("P", bound=type[Problem])
P2 = TypeVar("P2", bound=Problem)


def hold_result(problem: P2, function: str, n: int, seconds: float) -> P2:
    """``problem``, whose run (a hidden case's) gets call ``n`` of ``function``'s result ``seconds`` late.

    See :meth:`Problem.held_result`; the cell runner applies it (``eugo_lab.cellrun.exercise``, through
    ``eugo_lab.hpc.session.observing_submissions``).
    """
    object.__setattr__(problem, "_held", (function, int(n), float(seconds)))
    return problem


_DECLARED: dict[str, type[Problem]] = {}
_handed: dict[str, Problem] = {}  # the lesson's case, made once per kernel: every call hands out the same object
_serving: dict[str, Problem] = {}  # the hidden case, while the second run goes


def declare(exercise_id: str) -> Callable[[P], P]:
    """Class decorator: the :class:`Problem` subclass is the problem of exercise ``exercise_id``."""

    def register(cls: P) -> P:
        if not (isinstance(cls, type) and issubclass(cls, Problem)) or cls.make is Problem.make:
            raise TypeError(f"exercise {exercise_id!r}: a problem is a Problem subclass with make(rng, hidden)")
        old = _DECLARED.get(exercise_id)
        if old is not None and old.__qualname__ != cls.__qualname__:
            raise ValueError(f"exercise {exercise_id!r} already has a problem ({old.__module__}.{old.__qualname__})")
        cls.exercise_id = exercise_id
        _DECLARED[exercise_id] = cls
        return cls

    return register


def declared(exercise_id: str) -> type[Problem] | None:
    """The problem class of ``exercise_id`` (None: the exercise's cell defines its own inputs)."""
    return _DECLARED.get(exercise_id)


def make(exercise_id: str, seed: int, hidden: bool) -> Problem:
    """A new copy of ``exercise_id``'s problem from ``seed``: the same seed gives equal inputs."""
    cls = _DECLARED[exercise_id]
    made = cls.make(random.Random(seed), hidden)
    if type(made) is not cls:
        raise TypeError(f"{cls.__name__}.make returned {type(made).__name__}, not {cls.__name__}")
    return made


def lesson_case(exercise_id: str) -> Problem:
    """A new copy of the lesson's case of ``exercise_id`` (the checker's own: the learner's cannot touch it)."""
    return make(exercise_id, LESSON_SEED, hidden=False)


def problem(exercise_id: str) -> Problem:
    """The inputs of exercise ``exercise_id``, handed out by the checker: use them in the exercise's cell.

    ``p = exercises.problem("fan-out")`` then ``p.xs`` where the cell needs the numbers. The
    checker grades your run against its own copy of these inputs, then runs your cell once
    more on other inputs of the same kind (while it does, this hands out those).
    """
    from eugo_lab.exercises import catalog  # loads every exercise (and its problem); lists close ids

    ex = catalog.get(exercise_id)
    if ex.id in _serving:
        return _serving[ex.id]
    if ex.id not in _DECLARED:
        have = ", ".join(sorted(_DECLARED)) or "none"
        raise ValueError(f"exercise {ex.id!r} hands out no inputs: its cell defines its own, as the lesson shows "
                         f"(exercises with inputs: {have})")
    if ex.id not in _handed:
        _handed[ex.id] = lesson_case(ex.id)
    return _handed[ex.id]


def given(a: Attempt) -> Any:
    """The checker's copy of the problem the graded run was handed (the lesson's case when none was set)."""
    return a.problem if a.problem is not None else lesson_case(a.exercise_id)


def draw_seed() -> int:
    """A new seed for a hidden case (never :data:`LESSON_SEED`): drawn per run, so no answer can be typed in."""
    return LESSON_SEED + 1 + secrets.randbelow(2**31)


def holding(namespace: Mapping[str, Any], exercise_id: str) -> list[str]:
    """The names in ``namespace`` bound to a problem of ``exercise_id`` (what the second run rebinds)."""
    cls = _DECLARED.get(exercise_id)
    if cls is None:
        return []
    return sorted(n for n, v in namespace.items() if type(v) is cls and not n.startswith("_"))


def rebinding(namespace: Mapping[str, Any], exercise_id: str, hidden: Problem) -> dict[str, Any]:
    """What the second run starts with instead: ``{name: value of the hidden case}`` for the names of ``namespace``.

    A name bound to a problem of ``exercise_id`` gets ``hidden``; a name bound to the very
    tuple or array of a field of the problem handed out (``data = p.data`` in an earlier cell)
    gets that field of ``hidden``. Numbers and strings are matched by nothing: a small int is
    one object wherever it is written, so identity would not say the name came from ``p``.
    """
    out: dict[str, Any] = dict.fromkeys(holding(namespace, exercise_id), hidden)
    handed = _handed.get(exercise_id)
    if handed is None:
        return out
    fields = {id(v): f.name for f in dataclasses.fields(handed)
              if isinstance(v := getattr(handed, f.name), (tuple, np.ndarray))}
    for name, value in namespace.items():
        if not name.startswith("_") and name not in out and id(value) in fields:
            out[name] = getattr(hidden, fields[id(value)])
    return out


@contextlib.contextmanager
def serving(exercise_id: str, hidden: Problem) -> Iterator[None]:
    """While the block runs, :func:`problem` hands out ``hidden`` for ``exercise_id`` (the second run)."""
    _serving[exercise_id] = hidden
    try:
        yield
    finally:
        _serving.pop(exercise_id, None)


# Per (exercise, mistake): what a ``not yet`` on the hidden case says happened there, where the mistake is not
# a typed value (see :func:`explained_on_hidden`).
_ON_HIDDEN: dict[tuple[str, str], str] = {}


def explained_on_hidden(exercise_id: str, mistake: str, words: str) -> None:
    """Declare what the hidden case's ``not yet`` says when its run got ``mistake``: ``there {words}``.

    For a mistake a cell can get on the hidden case with every input taken from ``p`` (an order that
    matched the lesson's case by chance), where "a value is written into the cell" would be false.
    ``words`` must hold nothing of the hidden case (no input, no answer, no count of it); the verdict
    then names ``mistake``, so its hints answer it.
    """
    _ON_HIDDEN[(exercise_id, mistake)] = words


def checked_again(first: Verdict, second: Verdict, names: list[str], error: BaseException | None = None) -> Verdict:
    """The verdict of a cell that passed on the lesson's inputs, after its run on the hidden case (``second``).

    ``names``: the names that held the problem (rebound for the second run); ``error``: what that run raised.

    Passed there too: ``first`` with :data:`SECOND_CASE` added. Not: ``not yet`` with mistake
    :data:`CARRY_OVER`, in words that hold nothing of the hidden case (not its inputs, not its
    answer, not the message its run got), or, for a mistake the exercise explained with
    :func:`explained_on_hidden`, its words and that mistake. A checker bug on the hidden case stays that bug.
    """
    if second.checker_error is not None:
        return replace(second, reference=first.reference)
    if second.passed:
        return replace(first, lines=(*first.lines, SECOND_CASE))
    said = _ON_HIDDEN.get((first.exercise_id, second.mistake or "")) if error is None else None
    if said is not None:
        return Verdict(first.exercise_id, False, (
            "your cell met the criteria on the lesson's inputs, but not on a second case the checker made with "
            f"other inputs of the same kind (it ran your cell again on them, out of sight): there {said}.",
            HINT_POINTER.format(id=first.exercise_id)), reference=first.reference, mistake=second.mistake)
    where = f" (`{'`, `'.join(names)}`)" if names else ""
    # The error's type only: its message may hold a value of the hidden case.
    there = f"there it stopped with {type(error).__name__}" if error is not None else "there it did not meet them"
    return Verdict(first.exercise_id, False, (
        "your cell met the criteria on the lesson's inputs, but not on a second case the checker made with other "
        f"inputs of the same kind (it ran your cell again on them, out of sight): {there}, so your answer did not "
        "carry over. That happens when a value is written into the cell instead of computed from the inputs the "
        f"checker handed out{where}.",
        HINT_POINTER.format(id=first.exercise_id)), reference=first.reference, mistake=CARRY_OVER)
