"""The JIT without annotation: a function whose time is in Python bytecode is compiled, checked, kept when faster.

Every function the runtime runs (a task on a worker, or a ``%%eugo`` cell's own function called
in the driver) goes through :class:`AutoJit` unless the JIT is switched off
(``@hpc.remote(optimize=False)``, ``hpc.init(optimize=False)``, ``%%eugo --no-optimize``). Per
process and per function (its code key), what happens:

1. **watching** (plain calls): each call's CPU time is added up, and while a call runs, one
   sampler thread per process looks every :data:`SAMPLE_INTERVAL_S` at where its thread is:
   in Python bytecode (its innermost frame is at a loop's back jump or a function's start, where
   bytecode hands the GIL over, or at a call the sampler had to wait for) or in C code / waiting
   (the sampler got the GIL mid-instruction: NumPy's loops, sleeps and I/O release it). A
   heuristic, as cheap as one look at a frame; nothing else is done. While the function's calls
   average under :data:`SHORT_CALL_S`, they are only timed (a look every 5 ms would not catch them),
   and so are all its calls until it has spent :data:`SAMPLE_AFTER_S` of CPU, except the first
   call of a function with a loop (waking the sampler costs more than a short call).
2. once the function has spent :data:`MIN_CPU_S` of CPU, it **qualifies** when at least
   :data:`MIN_PYTHON_SHARE` of its samples were bytecode; else it is **not tried** ("its time is
   in C code"), as it is when its calls are all tiny (:data:`SHORT_CALL_S`; judged after
   :data:`SHORT_CALLS` calls, :data:`SHORT_CALLS_NO_LOOP` for a function with no loop) or when it cannot be
   compiled safely at all (:func:`static_reason`: a generator, a closure, a function that prints
   or writes a global: a trial would run those effects twice; one that calls pandas or another
   library Numba cannot compile, :data:`NOT_COMPILED_LIBRARIES`). Decided once per function and
   process; from then on a call is the plain call behind one dict lookup, its arguments unread.
3. a qualified function is **compiled in a background thread** for the argument types of the
   call that qualified it (Numba types them; lists and Python objects are not tried); its calls
   run plain meanwhile (one whose calls average :data:`WAIT_FOR_COMPILE_S` or more waits for it
   at its next call). The compiled code is then **proven or declined**: :mod:`eugo_lab.jit.exact`
   reads Numba's typed IR and declines anything whose meaning is not provably CPython's for every
   input of those types (``not-proven``, with the line and the reason): a Python int that can
   outgrow 64 bits, a library call that raises in Python where compiled code returns nan...
4. the first call after the compile is the **trial**: copies of its array arguments are taken,
   the plain function runs on the real ones (its result is what the caller gets), the compiled
   one on the copies; the return value and every argument the plain run wrote into must match
   to the last bit (:class:`eugo_lab.jit.checked.PlainRun`), and the compiled run must be
   :data:`~eugo_lab.jit.checked.MIN_GAIN` times faster. Kept or declined, with the SIMD verdict of
   its machine code. A compile error about the function itself (a call Numba does not know, a
   feature it does not compile, no Numba) declines it for every argument type at once.
5. **later calls** with the same argument types run the compiled version; a new signature
   (types, dtypes, dimensions) is compiled and trialled again. Compiled calls number 8 and 64, then
   every :data:`RECHECK_EVERY`-th, are **re-checked** like the trial, a second line of defence
   behind the proof: at the first difference the plain result is returned, the function goes
   back to plain for good and the difference is reported (``differs-later``).

What each function's verdicts are travels as the trial phases of :mod:`eugo_lab.jit.checked`
(``jit: compiled: ...``, ``jit: declined: ...``, ``jit: not tried: ...``): in a task, as
``hpc.phase`` spans; in the driver, into the list the cell gave (``phase`` is any callable that
returns a context manager).
"""

from __future__ import annotations

import dis
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

# Only what a function that is never compiled needs: a worker imports this module with its first task of a
# cell, and most tasks never qualify. The trial's machinery (eugo_lab.jit.checked: dataclasses, hashing,
# ~50 ms of CPU to import on a 2-core VM) is imported once a function qualifies (_checked()).
from eugo_lab.jit.names import PHASE_PREFIX, SKIPPED, _NoPhase, globals_unchanged, int_sizes

if TYPE_CHECKING:
    from eugo_lab.jit.checked import Verdict

# A function qualifies once it has spent this much CPU in plain calls in one process. Numba
# compiles a loop in 0.1-0.5 s of CPU (measured on this project's 2-core VM): a function that has
# used less than that has not yet shown that a compile could pay for itself, and a short cell, whose
# functions never get there, pays nothing but the measuring below.
MIN_CPU_S = 0.2
# Where its samples were: at least half in bytecode, or the time is NumPy's (a JIT removes the interpreter,
# not C code). Fewer samples than MIN_SAMPLES decide nothing yet (the function keeps being watched).
MIN_PYTHON_SHARE = 0.5
MIN_SAMPLES = 8
# How often the sampler looks at a watched call: CPython's own GIL switch interval (5 ms), so a
# sample costs the call at most one extra GIL hand-over: under 1% of its time.
SAMPLE_INTERVAL_S = 0.005
# Calls this short on average, SHORT_CALLS of them: the function is not tried, and is no longer measured
# (a compiled call costs ~1-5 us of dispatch and argument checks itself: nothing left to win).
SHORT_CALL_S = 20e-6
SHORT_CALLS = 256
# A function with no loop in its code that does not call itself runs each of its instructions once a call, and
# Numba compiles no call into the plain Python functions it might call: a compile has nothing to speed up but the
# lines themselves, and a long call's time is in what it calls. Its short calls are judged after this many; the
# watching of SHORT_CALLS was most of the automatic JIT's cost in a cell where nothing qualifies (x + 1, math.sqrt,
# a small NumPy call: benchmarks/RESULTS.md). Its long calls are judged as any function's.
SHORT_CALLS_NO_LOOP = 16
# A function's calls are sampled only once it has spent this much CPU in them (and its first call, if its code
# has a loop). A sampled call wakes the sampler when it waits, and the woken sampler then waits for the GIL: in a
# pool worker, whose thread releases it at each task's pipe read and write, each release wakes it again until it
# gets it, mostly between tasks, when no call is left to look at. That was most of the automatic JIT's cost in a
# cell where nothing qualifies (benchmarks/RESULTS.md), for nothing while the function is far from MIN_CPU_S:
# 10 ms is 5% of it, and sampling from there leaves 190 ms of calls, 38 looks for the MIN_SAMPLES that decide. A
# function with a loop has its first call sampled anyway, so that one long call (a loop over a big array, one
# task) is decided when it ends, as before; one without a loop runs each instruction once per call, so a long
# call of it is in what it calls, and is sampled from SAMPLE_AFTER_S on like any other.
SAMPLE_AFTER_S = 0.01
# Re-checks after the swap: compiled calls number 8 and 64 (early: a difference shows soon after the
# trial), then every RECHECK_EVERY-th. Each re-check runs the plain function too (for a function
# 50x faster, 50 compiled calls' time): at 1 in 256 the average call stays within a third of the
# compiled one at 50x, and a run of 1000 calls has 5 re-checks.
RECHECK_FIRST = (8, 64)
# A function whose plain calls average at least this long waits for its background compile at its next call (at
# most COMPILE_WAIT_MAX_S), then runs the trial: a compile takes 0.1-0.5 s (2-3 s on a busy 2-core VM), so a cell
# that calls a 0.3 s loop five times had every call run plain beside the compile and ended before any trial.
# Shorter calls keep running plain while it compiles: they are many, and the compile is soon paid back.
WAIT_FOR_COMPILE_S = 0.05
COMPILE_WAIT_MAX_S = 30.0
RECHECK_EVERY = 256

_get_ident, _thread_time = threading.get_ident, time.thread_time

WATCHING, QUALIFIED, SKIPPED_STATE = "watching", "qualified", "skipped"
# Compile errors about the function itself, whatever its argument types: it is not compiled for other types either.
_WHOLE_FUNCTION = frozenset({"numba-missing", "unknown-call", "unsupported-feature"})
COMPILING, READY, COMPILED, DECLINED = "compiling", "ready", "compiled", "declined"

# Names whose call in a function would run twice in a trial (the plain run and the compiled one).
_EFFECTS = frozenset({"print", "open", "input", "exec", "eval", "breakpoint", "exit", "quit"})
_CO_NOT_PLAIN = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator
_CO_VARARGS = 0x04 | 0x08
# Libraries a function may call that Numba compiles no call into (data frames, other array frameworks, plotting,
# file formats, the network): a function that reads one of them is not tried, decided from its code once,
# instead of being watched, compiled and declined (see static_reason).
NOT_COMPILED_LIBRARIES = frozenset({
    "pandas", "polars", "pyarrow", "xarray", "torch", "tensorflow", "jax", "sklearn", "matplotlib", "seaborn",
    "PIL", "cv2", "requests", "json", "pickle", "csv", "sqlite3", "subprocess", "socket", "urllib"})
_MODULE_TYPE = type(sys)


def static_reason(fn: Any) -> tuple[str, str] | None:
    """``(code, detail)`` when ``fn`` is never tried, read from its code object alone; ``None``: it may be.

    A trial runs the function twice (plainly, then compiled on copies of its arguments), so a
    function with effects beyond its arguments and return value is left alone.
    """
    return _read_code(fn)[0]


def _read_code(fn: Any) -> tuple[tuple[str, str] | None, bool]:
    """:func:`static_reason`'s answer, and whether ``fn``'s code has a loop (one pass over its instructions)."""
    code = getattr(fn, "__code__", None)
    if code is None or not callable(fn):
        return ("not-python", type(fn).__name__), False
    if code.co_flags & _CO_NOT_PLAIN:
        return ("not-plain", "a generator or coroutine"), False
    if code.co_flags & _CO_VARARGS or code.co_kwonlyargcount:
        return ("not-plain", "it takes *args, **kwargs or keyword-only parameters"), False
    if code.co_freevars:
        return ("not-plain", "a closure over variables of the function around it"), False
    effects = sorted(_EFFECTS.intersection(code.co_names))
    if effects:
        return ("effects", f"it calls {', '.join(effects)}(): a trial would do that twice"), False
    g = getattr(fn, "__globals__", None) or {}
    library = ""
    loops = False
    for ins in dis.get_instructions(code):
        if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            return ("effects", f"it writes the global {ins.argval}"), False
        if ins.opname == "LOAD_GLOBAL" and not library:
            library = _library_of(g.get(ins.argval))
        if not loops:
            loops = _loops_at(ins, code.co_name)
    if library:
        return ("library", f"it calls {library}"), False
    return None, loops or any(_has_loop(c) for c in code.co_consts if isinstance(c, _CODE_TYPE))


def has_loop(fn: Any) -> bool:
    """Whether ``fn``'s code has a loop (or calls itself), read from its bytecode, whatever else keeps it from a JIT."""
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    return code is not None and _has_loop(code)


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
_CODE_TYPE = type(static_reason.__code__)


def _jumps_back(ins: dis.Instruction) -> bool:
    """Whether ``ins`` jumps back: a ``for`` or ``while`` loop's (every Python version's loops end in one)."""
    return ins.opcode in _JUMPS and ins.argval <= ins.offset


def _loops_at(ins: dis.Instruction, name: str) -> bool:
    """Whether ``ins`` makes its function (named ``name``) loop: a jump back, or the load of itself to call.

    Numba compiles self-recursion (fib(n) is the classic case). Only a global load counts: a
    function named ``histogram`` that calls ``np.histogram`` loads an attribute of that name.
    """
    return _jumps_back(ins) or (ins.opname == "LOAD_GLOBAL" and ins.argval == name)


def _has_loop(code: Any) -> bool:
    """Whether ``code`` loops, or code inside it does (a comprehension's, before Python 3.12 inlined them)."""
    return (any(_loops_at(ins, code.co_name) for ins in dis.get_instructions(code))
            or any(_has_loop(c) for c in code.co_consts if isinstance(c, _CODE_TYPE)))


def _library_of(value: Any) -> str:
    """The top-level package of ``value`` (a module, or a function or class from one) when Numba cannot compile it."""
    if value is None:
        return ""
    name = value.__name__ if isinstance(value, _MODULE_TYPE) else getattr(value, "__module__", None)
    root = name.partition(".")[0] if isinstance(name, str) else ""
    return root if root in NOT_COMPILED_LIBRARIES else ""


def typeable(pos: tuple) -> str:
    """Why these arguments cannot go to a compiled version ("" when they can): only arrays, numbers and tuples."""
    import numpy as np

    for v in pos:
        if isinstance(v, tuple):
            why = typeable(v)
            if why:
                return why
        elif isinstance(v, np.ndarray):
            if v.dtype.kind not in "biufc":
                return f"an array of {v.dtype} (only numeric arrays compile)"
        elif isinstance(v, list):
            return "lists"
        elif not isinstance(v, (bool, int, float, complex, np.number, np.bool_)):
            return f"a {type(v).__name__} argument"
    return ""


class _Signature:
    """One argument signature of a qualified function: its compile, trial and compiled calls.

    Plain classes with slots, not dataclasses: this module must import fast (see the imports above).
    """

    __slots__ = ("status", "dispatcher", "compile_s", "error", "calls", "arity", "types", "thread", "frozen")

    def __init__(self, status: str = COMPILING, dispatcher: Any = None, compile_s: float | None = None,
                 error: tuple[str, str] | None = None, calls: int = 0, arity: int = -1, types: tuple = (),
                 frozen: tuple = ()):
        self.status = status
        self.dispatcher = dispatcher
        self.compile_s = compile_s
        self.error = error
        self.calls = calls  # compiled calls since the trial kept it
        self.arity = arity
        self.types = types  # Numba's types of the arguments it was compiled for
        self.thread: threading.Thread | None = None  # its background compile
        # The globals its compiled code froze (eugo_lab.jit.exact.frozen_globals): checked before each of its calls.
        self.frozen = frozen

    def __repr__(self) -> str:
        return f"_Signature({self.status}, compile_s={self.compile_s}, error={self.error}, calls={self.calls})"


class _State:
    """What this process knows about one function (by code key)."""

    __slots__ = ("name", "code", "status", "calls", "cpu", "python", "native", "sigs", "said", "owners", "lock",
                 "loops", "short_after")

    def __init__(self, name: str, code: Any, status: str = WATCHING, loops: bool = True):
        self.name = name
        self.code = code
        self.status = status
        self.loops = loops  # its code has a loop: its first call is sampled (see SAMPLE_AFTER_S)
        self.short_after = SHORT_CALLS if loops else SHORT_CALLS_NO_LOOP  # calls before short ones are judged
        self.calls = 0
        self.cpu = 0.0
        self.python = 0  # samples in bytecode
        self.native = 0  # samples in C code or waiting
        self.sigs: dict[tuple, _Signature] = {}
        self.said: list[str] = []  # verdict phases, in order (each copy announces them)
        self.owners: list[int] = []  # id of the AutoJit copy that produced each one
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"_State({self.name}, {self.status}, calls={self.calls}, cpu={self.cpu:.3g}, "
                f"python={self.python}, native={self.native}, sigs={self.sigs}, said={self.said})")

    def say(self, name: str, owner: int) -> None:
        with self.lock:
            self.said.append(name)
            self.owners.append(owner)


_states: dict[str, _State] = {}
_states_lock = threading.Lock()
_watch: dict[int, _State] = {}  # thread id -> the function whose plain call it runs now
_cond = threading.Condition()
_sampler: threading.Thread | None = None
# True while the sampler is between waits: a watched call then only adds itself to _watch (no lock, no notify).
# Set False under _cond before the sampler looks at _watch and waits, so a call that reads True added itself
# before that look (one interpreter lock orders both), and one that reads False notifies.
_awake = False
_compiling: list[threading.Thread] = []
_notified = [0.0]  # when a watched call last woke the sampler (perf_counter): how long the sampler waited for the GIL


_ck: Any = None  # eugo_lab.jit.checked, once a function qualified


def _checked() -> Any:
    """The trial's module (:mod:`eugo_lab.jit.checked`), imported the first time a function gets that far."""
    global _ck
    if _ck is None:
        from eugo_lab.jit import checked

        _ck = checked
    return _ck


def _state(key: str, fn: Callable) -> _State:
    st = _states.get(key)
    if st is None:
        with _states_lock:
            st = _states.get(key)
            if st is None:
                why, loops = _read_code(fn)
                st = _State(getattr(fn, "__qualname__", getattr(fn, "__name__", "?")), getattr(fn, "__code__", None),
                            loops=loops)
                if why is not None:
                    st.status = SKIPPED_STATE
                    st.said.append(skipped_phase(*why))
                    st.owners.append(0)
                _states[key] = st
    return st


def skipped_phase(code: str, detail: str = "") -> str:
    """The phase that says a function was not tried: ``jit: not tried: CODE[: detail]``."""
    return f"{PHASE_PREFIX}{SKIPPED}: {code}" + (f": {detail}" if detail else "")


def _yield_ops() -> frozenset[int]:
    return frozenset(dis.opmap[n] for n in ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RESUME", "JUMP_ABSOLUTE")
                     if n in dis.opmap)


_YIELD = _yield_ops()
_CALLS = frozenset(dis.opmap[n] for n in ("CALL", "PRECALL", "CALL_FUNCTION_EX", "CALL_FUNCTION", "CALL_METHOD")
                   if n in dis.opmap)


def _sample_loop() -> None:
    global _awake
    perf = time.perf_counter
    started = True  # started by a watched call: that call is looked at at once, as a woken sampler's is
    while True:
        with _cond:
            _awake = False
            woken, started = started, False
            while not _watch:
                _cond.wait()
                woken = True
            _awake = True
        # A thread holding the GIL (running bytecode) gives it up only after the switch interval: a wait
        # of half of it means the watched thread was running with it, whatever its opcode shows now.
        if woken:
            # Woken by a call that started: look at once. Sleeping first meant a second wait for the GIL
            # (after the one to wake), so a call of ~10 ms had ended before the first look and was never sampled.
            held = perf() - _notified[0] >= sys.getswitchinterval() / 2
        else:
            asked = perf()
            time.sleep(SAMPLE_INTERVAL_S)
            held = perf() - asked - SAMPLE_INTERVAL_S >= sys.getswitchinterval() / 2
        frames = sys._current_frames()
        leaf = f = None
        for tid, st in list(_watch.items()):
            leaf = f = frames.get(tid)
            while f is not None and f.f_code is not st.code:
                f = f.f_back
            if f is None or leaf is None:
                continue  # not inside the function just now
            lasti = leaf.f_lasti
            op = leaf.f_code.co_code[lasti] if lasti >= 0 else -1
            # Bytecode: at a back jump or a function's start (where bytecode hands the GIL over), or at a call
            # after a wait (CPython also hands it over when a call returns). Anywhere else, or at a call without
            # a wait, the thread was inside C code that had released the GIL (NumPy's loops).
            if op in _YIELD or (held and op in _CALLS):
                st.python += 1
            else:
                st.native += 1
        del frames, leaf, f


def _start_sampler() -> None:
    global _sampler
    with _cond:
        if _sampler is None or not _sampler.is_alive():
            _sampler = threading.Thread(target=_sample_loop, name="eugo-jit-sampler", daemon=True)
            _sampler.start()


def _after_fork() -> None:
    # A forked worker has none of its parent's threads (sampler, compiles) and maybe a lock the parent held.
    global _sampler, _cond, _states_lock, _awake
    _sampler = None
    _awake = False
    _cond = threading.Condition()
    _states_lock = threading.Lock()
    _watch.clear()
    _compiling.clear()
    for st in _states.values():
        st.lock = threading.Lock()
        for s in st.sigs.values():
            if s.status == COMPILING:
                s.status, s.error = DECLINED, ("compile-error", "the process forked while compiling")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _compile(fn: Callable, pos: tuple, sig: _Signature) -> None:
    """Background thread: compile ``fn`` for the types of ``pos``; the next call with them runs the trial."""
    t0 = time.perf_counter()
    ck = _checked()
    try:
        types = ck.numba_types(pos)
        if types is None:
            sig.error = ("python-objects", "an argument Numba has no type for")
        else:
            sig.dispatcher = ck.compile_for(fn, types)
            sig.arity = len(types)
            sig.types = types
            from eugo_lab.jit.exact import ResultTypeVaries, frozen_globals, read, with_casts

            sig.frozen = frozen_globals(sig.dispatcher, types, fn)
            # Exact by construction: only code whose meaning is CPython's for every input of these types is kept.
            reasons, casts = read(sig.dispatcher, types, pos)
            why = ck.reasons_line(reasons)
            # Numba boxes a NumPy scalar result (np.float32) as a Python number: cast back to the plain call's type.
            sig.dispatcher = with_casts(sig.dispatcher, casts, fn)
            if isinstance(casts, ResultTypeVaries):  # a result of another type on some paths: said as such
                sig.error = ("result-type", str(casts))
            elif why:
                sig.error = ("not-proven", why)
    except ImportError:
        sig.error = ("numba-missing", "")
    except Exception as exc:  # noqa: BLE001 - any compile failure: the function stays plain
        sig.error = ck.classify_numba_error(exc)
    sig.compile_s = time.perf_counter() - t0
    sig.status = READY if sig.error is None else DECLINED


def wait_for_compiles(timeout: float = 60.0) -> bool:
    """Wait until every background compile of this process has finished (tests, benchmarks); True if they did."""
    deadline = time.monotonic() + timeout
    for t in list(_compiling):
        t.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in _compiling)


def _has_array(args: tuple, kwargs: dict) -> bool:
    """Whether a call passes a NumPy array (by type name: this module does not import NumPy)."""
    return any(type(a).__name__ == "ndarray" and type(a).__module__ == "numpy" for a in (*args, *kwargs.values()))


def _recheck(n: int) -> bool:
    return n in RECHECK_FIRST or n % RECHECK_EVERY == 0


class AutoJit:
    """A function under the automatic JIT (see the module's docstring); calling it is calling the function.

    ``key``: the code key (:func:`eugo_lab.jit.checked.code_key`); ``phase``: ``hpc.phase`` in a
    task, or a collector in the driver. Pickles as its parts; its state lives in the process.
    """

    __slots__ = ("fn", "key", "phase", "told", "__weakref__", "__dict__")
    ns: dict | None = None  # a cell function's namespace (CellFunction): given the plain function once not tried
    eager = False  # %%eugo --optimize on a cell's function: compiled and trialled on its first call with arrays

    def __init__(self, fn: Callable, key: str, phase: Callable[[str], Any] = _NoPhase):
        self.fn = fn
        self.key = key
        self.phase = phase
        self.told = 0  # how many of the function's verdict phases this copy has announced

    def __reduce__(self) -> tuple:
        return AutoJit, (self.fn, self.key, self.phase)

    def _give_back(self) -> None:
        """Nothing to give back for a task's wrapper (see :class:`CellFunction`)."""

    def _tell(self, st: _State) -> None:
        with st.lock:
            new = list(zip(st.said[self.told:], st.owners[self.told:]))
            self.told = len(st.said)
        for name, owner in new:
            if owner and owner != id(self) and "[" in name and "cached" not in name:
                name = name.replace(" [trial ", " [cached ", 1)  # an earlier copy's trial: its numbers, no new compile
            with self.phase(name):
                pass

    def eugo_settled(self) -> Callable:
        """What a batch should call for its next items: the plain function once the JIT ruled it out, else this.

        ``hpc.map`` runs a batch's items in groups; asking once a group spares every item the
        wrapper's look-up (~0.17 us an item, as long as a tiny item itself). A function not tried
        stays not tried, so the plain function is the same call ``__call__`` would make.
        """
        st = _states.get(self.key)
        if st is not None and st.status == SKIPPED_STATE and self.told == len(st.said) and self.ns is None:
            return self.fn
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Plain while watched, compiling or declined; the trial on the first call after a compile; then compiled."""
        st = _states.get(self.key) or _state(self.key, self.fn)
        if self.told != len(st.said):
            self._tell(st)
        status = st.status
        # Not tried (decided once per function: from its code, or from its measured calls): the call itself, with
        # no look at its arguments.
        if status == SKIPPED_STATE:
            if self.ns is not None:
                self._give_back()
            return self.fn(*args, **kwargs)
        if status == WATCHING:
            if self.eager and _has_array(args, kwargs):
                return self._first_call_trial(st, args, kwargs)
            return self._watched(st, args, kwargs)
        ck = _ck or _checked()
        sig = ck.arg_signature(args, kwargs) + int_sizes(args, kwargs)
        s = st.sigs.get(sig)
        if s is not None and s.frozen and not globals_unchanged(s.frozen):
            s = self._globals_changed(st)
        if s is None:  # a qualified function, new argument types: compile for them in the background
            s = self._new_signature(st, args, kwargs)
            if s.status == READY:  # the compiled code of these types exists: trial this call now
                return self._trial(st, s, args, kwargs)
        if s.status == COMPILED:
            s.calls += 1
            pos = args if not kwargs and len(args) == s.arity else ck.positional(self.fn, args, kwargs)
            if not _recheck(s.calls):
                return s.dispatcher(*pos)
            return self._checked_again(st, s, args, kwargs, pos)
        if s.status == COMPILING and s.thread is not None and st.calls and st.cpu >= WAIT_FOR_COMPILE_S * st.calls:
            # Calls this long: this one waits for the compile (0.1-0.5 s) and runs the trial, instead of running
            # plain beside it; a cell that calls such a function a few times then uses the compiled version.
            s.thread.join(COMPILE_WAIT_MAX_S)
        if s.status == READY:
            return self._trial(st, s, args, kwargs)
        if s.status == DECLINED and s.error is not None:
            error, s.error = s.error, None
            if error[0] in _WHOLE_FUNCTION and not any(o.status == COMPILED for o in st.sigs.values()):
                # No other argument types would compile either: later calls skip the signature work above.
                st.status = SKIPPED_STATE
            st.say(f"{PHASE_PREFIX}declined: {error[0]}" + (f": {error[1]}" if error[1] else "")
                   + f" [trial compile={s.compile_s or 0:.3g}]", id(self))
            self._tell(st)
        return self.fn(*args, **kwargs)

    def _new_signature(self, st: _State, args: tuple, kwargs: dict) -> _Signature:
        """Start on new argument types of a qualified function: a background compile, or the existing code reused."""
        ck = _checked()
        base = ck.arg_signature(args, kwargs)
        sig = base + int_sizes(args, kwargs)
        pos = ck.positional(self.fn, args, kwargs)
        why = typeable(pos) if pos is not None else "*args, **kwargs or keyword-only parameters"
        with st.lock:
            s = st.sigs.get(sig)
            if s is not None:
                return s
            # (not code that froze a global since rebound: that one is compiled anew, reading the new value)
            same = next((o for k, o in st.sigs.items() if k[:len(base)] == base and o.dispatcher is not None
                         and globals_unchanged(o.frozen)), None)
            if same is not None and not why:
                # Same types, Python integers of another size: Numba's code is the same (no compile), but whether
                # its 64-bit integers hold what Python's do depends on those sizes: proven again for them.
                unproven = ck.unproven_reasons(same.dispatcher, same.types, pos)
                s = st.sigs[sig] = _Signature(DECLINED if unproven else READY, same.dispatcher, 0.0,
                                              ("not-proven", unproven) if unproven else None, arity=same.arity,
                                              types=same.types, frozen=same.frozen)
                return s
            s = st.sigs[sig] = _Signature()
            if why:
                s.status = DECLINED
            else:
                t = threading.Thread(target=_compile, args=(self.fn, pos, s), name="eugo-jit-compile", daemon=True)
                s.thread = t
                _compiling.append(t)
                t.start()
        if why:
            st.say(skipped_phase("arguments", why), id(self))
            self._tell(st)
        return s

    def _first_call_trial(self, st: _State, args: tuple, kwargs: dict) -> Any:
        """``--optimize``'s eager trial, for a cell's function: qualified now, compiled now, trialled on this call.

        Its compiled code is proven or declined as any automatic compile is; then later calls run as a qualified
        function's do.
        """
        with st.lock:
            if st.status == WATCHING:
                st.status = QUALIFIED
        s = self._new_signature(st, args, kwargs)
        if s.thread is not None:
            s.thread.join(COMPILE_WAIT_MAX_S)
        if s.status == READY:
            return self._trial(st, s, args, kwargs)
        return self(*args, **kwargs)  # declined (said by the call) or still compiling: the plain call

    def _watched(self, st: _State, args: tuple, kwargs: dict) -> Any:
        # Every call of a function not yet decided pays this: two clock reads, and while its calls average
        # SHORT_CALL_S or more and it has spent SAMPLE_AFTER_S (or on the first call of one with a loop), a dict
        # entry for the sampler (the lock and notify only when the sampler sleeps). Shorter calls are only timed:
        # a sampler looking every 5 ms would almost never catch one, and calls that stay that short are decided
        # "short-calls" after SHORT_CALLS of them (SHORT_CALLS_NO_LOOP without a loop), from their time alone.
        cpu = st.cpu
        sampled = (cpu >= SAMPLE_AFTER_S or (st.loops and not st.calls)) and cpu >= SHORT_CALL_S * st.calls
        tid = 0
        if sampled:
            tid = _get_ident()
            _watch[tid] = st
            if not _awake:
                with _cond:
                    _notified[0] = time.perf_counter()
                    _cond.notify()
                if _sampler is None:
                    _start_sampler()
        t0 = _thread_time()
        try:
            return self.fn(*args, **kwargs)
        finally:
            st.cpu += _thread_time() - t0
            st.calls += 1
            if sampled:
                _watch.pop(tid, None)
            # Counted here, judged only where a verdict may fall (a method call on every call: ~0.1 us of this ~1.5).
            if st.cpu >= MIN_CPU_S or st.calls >= st.short_after:
                if self._judge_watch(st) and sys.exc_info()[0] is None:
                    self._new_signature(st, args, kwargs)  # compile for this call's types now, in the background
                if self.told < len(st.said):  # decided: say so in this call's task
                    self._tell(st)

    def _judge_watch(self, st: _State) -> bool:
        """Judge a function whose plain calls were counted; True when they made it qualify."""
        if st.cpu >= MIN_CPU_S:
            n = st.python + st.native
            if n < MIN_SAMPLES:
                return False
            share = st.python / n
            if share >= MIN_PYTHON_SHARE:
                st.status = QUALIFIED
                # Said now, replaced by the trial's verdict once the background compile is done and checked.
                st.say(skipped_phase("compiling", f"{share:.0%} of its sampled time in Python bytecode "
                                                  f"[trial plain={st.cpu / st.calls:.3g}]"), id(self))
                return True
            st.status = SKIPPED_STATE
            st.say(skipped_phase("in-c", f"{share:.0%} of its sampled time in Python bytecode, the rest in C code "
                                         f"or waiting [trial plain={st.cpu / st.calls:.3g}]"), id(self))
        elif st.calls >= st.short_after and st.cpu / st.calls < SHORT_CALL_S:
            st.status = SKIPPED_STATE
            st.say(skipped_phase("short-calls", f"{st.calls} calls of {st.cpu / st.calls * 1e6:.0f} us on average "
                                                f"[trial plain={st.cpu / st.calls:.3g}]"), id(self))
        return False

    def _trial(self, st: _State, s: _Signature, args: tuple, kwargs: dict) -> Any:
        ck = _checked()
        pos = ck.positional(self.fn, args, kwargs)
        assert pos is not None  # it bound when the compile started, for the same signature
        run = ck.PlainRun(self.fn, args, kwargs, pos, self.phase)
        said: list[Verdict] = []

        def mark(v: Verdict) -> Verdict:
            said.append(v)
            return v

        with st.lock:
            if s.status != READY:  # another thread ran the trial meanwhile
                return run.value
            s.status = DECLINED
        verdict, compiled = ck._judge(run.against(s.dispatcher), s.compile_s, s.dispatcher, mark)
        if compiled is not None:
            s.status = COMPILED
        elif verdict.code == "differs" and any(o.status == COMPILED for o in st.sigs.values()):
            # Kept for other arguments, different for these (integers that outgrew 64 bits): plain from now on.
            self._back_to_plain(st)
            verdict = ck.Verdict("declined", "differs-later", verdict.detail, plain_s=verdict.plain_s)
        st.say(verdict.phase_name(), id(self))
        self._tell(st)
        return run.value

    @staticmethod
    def _globals_changed(st: _State) -> None:
        """A global the compiled code froze was rebound: forget every version that froze one (compiled anew)."""
        with st.lock:
            for k, o in list(st.sigs.items()):
                if o.frozen and not globals_unchanged(o.frozen):
                    del st.sigs[k]

    @staticmethod
    def _back_to_plain(st: _State) -> None:
        """A compiled result differed from the plain one: every signature of this function runs plain from now on."""
        with st.lock:
            for o in st.sigs.values():
                o.status = DECLINED
            st.status = SKIPPED_STATE

    def _checked_again(self, st: _State, s: _Signature, args: tuple, kwargs: dict, pos: tuple | None) -> Any:
        assert pos is not None
        run = _checked().PlainRun(self.fn, args, kwargs, pos)
        c = run.against(s.dispatcher, repeat=False)
        if c.error is not None or c.differs:
            self._back_to_plain(st)
            what = c.differs or f"it raised {type(c.error).__name__}"
            st.say(f"{PHASE_PREFIX}declined: differs-later: {what}, on compiled call {s.calls} "
                   f"[trial plain={c.plain_s:.3g}]", id(self))
            self._tell(st)
        return run.value


def _from_pickle(payload: bytes, key: str, phase: Callable[[str], Any]) -> AutoJit:
    """The wrapper :class:`Packed` stands for, around the function unpickled from ``payload``."""
    import pickle

    return AutoJit(pickle.loads(payload), key, phase)


class Packed:
    """Pickles as ``AutoJit(fn, key, phase)`` from ``fn``'s own pickle (``payload``), which it carries as bytes.

    The driver has pickled the function already (its hash is the key): the wrapper's pickle reuses
    those bytes instead of pickling the function a second time.
    """

    __slots__ = ("payload", "key", "phase")

    def __init__(self, payload: bytes, key: str, phase: Callable[[str], Any]):
        self.payload, self.key, self.phase = payload, key, phase

    def __reduce__(self) -> tuple:
        return _from_pickle, (self.payload, self.key, self.phase)


_SPANS = frozenset(PHASE_PREFIX + s for s in ("plain run", "compiled run", "compile"))  # spans, not verdicts


def cell_key(fn: Callable) -> str:
    """A key for a cell's function: its code and the globals it reads (numbers by value, anything else by identity).

    Numba freezes the globals a function reads when it compiles, so the same code reading a
    changed global is another function; a cell run again with the same code and globals reuses
    the compiled version and its verdict.
    """
    import hashlib
    import marshal

    g = getattr(fn, "__globals__", {})
    seen = []
    for name in sorted(set(fn.__code__.co_names)):
        if name in g:
            v = g[name]
            seen.append((name, repr(v) if isinstance(v, (bool, int, float, complex, str)) else f"id:{id(v)}"))
    return "cell:" + hashlib.blake2b(marshal.dumps(fn.__code__) + repr(seen).encode(), digest_size=16).hexdigest()


def _plain(fn: Callable) -> Callable:
    return fn


class CellFunction(AutoJit):
    """A ``%%eugo`` cell's own function, under the automatic JIT while the cell runs in the driver.

    Looks like the function (name, docstring, ``__wrapped__``), and pickles as the plain function:
    sent to a worker (``hpc.remote(f)`` in the cell), it gets the workers' own automatic JIT.
    ``verdicts`` collects this function's verdict phases for the cell's report.
    """

    def __init__(self, fn: Callable, key: str, ns: dict | None = None, eager: bool = False):
        import functools

        self.verdicts: list[str] = []
        super().__init__(fn, key, self._collect)
        functools.update_wrapper(self, fn)
        self.ns = ns
        self.eager = eager  # --optimize: the trial on its first call with arrays, not after 0.2 s of CPU

    def _give_back(self) -> None:
        """Not tried for good: rebind the cell's name to the plain function, so later calls cost nothing."""
        ns, self.ns = self.ns, None
        name = getattr(self.fn, "__name__", None)
        if ns is not None and name is not None and ns.get(name) is self:
            ns[name] = self.fn

    def _collect(self, name: str) -> _NoPhase:
        if name not in _SPANS:
            self.verdicts.append(name)
        return _NoPhase(name)

    def __reduce__(self) -> tuple:
        return _plain, (self.fn,)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else self.fn.__get__(obj, owner)  # as a method: the plain function

    def __repr__(self) -> str:
        return repr(self.fn)

    def watched(self) -> tuple[int, float]:
        """``(calls, CPU seconds)`` this process measured of the plain function while it was watched."""
        st = _states.get(self.key)
        return (st.calls, st.cpu) if st is not None else (0, 0.0)


def state_of(key: str) -> _State | None:
    """What this process knows about the function with code key ``key`` (None: never called here)."""
    return _states.get(key)


def reset() -> None:
    """Forget every function's state in this process (tests)."""
    wait_for_compiles()
    with _states_lock:
        _states.clear()
