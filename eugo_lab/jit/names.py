"""The phase names both JITs share, in a module that imports nothing a worker has not loaded already.

The automatic JIT's wrapper (:mod:`eugo_lab.jit.auto`) goes around every task of a cell, and a
worker imports it with the first one: this module keeps that import to what a function that is
never compiled needs. :mod:`eugo_lab.jit.checked` (the trial, dataclasses, hashing) is imported
once a function qualifies.
"""

from __future__ import annotations

from typing import Any

from eugo_lab.contract.phases import RUNTIME_PHASE_PREFIX

PHASE_PREFIX = RUNTIME_PHASE_PREFIX
VERDICT_COMPILED = "compiled"
# The automatic JIT looked at a function and did not try it (eugo_lab.jit.auto): "jit: not tried: CODE[: detail]".
SKIPPED = "not tried"


class _NoPhase:
    """A do-nothing stand-in for ``hpc.phase`` (a trial run outside a task, or in tests)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def int_sizes(args: tuple, kwargs: dict) -> tuple:
    """The bit lengths of the call's Python ``int`` arguments, to the next multiple of 8 (part of a signature).

    Numba runs Python integers as 64-bit ones: a function checked on small integers may overflow
    on larger ones, so a call whose integers are a size class larger is trialled again.
    """
    return tuple((v.bit_length() + 7) // 8 for v in (*args, *kwargs.values()) if type(v) is int)


_MISSING = object()


def globals_unchanged(frozen: tuple) -> bool:
    """Whether every global a compiled version froze is still bound to the same object (a look-up each).

    Numba bakes a global's value (``X``, ``mod.X``) into the code when it compiles; Python reads it
    at each call. Checked before each compiled call, so a rebound global (``X = 0.25`` in another
    task, a cell run again) never meets code that froze the old value: that version is forgotten and
    the call runs plain while a compile that reads the new value starts (cheaper than declining
    every function that reads a global, and exact).
    """
    for ns, name, value in frozen:
        now = ns.get(name, _MISSING) if isinstance(ns, dict) else getattr(ns, name, _MISSING)
        if now is not value:
            return False
    return True
