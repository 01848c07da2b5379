"""The ``as-completed`` exercise: the reference passes; waiting in submission order and getting all first do not."""

from __future__ import annotations

from _exercise_cells import code_in, hint_code, run_exercise

SETUP = """
import time
from eugo_lab import hpc

@hpc.remote
def measure(i):
    time.sleep(0.4 if i == 0 else 0.03)
    return i * 10

def handle(r):
    time.sleep(0.02)
    return r + 1
"""


def test_reference_passes():
    v = run_exercise("as-completed", "futures = [measure.remote(i) for i in range(10)]\n"
                                     "handled = []\n"
                                     "for f in hpc.as_completed(futures):\n"
                                     "    handled.append(handle(hpc.get(f)))\n", setup=SETUP)
    assert v.passed, v.to_text()
    assert v.to_text() == ("exercise as-completed: passed\n"
                           "  all 10 results handled; the first was handled before the last task finished\n"
                           "  results taken in hpc.as_completed; no Submission order finding")


def test_waiting_in_submission_order_names_the_line():
    v = run_exercise("as-completed", "futures = [measure.remote(i) for i in range(10)]\n"
                                     "handled = []\n"
                                     "for f in futures:\n"
                                     "    handled.append(handle(hpc.get(f)))\n", setup=SETUP)
    text = v.to_text()
    assert text.startswith("exercise as-completed: not yet\n"), text
    assert "your loop called get() at cell line 5 in submission order" in text
    assert "hpc.as_completed(futures)" in hint_code(v) and code_in(text) == []


def test_getting_all_before_handling():
    v = run_exercise("as-completed", "futures = [measure.remote(i) for i in range(10)]\n"
                                     "handled = [handle(r) for r in hpc.get(futures)]\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "waited for all 10 results at once (get() at cell line 3)" in text, text
    assert "nothing was handled while the slow task ran" in text


def test_one_worker_needs_completion_order_and_says_why():
    cell = ("futures = [measure.remote(i) for i in range(10)]\nhandled = []\n"
            "for f in futures:\n    handled.append(handle(hpc.get(f)))\n")
    v = run_exercise("as-completed", cell, setup=SETUP, line="-w 1 --no-live")
    assert not v.passed and "this run had 1 worker" in v.to_text()
    v = run_exercise("as-completed", cell.replace("in futures", "in hpc.as_completed(futures)"), setup=SETUP,
                     line="-w 1 --no-live")
    assert v.passed and "(1 worker: checked by the way results were taken)" in v.to_text(), v.to_text()


def test_missing_results():
    v = run_exercise("as-completed", "futures = [measure.remote(i) for i in range(10)]\n"
                                     "handled = [handle(hpc.get(f)) for f in futures[:5]]\n", setup=SETUP)
    assert not v.passed and "`handled` does not hold handle's answer for each of the 10 results" in v.to_text()
