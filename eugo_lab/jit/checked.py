"""JIT for Python loops over NumPy arrays: try Numba on a worker, keep it only when checked and faster.

How a function gets here: ``@hpc.remote(optimize=True)`` or a ``%%eugo --optimize`` cell
submits the function wrapped in :class:`Optimized` (the driver wraps it; the worker shims
are untouched). On the first call in each worker process the wrapper runs a *trial*:

1. the plain function runs on the real arguments (its result is what the caller gets, so
   the trial wastes no work) and is timed;
2. Numba compiles it for those argument types (timed on its own);
3. the compiled version runs once on copies of the original inputs; its result must have the
   same type, dtype and shape and the very same values to the last bit (NaNs equal, ``-0.0`` not
   ``0.0``): an optimization that changed a result in its last bit would still have changed it;
4. it is kept only when it is at least :data:`MIN_GAIN` times faster. ``optimize=True`` keeps it
   also where :mod:`eugo_lab.jit.exact` cannot prove it exact for every input (you asked for it):
   the verdict then carries why (:func:`unproven_of`), and the report says it was checked on its
   trial calls only. A later call whose Python int arguments are a size class larger than the
   trial's runs plain (:func:`checked_signature`).

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

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The shared names live in a module the automatic JIT imports without this one (its callers import them from here too).
from eugo_lab.contract.digest import blake2b
from eugo_lab.contract.phases import JIT_COMPILE_PHASE, runtime_work
from eugo_lab.jit.names import PHASE_PREFIX, SKIPPED, VERDICT_COMPILED, _NoPhase, globals_unchanged, int_sizes

# A compiled version must be at least this much faster to replace the plain one: below it the
# gain is within this VM's timing noise (~25% drift) and not worth a compile per worker.
MIN_GAIN = 1.5
# A call shorter than this is not worth compiling for: Numba's compile costs 0.1-0.3 s, so a
# 1 ms call would need hundreds of calls per worker to pay it back, and its timing is noisy.
MIN_PLAIN_SECONDS = 1e-3


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
    arity: int = -1  # how many positional arguments the compiled version takes (-1: not compiled)

    @property
    def compiled(self) -> bool:
        """True when calls on this worker run the compiled version."""
        return self.status == VERDICT_COMPILED

    def phase_name(self, cached: bool = False) -> str:
        """The zero-length phase that carries this verdict (and the trial's times) to the driver.

        ``cached``: the verdict of an earlier trial in this process, announced again for a new
        record of the same code (a cell re-run), with that trial's times.
        """
        name = PHASE_PREFIX + (VERDICT_COMPILED + (f": {self.detail}" if self.detail else "") if self.compiled else
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
    if rest == VERDICT_COMPILED or rest.startswith(VERDICT_COMPILED + ": "):
        return VERDICT_COMPILED, "", rest[len(VERDICT_COMPILED) + 2:]
    if rest.startswith(SKIPPED + ": "):
        code, _, detail = rest[len(SKIPPED) + 2:].partition(": ")
        return SKIPPED, code, detail
    if rest.startswith("declined: "):
        code, _, detail = rest[len("declined: "):].partition(": ")
        return "declined", code, detail
    return None


# -- the worker side ---------------------------------------------------------------------------------
_lock = threading.Lock()
# code key -> (verdict, compiled dispatcher or None, the argument signature the trial checked it for)
_verdicts: dict[str, tuple[Verdict, Callable | None, tuple]] = {}
_count_lock = threading.Lock()
_compiles = 0  # Numba compiles this process ran (tests count them: one per worker and function)


def compile_count() -> int:
    """How many functions this process has compiled with Numba (for tests and the benchmark)."""
    return _compiles


def code_key(payload: bytes) -> str:
    """A stable key for a function's code and what it captured: a hash of its pickled payload."""
    return blake2b(payload, digest_size=16).hexdigest()


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
            return _call_chosen(entry, self.fn, args, kwargs)
        with _lock:  # threads-backend workers share one process: one trial per process
            entry = _verdicts.get(self.key)
            if entry is None:
                self.announced = True
                signature = checked_signature(args, kwargs)  # before the call: the plain run may change its inputs
                try:
                    value, verdict, compiled = trial(self.fn, args, kwargs, self.phase)
                except BaseException:
                    self.announced = False  # the plain call raised: try again on the next call
                    raise
                _verdicts[self.key] = (verdict, compiled, signature)
                return value
        return _call_chosen(entry, self.fn, args, kwargs)


def _signature_of(v: Any) -> Any:
    """What Numba specializes on for one argument; for an array, what its Numba type holds.

    Its dtype, dimensions, layout, whether it is read-only (an ``hpc.put`` array on a worker is) and aligned.
    """
    t = type(v)
    if t is tuple:
        return (t, tuple(_signature_of(x) for x in v))
    dtype = getattr(v, "dtype", None)
    if dtype is not None and hasattr(v, "ndim") and hasattr(v, "flags"):
        f = v.flags
        return (t, dtype.str, v.ndim, bool(f.c_contiguous), bool(f.f_contiguous), bool(f.writeable), bool(f.aligned))
    return t


def arg_signature(args: tuple, kwargs: dict) -> tuple:
    """The argument types a trial checked the compiled version for (see :class:`Optimized`)."""
    return tuple(_signature_of(a) for a in args) + tuple((k, _signature_of(v)) for k, v in sorted(kwargs.items()))


def checked_signature(args: tuple, kwargs: dict) -> tuple:
    """What a trial checked: the argument types, and the size class of each Python int argument.

    Numba runs Python ints as 64-bit ones: code checked on small ints (a loop bound, a multiplier) may wrap
    on larger ones, so a call whose ints are a size class larger runs plain.
    """
    return arg_signature(args, kwargs) + int_sizes(args, kwargs)


def _chosen(entry: tuple[Verdict, Callable | None, tuple], fn: Callable, args: tuple, kwargs: dict) -> Callable:
    """The compiled version when the trial checked it for these argument types, else ``fn``."""
    compiled = entry[1]
    if compiled is None or checked_signature(args, kwargs) != entry[2]:
        return fn
    return compiled


def _call_chosen(entry: tuple[Verdict, Callable | None, tuple], fn: Callable, args: tuple, kwargs: dict) -> Any:
    """The compiled version on the call's bound arguments when the trial checked it for these types, else ``fn``.

    Bound (keywords and defaults made positional) as in the trial: called with fewer arguments,
    Numba would compile a new version on the spot, which nobody checked.
    """
    compiled = _chosen(entry, fn, args, kwargs)
    if compiled is fn or not _globals_still(compiled):
        return fn(*args, **kwargs)
    pos = positional(fn, args, kwargs) if kwargs or len(args) != entry[0].arity else args
    return compiled(*pos) if pos is not None else fn(*args, **kwargs)


def _globals_still(compiled: Any) -> bool:
    """Whether the globals ``compiled`` froze when it compiled are still bound as then (else Python's differ)."""
    return globals_unchanged(getattr(compiled, "eugo_frozen", ()))


def _has(obj: Any, kind: type) -> bool:
    return isinstance(obj, kind) or (isinstance(obj, tuple) and any(isinstance(o, kind) for o in obj))


def _scalar_class(x: Any) -> str:
    """``b``/``i``/``f``/``c`` for a bool, int, float or complex scalar (Python's or NumPy's); "" for anything else."""
    import numpy as np

    if isinstance(x, (bool, np.bool_)):
        return "b"
    if isinstance(x, (int, np.integer)):
        return "i"
    if isinstance(x, (float, np.floating)):
        return "f"
    if isinstance(x, (complex, np.complexfloating)):
        return "c"
    return ""


def _same_float(x: float, y: float) -> bool:
    """The same float to the last bit: -0.0 is not 0.0; any NaN is any NaN."""
    import math

    if x != x or y != y:
        return x != x and y != y
    return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)


def _same_floats(a: Any, b: Any) -> Any:
    """Elementwise :func:`_same_float` of two float arrays of one shape."""
    import numpy as np

    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def same_elements(a: Any, b: Any) -> Any:
    """A bool array: where two arrays of one shape and dtype hold the same value to the last bit (NaNs equal)."""
    import numpy as np

    if a.dtype.kind == "f":
        return _same_floats(a, b)
    if a.dtype.kind == "c":
        return _same_floats(a.real, b.real) & _same_floats(a.imag, b.imag)
    return np.asarray(a == b)


def bit_identical(a: Any, b: Any) -> bool:
    """Same type, dtype and shape and the very same values, to the last bit (NaNs equal); tuples element by element.

    Exact, not within a tolerance: an optimization that changed a value's last bit, or the sign of a
    zero (``-0.0`` against ``0.0``), still changed it. Numbers compare by type and bits: a Python
    float and a NumPy float64 holding the same bits are different results (``x / 0`` raises
    ZeroDivisionError on one and gives inf on the other), as are an int and a float.
    """
    import numpy as np

    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(bit_identical(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return bool(np.all(same_elements(a, b)))
        return bool(np.array_equal(a, b))
    ka, kb = _scalar_class(a), _scalar_class(b)
    if ka or kb:
        if ka != kb or type(a) is not type(b):
            return False
        if ka == "f":
            return _same_float(float(a), float(b))
        if ka == "c":
            return _same_float(a.real, b.real) and _same_float(a.imag, b.imag)
        return bool(a == b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable results are not the same result
        return False


def _type_name(x: Any) -> str:
    """``numpy.float64`` for a NumPy scalar, ``float`` for a Python number (NumPy 2 names its bool ``bool`` too)."""
    t = type(x)
    return f"numpy.{t.__name__}" if t.__module__ == "numpy" else t.__name__


def difference(a: Any, b: Any) -> str:
    """How a compiled float result ``b`` differs from the plain ``a``, where both are arrays of one shape: ``""`` else.

    ``"160 of 200,000 values, by at most 1 unit in the last place"``: what tells a rounding
    difference (a math function compiled differently) from a wrong result.
    """
    import numpy as np

    if _scalar_class(a) and _scalar_class(b) and type(a) is not type(b):
        # The same number of another type (np.float64 against float): later arithmetic on it differs.
        return f"a {_type_name(b)} where plain Python returned a {_type_name(a)}"
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape \
            or a.dtype != b.dtype or a.dtype.kind != "f":
        return ""
    off = ~same_elements(a, b)
    n = int(np.count_nonzero(off))
    if not n:
        return ""
    with np.errstate(all="ignore"):
        ulp = float(np.max(np.abs(a[off] - b[off]) / np.spacing(np.abs(a[off]))))
    if ulp == 0:  # equal as numbers, different bits: the sign of a zero
        return f"{n:,} of {a.size:,} values (-0.0 against 0.0)"
    if not ulp < 1e6:  # not a rounding difference (or inf or nan): the count is what there is to say
        return f"{n:,} of {a.size:,} values"
    return f"{n:,} of {a.size:,} values, by at most {ulp:.0f} unit{'s' if round(ulp) != 1 else ''} in the last place"


def positional(fn: Callable, args: tuple, kwargs: dict) -> tuple | None:
    """The call's arguments as one positional tuple, defaults filled in: what the compiled version is called with.

    A compiled version is compiled for these types alone, so its compile happens before the
    timed run also when the call used keywords or relied on defaults. ``None`` where that cannot
    be done: ``*args``/``**kwargs`` or keyword-only parameters, or arguments that do not bind.
    """
    import inspect

    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in sig.parameters.values()):
        return None
    bound.apply_defaults()
    return tuple(bound.args)


def parameter_names(fn: Callable) -> list[str]:
    """The names of ``fn``'s parameters in order (for saying which argument was written or differed)."""
    import inspect

    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _copy(v: Any) -> Any:
    import numpy as np

    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, tuple):
        return tuple(_copy(x) for x in v)
    return v


@dataclass(frozen=True)
class Checked:
    """One call run both ways on the same inputs: the plain value (the caller's) and how the compiled one compared.

    ``checked`` says what was compared (the return value and every argument the plain run wrote
    into); ``differs`` names the first thing that did not match (empty: all matched);
    ``nothing``: the function returned ``None`` and wrote into no argument, so nothing could be compared.
    """

    value: Any
    plain_s: float
    compiled_s: float | None
    checked: str
    differs: str = ""
    error: BaseException | None = None
    nothing: bool = False

    @property
    def same(self) -> bool:
        """The compiled run matched the plain one in everything that was compared (and something was)."""
        return self.error is None and not self.differs and not self.nothing


class PlainRun:
    """One call run plainly for the caller, with copies of its inputs taken before (a compiled run's reference).

    ``PlainRun(fn, args, kwargs, pos)`` runs ``fn(*args, **kwargs)`` at once (its error
    propagates); :meth:`against` then runs a compiled version on the copies and compares. Times
    are this thread's CPU seconds (see :func:`trial`).
    """

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, pos: tuple,
                 phase: Callable[[str], Any] = _NoPhase):
        self.fn = fn
        self.pos = pos
        self.phase = phase
        self.pristine = tuple(_copy(v) for v in pos)
        self.cpos = tuple(_copy(v) for v in pos)
        cpu = time.thread_time
        t0 = cpu()
        with phase(PHASE_PREFIX + "plain run"):
            self.value = fn(*args, **kwargs)
        self.plain_s = cpu() - t0

    def against(self, compiled: Callable, repeat: bool = True) -> Checked:
        """Run ``compiled`` on the copies; compare its return value and every argument the plain run changed.

        ``repeat``: run it up to twice more, keeping the fastest (a first call pays page faults
        for a fresh output).
        """
        pos, value, plain_s = self.pos, self.value, self.plain_s
        nd = _ndarray()
        names = parameter_names(self.fn)

        def label(i: int) -> str:
            return f"`{names[i]}`" if i < len(names) else f"argument {i + 1}"

        written = [i for i, (before, now) in enumerate(zip(self.pristine, pos))
                   if _has(now, nd) and not bit_identical(before, now)]
        said = ", ".join(label(i) for i in written)
        checked = ("the return value" + (f" and {said} (written in place)" if written else "")
                   if value is not None or not written else f"{said} (written in place; it returns None)")
        cpu = time.thread_time
        try:
            with self.phase(PHASE_PREFIX + "compiled run"):
                t2 = cpu()
                fast = compiled(*self.cpos)
                compiled_s = cpu() - t2
                for _ in range(2 if repeat else 0):
                    if compiled_s * 10 > plain_s:
                        break
                    # Again on fresh copies, keeping the fastest: a first call pays page faults for its
                    # fresh output (4 ms against 0.3 ms for 8 MB here), which later calls reuse. Cheap: a
                    # tenth of the plain run at most. (Its result is not used: the check is on the first.)
                    again = tuple(_copy(v) for v in self.pristine)
                    t2 = cpu()
                    compiled(*again)
                    compiled_s = min(compiled_s, cpu() - t2)
        except Exception as exc:  # noqa: BLE001 - e.g. an out-of-bounds write Python would have caught differently
            return Checked(value, plain_s, None, checked, error=exc)
        if value is None and fast is None and not written:
            return Checked(value, plain_s, compiled_s, "nothing", nothing=True)
        if not bit_identical(value, fast):
            how = difference(value, fast)
            return Checked(value, plain_s, compiled_s, checked,
                           differs="the return value" + (f" ({how})" if how else ""))
        for i in range(len(pos)):
            if _has(pos[i], nd) and not bit_identical(pos[i], self.cpos[i]):
                how = difference(pos[i], self.cpos[i])
                return Checked(value, plain_s, compiled_s, checked,
                               differs=f"{label(i)}, which it writes into" + (f" ({how})" if how else ""))
        return Checked(value, plain_s, compiled_s, checked)


def _ndarray() -> type:
    import numpy as np

    return np.ndarray


def numba_types(pos: tuple) -> tuple | None:
    """Numba's types of ``pos`` (None where one has no Numba type: a dict, a string of objects...)."""
    import numba

    try:
        return tuple(numba.typeof(a) for a in pos)
    except (ValueError, TypeError):
        return None


def compile_for(fn: Callable, types: tuple) -> Any:
    """``numba.njit(fn)`` compiled for ``types`` now (counted by :func:`compile_count`); raises Numba's errors."""
    global _compiles
    import numba

    # Bounds-checked, as Python indexing is (an index out of range raises IndexError instead of reading memory),
    # with Python's error model (a zero divisor raises ZeroDivisionError) and without fast-math (floats in source
    # order): what eugo_lab.jit.exact proves the code against.
    dispatcher = numba.njit(fn, boundscheck=True, error_model="python", fastmath=False)
    dispatcher.compile(types)
    # No other version, ever: called with other types (the trial's writable, contiguous copies of a read-only or
    # strided argument), Numba would compile one on the spot that nobody proved, checked or timed (a put array's
    # trial timed that compile as the compiled run and declined "not faster"). Copies convert to these types.
    dispatcher.disable_compile()
    with _count_lock:  # (not _lock: a trial holds that one while it compiles)
        _compiles += 1
    return dispatcher


def simd_detail(dispatcher: Any) -> str:
    """The SIMD verdict of the code ``dispatcher`` compiled last, as one line ("" where none could be read)."""
    from eugo_lab.jit import simd

    sigs = getattr(dispatcher, "signatures", None) or []
    found = simd.of_dispatcher(dispatcher, sigs[-1]) if sigs else None
    return found.summary() if found is not None else ""


# A compiled verdict's detail: what was compared, then what the machine code says (split by this).
DETAIL_SEP = " | "


def compiled_detail(checked: str, simd_line: str, unproven: str = "") -> str:
    """``checked | simd[ | unproven]`` for a compiled verdict's phase (see :func:`split_compiled_detail`).

    ``unproven``: why the code is not proven to mean what Python means for every input (compiled
    anyway because ``optimize=True`` asked for it); empty: proven (:mod:`eugo_lab.jit.exact`).
    """
    return checked + (DETAIL_SEP + simd_line if simd_line or unproven else "") + \
        (DETAIL_SEP + unproven if unproven else "")


def split_compiled_detail(detail: str) -> tuple[str, str]:
    """``(what was checked, the SIMD line)`` of a compiled verdict's detail."""
    parts = detail.split(DETAIL_SEP)
    return parts[0], parts[1] if len(parts) > 1 else ""


def unproven_of(detail: str) -> str:
    """Why a compiled verdict's code is not proven exact ("" where it is), from its detail."""
    parts = detail.split(DETAIL_SEP)
    return parts[2] if len(parts) > 2 else ""


def unproven_reasons(dispatcher: Any, types: tuple, pos: tuple) -> str:
    """Why the code ``dispatcher`` compiled for ``types`` may not compute what Python does ("" : proven exact).

    The first reason (``line N: why``) and how many more there are; see :mod:`eugo_lab.jit.exact`.
    """
    from eugo_lab.jit.exact import unproven

    return reasons_line(unproven(dispatcher, types, pos))


def reasons_line(why: list[str]) -> str:
    """The first of :func:`eugo_lab.jit.exact.unproven`'s reasons and how many more there are ("" : none)."""
    if not why:
        return ""
    return why[0] + (f" (and {len(why) - 1} more)" if len(why) > 1 else "")


def trial(fn: Callable, args: tuple, kwargs: dict,
          phase: Callable[[str], Any] = _NoPhase) -> tuple[Any, Verdict, Callable | None]:
    """Run ``fn`` plainly, try Numba on it, check and time it; returns ``(plain value, verdict, compiled or None)``.

    ``phase`` records the trial's spans and verdict in the running task (``hpc.phase``).

    The compile runs on its own before the compiled run, for the call's arguments bound to the
    parameters (keywords and defaults included), so no compile time is inside a timed run. The
    check compares the return value and every argument the plain run wrote into (see
    :meth:`PlainRun.against`); a function that returns ``None`` and writes into no argument is declined:
    there is nothing to compare.

    Raises what the plain call raises (after recording a ``plain-error`` verdict), so the
    caller sees the function's own error exactly as without ``optimize``.
    """
    import numpy as np

    def _mark(verdict: Verdict) -> Verdict:
        with phase(verdict.phase_name()):
            pass
        return verdict

    values = list(args) + list(kwargs.values())
    has_arrays = any(_has(v, np.ndarray) for v in values)
    pos = positional(fn, args, kwargs) if has_arrays else None
    if not has_arrays or pos is None:
        # Calls are timed in this thread's CPU time: the other workers of this machine may be compiling
        # or running at the same moment, and on 2 shared cores that made a 50 us compiled call read 2 ms
        # by the wall clock. Compiling is timed by the wall clock (what the task waits).
        t0 = time.thread_time()
        try:
            with phase(PHASE_PREFIX + "plain run"):
                value = fn(*args, **kwargs)
        except BaseException:
            _mark(Verdict("declined", "plain-error"))
            raise
        plain_s = time.thread_time() - t0
        if has_arrays:
            code, detail = "unsupported-feature", "*args, **kwargs or keyword-only parameters"
        else:
            code, detail = ("lists" if any(_has(v, list) for v in values) else "no-arrays"), ""
        return value, _mark(Verdict("declined", code, detail, plain_s=plain_s)), None
    try:
        with_copies = PlainRun(fn, args, kwargs, pos, phase)
    except BaseException:
        _mark(Verdict("declined", "plain-error"))
        raise
    value, plain_s = with_copies.value, with_copies.plain_s
    if plain_s < MIN_PLAIN_SECONDS:
        return value, _mark(Verdict("declined", "too-short", plain_s=plain_s)), None
    # Importing Numba, compiling and reading the compiled code are the runtime's work inside the task, not the
    # task's (its warm-up is measured on the worker: backends/import_clock.py).
    with runtime_work():
        try:
            import numba  # noqa: F401 - only to know it is there
        except ImportError:
            return value, _mark(Verdict("declined", "numba-missing", plain_s=plain_s)), None
        # The compile runs on its own, between the plain run and the compiled one: no timed run holds it.
        t1 = time.perf_counter()
        with phase(JIT_COMPILE_PHASE):
            types = numba_types(pos)
            try:
                dispatcher = compile_for(fn, types) if types is not None else None
                error = None if types is not None else ("python-objects", "an argument Numba has no type for")
            except Exception as exc:  # noqa: BLE001 - any compile failure: keep the plain function
                dispatcher, error = None, classify_numba_error(exc)
        compile_s = time.perf_counter() - t1
        if dispatcher is None:
            assert error is not None
            return value, _mark(Verdict("declined", *error, plain_s=plain_s)), None
        # optimize=True asked for the compile: code not proven exact is still kept when its trial matched, and its
        # verdict says so (the automatic JIT never keeps it).
        from eugo_lab.jit.exact import ResultTypeVaries, frozen_globals, read, with_casts

        reasons, casts = read(dispatcher, types, pos)
        if isinstance(casts, ResultTypeVaries):
            # Not kept even when asked for: on some paths the compiled result is of another type than plain
            # Python's (np.float64 against float), whatever this call's trial would see.
            return value, _mark(Verdict("declined", "result-type", str(casts), plain_s=plain_s,
                                        compile_s=compile_s)), None
        unproven = reasons_line(reasons)
        # Numba boxes a NumPy scalar result as a Python number: cast back to the plain call's type.
        dispatcher = with_casts(dispatcher, casts, fn)
        # Numba froze the globals it read: a later call whose globals were rebound runs plain (_call_chosen).
        dispatcher.eugo_frozen = frozen_globals(dispatcher, types, fn)
    return value, *_judge(with_copies.against(dispatcher), compile_s, dispatcher, _mark, unproven)


def _judge(c: Checked, compile_s: float | None, dispatcher: Any,
           mark: Callable[[Verdict], Verdict], unproven: str = "") -> tuple[Verdict, Callable | None]:
    """The verdict of one checked run (kept only when it matched and was :data:`MIN_GAIN` times faster).

    ``unproven``: why the code is not proven exact (it goes into a compiled verdict's detail).
    """
    if c.error is not None:
        exc = c.error
        code, detail = classify_numba_error(exc) if "numba" in type(exc).__module__ else ("compiled-error", "")
        return mark(Verdict("declined", code, detail, plain_s=c.plain_s, compile_s=compile_s)), None
    if c.nothing:
        return mark(Verdict("declined", "no-result", plain_s=c.plain_s, compile_s=compile_s,
                            compiled_s=c.compiled_s)), None
    if c.differs:
        return mark(Verdict("declined", "differs", c.differs, plain_s=c.plain_s, compile_s=compile_s,
                            compiled_s=c.compiled_s)), None
    assert c.compiled_s is not None
    if c.compiled_s * MIN_GAIN > c.plain_s:
        return mark(Verdict("declined", "not-faster", plain_s=c.plain_s, compile_s=compile_s,
                            compiled_s=c.compiled_s)), None
    with runtime_work():  # reading the machine code (it may load Numba's and LLVM's modules)
        simd = simd_detail(dispatcher)
    detail = compiled_detail(c.checked, simd, unproven)
    return mark(Verdict(VERDICT_COMPILED, detail=detail, plain_s=c.plain_s, compile_s=compile_s,
                        compiled_s=c.compiled_s, arity=len(dispatcher.signatures[-1]))), dispatcher


def reset() -> None:
    """Forget every verdict of this process (tests)."""
    global _compiles
    with _lock:
        _verdicts.clear()
        _compiles = 0
