"""``future.complete_batch``: finishing a whole hpc.map batch at once behaves like per-item ``_complete``."""

from __future__ import annotations

import pickle
import threading

from eugo_lab.hpc.future import (
    STATE_CANCELLED,
    STATE_FAILED,
    STATE_FINISHED,
    STATE_PENDING,
    BatchResult,
    Future,
    complete_batch,
)


def test_complete_batch_sets_values_wakes_waiters_and_runs_callbacks():
    futs = [Future(i, "f") for i in range(5)]
    batch = BatchResult(pickle.dumps([10, 11, 12, 13, 14]))
    futs[1]._complete(STATE_FAILED, error=ValueError("item failed"))   # failed items are completed first
    futs[3]._complete(STATE_CANCELLED, error=RuntimeError("cancelled"))
    seen = []
    futs[4].add_done_callback(lambda f: seen.append(f.task_id))
    woke = threading.Event()

    def waiter() -> None:
        if futs[2]._wait(10):
            woke.set()

    t = threading.Thread(target=waiter)
    t.start()
    while futs[2]._event is None:  # the waiter has registered its event
        pass
    complete_batch(futs, batch, skip={1})
    t.join(10)
    assert woke.is_set() and seen == [4]
    assert [f._state for f in futs] == [STATE_FINISHED, STATE_FAILED, STATE_FINISHED, STATE_CANCELLED, STATE_FINISHED]
    assert [futs[i]._value() for i in (0, 2, 4)] == [10, 12, 14]
    assert futs[0]._canceller is None and futs[4]._callbacks is None


def test_complete_batch_skips_items_in_skip_even_if_pending():
    futs = [Future(i, "f") for i in range(3)]
    complete_batch(futs, BatchResult(pickle.dumps([1, 2, 3])), skip={0})
    assert [f._state for f in futs] == [STATE_PENDING, STATE_FINISHED, STATE_FINISHED]
