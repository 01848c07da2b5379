"""Which of a cell's functions ran in the notebook's own process (the driver), and how many times.

A value the learner keeps says nothing about where it was computed: a cell can score 3000
items in a plain loop while a decoy task of the right name runs beside it, and an honest cell
can call its task function only through a helper of its own. What tells them apart is whether
the function's code ran in the driver. :class:`DriverCalls` records that while one cell runs:
a profiling hook (``sys.monitoring`` where Python has it, 3.12+; else ``sys.setprofile`` and
``threading.setprofile``) counts each start of a watched code object, by the name the trace
gives functions (``Class.method`` or ``function``).

Calls made on behalf of a task do not count: the threads engine runs task bodies in threads of
this process, and a task marks the thread it runs on (:func:`eugo_lab.contract.phases.in_task`).

Watched code: every function whose code comes from one of ``files`` (the notebook's cells), and
the code objects named in ``codes`` (a task function defined in a module). ``wrappers``: the
``__call__`` code of callable objects that stand in for a function (``functools.update_wrapper``
style, with ``__wrapped__``) and may run it without running its Python code (a JIT-compiled
version): a call through one counts for the wrapped function, and the function's count is the
larger of its code's starts and its calls through the wrapper, so a call is counted once.

``values_of``: names of functions whose calls in the driver are kept by value as well: the objects
each call was given (its parameters as the call began) and the object it returned, up to
``MAX_CALLS_KEPT`` calls per function (:attr:`DriverCalls.values`). A grader asks there whether the
notebook's own step (``handle(r)``) was given the very objects a get() handed over and returned the
value it keeps (:mod:`eugo_lab.tracing.returned`).

The hook is installed by :meth:`DriverCalls.__enter__` and always removed by ``__exit__``, also
when the cell raises or is interrupted; the profile function a thread had before is given back.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from types import CodeType, FrameType
from typing import Any

from eugo_lab.contract import async_exc
from eugo_lab.contract.phases import in_task

#: The key of the record in a trace's ``meta``: ``{function name: calls in the driver}``.
META_KEY = "driver_calls"
#: The key of the calls kept by value in a trace's ``live`` facts (never saved): :attr:`DriverCalls.values`.
VALUES_KEY = "driver_call_values"
#: Calls kept by value per function: a cell's step runs once per result, tens or thousands of times;
#: the objects stay alive with the record, so a loop of a million calls keeps only the first ones.
MAX_CALLS_KEPT = 8192

# Code objects that are not a function of the cell: its module body and 3.11's comprehension frames.
_NOT_FUNCTIONS = frozenset({"<module>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
# sys.monitoring's tool slot for us (3.12+): the profiler's slot, the one a notebook's own profiler uses least.
_TOOL_ID = 2


#: How many :class:`DriverCalls` hooks are installed now (the runtime's entry points read it, cheaply).
_installed = 0


def unwatched(fn: Callable) -> Callable:
    """Decorate a runtime entry point (``.remote()``, ``hpc.get``...): while a hook is installed, it runs unhooked.

    Under ``sys.setprofile`` every call the thread makes costs a Python call of the hook, and the
    runtime's submission path makes many (unhooked, 3,000 submissions took 0.18 s here; hooked,
    0.83 s): none of it is the cell's work, and a slower driver changes what a run measures (the
    submission pace a sizing plan replays). The entry point calls none of the cell's functions in
    the driver, so nothing the record should hold is lost. With no hook installed it costs one test.
    """

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not _installed:
            return fn(*args, **kwargs)
        hook = sys.getprofile()
        if hook is None:
            return fn(*args, **kwargs)
        sys.setprofile(None)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.setprofile(hook)

    return call


def function_name(code: CodeType) -> str:
    """The name the trace gives the function of ``code``: ``Class.method`` or ``function``, no ``<locals>.``."""
    qualname = getattr(code, "co_qualname", None) or code.co_name
    return qualname.rsplit("<locals>.", 1)[-1]


class DriverCalls:
    """Count the starts of watched functions in this process outside tasks, while the ``with`` block runs.

    ``files``: source file names whose functions are watched (the cells'); ``codes``: more code
    objects to watch; ``wrappers``: ``__call__`` code objects of stand-ins for a function (see the
    module's docstring). After the block, :attr:`calls` is ``{function name: calls}`` (functions
    that ran at least once).
    """

    def __init__(self, files: Iterable[str], codes: Iterable[CodeType] = (),
                 wrappers: Iterable[CodeType] = (), values_of: Iterable[str] = ()) -> None:
        self._files = frozenset(files)
        self._values_of = frozenset(values_of)
        # code -> whether its calls are kept by value (decided at its first call, by its name)
        self._keeps: dict[CodeType, bool] = {}
        self._kept: dict[str, list[tuple[tuple[Any, ...], Any]]] = {}
        #: Calls of ``values_of`` functions not kept (over ``MAX_CALLS_KEPT``).
        self.values_dropped = 0
        self._open_calls = threading.local()  # each thread's calls begun and not returned: (code, arguments)
        self._wrappers = frozenset(wrappers)
        self._extra = frozenset(codes) | self._wrappers  # the codes watched whatever their file
        # One pair of counters per thread: the hook's count needs no lock, and threads never lose a count.
        self._threads: list[tuple[Counter[CodeType], Counter[CodeType]]] = []
        self._plain_counts: list[dict[CodeType, int]] = []
        self._lock = threading.Lock()
        self._saved: tuple[Any, Any] | None = None
        self._monitoring = False
        self._active = False  # threads the cell started keep the hook until their next event after the block

    def _keeps_values(self, code: CodeType) -> bool:
        keep = self._keeps.get(code)
        if keep is None:
            keep = self._keeps[code] = function_name(code) in self._values_of
        return keep

    def _began(self, code: CodeType, frame: FrameType) -> None:
        """A call of a function kept by value began: note its parameters' objects (before its body rebinds any)."""
        stack = getattr(self._open_calls, "stack", None)
        if stack is None:
            stack = self._open_calls.stack = []
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        f_locals = frame.f_locals
        stack.append((code, tuple(f_locals.get(n) for n in names)))

    def _returned(self, code: CodeType, value: Any) -> None:
        """The call of ``code`` begun last on this thread returned ``value``: keep the pair."""
        stack = getattr(self._open_calls, "stack", None)
        if not stack or stack[-1][0] is not code:
            return  # began before the record did (or in a task): not the cell's call
        _, args = stack.pop()
        with self._lock:
            kept = self._kept.setdefault(function_name(code), [])
            if len(kept) < MAX_CALLS_KEPT:
                kept.append((args, value))
            else:
                self.values_dropped += 1

    def _watched(self, code: CodeType) -> bool:
        return (code in self._extra or code.co_filename in self._files) and code.co_name not in _NOT_FUNCTIONS

    def _counters(self) -> tuple[Counter[CodeType], Counter[CodeType]]:
        pair: tuple[Counter[CodeType], Counter[CodeType]] = (Counter(), Counter())
        with self._lock:
            self._threads.append(pair)
        return pair

    def _start(self, code: CodeType, frame: FrameType | None, counts: Counter[CodeType],
               wrapped: Counter[CodeType]) -> None:
        """One start of ``code`` outside a task (``frame``: its frame, read only for a wrapper's ``self``)."""
        if code.co_name in _NOT_FUNCTIONS or in_task():
            return
        if code in self._wrappers:
            fn = getattr(frame.f_locals.get("self"), "__wrapped__", None) if frame is not None else None
            inner = getattr(fn, "__code__", None)
            if inner is not None and self._watched(inner):
                wrapped[inner] += 1
            return
        counts[code] += 1

    # -- sys.setprofile (3.11 and before): a Python call per event, so the hook does as little as it can
    def _hook(self) -> Any:
        """A profile function for the calling thread, with counters of its own."""
        counts, wrapped = self._counters()
        files, extra, wrappers, start = self._files, self._extra, self._wrappers, self._start
        plain: dict[CodeType, int] = {}  # this thread's counts of plain functions: the hot path, a dict and no call
        counts_plain = self._plain_counts
        counts_plain.append(plain)

        keeping = bool(self._values_of)
        keeps = self._keeps_values

        def hook(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                code = frame.f_code
                if code.co_filename in files or code in extra:
                    if not self._active:  # a thread the cell started, still running after the block: leave it
                        sys.setprofile(None)
                        return
                    if code in plain:
                        if not in_task():
                            plain[code] += 1
                    elif code in wrappers or code.co_name in _NOT_FUNCTIONS:
                        start(code, frame, counts, wrapped)
                    elif not in_task():
                        plain[code] = 1
                    if keeping and keeps(code) and not in_task():
                        self._began(code, frame)
            elif keeping and event == "return":
                code = frame.f_code
                if (code.co_filename in files or code in extra) and keeps(code) and self._active:
                    self._returned(code, arg)

        return hook

    def _new_thread(self, frame: FrameType, event: str, arg: Any) -> None:
        """What ``threading.setprofile`` gives each thread the cell starts: its own hook, from its first event on."""
        if not self._active:
            sys.setprofile(None)
            return
        hook = self._hook()
        sys.setprofile(hook)
        hook(frame, event, arg)

    # -- sys.monitoring (3.12+): a code object that is not watched is switched off after its first start
    def _py_start(self, code: CodeType, offset: int) -> Any:
        if not self._watched(code) and code not in self._wrappers:
            return sys.monitoring.DISABLE  # type: ignore[attr-defined]
        with self._lock:  # one hook for every thread here: the pair is shared
            self._start(code, sys._getframe(1) if code in self._wrappers else None, *self._threads[0])
        if self._values_of and self._keeps_values(code) and not in_task():
            self._began(code, sys._getframe(1))
        return None

    def _py_return(self, code: CodeType, offset: int, value: Any) -> Any:
        if not (self._watched(code) and self._keeps_values(code)):
            return sys.monitoring.DISABLE  # type: ignore[attr-defined]
        self._returned(code, value)
        return None

    def __enter__(self) -> DriverCalls:
        global _installed
        self._active = True
        mon = getattr(sys, "monitoring", None)
        if mon is not None and mon.get_tool(_TOOL_ID) is None:
            self._counters()
            mon.use_tool_id(_TOOL_ID, "eugo_lab driver calls")
            mon.register_callback(_TOOL_ID, mon.events.PY_START, self._py_start)
            events = mon.events.PY_START
            if self._values_of:
                mon.register_callback(_TOOL_ID, mon.events.PY_RETURN, self._py_return)
                events |= mon.events.PY_RETURN
            mon.set_events(_TOOL_ID, events)
            self._monitoring = True
            return self
        async_exc.clear_stuck_signal()  # else a profile function can spin forever at a function's entry (3.11)
        self._saved = (sys.getprofile(), threading.getprofile() if hasattr(threading, "getprofile") else None)
        threading.setprofile(self._new_thread)  # threads the cell starts
        sys.setprofile(self._hook())  # this thread
        _installed += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active = False
        if self._monitoring:
            mon = sys.monitoring  # type: ignore[attr-defined]
            mon.set_events(_TOOL_ID, 0)
            mon.register_callback(_TOOL_ID, mon.events.PY_START, None)
            mon.register_callback(_TOOL_ID, mon.events.PY_RETURN, None)
            mon.free_tool_id(_TOOL_ID)
            mon.restart_events()  # the code objects switched off come back for the next tool
            self._monitoring = False
            return
        if self._saved is not None:
            global _installed
            old, old_threads = self._saved
            sys.setprofile(old)
            threading.setprofile(old_threads)  # type: ignore[arg-type]
            self._saved = None
            _installed -= 1

    @property
    def calls(self) -> dict[str, int]:
        """``{function name: calls in the driver}``, each call counted once (see the module's docstring)."""
        counts: Counter[CodeType] = Counter()
        wrapped: Counter[CodeType] = Counter()
        with self._lock:
            for c, w in self._threads:
                counts.update(c)
                wrapped.update(w)
            for plain in self._plain_counts:
                counts.update(plain)
        out: Counter[str] = Counter()
        for code in set(counts) | set(wrapped):
            out[function_name(code)] += max(counts[code], wrapped[code])
        return dict(sorted(out.items()))

    @property
    def values(self) -> dict[str, list[tuple[tuple[Any, ...], Any]]]:
        """``{function name: [(the objects its parameters held as the call began, the object it returned)]}``.

        Only the ``values_of`` functions' calls in the driver, in the order they returned, the first
        ``MAX_CALLS_KEPT`` of each (:attr:`values_dropped` counts the others). A call that raised
        returned None here.
        """
        with self._lock:
            return {name: list(calls) for name, calls in self._kept.items()}
