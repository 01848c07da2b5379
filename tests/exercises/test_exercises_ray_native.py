"""The ``ray-wait`` exercise: take results as they finish with ``ray.wait``, in Ray's own API.

The table grades traces written by :class:`~eugo_lab.native.ray_recording.RayRecording` from the
exact shape of Ray's profile events and the driver's notes (as in ``tests/native/test_native_ray.py``), so
each row is exact and needs no running Ray; a live local Ray then runs the starter, the reference
and an honest variant through ``%%eugo --exercise``.
"""

from __future__ import annotations

import pytest
from _exercise_cells import not_yet_for, passed_with, run_exercise

from eugo_lab.exercises import catalog, problems
from eugo_lab.exercises.base import Attempt
from eugo_lab.exercises.catalog.ray_native import expected_values
from eugo_lab.native import ray_recording
from eugo_lab.native.ray_recording import RayRecording

ray = pytest.importorskip("ray")

T0 = 1_000_000.0
# Tile 0 is slow: as Ray finishes them, tiles 1-5 come first and tile 0 last.
FINISH_ORDER = [1, 2, 3, 4, 5, 0]


def _events(spans: list[tuple[str, str, float, float]]) -> list[dict]:
    """``ray.timeline()`` events of each ``(task id, worker, start, end)``: the whole task holding its body."""
    out = []
    for tid, worker, start, end in spans:
        out.append({"cat": "task::render", "pid": "127.0.0.1", "tid": f"worker:{worker}", "ts": start * 1e6,
                    "dur": (end - start) * 1e6, "ph": "X", "args": {"task_id": tid}})
        out.append({"cat": "task:execute", "pid": "127.0.0.1", "tid": f"worker:{worker}", "ts": start * 1e6,
                    "dur": (end - start) * 1e6, "ph": "X", "args": {}})
    return out


def _attempt(monkeypatch, shown, waits=(), gets=(), returned=None, interleave=True, details=None,
             calls_from=0.02) -> Attempt:
    """The attempt of a cell whose six render tasks returned ``returned`` (the tiles' values unless given).

    ``details``: each wait's ``(timeout given, tiles it reported ready)``; ``calls_from``: when the cell's first
    wait or get began, in seconds after the tasks were submitted (they all end by 0.81 s).
    """
    monkeypatch.setattr(ray_recording, "_local_ip", lambda: "127.0.0.1")
    values = returned if returned is not None else expected_values()
    rec = RayRecording()
    rec._mark = rec.recorder.open_region()
    d = rec.driver
    spans = []
    for tile in range(6):
        tid = f"t{tile}"
        d.submitted[tid], d.names[tid], d.deps[tid], d.results[tid] = T0 + tile * 0.001, "render", [], values[tile]
        # tile 0 alone on one worker for 0.8 s; the others one after another on the second, 0.1 s each
        start = T0 + 0.01 + (0.1 * (tile - 1) if tile else 0.0)
        spans.append((tid, "a" if tile == 0 else "b", start, start + (0.8 if tile == 0 else 0.099)))
    d.wait_calls = list(waits)
    if details is not None:
        d.wait_details = [(timeout, [f"t{tile}" for tile in tiles]) for timeout, tiles in details]
    calls = [("wait", g) for g, _, _ in waits]
    if interleave:  # a get of the ready refs after each wait that returned some, as a wait loop does
        calls = [c for (g, _, r) in waits for c in [("wait", g), *([("get", r)] if r else [])]]
    for i, (kind, n) in enumerate([*calls, *gets]):
        d.blocks.append((kind, T0 + calls_from + i * 0.1, T0 + calls_from + 0.03 + i * 0.1, n,
                         "/tmp/ipykernel_1/3.py:9"))
    trace = rec._write(ray_recording._spans(_events(spans), set(d.submitted)), 2, {})
    trace.meta.update(region_start=T0, region_end=T0 + 1.0)
    return Attempt("ray-wait", trace, {"shown": shown}, assigned=frozenset({"shown"}))


def _grade(attempt: Attempt):
    from eugo_lab.exercises.base import grade

    verdict = grade(catalog.get("ray-wait"), attempt)
    assert verdict.checker_error is None, verdict.to_text()
    return verdict


IN_FINISH_ORDER = [expected_values()[t] for t in FINISH_ORDER]
ONE_BY_ONE = [(6 - i, 1, 1) for i in range(6)]

PASS = {
    "one-at-a-time": (ONE_BY_ONE, ()),
    "two-at-a-time": ([(6, 2, 2), (4, 2, 2), (2, 2, 2)], ()),
    "polling-with-a-timeout": ([(6, 1, 0), (6, 1, 1), (5, 1, 1), (4, 1, 0), (4, 1, 1), (3, 1, 1), (2, 1, 1),
                                (1, 1, 1)], ()),
}


def test_registered_as_a_native_exercise_of_its_lesson():
    ex = catalog.get("ray-wait")
    assert ex.lesson == "01-distributed-python/11-the-engines-own-api.ipynb" and ex.native_api
    assert not catalog.get("ray-backend").native_api


@pytest.mark.parametrize("row", list(PASS.values()), ids=list(PASS))
def test_honest_ways_pass(monkeypatch, row):
    waits, gets = row
    passed_with(_grade(_attempt(monkeypatch, IN_FINISH_ORDER, waits, gets)),
                "those waits reported all 6 tiles ready between them")


NOT_YET = {
    "starter-get-in-a-loop": (dict(gets=[("get", 1)] * 6), "get-in-order",
                              "with 6 ray.gets of one ref each, asking for the tiles in an order of its own"),
    "one-get-of-all": (dict(gets=[("get", 6)]), "get-in-order", "with ray.get on many refs at once"),
    "wait-for-all": (dict(waits=[(6, 6, 6)]), "wait-for-all", "called ray.wait on 6 refs asking for 6 of them"),
    "one-then-wait-for-the-rest": (dict(waits=[(6, 1, 1), (5, 5, 5)]), "wait-for-all",
                                   "called ray.wait on 5 refs asking for 5 of them"),
    "all-waits-then-one-get": (dict(waits=ONE_BY_ONE, gets=[("get", 6)], interleave=False), "wait-then-get-all",
                               "but took their values only after the last wait"),
    "one-wait-then-get-the-rest": (dict(waits=[(6, 1, 1)], gets=[("get", 5)]), "wait-then-get-all",
                                   "reported 1 of the 6 tiles ready between them"),
}


@pytest.mark.parametrize("row", list(NOT_YET.values()), ids=list(NOT_YET))
def test_shortcuts_are_named(monkeypatch, row):
    kwargs, mistake, message = row
    text = not_yet_for(_grade(_attempt(monkeypatch, IN_FINISH_ORDER, **kwargs)), mistake, message)
    assert str(expected_values()[0]) not in text  # a not yet never contains the answer


def test_values_computed_in_the_notebook_beside_decoy_tasks(monkeypatch):
    attempt = _attempt(monkeypatch, IN_FINISH_ORDER, ONE_BY_ONE, returned=[7] * 6)
    not_yet_for(_grade(attempt), "decoy", "the graded value must be what this cell's tasks returned")


def test_values_worked_out_here_and_handed_in_to_render(monkeypatch):
    """Each render task was sent its tile's value and returned it: the tasks did not compute what `shown` holds."""
    from eugo_lab.contract.given import Given

    attempt = _attempt(monkeypatch, IN_FINISH_ORDER, ONE_BY_ONE)
    sent = Given()
    for tile, value in enumerate(expected_values()):
        sent.add("render", [tile, 100, value])
    attempt.given = sent
    not_yet_for(_grade(attempt), "given",
                "6 of the 6 values in `shown` are numbers the notebook had sent the render tasks")
    honest = Given()
    for tile in range(6):
        honest.add("render", [tile, 800 if tile == 0 else 100])  # the tile and its time only
    attempt.given = honest
    assert _grade(attempt).passed


def test_waits_on_other_refs_do_not_count_as_tiles_taken(monkeypatch):
    """A ray.wait loop over padding tasks, the tiles then taken by ray.get: the waits reported no tile ready."""
    padding = [(False, [])] * 6
    attempt = _attempt(monkeypatch, IN_FINISH_ORDER, ONE_BY_ONE, gets=[("get", 1)] * 6, details=padding)
    not_yet_for(_grade(attempt), "wait-then-get-all", "reported 0 of the 6 tiles ready between them")


def test_a_wait_for_all_with_a_timeout_is_a_poll(monkeypatch):
    """ray.wait(pending, num_returns=len(pending), timeout=...) returns when the time runs out: taken as they finish."""
    polls = [(6, 6, 1), (5, 5, 0), (5, 5, 5)]
    details = [(True, [1]), (True, []), (True, [2, 3, 4, 5, 0])]
    assert _grade(_attempt(monkeypatch, IN_FINISH_ORDER, polls, details=details)).passed
    no_timeout = [(False, tiles) for _, tiles in details]
    not_yet_for(_grade(_attempt(monkeypatch, IN_FINISH_ORDER, polls, details=no_timeout)), "wait-for-all",
                "asking for 6 of them at once, with no timeout")


def test_a_wait_loop_begun_after_every_tile_finished_takes_none_as_it_finishes(monkeypatch):
    """A sleep until all tiles are done, then a ray.wait loop: the loop is right, but nothing was left to take."""
    details = [(False, [t]) for t in FINISH_ORDER]
    late = _attempt(monkeypatch, IN_FINISH_ORDER, ONE_BY_ONE, details=details, calls_from=1.5)
    not_yet_for(_grade(late), "waited-first", "every one of the 6 tiles had finished before the cell's first ray.wait")
    assert _grade(_attempt(monkeypatch, IN_FINISH_ORDER, ONE_BY_ONE, details=details)).passed


def test_a_tile_missing(monkeypatch):
    not_yet_for(_grade(_attempt(monkeypatch, IN_FINISH_ORDER[:5], ONE_BY_ONE)), "results",
                "`shown` does not hold the values of the 6 tiles, each once")


def test_a_cell_through_hpc(monkeypatch):
    attempt = _attempt(monkeypatch, IN_FINISH_ORDER, ONE_BY_ONE)
    attempt.trace.meta["api"] = None  # what the runtime's own trace of an hpc cell on Ray says: no native API
    not_yet_for(_grade(attempt), "not-native", "ran through eugo_lab.hpc, not Ray's own API")


# -- a live local Ray, through the magic ------------------------------------------------------------------
# The inputs come from the checker (p.tiles, and p.ms: tile 0 is the slow one); a passing cell is run again on a
# hidden case.
RENDER = """
p = exercises.problem("ray-wait")

@ray.remote
def render(tile, ms):
    time.sleep(ms / 1000)
    return int(np.random.default_rng(tile).integers(0, 256, 10_000).sum())

refs = [render.remote(tile, ms) for tile, ms in zip(p.tiles, p.ms)]
shown = []
"""
LIVE = {
    "starter": (RENDER + "for ref in refs:\n    shown.append(ray.get(ref))\n", "get-in-order"),
    "reference": (RENDER + "while refs:\n    ready, refs = ray.wait(refs)\n    shown.append(ray.get(ready[0]))\n",
                  None),
    "two-at-a-time": (RENDER + "while refs:\n    ready, refs = ray.wait(refs, num_returns=min(2, len(refs)))\n"
                      "    shown.extend(ray.get(ready))\n", None),
}


@pytest.fixture(scope="module")
def live_ray():
    """A local Ray of 2 CPUs on loopback, started the way the runtime's Ray engine starts one."""
    import os

    from eugo_lab.backends.ray import _single_node_mode

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "60")  # a busy machine's metrics agent is slow
    with _single_node_mode():
        ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
                 logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("row", list(LIVE.values()), ids=list(LIVE))
def test_live_ray(live_ray, row):
    body, mistake = row
    verdict = run_exercise("ray-wait", body, setup="import time\nimport numpy as np\nimport ray\n"
                           "from eugo_lab import exercises\n", line="--no-live")
    if mistake is None:
        text = passed_with(verdict, "`shown` holds the 6 values the tasks returned")
        assert text.splitlines()[-1] == "  " + problems.SECOND_CASE, text  # and on the hidden case
    else:
        not_yet_for(verdict, mistake, "The cell never called ray.wait")
