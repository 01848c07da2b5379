"""The learner's predictions: ``%eugo guess NAME VALUE`` before a measurement, the comparison after it.

A lesson's "Predict" prompt is followed by a guess cell the learner edits::

    %eugo guess batch-speedup 2x

and the cell that measures the answer ends by printing the guess beside the measurement::

    from eugo_lab.guesses import compare_guess
    compare_guess("batch-speedup", speedup, "x")
    # your prediction (batch-speedup): 2x  |  measured: 1.73x

A value is a number with an optional unit (:data:`ACCEPTED`): a ratio (``2x``), a percentage
(``40%``), a time (``300 ms``, ``0.5 s``, ``2 min``), a size (``12 MB``, ``512 MiB``), a rate
(``40 MB/s``) or a plain count (``8``). A guess is kept in this kernel and saved in the progress
store under its lesson (the notebook's path below ``courses/``, which the Jupyter server hands
the kernel), so it survives a restart of the kernel; a kernel that does not know its notebook
(run outside a Jupyter server) keeps its guesses for itself. A measurement with no guess prints
``no guess recorded for NAME`` and goes on.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any

from eugo_lab import progress
from eugo_lab.units import fmt_bytes, fmt_seconds

#: unit as written (lower case) -> (kind, factor to the kind's base unit). The base units are x, %, s, B, B/s, "".
_UNITS: dict[str, tuple[str, float]] = {
    "": ("count", 1.0), "x": ("ratio", 1.0), "×": ("ratio", 1.0), "%": ("percent", 1.0),
    "ns": ("time", 1e-9), "us": ("time", 1e-6), "µs": ("time", 1e-6), "ms": ("time", 1e-3), "s": ("time", 1.0),
    "min": ("time", 60.0), "h": ("time", 3600.0),
    **{u: ("size", float(k)) for u, k in (("b", 1), ("kb", 10**3), ("mb", 10**6), ("gb", 10**9), ("tb", 10**12),
                                         ("kib", 2**10), ("mib", 2**20), ("gib", 2**30), ("tib", 2**40))},
    **{f"{u}/s": ("rate", float(k)) for u, k in (("b", 1), ("kb", 10**3), ("mb", 10**6), ("gb", 10**9))},
}
#: What a guess may look like (the error for a bad one lists these).
ACCEPTED = "a number with an optional unit: 2x, 40%, 300 ms, 0.5 s, 2 min, 12 MB, 512 MiB, 40 MB/s, or a count like 8"
_NAME = re.compile(r"^[A-Za-z][\w-]{0,63}$")
_NUMBER = r"[+-]?(?:\d{1,3}(?:[,_]\d{3})+|\d+)(?:\.\d*)?(?:[eE][+-]?\d+)?|[+-]?\.\d+"
_VALUE = re.compile(rf"^\s*(?P<number>{_NUMBER})\s*(?P<unit>[A-Za-zµ×%/]*)\s*$")
#: The label of a kernel that does not know its notebook's path.
NO_LESSON = ""

_kernel: dict[tuple[str, str], Guess] = {}


class GuessError(ValueError):
    """A guess's name or value cannot be read (the message names the accepted forms)."""


@dataclass(frozen=True)
class Guess:
    """One prediction: as written (``text``), and as ``value`` in the base unit of its ``kind``."""

    name: str
    text: str
    value: float
    kind: str

    def as_dict(self) -> dict[str, Any]:
        """What the progress store keeps (``when`` added by :func:`record`)."""
        return {"text": self.text, "value": self.value, "kind": self.kind}

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> Guess | None:
        """A stored guess, or None when the entry is not one (a hand edit, a future field)."""
        try:
            return cls(name, str(d["text"]), float(d["value"]), str(d["kind"]))
        except (KeyError, TypeError, ValueError):
            return None


def check_name(name: str) -> str:
    """``name`` when it is a guess name (a letter, then letters, digits, ``-`` or ``_``); else :class:`GuessError`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise GuessError(f"{name!r} is not a guess name: start with a letter, then letters, digits, '-' or '_' "
                         "(e.g. batch-speedup)")
    return name


def parse(name: str, text: str) -> Guess:
    """Read ``text`` as a value of :data:`ACCEPTED`; a bad one is a :class:`GuessError` saying what was wrong."""
    check_name(name)
    m = _VALUE.match(text or "")
    if m is None:
        raise GuessError(f"cannot read {text!r} as the guess {name}: write {ACCEPTED}")
    unit = m.group("unit").lower()
    if unit not in _UNITS:
        raise GuessError(f"{m.group('unit')!r} is not a unit a guess can have (in {text!r}): write {ACCEPTED}")
    number = float(m.group("number").replace(",", "").replace("_", ""))
    if not math.isfinite(number):
        raise GuessError(f"{text!r} is not a finite number: write {ACCEPTED}")
    kind, factor = _UNITS[unit]
    return Guess(name, " ".join(text.split()), number * factor, kind)


def lesson_of_kernel(user_ns: dict[str, Any] | None = None) -> str:
    """The kernel's notebook, relative to ``courses/`` when it lies below one; :data:`NO_LESSON` when unknown.

    The Jupyter server tells a kernel its notebook (``JPY_SESSION_NAME``, which ipykernel also
    puts in the namespace as ``__session__``); nbclient and a plain IPython do not.
    """
    path = os.environ.get("JPY_SESSION_NAME") or (user_ns or {}).get("__session__") or ""
    if not isinstance(path, str) or not path.endswith(".ipynb"):
        return NO_LESSON
    parts = path.replace("\\", "/").split("/")
    if "courses" in parts:
        parts = parts[len(parts) - parts[::-1].index("courses"):]
    return "/".join(p for p in parts if p)


def record(name: str, text: str, lesson: str = NO_LESSON) -> tuple[Guess, bool]:
    """Parse and keep the guess ``name`` (this kernel, and the store under ``lesson`` when known).

    Returns ``(guess, saved)``; a store that cannot be written costs a warning, never the guess.
    """
    guess = parse(name, text)
    _kernel[(lesson, name)] = guess
    if lesson == NO_LESSON:
        return guess, False
    try:
        progress.record_guess(lesson, name, {**guess.as_dict(), "when": progress.now()})
    except (OSError, progress.ProgressError) as exc:
        warnings.warn(f"eugo: your guess was kept in this kernel but not saved to {progress.progress_path()}: "
                      f"{exc}", stacklevel=2)
        return guess, False
    return guess, True


def recorded(name: str, lesson: str = NO_LESSON) -> Guess | None:
    """The guess ``name``: this kernel's, else the one saved for ``lesson``; None when none was made."""
    check_name(name)
    if (lesson, name) in _kernel:
        return _kernel[(lesson, name)]
    if lesson == NO_LESSON:
        return None
    try:
        saved = progress.guesses(lesson).get(name)
    except (OSError, progress.ProgressError):
        return None
    return Guess.from_dict(name, saved) if saved else None


def fmt(value: float, kind: str) -> str:
    """``value`` (in the base unit of ``kind``) as a reader writes it: ``1.73x``, ``40%``, ``412 ms``, ``12 MB``."""
    if kind == "time":
        return fmt_seconds(value)
    if kind == "size":
        return fmt_bytes(value, ".3g")
    if kind == "rate":
        return fmt_bytes(value, ".3g") + "/s"
    if kind == "ratio":
        return f"{value:.3g}x"
    if kind == "percent":
        return f"{value:.3g}%"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"


@dataclass(frozen=True)
class Comparison:
    """A guess beside what was measured; ``text`` is the one line :func:`compare_guess` prints."""

    name: str
    measured: float | None  # None: the measurement found no value (a break-even the GPU never reaches)
    kind: str
    guess: Guess | None
    #: What the value is: "measured", or where there is nothing to measure, e.g. "predicted for NVIDIA H100".
    source: str = "measured"

    @property
    def text(self) -> str:
        """``your prediction (NAME): 2x  |  measured: 1.73x``, or ``no guess recorded for NAME``."""
        shown = "none (no such value on this machine)" if self.measured is None else fmt(self.measured, self.kind)
        measured = f"{self.source}: {shown}"
        if self.guess is None:
            return f"no guess recorded for {self.name}  |  {measured}"
        said = f"your prediction ({self.name}): {self.guess.text}"
        if self.guess.kind == self.kind:
            return f"{said}  |  {measured}"
        if self.guess.kind == "count":  # a bare number means the measurement's unit: "2" for a speedup is 2x
            return f"{said} (read as {fmt(self.guess.value, self.kind)})  |  {measured}"
        return f"{said}  |  {measured} (a {self.kind}, your guess is a {self.guess.kind}: not comparable)"

    def __str__(self) -> str:
        return self.text


def compare(name: str, measured: float | None, unit: str = "", lesson: str = NO_LESSON,
            source: str = "measured") -> Comparison:
    """The guess ``name`` beside ``measured`` (a number in ``unit``, one of the units a guess may have; None: none).

    ``source`` says what the value is when it was not measured here: ``"predicted for NVIDIA H100"`` for a
    cost model's figure on a machine without that GPU.
    """
    if not isinstance(source, str) or not source.strip():
        raise GuessError(f"source must say what the value is (e.g. 'measured'), got {source!r}")
    key = (unit or "").strip().lower()
    if key not in _UNITS:
        raise GuessError(f"{unit!r} is not a unit compare_guess knows: use x, %, ns, us, ms, s, min, h, B, kB, MB, "
                         "GB, TB, KiB, MiB, GiB, MB/s, GB/s, or '' for a count")
    if measured is not None:
        try:
            measured = float(measured)  # numpy numbers and ints too
        except (TypeError, ValueError):
            raise GuessError(f"the measured value of {name} must be a number, got {measured!r}") from None
        if not math.isfinite(measured):
            raise GuessError(f"the measured value of {name} must be a finite number, got {measured!r}")
    kind, factor = _UNITS[key]
    return Comparison(name, None if measured is None else measured * factor, kind, recorded(name, lesson),
                      source.strip())


def compare_guess(name: str, measured: float | None, unit: str = "", source: str = "measured") -> None:
    """Print the learner's prediction ``name`` beside ``measured`` (in ``unit``); ``no guess recorded`` if none.

    The line labels both: ``your prediction (NAME): 300 ms  |  measured: 412 ms``. A value that is a model's
    prediction, not a measurement, says so through ``source``: ``...  |  predicted for NVIDIA H100: 1.2 ms``.
    """
    ns = None
    try:
        from IPython import get_ipython
    except ImportError:  # a plain Python: no notebook, so no lesson to read a saved guess from
        pass
    else:
        ip = get_ipython()
        ns = ip.user_ns if ip is not None else None
    print(compare(name, measured, unit, lesson_of_kernel(ns), source).text)


def forget() -> None:
    """Drop this kernel's guesses (the saved ones stay); tests start from none."""
    _kernel.clear()
