"""Did a graded value come from this cell's tasks? Checks of derivation against the trace's result digests.

A right value proves nothing on its own: a learner in a hurry computes it in the driver (or
leaves it from an earlier cell) while a decoy call of the taught API runs beside it. The
trace records a digest of what every task returned (:meth:`eugo_lab.tracing.trace.Trace.results`,
scalars with their value), so a grader can check that the value is what the tasks produced,
combined the way the exercise asks:

- :func:`combined` - a scalar equals ``combine`` of the tasks' scalar results (``total`` is the
  sum of the ``chunk_sum`` results);
- :func:`listed` - a sequence holds the tasks' results, in task order or in any order;
- :func:`one_of` - a value is what one of the tasks returned;
- :func:`concatenated` - an array (or DataFrame) is the tasks' results joined in task order;
- :func:`mapped` - a sequence holds ``fn`` of each task's scalar result (``handled`` holds
  ``handle(r)`` for every ``measure`` result), in task order or in any order.
- :func:`returned_by` - a sequence is what tasks of one function returned, each item by a task
  of its own (any order) or the tasks' lists joined in task order; it names the function and
  the tasks (:class:`Sources`), so a grader reads its other facts off those tasks only.

Each returns a :class:`Derivation`: ``ok``, and when not, ``why`` in plain words for the verdict.
Pure functions of the trace and the value: nothing reads a clock.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eugo_lab.tracing.digest import Digest, digest


@dataclass(frozen=True)
class Derivation:
    """Whether a value came from the tasks' results; ``why`` says what did not match (empty when ``ok``)."""

    ok: bool
    why: str = ""

    def __bool__(self) -> bool:
        return self.ok


_YES = Derivation(True)


def results(trace: Any, function: str) -> list[Digest]:
    """The digests of what ``function``'s tasks returned (first successful attempts), in task order."""
    return [r.digest for r in trace.results(function)]


def _no_tasks(name: str, function: str) -> Derivation:
    return Derivation(False, f"`{name}` was not computed from the tasks' results: no {function} task returned a "
                             "value in this cell")


def _not_scalars(trace: Any, name: str, function: str) -> Derivation:
    """Why ``name`` cannot be traced to ``function``'s scalar results: no task returned, or not plain numbers."""
    if not trace.results(function):
        return _no_tasks(name, function)
    return Derivation(False, f"`{name}` cannot be traced to the {function} tasks: they did not return plain numbers")


def _close(a: Any, b: Any) -> bool:
    """Equal numbers; floats within a relative 1e-9 (a sum taken in another order rounds differently)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12) if (
            isinstance(a, float) or isinstance(b, float)) else a == b
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _as_number(value: Any) -> Any:
    """A NumPy scalar as the Python number it holds (a task's ``np.float64`` and the driver's ``float`` agree)."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    return value


def scalar_values_of(result: Any) -> Any:
    """The scalar one traced task returned (a :class:`~eugo_lab.tracing.provenance.Result`), else ``None``.

    NumPy scalars come back as the Python number they hold; a result that is not a scalar the
    trace kept (an array, a list, a long string) gives ``None``.
    """
    if result.items or result.digest.value is None:
        return None
    return _as_number(result.digest.value)


def scalar_values(trace: Any, function: str) -> list[Any] | None:
    """The values ``function``'s tasks returned, when every one is a scalar the trace kept; else ``None``."""
    found = trace.results(function)
    if not found or any(r.items or r.digest.value is None for r in found):
        return None
    return [_as_number(r.digest.value) for r in found]


def combined(value: Any, trace: Any, function: str, combine: Callable[[list[Any]], Any], *,
             name: str = "the result", how: str = "combined") -> Derivation:
    """``value`` equals ``combine`` of the scalar results of ``function``'s tasks (``how``: "summed", ...)."""
    values = scalar_values(trace, function)
    if values is None:
        return _not_scalars(trace, name, function)
    expected = combine(values)
    if _close(_as_number(value), expected):
        return _YES
    return Derivation(False, f"`{name}` was not computed from the tasks' results: the {len(values)} {function} "
                             f"tasks returned values that {how} give {_show(expected)}, but `{name}` is "
                             f"{_show(_as_number(value))}")


def listed(values: Sequence[Any], trace: Any, function: str, *, name: str = "the result",
           ordered: bool = True) -> Derivation:
    """``values`` holds exactly the results of ``function``'s tasks (in task order when ``ordered``).

    A result may also be one item of what its task returned (``return seed, mean``, the cell keeping the
    mean): then the very object get() handed over, one per task (``Trace.handed``), is the evidence.
    """
    got = results(trace, function)
    if not got:
        return _no_tasks(name, function)
    try:
        mine = [digest(v) for v in values]
    except TypeError:
        return Derivation(False, f"`{name}` is not a list of results")
    if ordered and mine == got:
        return _YES
    if not ordered and Counter(mine) == Counter(got):
        return _YES
    if _items_handed(values, trace, function, ordered):
        return _YES
    same = sum((Counter(mine) & Counter(got)).values())
    if same == len(got) and len(mine) == len(got):
        return Derivation(False, f"`{name}` holds the {function} tasks' results in another order than the tasks "
                                 "were submitted")
    return Derivation(False, f"`{name}` was not computed from the tasks' results: {same} of its {len(mine)} "
                             f"values are among what the {len(got)} {function} tasks returned")


def _items_handed(values: Sequence[Any], trace: Any, function: str, ordered: bool) -> bool:
    """Each of ``values`` is an object get() handed over from its own task of ``function``, every such task once.

    An item of a task's result counts (its tuple taken apart); in task order when ``ordered``.
    """
    handed = getattr(trace, "handed", None)
    if handed is None:
        return False
    ids = {r.task_id for r in trace.results(function)}
    tasks = [handed.task_of(v) for v in values]
    if len(tasks) != len(ids) or any(t not in ids for t in tasks) or len(set(tasks)) != len(tasks):
        return False
    return not ordered or tasks == sorted(tasks)


def one_of(value: Any, trace: Any, function: str, *, name: str = "the result") -> Derivation:
    """``value`` is what one of ``function``'s tasks returned."""
    got = results(trace, function)
    if not got:
        return _no_tasks(name, function)
    if digest(value) in got:
        return _YES
    return Derivation(False, f"`{name}` was not returned by any of the {len(got)} {function} tasks of this cell")


def concatenated(value: Any, trace: Any, function: str, *, name: str = "the result") -> Derivation:
    """``value`` (an array or a pandas object) is the results of ``function``'s tasks joined in task order."""
    got = results(trace, function)
    if not got:
        return _no_tasks(name, function)
    lengths = [d.length for d in got]
    if any(n < 0 for n in lengths) or sum(lengths) != _length(value):
        return Derivation(False, f"`{name}` has {_length(value)} rows; the {len(got)} {function} tasks returned "
                                 f"{sum(n for n in lengths if n > 0)} in all, so it is not their results joined")
    at = 0
    for i, (n, d) in enumerate(zip(lengths, got)):
        piece = value.iloc[at:at + n] if hasattr(value, "iloc") else value[at:at + n]
        if digest(piece) != d:
            return Derivation(False, f"`{name}` was not computed from the tasks' results: rows {at}-{at + n - 1} "
                                     f"differ from what {function} task {i + 1} of {len(got)} returned")
        at += n
    return _YES


def mapped(values: Sequence[Any], trace: Any, function: str, fn: Callable[[Any], Any], *,
           name: str = "the result", how: str = "fn()", ordered: bool = False) -> Derivation:
    """``values`` holds ``fn(r)`` for each scalar result ``r`` of ``function``'s tasks (in task order when ``ordered``).

    ``how`` names ``fn`` in the message (``"handle()"``). Values compare closely (:func:`_close`),
    so a float the driver rounded another way still matches.
    """
    found = scalar_values(trace, function)
    if found is None:
        return _not_scalars(trace, name, function)
    try:
        mine = [_as_number(v) for v in values]
    except TypeError:
        return Derivation(False, f"`{name}` is not a list of results")
    expected = [fn(v) for v in found]
    if len(mine) == len(expected):
        pairs = zip(mine, expected) if ordered else zip(_sorted(mine), _sorted(expected))
        if all(_close(m, e) for m, e in pairs):
            return _YES
    left = list(expected)
    same = 0
    for m in mine:  # how many of the learner's values some task's result accounts for (each result once)
        hit = next((i for i, e in enumerate(left) if _close(m, e)), None)
        if hit is not None:
            same += 1
            del left[hit]
    if ordered and same == len(expected) == len(mine):
        return Derivation(False, f"`{name}` holds {how} of the {function} tasks' results in another order than the "
                                 "tasks were submitted")
    return Derivation(False, f"`{name}` was not computed from the tasks' results: {same} of its {len(mine)} values "
                             f"are {how} of one of the {len(expected)} values the {function} tasks returned")


def _sorted(xs: list[Any]) -> list[Any]:
    """``xs`` sorted when its items compare (numbers), else as it is."""
    try:
        return sorted(xs)
    except TypeError:
        return list(xs)


@dataclass(frozen=True)
class Sources(Derivation):
    """A :class:`Derivation` that also names where the value came from: ``function`` and its ``tasks`` (ids)."""

    function: str = ""
    tasks: tuple[int, ...] = ()


def returned_by(values: Sequence[Any], trace: Any, function: str | None = None, *,
                name: str = "the result") -> Sources:
    """``values`` is what tasks of one function (``function``, or any traced one) returned.

    Either every item was returned by a task of its own (any order; a task counts for one
    item), or ``values`` is the tasks' list results joined in task order (a task that returns
    a batch). On success ``function`` and ``tasks`` name them: the tasks the value came from,
    not every task the cell ran, so decoys beside them give no evidence.
    """
    found = trace.results(function)
    if not found:
        return Sources(False, f"`{name}` was not computed from the tasks' results: no "
                              f"{function + ' ' if function else ''}task returned a value in this cell")
    try:
        mine = [digest(v) for v in values]
    except TypeError:
        return Sources(False, f"`{name}` is not a list of results")
    if not mine:
        return Sources(False, f"`{name}` holds no results")
    by_function: dict[str, list[Any]] = {}
    for r in found:
        by_function.setdefault(r.function, []).append(r)
    best, best_fn = -1, ""
    for fn, rs in by_function.items():
        pool: dict[Digest, list[int]] = {}
        for r in rs:
            pool.setdefault(r.digest, []).append(r.task_id)
        ids = [pool[d].pop(0) for d in mine if pool.get(d)]
        if len(ids) == len(mine):
            return Sources(True, "", fn, tuple(ids))
        if concatenated(list(values), trace, fn, name=name):
            return Sources(True, "", fn, tuple(r.task_id for r in rs))
        if len(ids) > best:
            best, best_fn = len(ids), fn
    n = len(by_function[best_fn])
    return Sources(False, f"`{name}` was not computed from the tasks' results: {best} of its {len(mine)} values "
                          f"are among what the {n} {best_fn} task{'s' if n != 1 else ''} of this cell returned")


def _length(value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        return -1


def _show(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def partials(trace: Any, function: str, candidates: Mapping[str, Callable[[], Sequence[Any]]]) -> str | None:
    """The name of the candidate whose values are exactly what ``function``'s tasks returned, in task order.

    ``candidates`` maps a name to a callable making that candidate's list of values (called
    only when needed, in the mapping's order: each may cost a computation). Use it when the
    graded value is a combination the trace cannot replay (a custom combine of partial
    results): it shows which known set of partial results the tasks produced, e.g. a function
    applied to the partitions of a DataFrame that together hold every row. ``None``: none matched.
    """
    got = results(trace, function)
    if not got:
        return None
    for name, make in candidates.items():
        values = make()
        # Each candidate as it would arrive from a worker: a digest counts a pandas object's
        # in-memory bytes, which a pickle round trip can change (a categorical index's cached
        # state) while the values stay the same.
        if len(values) == len(got) and all(digest(pickle.loads(pickle.dumps(v))) == d for v, d in zip(values, got)):
            return name
    return None
