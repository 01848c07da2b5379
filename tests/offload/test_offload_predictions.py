"""The prediction recorder: what a cell asked the cost model, and only that."""

from __future__ import annotations

import threading

import numpy as np

from eugo_lab.offload import break_even, predict, predictions
from eugo_lab.offload.cost import sample_operation
from eugo_lab.offload.dispatch import offload
from eugo_lab.offload.profiles import published
from tests._offload import HOST


def test_predict_and_break_even_calls_are_kept_in_order_with_what_they_answered():
    gpu = published("h100")
    with predictions.recording() as log:
        est = predict(sample_operation("elementwise", 4096, work="special", name="power"), HOST, gpu)
        size = break_even("elementwise", HOST, gpu, work="special", name="power", resident=True)
    assert [c.function for c in log.calls] == ["predict", "break_even"]  # break_even's own scan is not the cell's
    first, scan = log.calls
    assert first.estimate is est and first.size == 4096 and first.copies
    assert scan.result == size and scan.resident and scan.size == size
    assert log.predicted(4096) == [first] and log.scans(size) == [scan] and log.predicted(8192) == []
    assert predictions.last_cell() is log


def test_a_resident_operation_is_priced_without_a_copy_and_a_matmul_by_its_order():
    gpu = published("h100")
    with predictions.recording() as log:
        predict(sample_operation("elementwise", 1000, resident=True), HOST, gpu)
        predict(sample_operation("matmul", 64), HOST, gpu)
    assert [c.copies for c in log.calls] == [False, True]
    assert log.sizes() == [1000, 64]


def test_nothing_is_kept_outside_a_recording_nor_from_another_thread():
    gpu = published("h100")
    with predictions.recording() as log:
        pass
    predict(sample_operation("elementwise", 10), HOST, gpu)  # no recording open: nothing to keep
    assert log.calls == []
    with predictions.recording() as log:
        t = threading.Thread(target=predict, args=(sample_operation("elementwise", 10), HOST, gpu))
        t.start()
        t.join()
    assert log.calls == []


def test_the_dispatchers_own_placements_are_not_recorded():
    with predictions.recording() as log:
        s = offload("auto", None, published("h100"), host=HOST)
        with s.activate():
            xp = s.module(np)
            xp.log(xp.asarray(np.ones(100_000)))
        s.close()
    assert log.calls == []
