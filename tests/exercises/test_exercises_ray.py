"""The ``ray-backend`` exercise on a real local Ray instance: the reference passes; each mistake, its message.

Ray takes seconds to start (tens of seconds on a busy machine), and every test ends with the
runtime shut down (the root conftest checks that no process is left), so one test runs the
whole table of cells on one Ray instance (two CPUs, no dashboard, no worker logs in the
driver) and reports every row that went wrong; the wrong-engine row needs no Ray at all.
"""

from __future__ import annotations

import pytest
from _exercise_cells import code_in, hint_code, hint_words, run_exercise

from eugo_lab import hpc
from eugo_lab.exercises import catalog, problems
from eugo_lab.exercises.catalog.ray_backend import chained, expected_peaks

pytest.importorskip("ray")

# The starter's two functions, as the lesson's exercise cell defines them, and its inputs (p.days, handed out by the
# checker: a passing cell is run again on a hidden case of other days).
FUNCTIONS = '''
import random
from eugo_lab import exercises, hpc

p = exercises.problem("ray-backend")

@hpc.remote
def load(day):
    rng = random.Random(day)
    return [rng.gauss(20.0, 5.0) for _ in range(50_000)]

@hpc.remote
def daily_peak(readings):
    return max(readings)
'''
STARTER = ("readings = [hpc.get(load.remote(day)) for day in p.days]\n"
           "peaks = hpc.get([daily_peak.remote(r) for r in readings])\n")
REFERENCE = "days = [load.remote(day) for day in p.days]\npeaks = hpc.get([daily_peak.remote(d) for d in days])\n"
LINE = "--no-live"  # no -w: the cell runs on the runtime the test connected (a -w would start the local pool)


def check(body: str, setup: str = ""):
    """Run ``body`` as the exercise cell on the running runtime, after the starter's functions (and ``setup``)."""
    return run_exercise("ray-backend", body, setup=FUNCTIONS + setup, line=LINE)


def not_yet(verdict, mistake: str, message: str) -> str:
    """The verdict's text, after checking it is a ``not yet`` for ``mistake`` saying ``message``, with no code."""
    text = verdict.to_text()
    assert text.splitlines()[0] == "exercise ray-backend: not yet", text
    assert message in text, text
    assert verdict.mistake == mistake, text
    assert code_in("\n".join(verdict.lines[:-1])) == [], text
    assert hint_words(verdict) and code_in(hint_words(verdict)) == [], hint_words(verdict)
    assert hint_code(verdict), verdict.mistake
    return text


def test_registered_with_its_lesson():
    assert catalog.get("ray-backend").lesson == "01-distributed-python/10-moving-to-ray.ipynb"


# Honest variants that differ from the reference: the chain written as one call inside another, in a
# loop, and a dictionary of futures by day.
TABLE_PASS = {
    "nested-calls": "peaks = hpc.get([daily_peak.remote(load.remote(day)) for day in p.days])\n",
    "loop": ("pending = []\nfor day in p.days:\n    readings = load.remote(day)\n"
             "    pending.append(daily_peak.remote(readings))\npeaks = hpc.get(pending)\n"),
    "map-of-a-map": "loads = hpc.map(load, p.days)\npeaks = hpc.get(hpc.map(daily_peak, loads))\n",
    "dict-of-futures": ("by_day = {day: load.remote(day) for day in p.days}\n"
                        "tops = {day: daily_peak.remote(f) for day, f in by_day.items()}\n"
                        "peaks = [hpc.get(tops[day]) for day in p.days]\n"),
}


# Each typical mistake and shortcut: (cell, setup, mistake, what the message must say).
TABLE_NOT_YET = {
    "starter-gets-between-steps": (STARTER, "", "driver-between-steps",
                                   "your cell waited in the notebook between the steps: get() of 1 future at cell "
                                   "line 2, before every daily_peak task was submitted"),
    "gets-all-loads-then-passes-futures": (
        "days = [load.remote(day) for day in range(6)]\nhpc.get(days)\n"
        "peaks = hpc.get([daily_peak.remote(d) for d in days])\n", "", "driver-between-steps",
        "get() of 6 futures at cell line 3"),
    "map-got-between-the-maps": (
        "loads = hpc.map(load, p.days)\nhpc.get(loads)\npeaks = hpc.get(hpc.map(daily_peak, loads))\n", "",
        "driver-between-steps", "get() of 6 futures at cell line 3"),
    "ray-directly": (
        "import ray\n\n@ray.remote\ndef ray_load(day):\n    rng = random.Random(day)\n"
        "    return [rng.gauss(20.0, 5.0) for _ in range(50_000)]\n\n@ray.remote\ndef ray_peak(readings):\n"
        "    return max(readings)\n\nrefs = [ray_peak.remote(ray_load.remote(day)) for day in range(6)]\n"
        "peaks = ray.get(refs)\n", "", "ray-direct",
        "the runtime ran no task in this cell, so its trace is empty"),
    "computed-in-the-notebook": ("peaks = [max(load(day)) for day in range(6)]\n", "", "local",
                                 "no task ran in this cell"),
    "decoy-beside-the-driver": (
        "hpc.get([daily_peak.remote(load.remote(0)) for day in range(6)])\n"
        "peaks = [max(load(day)) for day in range(6)]\n", "", "not-from-tasks",
        "`peaks` was not computed from the tasks' results: 1 of its 6 values are among what the 6 daily_peak "
        "tasks returned"),
    "typed-by-hand-beside-a-decoy": (
        "hpc.get([daily_peak.remote(load.remote(day)) for day in range(6)])\n"
        "peaks = [round(p, 2) for p in PEAKS]\n", f"PEAKS = {expected_peaks()!r}\n", "results",
        "`peaks` is not the 6 days' peaks in day order"),
    "copied-from-an-earlier-cell": (
        "hpc.get([daily_peak.remote(load.remote(day)) for day in range(6)])\npeaks = earlier\n",
        "earlier = hpc.get([daily_peak.remote(load.remote(day)) for day in range(6)])\n", "earlier-cell",
        "`peaks` is the very list an earlier cell left in `earlier`"),
    "readings-made-in-the-notebook": (
        "days = [load.remote(day) for day in range(6)]\n"
        "peaks = hpc.get([daily_peak.remote(load(day)) for day in range(6)])\n", "", "values-not-futures",
        "only 0 of the 6 daily_peak tasks were passed a load future"),
    "peaks-passed-in": (
        "@hpc.remote\ndef daily_peak(readings, answer):\n    return answer\n\n"
        "peaks = hpc.get([daily_peak.remote(load.remote(day), max(load(day))) for day in p.days])\n", "", "given",
        "6 of the 6 values in `peaks` are numbers the notebook had sent the daily_peak tasks"),
    "too-few-days": ("peaks = hpc.get([daily_peak.remote(load.remote(day)) for day in range(3)])\n", "", "local",
                     "3 of the 6 days ran as load tasks"),
}



def _reference() -> None:
    v = check(REFERENCE)
    text = v.to_text()
    assert v.passed, text
    assert text.splitlines()[0] == "exercise ray-backend: passed"
    assert "the 6 load and 6 daily_peak tasks ran through the runtime on the Ray engine" in text
    assert "each of the 6 daily_peak tasks was passed its load future" in text
    assert "`peaks` is the 6 values the daily_peak tasks returned, in day order" in text
    assert text.splitlines()[-1] == "  " + problems.SECOND_CASE, text  # and on the hidden case
    trace = hpc.last_trace()
    assert trace.meta["backend"] == "ray" and chained(trace, "daily_peak", "load") == 6


def _starter_counts_its_waits() -> None:
    v = check(STARTER)
    assert "6 waits like it in all" in v.to_text(), v.to_text()
    assert "days = [load.remote(day) for day in p.days]" in hint_code(v)


def test_the_table_of_cells_on_one_ray_instance():
    hpc.init(backend="ray", workers=2, log_to_driver=False)  # the lesson's own start
    wrong: list[str] = []

    def row(name: str, run) -> None:
        try:
            run()
        except AssertionError as exc:  # keep going: one Ray start serves every row, and all are reported
            wrong.append(f"{name}: {exc}")

    row("reference", _reference)
    for name, body in TABLE_PASS.items():
        def honest(body=body):
            v = check(body)
            assert v.passed and "was passed its load future" in v.to_text(), v.to_text()
        row(name, honest)
    for name, (body, setup, mistake, message) in TABLE_NOT_YET.items():
        row(name, lambda body=body, setup=setup, mistake=mistake, message=message:
            not_yet(check(body, setup), mistake, message))
    row("starter-counts-its-waits", _starter_counts_its_waits)
    assert not wrong, "\n\n".join(wrong)


def test_on_the_local_pool_names_the_engine():
    hpc.init(workers=2)
    v = check(REFERENCE)
    text = not_yet(v, "wrong-engine", "your cell's 12 tasks ran on the local engine, not on Ray")
    assert 'hpc.init(backend="ray"' in hint_code(v)
    assert "12 tasks" in text
