"""How long the calling thread waited for a core: Linux's per-thread run-queue time.

A task's wall time minus its CPU time is not all waiting for I/O. On a machine whose cores
are busy (more workers than cores, other processes, a shared VM) a thread that is ready to
compute waits on the scheduler's run queue until a core frees up. Linux counts that wait
per thread in ``/proc/thread-self/schedstat`` (second field, nanoseconds), and that is the
number that tells "CPU-starved" from "waiting for I/O".

Cost: the file is opened once per thread and re-read with ``os.pread`` (the kernel formats
fresh values on every read), about 1-2 us a read on this project's VMs. Loaded by worker
processes at start-up (the worker shim and ``hpc.phase``): imports nothing heavy.

Where the file does not exist (macOS, Windows, a kernel without schedstats), every reading
is ``None`` and callers record NaN: "not measured", never zero.
"""

from __future__ import annotations

import os
import threading

_PATH = "/proc/thread-self/schedstat"
_local = threading.local()
_supported = os.path.exists(_PATH)


class _File:
    """One thread's open schedstat file; closed when the thread (its ``threading.local``) goes."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _reset_after_fork() -> None:
    # An fd opened through /proc/thread-self keeps naming the thread that opened it: a forked
    # child (the local pool's template forks its workers) must open its own. Dropping the
    # parent's thread-local closes the inherited copy.
    global _local
    _local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _open() -> _File | None:
    global _supported
    try:
        f = _File(os.open(_PATH, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)))
    except OSError:
        _supported = False
        return None
    _local.file = f
    return f


def waited_ns() -> int | None:
    """Nanoseconds this thread has waited on a run queue since it started; ``None`` where unknown."""
    if not _supported:
        return None
    f = getattr(_local, "file", None)
    if f is None:
        f = _open()
        if f is None:
            return None
    try:
        return int(os.pread(f.fd, 64, 0).split(None, 2)[1])
    except (OSError, ValueError, IndexError):
        return None


def since(start: int | None) -> float:
    """Seconds waited since the reading ``start`` (from :func:`waited_ns`); NaN when either is unknown."""
    if start is None:
        return float("nan")
    now = waited_ns()
    return float("nan") if now is None else (now - start) * 1e-9


def supported() -> bool:
    """Whether this platform reports run-queue time (a reading has not failed yet)."""
    return _supported and waited_ns() is not None
