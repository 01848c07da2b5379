"""``hpc.profile()``: profile every task started inside a ``with`` block.

The glue between the runtime and the profiler (:mod:`eugo_lab.profile`, reached through the
contract's provider table, never imported from here): :class:`Settings` is
what the runtime holds while profiling is on (``Runtime.profiling``); its :meth:`~Settings.wrap`
swaps a function record for one whose function is wrapped in
:class:`~eugo_lab.profile.collect.Profiled`, which the worker shim recognises. The wrapped
records are cached, so a function profiled again is not pickled and sent to the workers again.
``%%eugo --profile`` shows its profile through :mod:`eugo_lab.cellrun.profile_display`.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from eugo_lab.contract.hooks import provider

_profiler = provider("profile")
DEFAULT_INTERVAL = _profiler.DEFAULT_INTERVAL
PYINSTRUMENT_INTERVAL = _profiler.PYINSTRUMENT_INTERVAL
SAMPLERS = _profiler.SAMPLERS
Profiled = _profiler.Profiled

_CACHE_SIZE = 256  # wrapped function records kept (a notebook redefines its functions often)
_cache: collections.OrderedDict[tuple[int, float, str], Any] = collections.OrderedDict()
_cache_lock = threading.Lock()

#: What the region object says when its report is asked for while the block still runs.
NOT_ENDED = "the profile is available after the 'with hpc.profile()' block ends"


class Settings:
    """How tasks are profiled while a region is open: the sampling interval and the sampler."""

    __slots__ = ("interval", "sampler")

    def __init__(self, interval: float | None = None, sampler: str = "thread"):
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
        if interval is None:
            interval = PYINSTRUMENT_INTERVAL if sampler == "pyinstrument" else DEFAULT_INTERVAL
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not 0.0001 <= interval <= 1:
            raise ValueError(f"interval must be a number of seconds from 0.0001 to 1, got {interval!r}")
        self.interval = float(interval)
        self.sampler = sampler

    def wrap(self, record: Any) -> Any:
        """The function record whose tasks are profiled (``record`` itself if it is one already)."""
        from eugo_lab.contract.task import FunctionRecord

        if type(record.fn) is Profiled:
            return record
        key = (record.fid, self.interval, self.sampler)
        with _cache_lock:
            wrapped = _cache.get(key)
            if wrapped is not None and wrapped.fn.fn is record.fn:
                _cache.move_to_end(key)
                return wrapped
            wrapped = FunctionRecord(Profiled(record.fn, self.interval, self.sampler), record.name)
            _cache[key] = wrapped
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
        return wrapped


def _profiled(rt: Any, record: Any, args: tuple, kwargs: dict, items: Any) -> Any:
    """While a profiling region is open on ``rt`` (``rt.profiling``), every call's function is sampled."""
    settings = rt.profiling
    return record if settings is None else settings.wrap(record)


def _hook_into_runtime() -> None:
    from eugo_lab.hpc import session

    session.add_wrapper(_profiled, order=20)  # after the JIT trial: the profile samples what really runs


@contextlib.contextmanager
def profiling(runtime: Any, settings: Settings | None) -> Iterator[None]:
    """Profile the tasks ``runtime`` starts inside the block (``settings=None``: leave it as it is)."""
    if settings is None:
        yield
        return
    _hook_into_runtime()
    previous, runtime.profiling = runtime.profiling, settings
    try:
        yield
    finally:
        runtime.profiling = previous


class profile:  # noqa: N801 - used as ``with hpc.profile() as p``
    """Profile every task started inside the ``with`` block, on every worker; ``p.report`` is the merged result.

    Example::

        with hpc.profile() as p:
            hpc.get([simulate.remote(s) for s in range(8)])
        p.report.hot_functions()     # [HotFunction(function='step', file='model.py', line=12, ...)]
        p                            # in a notebook: the hottest functions and lines, and an icicle

    The block is also an ``hpc.trace()`` region: ``p.trace`` is its Trace. Tasks must finish
    inside the block to be counted (as for ``hpc.trace``). ``sampler="pyinstrument"`` uses
    pyinstrument's own profiler, which names C functions but slows Python code 1.5-4x on
    Python 3.11; the default thread sampler costs about 2% more task CPU. ``interval``:
    seconds between samples (default 5 ms for the thread sampler, 1 ms for pyinstrument's).
    """

    def __init__(self, interval: float | None = None, sampler: str = "thread"):
        self.settings = Settings(interval, sampler)
        self.report: Any = None  # the merged Profile (eugo_lab.profile.model), once the block ended
        self.trace: Any = None
        self._region: Any = None
        self._rt: Any = None

    def __enter__(self) -> profile:
        from eugo_lab.hpc import api, session

        self._rt = session.running()
        self._region = api.trace(meta={"profile": self.settings.sampler})
        self._region.__enter__()
        _hook_into_runtime()
        self._previous, self._rt.profiling = self._rt.profiling, self.settings
        return self

    def __exit__(self, *exc: Any) -> None:
        self._rt.profiling = self._previous
        self._region.__exit__(*exc)
        self.trace = self._region.trace
        self.report = _profiler.Profile.from_trace(self.trace)

    def __repr__(self) -> str:
        return repr(self.report) if self.report is not None else "<hpc.profile region (recording)>"

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        if self.report is None:
            return {"text/plain": NOT_ENDED}
        # The bundle is a display: the cell runner builds it (text/plain and the HTML view).
        return provider("profile_display").mimebundle(self.report)

