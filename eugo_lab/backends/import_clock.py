"""How long a task spent importing modules, measured on the worker while the task's own code runs.

A worker's warm-up is the time its first task spends loading libraries (pandas 0.6-0.7 s, NumPy ~60 ms).
Counting the modules that appeared in ``sys.modules`` since the previous attempt could not tell that
time from the task's own work, nor the task's imports from the runtime's (its lazy imports on the first
traced task, another function's unpickling): a ``time.sleep`` task on a warm worker was called a
warm-up because 29 modules had appeared. This clock measures instead.

While a task's code runs (its function's unpickling, its arguments' unpickling, its body) on a thread
that :func:`begin` switched on, a finder in front of ``sys.meta_path`` times each import it sees: the
search for the module plus the loader's ``create_module``/``exec_module`` (an extension module's work is
in ``create_module``), inclusive of the imports nested in it, counted once at the outermost level.
Modules of ``eugo_lab`` (and what they import) are the runtime's, not the task's, and are not counted.

It costs nothing for a module already imported (the finders are asked only for new ones) and one
attribute read per new import on a thread that is not measuring. The loader is wrapped by an
attribute set on its own instance (file loaders are made per module), removed again when called:
the module never sees a proxy, and ``isinstance`` checks on its loader still hold.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from eugo_lab.contract.phases import in_runtime_phase

_RUNTIME = "eugo_lab"
_state = threading.local()
_installed = False
_install_lock = threading.Lock()
# Imports made while a function was unpickled outside any attempt (the local pool loads a function
# when its first task arrives): charged to that function's next attempt on this worker.
_pending: dict[str, tuple[float, int]] = {}


def _is_runtime(name: str) -> bool:
    return name == _RUNTIME or name.startswith(_RUNTIME + ".")


class _ImportClock:
    """A meta-path finder that finds nothing itself: it asks the finders behind it and times the load."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        st = _state
        if not getattr(st, "on", False) or getattr(st, "finding", False):
            return None
        # The runtime's own imports: a module of eugo_lab, or one imported during the runtime's own phases
        # inside the task (the JIT's trial imports Numba there: the runtime's work, not the task's warm-up).
        runtime = _is_runtime(name) or (st.depth == 0 and (in_runtime_phase() or _imported_by_a_feature()))
        outer = st.depth == 0 and not runtime
        t0 = time.perf_counter()
        st.finding = True  # the finders behind us may import (a zipimport hook): don't recurse
        spec = None
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None) if finder is not self else None
                if find is not None:
                    spec = find(name, path, target)
                    if spec is not None:
                        break
        finally:
            st.finding = False
        if outer:
            st.seconds += time.perf_counter() - t0
        loader = getattr(spec, "loader", None)
        # File-backed modules only (source, bytecode, extensions): builtin and frozen modules load
        # in microseconds, and their loaders are classes shared by every module.
        if spec is not None and spec.has_location and loader is not None and not isinstance(loader, type) \
                and hasattr(loader, "__dict__"):
            for method in ("create_module", "exec_module"):
                if hasattr(loader, method):
                    setattr(loader, method, _timed(loader, method, runtime))
        return spec


#: The runtime's features that run inside a task and load their own libraries there (the JIT imports Numba
#: between its trial's plain run and its compile; the profiler, the thread guard, the GPU offload theirs).
_FEATURES = ("eugo_lab.jit", "eugo_lab.profile", "eugo_lab.threadguard", "eugo_lab.offload")


def _imported_by_a_feature() -> bool:
    """Whether the code that asked for this import (the first frame outside importlib) is a feature's.

    Only the features': a function unpickled by the worker's own code (``pickle.loads`` called from
    ``eugo_lab.backends``) imports what the task's code needs, which is the task's warm-up.
    """
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith("<frozen importlib"):
        f = f.f_back
    if f is None:
        return False
    importer = str(f.f_globals.get("__name__", ""))
    return any(importer == p or importer.startswith(p + ".") for p in _FEATURES)


def _timed(loader: Any, method: str, runtime: bool) -> Any:
    """``loader.<method>`` timed into the current thread's counters; it removes itself when called.

    ``runtime``: the module is the runtime's (see :meth:`_ImportClock.find_spec`): neither it nor what it
    imports is counted.
    """
    original = getattr(loader, method)

    def run(arg: Any) -> Any:
        loader.__dict__.pop(method, None)  # a reload uses the loader's own method again
        st = _state
        if not getattr(st, "on", False):
            return original(arg)
        outer = st.depth == 0 and not runtime
        st.depth += 1
        st.runtime += runtime
        t0 = time.perf_counter()
        try:
            return original(arg)
        finally:
            st.depth -= 1
            st.runtime -= runtime
            if outer:
                st.seconds += time.perf_counter() - t0
            if method == "exec_module" and not runtime and st.runtime == 0:
                st.modules += 1

    return run


def install() -> None:
    """Put the clock in front of ``sys.meta_path`` (once per process; idempotent)."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if not _installed:
            sys.meta_path.insert(0, _ImportClock())
            _installed = True


def begin(function: str | None = None) -> None:
    """Start measuring the calling thread's imports (a task's attempt of ``function`` begins).

    Imports charged to ``function`` while it was unpickled (:func:`charge`) are counted in.
    """
    install()
    st = _state
    seconds, modules = _pending.pop(function, (0.0, 0)) if function is not None and _pending else (0.0, 0)
    st.seconds, st.modules, st.depth, st.runtime, st.on = seconds, modules, 0, 0, True


def end() -> tuple[float, int]:
    """Stop measuring; the seconds spent importing and the modules imported since :func:`begin`."""
    st = _state
    st.on = False
    return getattr(st, "seconds", 0.0), getattr(st, "modules", 0)


def drop(function: str) -> None:
    """Forget imports charged to ``function``: its next attempt is not traced, and paid for them unmeasured."""
    if _pending:
        _pending.pop(function, None)


def charge(function: str, seconds: float, modules: int) -> None:
    """Imports made loading ``function`` outside an attempt: its next attempt here counts them."""
    old = _pending.get(function, (0.0, 0))
    _pending[function] = (old[0] + seconds, old[1] + modules)


def measure_load(function: str, load: Any, *args: Any) -> Any:
    """``load(*args)`` (unpickling ``function``) with its imports charged to ``function``'s next attempt."""
    begin()
    try:
        return load(*args)
    finally:
        seconds, modules = end()
        if modules or seconds:
            charge(function, seconds, modules)
