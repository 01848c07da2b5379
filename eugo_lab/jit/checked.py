"""JIT for Python loops over NumPy arrays: try Numba on a worker, keep it only when checked and faster.

How a function gets here: ``@hpc.remote(optimize=True)`` or a ``%%eugo --optimize`` cell
submits the function wrapped in :class:`Optimized` (the driver wraps it; the worker shims
are untouched). On the first call in each worker process the wrapper runs a *trial*:

1. the plain function runs on the real arguments (its result is what the caller gets, so
   the trial wastes no work) and is timed;
2. Numba compiles it for those argument types (timed on its own);
3. the compiled version runs once on copies of the original inputs; its result must have the
   same type, dtype and shape and equal values (``np.allclose``, NaNs equal);
4. it is kept only when it is at least :data:`MIN_GAIN` times faster.

The verdict is cached per worker process under the function's *code key* (a hash of its
pickled payload), so each worker compiles once, also when the same code arrives again
under a new record (a cell re-run). Later calls go straight to the compiled or the plain
function: one dict lookup of overhead.

How the verdict reaches the driver: as ``hpc.phase`` spans of the trial task (``jit: plain
run``, ``jit: compile``, ``jit: compiled run``) plus one zero-length phase naming the verdict
(``jit: compiled`` or ``jit: declined: CODE[: detail]``). The phases already travel back
with every traced task, so nothing in the worker shim, the trace row or the recorder had to
change, and the timeline shows where the compile time went. :func:`verdicts_from_trace`
reads them back (:mod:`eugo_lab.jit.verdicts`), where ``explain`` turns a decline code into plain words.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class _NoPhase:
    """A do-nothing stand-in for ``hpc.phase`` (a trial run outside a task, or in tests)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None

# A compiled version must be at least this much faster to replace the plain one: below it the
# gain is within this VM's timing noise (~25% drift) and not worth a compile per worker.
MIN_GAIN = 1.5
# A call shorter than this is not worth compiling for: Numba's compile costs 0.1-0.3 s, so a
# 1 ms call would need hundreds of calls per worker to pay it back, and its timing is noisy.
MIN_PLAIN_SECONDS = 1e-3
# Tolerance of the result check: compiled loops may fuse multiply-adds or reorder a float
# reduction (last-bit differences); anything beyond this is a different result.
RTOL, ATOL = 1e-7, 1e-12

PHASE_PREFIX = "jit: "
VERDICT_COMPILED = "compiled"

# What Numba names a global's type when it is something to call (see classify_numba_error).
_CALLABLE_KINDS = ("function", "builtin_function_or_method", "method", "functools.partial",
                   "numba.core.registry.CPUDispatcher")


def classify_numba_error(exc: BaseException) -> tuple[str, str]:
    """Map a Numba compile error onto a decline code and a short detail (the offending name, if any)."""
    text = str(exc)
    low = text.lower()
    m = re.search(r"untyped global name '([^']+)'(?::\s*cannot determine numba type of <class '([^']+)'>)?",
                  text, re.IGNORECASE)
    if m:
        name, kind = m.group(1), m.group(2) or ""
        # A global Numba cannot type is a call it does not know only when it is a function;
        # a class (``Box(0.0)``) or an instance (``B.v``) is a Python object in the loop.
        if kind == "type":
            return "python-objects", f"{name}, a class"
        if kind and kind not in _CALLABLE_KINDS:
            return "python-objects", f"{name}, a {kind.rsplit('.', 1)[-1]} object"
        return "unknown-call", name
    m = re.search(r"Unknown attribute '(\w+)' of type Module\(<module '([\w.]+)'", text)
    if m:
        return "unknown-call", f"{m.group(2)}.{m.group(1)}"
    if "cannot unify" in low or "can't unify" in low:
        return "type-unstable", ""
    if "reflected list" in low or "reflected set" in low:
        return "lists", ""
    if "pyobject" in low or "cannot determine numba type of" in low or "unknown attribute" in low:
        m = re.search(r"cannot determine Numba type of <class '([^']+)'>", text, re.IGNORECASE)
        return "python-objects", m.group(1) if m else ""
    if "unsupported" in low and ("opcode" in low or "use of" in low or "construct" in low):
        return "unsupported-feature", ""
    m = re.search(r"No implementation of function Function\(<[^>]*?([\w.]+)>\)", text)
    if m or "invalid use of" in low or "no implementation of function" in low:
        return "unsupported-call", m.group(1) if m else ""
    return "compile-error", text.strip().splitlines()[0][:120] if text.strip() else type(exc).__name__


@dataclass(frozen=True)
class Verdict:
    """What the trial decided for one function on one worker (times are seconds, ``None`` if not measured)."""

    status: str  # "compiled" or "declined"
    code: str = ""  # decline code (see verdicts.explain)
    detail: str = ""
    plain_s: float | None = None
    compile_s: float | None = None
    compiled_s: float | None = None

    @property
    def compiled(self) -> bool:
        """True when calls on this worker run the compiled version."""
        return self.status == VERDICT_COMPILED

    def phase_name(self, cached: bool = False) -> str:
        """The zero-length phase that carries this verdict (and the trial's times) to the driver.

        ``cached``: the verdict of an earlier trial in this process, announced again for a new
        record of the same code (a cell re-run), with that trial's times.
        """
        name = PHASE_PREFIX + (VERDICT_COMPILED if self.compiled else
                               "declined: " + self.code + (f": {self.detail}" if self.detail else ""))
        times = " ".join(f"{k}={v:.3g}" for k, v in (("plain", self.plain_s), ("compile", self.compile_s),
                                                       ("compiled", self.compiled_s)) if v is not None)
        return f"{name} [{'cached' if cached else 'trial'} {times}]" if times or cached else name


def cached_times(name: str) -> tuple[str, dict[str, float] | None, bool]:
    """Split a verdict phase name into the verdict, the trial's times (None: none) and whether it was cached."""
    for tag in ("trial", "cached"):
        head, sep, tail = name.partition(f" [{tag} ")
        if sep or name.endswith(f" [{tag}]"):
            if not sep:
                return name[: -len(f" [{tag}]")], {}, tag == "cached"
            times = {}
            for part in tail.rstrip("]").split():
                k, _, v = part.partition("=")
                try:
                    times[k] = float(v)
                except ValueError:
                    pass
            return head, times, tag == "cached"
    return name, None, False


def parse_phase(name: str) -> tuple[str, str, str] | None:
    """``"jit: declined: unknown-call: foo"`` -> ``("declined", "unknown-call", "foo")``; other phases -> None."""
    if not name.startswith(PHASE_PREFIX):
        return None
    name, _, _ = cached_times(name)
    rest = name[len(PHASE_PREFIX):]
    if rest == VERDICT_COMPILED:
        return VERDICT_COMPILED, "", ""
    if rest.startswith("declined: "):
        code, _, detail = rest[len("declined: "):].partition(": ")
        return "declined", code, detail
    return None


# -- the worker side ---------------------------------------------------------------------------------
_lock = threading.Lock()
# code key -> (verdict, compiled dispatcher or None, the argument signature the trial checked it for)
_verdicts: dict[str, tuple[Verdict, Callable | None, tuple]] = {}
_compiles = 0  # Numba compiles this process ran (tests count them: one per worker and function)


def compile_count() -> int:
    """How many functions this process has compiled with Numba (for tests and the benchmark)."""
    return _compiles


def code_key(payload: bytes) -> str:
    """A stable key for a function's code and what it captured: a hash of its pickled payload."""
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


class Optimized:
    """A function submitted with ``optimize``: plain on the first call per worker, then compiled if it won.

    Pickled with the task like the function itself; ``key`` is computed once on the driver
    (:func:`code_key` of the function's payload). ``phase`` is ``hpc.phase``, handed in by the
    driver (pickled by reference) so that this room does not import the runtime's. Calling it
    directly (the threads backend, or by hand) behaves the same.
    """

    __slots__ = ("fn", "key", "phase", "announced", "__weakref__")

    def __init__(self, fn: Callable, key: str, phase: Callable[[str], Any] = _NoPhase):
        self.fn = fn
        self.key = key
        self.phase = phase
        self.announced = False  # this copy told the driver its verdict (a trial, or the cached one)

    def __reduce__(self) -> tuple:
        return Optimized, (self.fn, self.key, self.phase)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled version if this worker's trial kept it, else the plain function (the first call: the trial).

        The compiled version runs only for arguments of the types its trial checked: called with
        others (a list where the trial had an array, float32 where it had float64), Numba would
        compile a new version whose result nobody compared, so the plain function runs.
        """
        entry = _verdicts.get(self.key)
        if entry is not None:
            if not self.announced:  # the same code under a new record (a cell re-run): say what this worker does
                self.announced = True
                with self.phase(entry[0].phase_name(cached=True)):
                    pass
            return _chosen(entry, self.fn, args, kwargs)(*args, **kwargs)
        with _lock:  # threads-backend workers share one process: one trial per process
            entry = _verdicts.get(self.key)
            if entry is None:
                self.announced = True
                signature = arg_signature(args, kwargs)  # before the call: the plain run may change its inputs
                try:
                    value, verdict, compiled = trial(self.fn, args, kwargs, self.phase)
                except BaseException:
                    self.announced = False  # the plain call raised: try again on the next call
                    raise
                _verdicts[self.key] = (verdict, compiled, signature)
                return value
        return _chosen(entry, self.fn, args, kwargs)(*args, **kwargs)


def _signature_of(v: Any) -> Any:
    """What Numba specializes on for one argument: an array's dtype, dimensions and layout; else the type."""
    t = type(v)
    if t is tuple:
        return (t, tuple(_signature_of(x) for x in v))
    dtype = getattr(v, "dtype", None)
    if dtype is not None and hasattr(v, "ndim") and hasattr(v, "flags"):
        return (t, dtype.str, v.ndim, bool(v.flags.c_contiguous), bool(v.flags.f_contiguous))
    return t


def arg_signature(args: tuple, kwargs: dict) -> tuple:
    """The argument types a trial checked the compiled version for (see :class:`Optimized`)."""
    return tuple(_signature_of(a) for a in args) + tuple((k, _signature_of(v)) for k, v in sorted(kwargs.items()))


def _chosen(entry: tuple[Verdict, Callable | None, tuple], fn: Callable, args: tuple, kwargs: dict) -> Callable:
    compiled = entry[1]
    if compiled is None or arg_signature(args, kwargs) != entry[2]:
        return fn
    return compiled


def _has(obj: Any, kind: type) -> bool:
    return isinstance(obj, kind) or (isinstance(obj, tuple) and any(isinstance(o, kind) for o in obj))


def _copies(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Fresh copies of array inputs: the plain run may write into them, the compiled one must see the originals."""
    import numpy as np

    def cp(v: Any) -> Any:
        return v.copy() if isinstance(v, np.ndarray) else v

    return tuple(cp(a) for a in args), {k: cp(v) for k, v in kwargs.items()}


def same_result(a: Any, b: Any) -> bool:
    """Same type, dtype and shape, values equal within tolerance (NaNs equal); tuples element by element."""
    import numpy as np

    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_result(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return bool(np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, (bool, int, float, complex, np.number, np.bool_)) and \
            isinstance(b, (bool, int, float, complex, np.number, np.bool_)):
        if isinstance(a, float) or isinstance(b, float) or isinstance(a, np.floating) or isinstance(b, np.floating):
            return bool(np.isclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True))
        return bool(a == b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable results are not the same result
        return False


def trial(fn: Callable, args: tuple, kwargs: dict,
          phase: Callable[[str], Any] = _NoPhase) -> tuple[Any, Verdict, Callable | None]:
    """Run ``fn`` plainly, try Numba on it, check and time it; returns ``(plain value, verdict, compiled or None)``.

    ``phase`` records the trial's spans and verdict in the running task (``hpc.phase``).

    Raises what the plain call raises (after recording a ``plain-error`` verdict), so the
    caller sees the function's own error exactly as without ``optimize``.
    """
    global _compiles
    import numpy as np

    def _mark(verdict: Verdict) -> Verdict:
        with phase(verdict.phase_name()):
            pass
        return verdict

    values = list(args) + list(kwargs.values())
    has_arrays = any(_has(v, np.ndarray) for v in values)
    copies = _copies(args, kwargs) if has_arrays else None
    # Calls are timed in this thread's CPU time: the other workers of this machine may be compiling
    # or running at the same moment, and on 2 shared cores that made a 50 us compiled call read 2 ms
    # by the wall clock. Compiling is timed by the wall clock (what the task waits).
    cpu = time.thread_time
    t0 = cpu()
    try:
        with phase(PHASE_PREFIX + "plain run"):
            value = fn(*args, **kwargs)
    except BaseException:
        _mark(Verdict("declined", "plain-error"))
        raise
    plain_s = cpu() - t0
    if not has_arrays:
        code = "lists" if any(_has(v, list) for v in values) else "no-arrays"
        return value, _mark(Verdict("declined", code, plain_s=plain_s)), None
    if plain_s < MIN_PLAIN_SECONDS:
        return value, _mark(Verdict("declined", "too-short", plain_s=plain_s)), None
    try:
        import numba
    except ImportError:
        return value, _mark(Verdict("declined", "numba-missing", plain_s=plain_s)), None
    assert copies is not None
    cargs, ckwargs = copies
    t1 = time.perf_counter()
    try:
        with phase(PHASE_PREFIX + "compile"):
            dispatcher = numba.njit(fn)
            if not ckwargs:  # compile on its own, so the compiled run below is timed without it
                dispatcher.compile(tuple(numba.typeof(a) for a in cargs))
            _compiles += 1
    except Exception as exc:  # noqa: BLE001 - any compile failure: keep the plain function
        code, detail = classify_numba_error(exc)
        return value, _mark(Verdict("declined", code, detail, plain_s=plain_s)), None
    compile_s = time.perf_counter() - t1
    try:
        with phase(PHASE_PREFIX + "compiled run"):
            t2 = cpu()
            fast = dispatcher(*cargs, **ckwargs)
            compiled_s = cpu() - t2
            for _ in range(2):
                if compiled_s * 10 > plain_s:
                    break
                # Again on the same inputs, keeping the fastest: a first call pays page faults for its
                # fresh output (4 ms against 0.3 ms for 8 MB here), which later calls reuse. Cheap: a
                # tenth of the plain run at most.
                t2 = cpu()
                dispatcher(*cargs, **ckwargs)  # (its result is not used: the check above is done on the first)
                compiled_s = min(compiled_s, cpu() - t2)
    except Exception as exc:  # noqa: BLE001 - e.g. an out-of-bounds write Python would have caught differently
        code, detail = classify_numba_error(exc) if "numba" in type(exc).__module__ else ("compiled-error", "")
        return value, _mark(Verdict("declined", code, detail, plain_s=plain_s, compile_s=compile_s)), None
    if not same_result(value, fast):
        return value, _mark(Verdict("declined", "differs", plain_s=plain_s, compile_s=compile_s,
                                    compiled_s=compiled_s)), None
    if compiled_s * MIN_GAIN > plain_s:
        return value, _mark(Verdict("declined", "not-faster", plain_s=plain_s, compile_s=compile_s,
                                    compiled_s=compiled_s)), None
    return value, _mark(Verdict(VERDICT_COMPILED, plain_s=plain_s, compile_s=compile_s, compiled_s=compiled_s)), \
        dispatcher


def reset() -> None:
    """Forget every verdict of this process (tests)."""
    global _compiles
    with _lock:
        _verdicts.clear()
        _compiles = 0
