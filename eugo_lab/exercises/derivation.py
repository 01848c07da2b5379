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
- :func:`concatenated` - an array (or DataFrame) is the tasks' results joined in task order.

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
        if not trace.results(function):
            return _no_tasks(name, function)
        return Derivation(False, f"`{name}` cannot be traced to the {function} tasks: they did not return plain "
                                 "numbers")
    expected = combine(values)
    if _close(_as_number(value), expected):
        return _YES
    return Derivation(False, f"`{name}` was not computed from the tasks' results: the {len(values)} {function} "
                             f"tasks returned values that {how} give {_show(expected)}, but `{name}` is "
                             f"{_show(_as_number(value))}")


def listed(values: Sequence[Any], trace: Any, function: str, *, name: str = "the result",
           ordered: bool = True) -> Derivation:
    """``values`` holds exactly the results of ``function``'s tasks (in task order when ``ordered``)."""
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
    same = sum((Counter(mine) & Counter(got)).values())
    if same == len(got) and len(mine) == len(got):
        return Derivation(False, f"`{name}` holds the {function} tasks' results in another order than the tasks "
                                 "were submitted")
    return Derivation(False, f"`{name}` was not computed from the tasks' results: {same} of its {len(mine)} "
                             f"values are among what the {len(got)} {function} tasks returned")


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
