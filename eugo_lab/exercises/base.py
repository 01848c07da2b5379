"""The exercise machinery: the ``@exercise`` registry, the learner's :class:`Attempt` and the :class:`Verdict`.

An exercise is a function ``check(attempt) -> Verdict`` registered with :func:`exercise`.
It grades what the learner's cell *did*, measured on its own trace: overlap, findings of the
analysis, bytes shipped, batch counts, results equal to a reference, the replayed speedup.
Never wall-clock windows, so the same cell gets the same verdict on a busy 2-core VM and on
a 1-core Binder (where criteria that need parallelism use the replay on 2 workers, and say so).

Text is deterministic: the first line is exactly ``exercise ID: passed`` or ``exercise ID:
not yet`` (for the lesson's reference solution, run with ``--solution``: ``Reference solution
for ID: passed — this run does not count as your attempt``); the lines after it state counts
and criteria (never seconds, pids or addresses), so a reference solution's verdict can be
compared by nbval. Measured numbers that vary from run to run go in :attr:`Verdict.details`,
shown only by ``to_text(precise=True)`` and ``to_html(precise=True)`` (what ``%%eugo
--exercise`` displays in HTML and in a terminal).
The cell's summary HTML carries timings, so a lesson checks a reference's verdict in the
next cell: ``exercises.last_verdict()`` displays the deterministic text and HTML.

A checker that raises is a bug in Eugo Lab, not the learner's mistake: :func:`grade` turns
it into a verdict whose first line is ``exercise ID: not checked`` and says so (:func:`grade`).

Hints come in tiers, so a ``not yet`` never hands over the fix at once. The verdict says what
the run did and which finding it raised, in words and without code, and ends by pointing at
``%eugo hint ID``; the first ``%eugo hint`` says what to change (tier 1, words), the second
shows the code (tier 2). An exercise declares its tiers as data where it is registered::

    @exercise("fan-out", lesson=..., title=..., hints={
        DEFAULT: Hint("submit every call first, then wait once", "futures = [...]; results = hpc.get(futures)"),
        "blocking-loop": Hint("take get() out of the loop ...", "..."),
    })

A checker names the mistake it found (``a.not_yet(..., mistake="blocking-loop")`` or
``NotYet(..., mistake=...)``); a verdict without one (the cell raised, a variable is missing)
gets the ``DEFAULT`` tiers. The mistake is saved with the attempt (:mod:`eugo_lab.progress`),
so ``%eugo hint`` answers the run the learner made, in any later kernel.
"""

from __future__ import annotations

import difflib
import html
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from eugo_lab.renderable import TextRepr

#: ``exercise ID: passed`` / ``exercise ID: not yet`` (and ``not checked`` for a checker bug).
PASSED, NOT_YET, NOT_CHECKED = "passed", "not yet", "not checked"
#: What a reference solution's first line adds: its run is graded, never recorded as the learner's.
NOT_YOUR_ATTEMPT = "this run does not count as your attempt"


#: The key of an exercise's hint tiers for every mistake without tiers of its own.
DEFAULT = "default"
#: The line every ``not yet`` ends with: where the next step is (the words first, then the code).
HINT_POINTER = ("for a hint, run %eugo hint {id}: it says what to change, in words; run it a second time "
                "for the code.")


class NotYet(Exception):
    """Raised inside a checker to end it with a ``not yet`` verdict carrying this message.

    ``mistake``: the key of the hint tiers that answer it (``None``: the exercise's ``DEFAULT``).
    """

    def __init__(self, message: str, mistake: str | None = None) -> None:
        super().__init__(message)
        self.mistake = mistake


@dataclass(frozen=True)
class Hint:
    """Two tiers of help for one mistake: what to change, in words (tier 1), then the code (tier 2)."""

    change: str
    code: str

    def __post_init__(self) -> None:
        if not self.change.strip() or not self.code.strip():
            raise ValueError("a hint needs both tiers: what to change, in words, and the code")

    @property
    def tiers(self) -> tuple[str, str]:
        """``(words, code)``: what ``%eugo hint`` shows first and second."""
        return (self.change, self.code)


def submit_all_first(pieces: str, code: str) -> Hint:
    """The hint for a cell that waited for each of its ``pieces`` before submitting the next."""
    return Hint(f"Submit every {pieces} before waiting for any: build the list of futures first, then one get().",
                code)


HintsSpec = Hint | tuple[str, str] | Mapping[str, Hint | tuple[str, str]]


class UnknownExerciseError(KeyError):
    """No exercise has this id; the message lists the close ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown exercise"


@dataclass(frozen=True, repr=False)
class Verdict(TextRepr):
    """The result of checking one attempt.

    ``lines``: deterministic sentences after the first line (evidence for a pass, the specific
    message and next step for a ``not yet``). ``details``: measured numbers that vary between
    runs (concurrency, seconds), shown by the ``precise`` forms only. ``checker_error``: set
    when the checker itself failed (a bug to report). ``mistake``: for a ``not yet``, the key
    of the hint tiers that answer it (``None``: the exercise's ``DEFAULT`` tiers).
    """

    exercise_id: str
    passed: bool
    lines: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    checker_error: str | None = None
    reference: bool = False  # the lesson's reference solution (--solution): shown, never saved to progress
    mistake: str | None = None

    @property
    def status(self) -> str:
        """``passed``, ``not yet`` or ``not checked``."""
        if self.checker_error is not None:
            return NOT_CHECKED
        return PASSED if self.passed else NOT_YET

    @property
    def heading(self) -> str:
        """Whose run this is: ``exercise ID``, or ``Reference solution for ID``."""
        return f"Reference solution for {self.exercise_id}" if self.reference else f"exercise {self.exercise_id}"

    @property
    def first_line(self) -> str:
        """``exercise ID: passed`` or ``exercise ID: not yet`` (``not checked`` for a checker bug).

        A reference solution's says so first and that it does not count:
        ``Reference solution for ID: passed — this run does not count as your attempt``.
        """
        return f"{self.heading}: {self.outcome}"

    @property
    def outcome(self) -> str:
        """The status, and for a reference solution that its run does not count."""
        return f"{self.status} — {NOT_YOUR_ATTEMPT}" if self.reference else self.status

    def as_reference(self) -> Verdict:
        """The same verdict as the reference solution's (same grading, a first line that says it does not count)."""
        return replace(self, reference=True)

    def to_text(self, precise: bool = False) -> str:
        """The first line, then the evidence or message (indented); ``precise`` adds the measured details."""
        out = [self.first_line, *("  " + line for line in self.lines)]
        if precise and self.details:
            out.append("  measured: " + "; ".join(self.details))
        return "\n".join(out)

    def __str__(self) -> str:
        return self.to_text()

    def to_html(self, precise: bool = False) -> str:
        """The verdict as HTML, every string escaped; ``precise`` adds the measured details."""
        cls = {PASSED: "passed", NOT_YET: "not-yet", NOT_CHECKED: "not-checked"}[self.status]
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.lines)
        details = ""
        if precise and self.details:
            details = ("<p class='eugo-exercise-details'>measured: "
                       + html.escape("; ".join(self.details)) + "</p>")
        return (f"<div class='eugo-exercise eugo-exercise-{cls}'>"
                f"<p><b>{html.escape(self.heading)}</b>: {html.escape(self.outcome)}</p>"
                f"<ul>{items}</ul>{details}</div>")

    def _repr_html_(self) -> str:
        # Deterministic like to_text(): a cell that shows a verdict can be compared by nbval.
        return self.to_html()

    def evidence(self) -> str:
        """The deterministic lines as one string (what the progress store keeps)."""
        return " ".join(self.lines)


@dataclass
class Attempt:
    """One run of a learner's exercise cell, as the checker sees it.

    ``trace``: the cell's :class:`~eugo_lab.tracing.Trace`; ``namespace``: the user namespace
    after the cell; ``error``: the exception the cell raised, or None; ``workers``: the
    worker count it ran on; ``puts``: how many ``hpc.put`` references the cell created; ``refused``: how many of its
    resource requests (``gpus=``) no worker could meet (:class:`~eugo_lab.hpc.ResourceRequestError`);
    ``before``: the namespace before the cell (so a value left by an earlier cell is not
    taken for this cell's answer); ``assigned``: the names the cell's source binds (a name it
    assigns counts as set even when the value is the very object it held before, as a small
    int or an interned string is when a learner re-runs a cell). ``analysed``: the cell's
    analysis :class:`~eugo_lab.analysis.Report` when it was made already (``%%eugo
    --exercise`` hands over its summary's, so the summary and the verdict read one Report,
    ``--compare`` baseline included); else :attr:`report` analyses the trace on first use.
    ``problem``: the checker's own copy of the inputs this run was handed, for an exercise that
    declares them (:mod:`eugo_lab.exercises.problems`): the lesson's case, or the hidden one.
    ``given``: what the run's submissions sent by value (:func:`eugo_lab.exercises.steps.not_handed_in`).
    """

    exercise_id: str
    trace: Any
    namespace: dict[str, Any]
    error: BaseException | None = None
    puts: int = 0
    refused: int = 0
    before: dict[str, Any] = field(default_factory=dict, repr=False)
    assigned: frozenset[str] = frozenset()
    analysed: Any = field(default=None, repr=False)
    problem: Any = field(default=None, repr=False)
    #: The numbers each function's tasks were sent by value in this run (:class:`eugo_lab.contract.given.Given`).
    given: Any = field(default=None, repr=False)

    @property
    def workers(self) -> int:
        """Workers of the run (1 on Binder: criteria that need parallelism use :meth:`replayed_speedup`)."""
        return int(self.trace.n_workers)

    @property
    def report(self) -> Any:
        """The run's analysis: findings (``report.finding("blocking")``), speedup... (see ``analysed``)."""
        if self.analysed is None:
            from eugo_lab.analysis import analyze

            self.analysed = analyze(self.trace)
        return self.analysed

    def replayed_speedup(self, workers: int = 2) -> float:
        """The speedup the simulator predicts for this trace's work on ``workers`` vs 1 worker."""
        from eugo_lab.analysis import simulate

        (row,) = simulate(self.trace, workers=[int(workers)])
        return float(row.speedup)

    def require(self, name: str) -> Any:
        """The value the cell gave ``name``; raises :class:`NotYet` naming it when the cell did not define it.

        A name that still holds the very object it held before the cell was not set by this cell.
        """
        unchanged = name in self.before and self.namespace.get(name) is self.before[name]
        if name not in self.namespace or (unchanged and name not in self.assigned):
            raise NotYet(f"the cell did not define `{name}`: this exercise reads its result from a variable "
                         f"named `{name}`, so assign your final result to `{name}` in this cell (a value left "
                         "by an earlier cell does not count).")
        return self.namespace[name]

    def require_engine(self, engine: str, tasks: int, why: str) -> None:
        """Raise :class:`NotYet` (mistake ``wrong-engine``) unless the cell's tasks ran on ``engine``.

        The message counts the ``tasks`` and names the engine they ran on instead; ``why`` goes on
        right after "ran on the ... engine" (what that engine lacks, or what was not connected).
        """
        from eugo_lab.exercises import measure

        backend = measure.engine(self.trace)
        if backend != engine:
            raise NotYet(f"your cell's {measure.plural(tasks, 'task')} ran on the {backend} engine{why}",
                         mistake="wrong-engine")

    def passed(self, *lines: str, details: tuple[str, ...] = ()) -> Verdict:
        """A passing verdict whose lines are the deterministic evidence."""
        return Verdict(self.exercise_id, True, tuple(lines), tuple(details))

    def not_yet(self, *lines: str, mistake: str | None = None, details: tuple[str, ...] = ()) -> Verdict:
        """A ``not yet`` verdict: what the run did and which finding it raised, in words (no code).

        ``mistake`` names the hint tiers that answer it (``None``: the exercise's ``DEFAULT``);
        :func:`grade` adds the line pointing at ``%eugo hint``.
        """
        return Verdict(self.exercise_id, False, tuple(lines), tuple(details), mistake=mistake)


def bound_names(source: str) -> frozenset[str]:
    """The names a cell's Python source binds (assignments, loop targets, imports, defs); empty if it does not parse."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


Checker = Callable[[Attempt], Verdict]


@dataclass(frozen=True)
class Exercise:
    """A registered exercise: its id, lesson notebook (relative to ``courses/``), title, checker and hint tiers."""

    id: str
    lesson: str
    title: str
    check: Checker
    hints: Mapping[str, Hint] = field(default_factory=dict)
    #: The cell is written in Dask's or Ray's own API and graded on its recording from that engine's records
    #: (eugo_lab.native); False: only what eugo_lab.hpc ran is recorded.
    native_api: bool = False
    #: The notebook's own functions whose calls in the driver the checker reads by value (what each was
    #: given and returned: ``handle(r)`` fed the very objects get() handed over), kept while the cell runs.
    values_of: tuple[str, ...] = ()

    def hint(self, mistake: str | None) -> Hint:
        """The tiers that answer ``mistake`` (its own, else the ``DEFAULT`` ones)."""
        return self.hints.get(mistake or DEFAULT) or self.hints[DEFAULT]

    def __call__(self, attempt: Attempt) -> Verdict:
        """Grade ``attempt`` (see :func:`grade`)."""
        return grade(self, attempt)


_REGISTRY: dict[str, Exercise] = {}


def _hints(id: str, spec: HintsSpec) -> dict[str, Hint]:
    """``spec`` as ``{mistake: Hint}`` with a ``DEFAULT`` entry; a bad spec is a ``ValueError`` naming the exercise."""
    if isinstance(spec, Hint) or (isinstance(spec, tuple) and len(spec) == 2):
        spec = {DEFAULT: spec}
    if not isinstance(spec, Mapping):
        raise ValueError(f"exercise {id!r}: hints= is Hint(words, code), a (words, code) pair, or "
                         f"{{mistake: Hint}} with a {DEFAULT!r} entry; got {type(spec).__name__}")
    out = {}
    for key, tiers in spec.items():
        if isinstance(tiers, tuple) and len(tiers) == 2:
            tiers = Hint(*tiers)
        if not isinstance(tiers, Hint):
            raise ValueError(f"exercise {id!r}: the hint for {key!r} is not Hint(words, code)")
        out[str(key)] = tiers
    if DEFAULT not in out:
        raise ValueError(f"exercise {id!r}: hints= needs a {DEFAULT!r} entry, the tiers for a run whose verdict "
                         "names no mistake of its own (the cell raised, a variable is missing)")
    return out


def exercise(id: str, *, lesson: str, title: str, hints: HintsSpec,
             native_api: bool = False, values_of: tuple[str, ...] = ()) -> Callable[[Checker], Exercise]:
    """Register ``check(attempt) -> Verdict`` as the exercise ``id`` of ``lesson``, with its hint tiers.

    ``lesson`` is the notebook's path under ``courses/``
    (``01-distributed-python/02-fan-out-without-blocking.ipynb``); ``title`` a few words;
    ``hints``: ``Hint(words, code)`` (or the pair) for every mistake, or ``{mistake key: Hint}``
    with a ``DEFAULT`` entry where the exercise's mistakes need different help. ``native_api``: the
    cell is written in Dask's or Ray's own API, recorded from the engine's own records. ``values_of``: the
    notebook's functions whose driver calls the checker reads by value (:attr:`Exercise.values_of`).
    """
    if not id or id != id.strip().lower() or " " in id:
        raise ValueError(f"an exercise id is lower-case words joined by '-', got {id!r}")
    tiers = _hints(id, hints)

    def register(fn: Checker) -> Exercise:
        old = _REGISTRY.get(id)
        if old is not None and old.check.__qualname__ != fn.__qualname__:
            by = f"{old.check.__module__}.{old.check.__qualname__}"
            raise ValueError(f"exercise {id!r} is already registered (by {by})")
        ex = Exercise(id=id, lesson=lesson, title=title, check=fn, hints=tiers, native_api=native_api,
                      values_of=tuple(values_of))
        _REGISTRY[id] = ex
        return ex

    return register


def registered() -> dict[str, Exercise]:
    """The exercises registered so far (the catalog imports its modules to fill this)."""
    return dict(_REGISTRY)


def unknown(exercise_id: str, known: list[str]) -> UnknownExerciseError:
    """The error for an unknown id: the close ids (did you mean), and every id."""
    close = difflib.get_close_matches(exercise_id, known, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return UnknownExerciseError(f"no exercise {exercise_id!r}; {hint}exercises: {', '.join(sorted(known))}")


def grade(ex: Exercise, attempt: Attempt) -> Verdict:
    """Run ``ex``'s checker on ``attempt``: never raises, and keeps the learner's and the checker's faults apart.

    - the cell raised: ``not yet`` naming the error (the checker is not asked: it would grade a half run);
    - the checker raised :class:`NotYet`: ``not yet`` with its message;
    - the checker raised anything else, or named a mistake ``ex`` has no hint for: ``not checked``,
      saying it is a bug in Eugo Lab, not in the cell.

    Every ``not yet`` ends with the line pointing at ``%eugo hint`` (:data:`HINT_POINTER`).
    """
    if attempt.error is not None:
        err = attempt.error
        name = type(err).__name__
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        said = f"{name}: {msg}" if msg else name
        return _pointing(ex, Verdict(ex.id, False, (
            f"the cell stopped with {said} before it finished, so there is nothing to check yet; fix the error "
            "(the traceback below shows the line), then run the cell again.",)))
    try:
        verdict = ex.check(attempt)
    except NotYet as exc:
        verdict = Verdict(ex.id, False, (str(exc),), mistake=exc.mistake)
    except Exception as exc:  # noqa: BLE001 - a checker bug must not look like the learner's mistake
        where = traceback.extract_tb(exc.__traceback__)[-1]
        bug = f"{type(exc).__name__}: {exc} ({where.name}, line {where.lineno})"
        return _checker_bug(ex, bug, f"{type(exc).__name__} in the {ex.id} checker")
    if not isinstance(verdict, Verdict) or verdict.exercise_id != ex.id:
        return Verdict(ex.id, False, ("the checker for this exercise returned no verdict: that is a bug in Eugo "
                                      "Lab, not a mistake in your cell.",),
                       checker_error=f"checker returned {type(verdict).__name__}")
    if verdict.passed:
        return verdict
    if verdict.mistake is not None and verdict.mistake not in ex.hints:
        return _checker_bug(ex, f"mistake {verdict.mistake!r} has no hint (hints: {', '.join(sorted(ex.hints))})",
                            f"no hint for mistake {verdict.mistake!r} in the {ex.id} checker")
    return _pointing(ex, verdict)


def _pointing(ex: Exercise, verdict: Verdict) -> Verdict:
    """``verdict`` (a ``not yet``) ending with the line that points at ``%eugo hint``."""
    return replace(verdict, lines=(*verdict.lines, HINT_POINTER.format(id=ex.id)))


def _checker_bug(ex: Exercise, bug: str, report: str) -> Verdict:
    """The ``not checked`` verdict of a checker that failed: Eugo Lab's bug, with the line to report."""
    return Verdict(ex.id, False, (
        "the checker for this exercise failed: that is a bug in Eugo Lab, not a mistake in your cell "
        f"(your cell ran; the summary above shows what it did). Please report it with this line: {report}.",),
        checker_error=bug)
