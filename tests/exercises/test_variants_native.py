"""The engine exercises own their problem, and a passing cell is run again on a hidden case.

``dask-scatter`` (Dask's own client), ``ray-wait`` (Ray's own API), ``dask-cluster`` (``hpc``
connected to a Dask cluster) and ``ray-backend`` (``hpc`` on Ray), through the real
``%%eugo --exercise`` magic on a real engine: the reference passes and says it was checked on a
second case; a cell that types in the lesson's answer or inputs does not carry over, and its
message holds nothing of the hidden case; honest solutions unlike the reference pass; the
mistakes the exercise names are still named. The second run of a cell in an engine's own API is
recorded from the engine by a recording of its own (``run_quietly(native_api=True)``): it sees its
own tasks, none of the first run's. The hidden case's seed is fixed here (``problems.draw_seed``).
"""

from __future__ import annotations

from multiprocessing import resource_tracker
from typing import Any

import pytest
from _exercise_cells import not_yet_for, run_exercise, shell
from _variants import carried_over, hidden, lesson, never_shown, passed_twice

from eugo_lab import hpc
from eugo_lab.cellrun import exercise as exercise_cell
from eugo_lab.exercises import measure, problems

pytestmark = pytest.mark.usefixtures("hidden_seed")  # every hidden case here is made from _variants.SEED


@pytest.fixture
def second_runs(monkeypatch) -> list[tuple[BaseException | None, Any]]:
    """``(error, trace)`` of every hidden run the magic makes while the test runs (the runner's own, passed on)."""
    seen: list[tuple[BaseException | None, Any]] = []
    real = exercise_cell.run_quietly

    def keep(*args: Any, **kwargs: Any) -> tuple[BaseException | None, Any, Any]:
        out = real(*args, **kwargs)
        seen.append(out[:2])  # the run's own record (out[2]) is not what these tests read
        return out

    monkeypatch.setattr(exercise_cell, "run_quietly", keep)
    return seen


# -- dask-scatter -----------------------------------------------------------------------------------------------
distributed = pytest.importorskip("distributed")

DASK_SETUP = """from distributed import as_completed, get_client
import numpy as np
from eugo_lab import exercises

client = get_client()
"""
# The lesson's cell as it starts (p handed out, the function), before its submissions.
ABOVE = """p = exercises.problem("dask-scatter")

def above(data, limit):
    return int((data > limit).sum())

"""
SCATTER = ABOVE + ("readings_f = client.scatter(p.readings, broadcast=True)\n"
                   "counts = client.gather([client.submit(above, readings_f, limit) for limit in p.limits])\n")


def dask_check(body: str):
    return run_exercise("dask-scatter", body, setup=DASK_SETUP, line="--no-live")  # the notebook's own cluster


def dask_hidden_values(h) -> list:
    """What of the hidden case a learner could recognise: its counts, limits and size."""
    counts = [int((h.readings > limit).sum()) for limit in h.limits]
    return [*counts, list(h.limits), str(h.limits), h.readings.size, f"{h.readings.size:,}"]


@pytest.fixture(scope="class")
def dask_client():
    """A LocalCluster of 2 worker processes on loopback and its client, as the lesson's first cell makes them.

    Class-scoped: closed before the Ray tests start, so the two engines never share the machine's cores.
    """
    resource_tracker.ensure_running()  # started once by a cluster of worker processes, lives with this process
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    c = distributed.Client(cluster)  # the notebook's default client
    yield c
    c.close()
    cluster.close()
    hpc.shutdown()


@pytest.mark.usefixtures("dask_client")
class TestDaskScatter:
    """dask-scatter on the notebook's own Dask cluster."""

    def test_reference_passes_on_both_cases_each_run_recorded_alone(self, second_runs):
        p, h = lesson("dask-scatter"), hidden("dask-scatter")
        assert len(h.limits) != len(p.limits) and h.readings.size < p.readings.size
        text = passed_twice(dask_check(SCATTER))
        assert "all 6 above tasks read the one scattered copy of the array on their workers" in text
        # The hidden run's recording holds its own tasks and scatter, none of the first run's.
        [(error, trace)] = second_runs
        assert error is None
        assert measure.tasks(trace, "above") == len(h.limits)
        assert len(trace.puts["ref"]) == 1
        first = hpc.last_trace()  # still the first run's
        assert measure.tasks(first, "above") == len(p.limits)
        # Its one scatter sent the hidden case's array (a few MB), not the lesson's 16 MB again.
        assert int(trace.puts["bytes"][0]) == pytest.approx(h.readings.nbytes, rel=0.01)
        assert int(first.puts["bytes"][0]) == pytest.approx(p.readings.nbytes, rel=0.01)
        # Afterwards the namespace is the first run's: the lesson's counts, its scattered future.
        ns = shell().user_ns
        assert ns["p"] is problems.problem("dask-scatter")
        assert ns["counts"] == [int((p.readings > limit).sum()) for limit in p.limits]
        assert ns["readings_f"].result().size == p.readings.size

    def test_typed_counts_do_not_carry_over(self):
        p, h = lesson("dask-scatter"), hidden("dask-scatter")
        typed = [int((p.readings > limit).sum()) for limit in p.limits]
        cell = ABOVE + ("readings_f = client.scatter(p.readings)\n"
                        "client.gather([client.submit(above, readings_f, limit) for limit in p.limits])\n"
                        f"counts = {typed}\n")
        never_shown(carried_over(dask_check(cell)), *dask_hidden_values(h))

    def test_the_lesson_s_own_array_and_limits_do_not_carry_over(self):
        h = hidden("dask-scatter")
        cell = ABOVE + ("readings = np.random.default_rng(7).normal(20.0, 5.0, 2_000_000)\n"
                        "limits = [10, 15, 20, 25, 30, 35]\n"
                        "readings_f = client.scatter(readings, broadcast=True)\n"
                        "counts = client.gather([client.submit(above, readings_f, limit) for limit in limits])\n")
        never_shown(carried_over(dask_check(cell)), *dask_hidden_values(h))

    HONEST = {
        # a list scattered, the future by keyword, results taken as they finish and put back in order
        "list-scatter-as-completed": ABOVE + (
            "[stored] = client.scatter([p.readings])\n"
            "futs = {client.submit(above, limit=limit, data=stored): i for i, limit in enumerate(p.limits)}\n"
            "counts = [None] * len(p.limits)\n"
            "for fut in as_completed(futs):\n"
            "    counts[futs[fut]] = fut.result()\n"),
        # client.map with the future repeated, the inputs taken into names of the cell's own first
        "map-own-names": ABOVE + (
            "data, cutoffs = p.readings, list(p.limits)\n"
            "shared = client.scatter(data)\n"
            "counts = client.gather(client.map(above, [shared] * len(cutoffs), cutoffs))\n"),
    }

    @pytest.mark.parametrize("cell", list(HONEST.values()), ids=list(HONEST))
    def test_honest_cells_unlike_the_reference_pass_on_both_cases(self, cell):
        passed_twice(dask_check(cell))

    NOT_YET = {
        "starter-by-value": (ABOVE + "counts = client.gather([client.submit(above, p.readings, limit) "
                                     "for limit in p.limits])\n",
                             "by-value", "the 16 MB array went by value with every task"),
        # p read as a global by the function: Dask pickles p, its array with it, into every task
        "p-read-as-a-global": ('p = exercises.problem("dask-scatter")\n\n'
                               "def above(limit):\n    return int((p.readings > limit).sum())\n\n"
                               "counts = client.gather([client.submit(above, limit) for limit in p.limits])\n",
                               "captured", "it carried the array (`p`"),
        "scatter-per-task": (ABOVE + "counts = client.gather([client.submit(above, client.scatter(p.readings), "
                                     "limit) for limit in p.limits])\n",
                             "scatter-per-task", "the cell called scatter 6 times"),
        "counts-in-another-order": (SCATTER + "counts = counts[::-1]\n", "results",
                                    "`counts` is not the 6 counts of readings above each limit, in the order of "
                                    "p.limits"),
    }

    @pytest.mark.parametrize("row", list(NOT_YET.values()), ids=list(NOT_YET))
    def test_mistakes_are_still_named_on_the_lesson_s_case(self, row, second_runs):
        body, mistake, message = row
        text = not_yet_for(dask_check(body), mistake, message)
        never_shown(text, *dask_hidden_values(hidden("dask-scatter")))
        assert second_runs == []  # a cell that did not pass the lesson's case is not run again


# -- ray-wait ---------------------------------------------------------------------------------------------------
RAY_SETUP = """import time
import numpy as np
import ray
from eugo_lab import exercises
"""
# The lesson's cell as it starts (p handed out, the task, every tile submitted), before the results are taken.
RENDER = """p = exercises.problem("ray-wait")

@ray.remote
def render(tile, ms):
    time.sleep(ms / 1000)
    return int(np.random.default_rng(tile).integers(0, 256, 10_000).sum())

"""
SUBMIT = "refs = [render.remote(tile, ms) for tile, ms in zip(p.tiles, p.ms)]\nshown = []\n"
WAIT_LOOP = SUBMIT + "while refs:\n    ready, refs = ray.wait(refs)\n    shown.append(ray.get(ready[0]))\n"


def ray_check(body: str):
    return run_exercise("ray-wait", body, setup=RAY_SETUP, line="--no-live")


def ray_hidden_values(h) -> list:
    """What of the hidden case a learner could recognise: its tiles, their values and times, how many."""
    from eugo_lab.exercises.catalog.ray_native import expected_values

    return [*expected_values(h), list(h.tiles), str(h.tiles), str(h.ms), f"{len(h.tiles)} tiles",
            f"{len(h.tiles)} render"]


@pytest.fixture(scope="class")
def live_ray():
    """A local Ray of 2 CPUs on loopback, started the way the runtime's Ray engine starts one."""
    import os

    ray = pytest.importorskip("ray")
    from eugo_lab.backends.ray import _single_node_mode

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "60")  # a busy machine's metrics agent is slow
    with _single_node_mode():
        ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
                 logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.usefixtures("live_ray")
class TestRayWait:
    """ray-wait on a live local Ray, through the magic."""

    def test_reference_passes_on_both_cases_each_run_recorded_alone(self, second_runs):
        p, h = lesson("ray-wait"), hidden("ray-wait")
        assert len(h.tiles) < len(p.tiles) and set(h.tiles).isdisjoint(p.tiles)
        text = passed_twice(ray_check(RENDER + WAIT_LOOP))
        assert "`shown` holds the 6 values the tasks returned" in text
        # The hidden run's recording holds its own tasks and waits, none of the first run's.
        [(error, trace)] = second_runs
        assert error is None
        assert measure.tasks(trace, "render") == len(h.tiles)
        assert sum(int(r) for _, _, r in trace.meta["wait_calls"]) == len(h.tiles)
        first = hpc.last_trace()  # still the first run's
        assert measure.tasks(first, "render") == len(p.tiles)
        assert len(first.meta["wait_calls"]) == len(p.tiles)
        ns = shell().user_ns  # afterwards the namespace is the first run's
        assert ns["p"] is problems.problem("ray-wait")
        from eugo_lab.exercises.catalog.ray_native import expected_values

        assert sorted(ns["shown"]) == sorted(expected_values(p))

    def test_a_typed_count_of_tiles_does_not_carry_over(self):
        h = hidden("ray-wait")
        cell = RENDER + SUBMIT + ("for _ in range(6):\n    ready, refs = ray.wait(refs)\n"
                                  "    shown.append(ray.get(ready[0]))\n")
        text = carried_over(ray_check(cell))
        never_shown(text, *ray_hidden_values(h))

    def test_the_lesson_s_tiles_typed_in_do_not_carry_over(self):
        h = hidden("ray-wait")
        cell = RENDER + ("refs = [render.remote(tile, 800 if tile == 0 else 100) for tile in range(6)]\nshown = []\n"
                         "while refs:\n    ready, refs = ray.wait(refs)\n    shown.append(ray.get(ready[0]))\n")
        never_shown(carried_over(ray_check(cell)), *ray_hidden_values(h))

    HONEST = {
        # num_returns=1 by name, values taken with ray.get of the ready list, a dict back to the tile
        "num-returns-one-by-tile": RENDER + (
            "tile_of = {render.remote(t, ms): t for t, ms in zip(p.tiles, p.ms)}\n"
            "pending = list(tile_of)\nshown = []\n"
            "while pending:\n"
            "    done, pending = ray.wait(pending, num_returns=1)\n"
            "    shown.extend(ray.get(done))\n"),
        # polling with a timeout: a wait may come back with nothing ready, and the loop asks again
        "timeout-loop": RENDER + SUBMIT + (
            "while refs:\n"
            "    ready, refs = ray.wait(refs, num_returns=1, timeout=0.05)\n"
            "    for ref in ready:\n"
            "        shown.append(ray.get(ref))\n"),
    }

    @pytest.mark.parametrize("cell", list(HONEST.values()), ids=list(HONEST))
    def test_honest_cells_unlike_the_reference_pass_on_both_cases(self, cell):
        passed_twice(ray_check(cell))

    NOT_YET = {
        "starter-get-in-order": (SUBMIT + "for ref in refs:\n    shown.append(ray.get(ref))\n", "get-in-order",
                                 "asking for the tiles in an order of its own"),
        "wait-for-all": (SUBMIT + "ready, refs = ray.wait(refs, num_returns=len(refs))\n"
                                  "shown.extend(ray.get(ready))\n", "wait-for-all",
                         "called ray.wait on 6 refs asking for 6 of them"),
        "one-wait-then-get-the-rest": (SUBMIT + "ready, refs = ray.wait(refs)\n"
                                                "shown.extend(ray.get(ready) + ray.get(refs))\n",
                                       "wait-then-get-all", "reported 1 of the 6 tiles ready between them"),
    }

    @pytest.mark.parametrize("row", list(NOT_YET.values()), ids=list(NOT_YET))
    def test_mistakes_are_still_named_on_the_lesson_s_case(self, row, second_runs):
        body, mistake, message = row
        text = not_yet_for(ray_check(RENDER + body), mistake, message)
        never_shown(text, *ray_hidden_values(hidden("ray-wait")))
        assert second_runs == []  # a cell that did not pass the lesson's case is not run again


# -- dask-cluster -----------------------------------------------------------------------------------------------
# The lesson's `cluster` (its scheduler's address is what the check compares) and p, as the lesson's cells have them.
CLUSTER_SETUP = """import types
import numpy as np
from eugo_lab import exercises, hpc

cluster = types.SimpleNamespace(scheduler_address={address!r})
p = exercises.problem("dask-cluster")
"""
TAKES_TABLE = """
@hpc.remote
def channel_mean(gains, seed):
    picks = np.random.default_rng(seed).integers(0, len(gains), 1_000)
    return float(gains[picks].mean())

"""
STORED = ("gains_ref = hpc.put(p.gains)\n" + TAKES_TABLE
          + "result = hpc.get([channel_mean.remote(gains_ref, seed) for seed in p.seeds])\n")


def cluster_check(address: str, body: str):
    hpc.init(backend="dask", address=address)  # the lesson's connecting cell; the test's teardown shuts it down
    return run_exercise("dask-cluster", body, setup=CLUSTER_SETUP.format(address=address), line="--no-live")


def cluster_hidden_values(h) -> list:
    """What of the hidden case a learner could recognise: its means, seeds and table size."""
    from eugo_lab.exercises.catalog.clusters import reference_result

    means = reference_result(h)
    return [*means, *(f"{m:.6g}" for m in means), list(h.seeds), h.gains.size, f"{h.gains.size:,}"]


@pytest.fixture(scope="class")
def scheduler():
    """A ``dask scheduler`` and two ``dask worker`` processes on loopback (the tests' own helper); its address."""
    from _clusters import dask_cli_cluster

    with dask_cli_cluster(n_workers=2) as c:
        try:
            yield c.address
        finally:
            hpc.shutdown()


class TestDaskCluster:
    """dask-cluster (an hpc exercise) on a Dask cluster the runtime connects to, as lesson 09 does."""

    def test_reference_passes_on_both_cases_each_run_traced_alone(self, scheduler, second_runs):
        p, h = lesson("dask-cluster"), hidden("dask-cluster")
        assert len(h.seeds) < len(p.seeds) and h.gains.size < p.gains.size
        text = passed_twice(cluster_check(scheduler, STORED))
        assert "the 12 channel_mean tasks ran on the Dask cluster in `cluster`" in text
        [(error, trace)] = second_runs
        assert error is None
        assert measure.tasks(trace, "channel_mean") == len(h.seeds)
        assert len(trace.puts["ref"]) == 1
        assert measure.tasks(hpc.last_trace(), "channel_mean") == len(p.seeds)  # still the first run's

    def test_the_lesson_s_own_table_and_seeds_do_not_carry_over(self, scheduler):
        h = hidden("dask-cluster")
        cell = ("table = np.random.default_rng(1).normal(1.0, 0.01, 1_000_000)\ngains_ref = hpc.put(table)\n"
                + TAKES_TABLE + "result = hpc.get([channel_mean.remote(gains_ref, seed) for seed in range(12)])\n")
        never_shown(carried_over(cluster_check(scheduler, cell)), *cluster_hidden_values(h))

    def test_typed_seeds_do_not_carry_over(self, scheduler):
        h = hidden("dask-cluster")
        cell = STORED.replace("for seed in p.seeds", f"for seed in {list(lesson('dask-cluster').seeds)}")
        never_shown(carried_over(cluster_check(scheduler, cell)), *cluster_hidden_values(h))

    HONEST = {
        # a helper that submits and gathers, the table by keyword
        "helper-keyword": TAKES_TABLE + (
            "def all_means(ref, seeds):\n"
            "    return hpc.get([channel_mean.remote(seed=s, gains=ref) for s in seeds])\n\n"
            "result = all_means(hpc.put(p.gains), p.seeds)\n"),
        # the table bound to a name of the cell's own first, the futures built in a loop
        "own-names-loop": "table = p.gains\nshared = hpc.put(table)\n" + TAKES_TABLE + (
            "futures = []\nfor s in p.seeds:\n    futures.append(channel_mean.remote(shared, s))\n"
            "result = [f.result() for f in futures]\n"),
    }

    @pytest.mark.parametrize("cell", list(HONEST.values()), ids=list(HONEST))
    def test_honest_cells_unlike_the_reference_pass_on_both_cases(self, scheduler, cell):
        passed_twice(cluster_check(scheduler, cell))

    NOT_YET = {
        "starter-table-in-the-function": (
            "gains = p.gains\n\n@hpc.remote\ndef channel_mean(seed):\n"
            "    picks = np.random.default_rng(seed).integers(0, len(gains), 1_000)\n"
            "    return float(gains[picks].mean())\n\n"
            "result = hpc.get([channel_mean.remote(seed) for seed in p.seeds])\n",
            "captured", "it carried the 8 MB table of gains (`gains`), a global it reads"),
        "table-by-value": (TAKES_TABLE + "result = hpc.get([channel_mean.remote(p.gains, s) for s in p.seeds])\n",
                           "by-value", "the 8 MB table went by value with every task"),
    }

    @pytest.mark.parametrize("row", list(NOT_YET.values()), ids=list(NOT_YET))
    def test_mistakes_are_still_named_on_the_lesson_s_case(self, scheduler, row, second_runs):
        body, mistake, message = row
        text = not_yet_for(cluster_check(scheduler, body), mistake, message)
        never_shown(text, *cluster_hidden_values(hidden("dask-cluster")))
        assert second_runs == []  # a cell that did not pass the lesson's case is not run again


# -- ray-backend ------------------------------------------------------------------------------------------------
PIPELINE = '''import random
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
CHAINED = "days = [load.remote(day) for day in p.days]\npeaks = hpc.get([daily_peak.remote(d) for d in days])\n"
# Honest cells unlike the reference: a helper that chains the steps, and the days taken in a loop by index.
RAY_BACKEND_HONEST = {
    "helper": ("def pipeline(days):\n    return [daily_peak.remote(load.remote(d)) for d in days]\n\n"
               "peaks = hpc.get(pipeline(p.days))\n"),
    "index-loop": ("tops = []\nfor i in range(len(p.days)):\n"
                   "    tops.append(daily_peak.remote(load.remote(p.days[i])))\n"
                   "peaks = [t.result() for t in tops]\n"),
}


def ray_backend_hidden_values(h) -> list:
    """What of the hidden case a learner could recognise: its days and their peaks."""
    from eugo_lab.exercises.catalog.ray_backend import expected_peaks

    peaks = expected_peaks(h.days)
    return [list(h.days), str(h.days), *peaks, *(f"{v:.6g}" for v in peaks)]


def test_ray_backend_on_one_ray_instance(second_runs):
    """ray-backend (an hpc exercise) on the Ray the runtime starts, as lesson 10 does: every row on one start.

    Ray takes seconds to start (tens on a busy machine) and every test ends with the runtime shut down, so the
    rows share this test and each failure is reported with its row's name.
    """
    p, h = lesson("ray-backend"), hidden("ray-backend")
    assert len(h.days) < len(p.days) and set(h.days).isdisjoint(p.days)
    secret = ray_backend_hidden_values(h)
    # The lesson's own start, with a small object store as the other live Ray tests here: quicker to set up.
    hpc.init(backend="ray", workers=2, log_to_driver=False, object_store_memory=80 * 2**20)
    wrong: list[str] = []

    def check(body: str):
        return run_exercise("ray-backend", body, setup=PIPELINE, line="--no-live")

    def row(name: str, run) -> None:
        try:
            run()
        except AssertionError as exc:  # keep going: one Ray start serves every row, and all are reported
            wrong.append(f"{name}: {exc}")

    def reference() -> None:
        second_runs.clear()
        text = passed_twice(check(CHAINED))
        assert "`peaks` is the 6 values the daily_peak tasks returned, in day order" in text
        [(error, trace)] = second_runs
        assert error is None
        assert measure.tasks(trace, "load") == measure.tasks(trace, "daily_peak") == len(h.days)
        assert measure.tasks(hpc.last_trace(), "daily_peak") == len(p.days)  # still the first run's

    row("reference", reference)
    row("typed-days", lambda: never_shown(carried_over(check(CHAINED.replace("p.days", repr(list(p.days))))),
                                          *secret))
    row("range-of-the-lesson-s-count", lambda: never_shown(carried_over(check(CHAINED.replace(
        "p.days", "range(6)"))), *secret))
    for name, body in RAY_BACKEND_HONEST.items():
        row(name, lambda body=body: passed_twice(check(body)))

    def starter() -> None:
        second_runs.clear()
        text = not_yet_for(check("readings = [hpc.get(load.remote(day)) for day in p.days]\n"
                                 "peaks = hpc.get([daily_peak.remote(r) for r in readings])\n"),
                           "driver-between-steps", "your cell waited in the notebook between the steps")
        never_shown(text, *secret)
        assert second_runs == []  # a cell that did not pass the lesson's case is not run again

    row("starter", starter)
    row("values-not-futures", lambda: never_shown(not_yet_for(check(
        "days = [load.remote(day) for day in p.days]\n"
        "peaks = hpc.get([daily_peak.remote(load(day)) for day in p.days])\n"),
        "values-not-futures", "only 0 of the 6 daily_peak tasks were passed a load future"), *secret))
    assert not wrong, "\n\n".join(wrong)
