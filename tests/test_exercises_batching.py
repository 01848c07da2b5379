"""The ``batching`` exercise: the reference passes; one task per item and one giant batch do not."""

from __future__ import annotations

from _exercise_cells import code_in, hint_code, run_exercise

SETUP = """
from eugo_lab import hpc

@hpc.remote
def score(x):
    return sum((x * k) % 7 for k in range(200))

items = range(3000)
"""


def test_reference_passes():
    v = run_exercise("batching", "results = hpc.get(hpc.map(score, items))\n", setup=SETUP)
    assert v.passed, v.to_text()
    assert v.to_text().startswith("exercise batching: passed\n  3000 items in ")
    assert "at least 10 items per task and at least 2 batches per worker on 2 workers" in v.to_text()


def test_one_remote_per_item():
    v = run_exercise("batching", "results = hpc.get([score.remote(x) for x in items])\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "3000 tasks for 3000 items: one task per item" in text, text
    assert "hpc.map(score, items)" in hint_code(v) and code_in(text) == []
    assert "(the Scheduling overhead finding)" in text and v.mistake == "one-per-item"


def test_one_giant_batch():
    v = run_exercise("batching", "results = hpc.get(hpc.map(score, items, batch=3000))\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "all 3000 items went in 1 task, so only 1 worker could get work" in text, text
    assert "batches of at most 750 items" in text and v.mistake == "too-few-batches"


def test_on_one_worker_the_batches_are_counted_for_two():
    v = run_exercise("batching", "results = hpc.get(hpc.map(score, items, batch=1000))\n", setup=SETUP,
                     line="-w 1 --no-live")
    assert not v.passed and "(counted for 2: this run had 1)" in v.to_text(), v.to_text()


def test_reference_on_one_worker_passes():
    v = run_exercise("batching", "results = hpc.get(hpc.map(score, items))\n", setup=SETUP, line="-w 1 --no-live")
    assert v.passed and "on 2 workers" in v.to_text(), v.to_text()


def test_wrong_order():
    v = run_exercise("batching", "results = sorted(hpc.get(hpc.map(score, items)))\n", setup=SETUP)
    assert not v.passed and "in order" in v.to_text()
