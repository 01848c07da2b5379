"""The local pool never writes to or closes a descriptor it no longer owns.

A descriptor number is reused by the next ``open``/``pipe``/``socket`` of any code in the
process. A write to the pool's wake-up pipe after shutdown, or a second close of a dead
worker's pipe, would hit that other file: a Ray or Dask socket, a log, pytest's capture.
"""

from __future__ import annotations

import os

from eugo_lab.backends.local import LocalBackend
from eugo_lab.backends.local_process import Worker


def test_a_post_after_shutdown_writes_nowhere():
    pool = LocalBackend(workers=1)
    pool.start()
    wake_w = pool._wake_w
    pool.shutdown()
    assert pool._wake_w == -1 and pool._wake_r == -1
    r, w = os.pipe()
    try:
        # Give the old wake-up number to a pipe of ours (dup2 onto a number nothing holds).
        try:
            os.fstat(wake_w)
            raise AssertionError(f"descriptor {wake_w} is still open after shutdown")
        except OSError:
            pass
        os.dup2(w, wake_w)
        os.set_blocking(r, False)
        pool._wake_pending = False
        pool._post("drop", 1)  # what a late ObjectRef release or cancel does
        try:
            landed = os.read(r, 16)
        except BlockingIOError:
            landed = b""
        assert landed == b"", "the pool wrote into a pipe it does not own"
    finally:
        for fd in (r, w, wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


def test_worker_pipes_close_once():
    w = Worker(0)
    w.task_w, w.result_r, w.lifeline_w, w.cancel_w = (*os.pipe(), *os.pipe())
    numbers = (w.task_w, w.result_r, w.lifeline_w, w.cancel_w)
    w.close_pipes()
    assert (w.task_w, w.result_r, w.lifeline_w, w.cancel_w) == (-1, -1, -1, -1)
    reused = [os.pipe() for _ in range(2)]  # very likely the same four numbers
    try:
        w.close_pipes()  # a dead worker closed again at teardown
        for r, wr in reused:
            os.fstat(r)  # still open: the second close_pipes touched nothing
            os.fstat(wr)
        assert {fd for pair in reused for fd in pair} == set(numbers)
    finally:
        for r, wr in reused:
            os.close(r)
            os.close(wr)
