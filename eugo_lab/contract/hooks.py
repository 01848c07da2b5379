"""Where the runtime finds its features without importing them: modules named here, imported by name.

The runtime (``eugo_lab.hpc``) stands above the engines and below the features that change how
code runs (the JIT, the profiler, the optimizations report, their displays): it may not import
them, yet it calls them. Each feature is named here by module, as a string; the runtime asks for
one with :func:`provider` when it first needs it (``importlib``, so the import graph keeps no edge
from the runtime to a feature), and a pool's worker template imports :data:`WORKER_PRELOADS` before
it forks. A feature that wants to change this is an edit of these tables, not of the runtime.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: What the runtime asks for -> the module that provides it (its public names are the provider's API).
PROVIDERS: dict[str, str] = {
    # The JIT: the eager trial's wrapper and the key of a function's code (Optimized, code_key) ...
    "jit": "eugo_lab.jit.checked",
    # ... and the automatic JIT's wrapper (AutoJit, Packed), imported only once a call is wrapped in it.
    "auto_jit": "eugo_lab.jit.auto",
    # The profiler: the sampler's settings, the wrapper a worker recognises, the merged profile.
    "profile": "eugo_lab.profile.hook",
    # A profile as a notebook shows it (mimebundle): a display, so it lives with the cell runner.
    "profile_display": "eugo_lab.cellrun.profile_display",
    # The optimizations report (hpc.last_optimizations()): its slot of the cell record, which its own package
    # declares and fills (a region's report it builds from the trace on the first ask).
    "optimizations": "eugo_lab.optimizations.report",
}

#: What a local pool's worker template imports before it forks, so every worker has it at no cost
#: (~2 ms each otherwise, on the way to the first result): the automatic JIT's watcher, which every
#: call of a function the JIT is not switched off for goes through, and the thread guard each worker
#: applies after its hello. Not cloudpickle (~6 ms), needed only for functions pickled by value: the
#: template would then still be booting when the driver, done with its own imports, asks for workers.
WORKER_PRELOADS: tuple[str, ...] = ("eugo_lab.jit.auto", "eugo_lab.threadguard.variables")


def provider(kind: str) -> ModuleType:
    """The module that provides ``kind`` (one of :data:`PROVIDERS`), imported on first use."""
    try:
        name = PROVIDERS[kind]
    except KeyError:
        raise LookupError(f"no feature provides {kind!r}; known: {', '.join(sorted(PROVIDERS))}") from None
    return importlib.import_module(name)


def preload_worker_modules() -> None:
    """Import every module of :data:`WORKER_PRELOADS` (in a worker template, before it forks)."""
    for name in WORKER_PRELOADS:
        importlib.import_module(name)
