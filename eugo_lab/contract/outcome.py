"""What a backend reports when a task attempt ends: a small typed :class:`Outcome`.

Backends call ``on_done(task, outcome)`` exactly once per attempt. The status codes are the
trace row's (:mod:`eugo_lab.contract.row`); each status fills its own field, so nobody has
to tell a traceback from an exit code by its type:

- ``OK``: ``payload`` is the pickled result (a batch: the pickled list of item results,
  ``item_errors`` the items that raised);
- ``ERROR``: ``payload`` is the pickled exception, ``traceback`` its frames;
- ``CRASHED``: ``crash`` says how the worker was lost (died, memory limit, no workers,
  engine lost);
- ``CANCELLED``: ``reason`` says why, in words (``None``: ``hpc.cancel``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from eugo_lab.contract.row import CANCELLED, CRASHED, ERROR, OK, TaskStats

__all__ = ["OK", "ERROR", "CRASHED", "CANCELLED", "BatchProgress", "Crash", "Outcome", "from_worker"]

# Crash kinds.
DIED = "died"  # the worker process exited while holding the task: retried
MEMORY = "memory"  # the task was stopped at its memory limit: never retried
NO_WORKERS = "no-workers"  # no worker could take it (none started, none came back in time)
ENGINE_LOST = "engine-lost"  # the scheduler or cluster went away


class Crash(NamedTuple):
    """How a task attempt lost its worker."""

    kind: str  # DIED, MEMORY, NO_WORKERS or ENGINE_LOST
    exit_code: int | None = None  # the worker's exit status (negative: the signal), when known
    message: str = ""  # NO_WORKERS / ENGINE_LOST: what happened and what to do, in words
    used: int = 0  # MEMORY: bytes seen (local pool: the worker's RSS; Dask/Ray: what the task added)
    limit: int = 0  # MEMORY: the task's limit in bytes
    baseline: int | None = None  # MEMORY on Dask/Ray: the worker's RSS when the task started

    @property
    def retryable(self) -> bool:
        """Only a plain death is worth another attempt: a memory stop would grow the same way again."""
        return self.kind == DIED

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for engines' side channels (Dask's event log, Ray's KV store)."""
        return self._asdict()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Crash:
        """The inverse of :meth:`to_dict` (unknown keys ignored, so old and new workers interoperate)."""
        return cls(**{k: v for k, v in d.items() if k in cls._fields})

    @classmethod
    def memory(cls, used: int, limit: int, baseline: int | None = None, exit_code: int | None = None) -> Crash:
        """A memory-limit stop."""
        return cls(MEMORY, exit_code=exit_code, used=used, limit=limit, baseline=baseline)


class BatchProgress(NamedTuple):
    """How far an ``hpc.map`` batch got before its worker was lost (the local pool reports it with CRASHED).

    ``parts``: the groups of items that finished, in order, each ``(lo, hi, payload, errors)``:
    items ``lo..hi-1``, their pickled list of results (``None``: too large or unpicklable to send
    ahead; those items count as not run) and the errors among them (item index -> ``(pickled
    exception, traceback)``, or ``None``). ``running``: ``(lo, hi)``, the group of items that was
    running when the worker died: one item is the one that crashed; several tiny items cannot be
    told apart. The items from ``running[1]`` on never started. ``body_start`` and ``ends``: the
    wall-clock start of the batch's body and each part's end, seconds after it (for the trace).
    ``reported``: False where the engine could not say how far the batch got (Dask, Ray): the runtime
    then takes every item as running (no part finished) and sends each again as a batch of its own.
    """

    parts: tuple[tuple[int, int, bytes | None, dict | None], ...]
    running: tuple[int, int]
    body_start: float = 0.0
    ends: tuple[float, ...] = ()
    reported: bool = True


class Outcome(NamedTuple):
    """The end of one task attempt, as a backend reports it."""

    status: int
    payload: bytes | None = None
    stats: TaskStats | None = None
    worker: int = -1  # the worker's index (-1: none, e.g. cancelled while queued)
    traceback: Any = None  # ERROR: (frames, exception line) from the worker
    # OK batch: item index -> (pickled exception, traceback), or (b"", Crash) for an item stopped at its memory limit
    item_errors: dict[int, tuple[bytes, Any]] | None = None
    crash: Crash | None = None  # CRASHED
    reason: str | None = None  # CANCELLED
    gpu: int = -1  # the GPU the attempt held (a gpus= task on a worker with a device), -1: none
    progress: BatchProgress | None = None  # CRASHED batch: which items finished before (the local pool)

    @classmethod
    def crashed(cls, crash: Crash, worker: int = -1, stats: TaskStats | None = None) -> Outcome:
        """A lost attempt."""
        return cls(CRASHED, stats=stats, worker=worker, crash=crash)

    @classmethod
    def cancelled(cls, reason: str | None = None, worker: int = -1) -> Outcome:
        """A cancelled attempt."""
        return cls(CANCELLED, worker=worker, reason=reason)


def from_worker(status: int, payload: bytes | None, detail: Any, stats: TaskStats | None, worker: int,
                batch: bool) -> Outcome:
    """The outcome of what the worker shim returned (``_worker.execute``'s ``(status, payload, detail, stats)``).

    ``detail`` is the shim's one untyped slot, read here once, by status: a traceback
    (``ERROR``), the failed items of a batch (``OK``), or a memory stop (``CRASHED``, a
    :class:`Crash`).
    """
    if status == OK:
        return Outcome(OK, payload, stats, worker, item_errors=detail if batch else None)
    if status == ERROR:
        return Outcome(ERROR, payload, stats, worker, traceback=detail)
    if status == CRASHED:
        return Outcome(CRASHED, None, stats, worker, crash=detail if isinstance(detail, Crash) else Crash(DIED))
    return Outcome(CANCELLED, None, stats, worker, reason=detail if isinstance(detail, str) else None)
