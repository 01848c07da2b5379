"""Exceptions raised in another thread (``PyThreadState_SetAsyncExc``), and the CPython quirk that comes with them.

The runtime stops a task that outgrew its memory limit by raising an exception in the task's
thread at its next bytecode (:func:`raise_in_thread`). CPython marks the whole interpreter
"an asynchronous exception is pending" until the thread that holds one takes it. Withdrawing a
raised exception (``PyThreadState_SetAsyncExc(id, NULL)``), or a thread that ends before taking
it, leaves that mark set with no thread to clear it. On CPython 3.11 a thread with a profile
function (``sys.setprofile``: the driver's record of a graded cell, pyinstrument) then spins
forever at the entry of the next Python function it calls, at 100% CPU.

So: a raised exception is never withdrawn but let land where it is caught (:func:`absorb`), and
code about to install a profile function first clears a mark left by anyone else
(:func:`clear_stuck_signal`).
"""

from __future__ import annotations

import ctypes
import sys
import threading


def raise_in_thread(thread_id: int, exc_type: type[BaseException]) -> bool:
    """Raise ``exc_type`` in thread ``thread_id`` at its next bytecode; False if there is no such thread."""
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type)) == 1


def absorb(exc_type: type[BaseException]) -> None:
    """Let an ``exc_type`` raised in this thread and not delivered yet land here, caught.

    The loop's backward jumps check for it: a pending one is raised within the first iterations.
    """
    try:
        for _ in range(64):
            pass
    except exc_type:
        pass


class _Clear(Exception):
    """Raised in a thread of :func:`clear_stuck_signal`'s own, which catches it."""


def clear_stuck_signal() -> None:
    """Clear the interpreter's "asynchronous exception pending" mark if nobody will (CPython before 3.12).

    A thread of ours takes one exception of its own: taking it clears the mark, whoever set it.
    Costs a short thread (well under a millisecond); 3.12 and later need none of it.
    """
    if sys.version_info >= (3, 12):
        return
    ready = threading.Event()
    stop = False

    def take() -> None:
        ready.set()
        try:
            while not stop:
                pass
        except _Clear:
            pass

    t = threading.Thread(target=take, name="eugo-clear-async-exc", daemon=True)
    t.start()
    ready.wait()
    if not raise_in_thread(t.ident or 0, _Clear):
        stop = True
    t.join(5.0)
    stop = True
