"""The ``dask-scatter`` exercise on a real LocalCluster of worker processes (loopback): scatter once, in Dask's API.

Each shortcut is a row with the message it must get; each honest variant passes. The verdicts rest
on what the recording took from Dask (bytes per task, scatters, the keys each worker's task read,
the values the driver received), never on timing.
"""

from __future__ import annotations

from multiprocessing import resource_tracker

import pytest
from _exercise_cells import not_yet_for, passed_with, run_exercise

from eugo_lab import hpc
from eugo_lab.exercises import catalog, problems
from eugo_lab.exercises.catalog.dask_native import expected_counts

distributed = pytest.importorskip("distributed")

# The inputs come from the checker (p: 16 MB of readings and six limits); a passing cell is run again on a hidden case.
ARRAY = """import numpy as np

p = exercises.problem("dask-scatter")
readings, limits = p.readings, list(p.limits)

def above(data, limit):
    return int((data > limit).sum())
"""
STARTER = ARRAY + "counts = client.gather([client.submit(above, readings, limit) for limit in limits])\n"
REFERENCE = ARRAY + ("readings_f = client.scatter(readings, broadcast=True)\n"
                     "counts = client.gather([client.submit(above, readings_f, limit) for limit in limits])\n")
LINE = "--no-live"  # no -w: the notebook's own cluster runs the cell as it is


@pytest.fixture(scope="module", autouse=True)
def _resource_tracker():
    resource_tracker.ensure_running()  # started once by a cluster of worker processes, lives with this process


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    c = distributed.Client(cluster)  # the notebook's default client, as the lesson's setup cell makes it
    yield c
    c.close()
    cluster.close()
    hpc.shutdown()


def check(body: str):
    return run_exercise("dask-scatter", body, setup="from distributed import Client, as_completed, get_client\n"
                        "from eugo_lab import exercises\nclient = get_client()\n", line=LINE)


def test_registered_as_a_native_exercise_of_its_lesson():
    ex = catalog.get("dask-scatter")
    assert ex.lesson == "01-distributed-python/11-the-engines-own-api.ipynb" and ex.native_api
    assert not catalog.get("dask-cluster").native_api  # the hpc exercises stay graded on the runtime's run


PASS = {
    "reference": REFERENCE,
    # client.map over the limits, the scattered future repeated; no broadcast
    "map-without-broadcast": ARRAY + ("readings_f = client.scatter(readings)\n"
                                      "counts = client.gather(client.map(above, [readings_f] * len(limits), "
                                      "limits))\n"),
    # a function of the cell's own name and signature, client.map with the future as a keyword, then wait
    "renamed-function-map-keyword": ARRAY + ("from distributed import wait\n\n"
                                             "def count_above(limit, data=None):\n"
                                             "    return int((data > limit).sum())\n\n"
                                             "data = client.scatter(readings)\n"
                                             "futs = client.map(count_above, limits, data=data)\n"
                                             "wait(futs)\ncounts = [f.result() for f in futs]\n"),
    # results taken as they finish, put back in the order of the limits
    "as-completed": ARRAY + ("readings_f = client.scatter(readings)\n"
                             "futs = {client.submit(above, readings_f, limit): i for i, limit in enumerate(limits)}\n"
                             "counts = [0] * len(limits)\n"
                             "for fut in as_completed(futs):\n"
                             "    counts[futs[fut]] = fut.result()\n"),
    # the checker's import written in the cell itself: still a cell in Dask's API (it names no hpc)
    "import-in-the-cell": "from eugo_lab import exercises\n" + REFERENCE,
    # a list scattered, the future by keyword, each result() after all were submitted, a helper doing the work
    "list-keyword-helper": ARRAY + ("def count_above(limit, data):\n"
                                    "    return above(data, limit)\n\n"
                                    "[stored] = client.scatter([readings])\n"
                                    "futs = [client.submit(count_above, limit, data=stored) for limit in limits]\n"
                                    "counts = [f.result() for f in futs]\n"),
}


@pytest.mark.parametrize("body", list(PASS.values()), ids=list(PASS))
def test_passes(client, body):
    if "count_above" in body:  # the helper's name is the tasks' function
        body = body.replace("def above(", "def _above(").replace("return above(", "return _above(")
        body = body.replace("def count_above(", "def above(").replace("count_above, ", "above, ")
    verdict = check(body)
    text = passed_with(verdict, "all 6 above tasks read the one scattered copy of the array on their workers "
                       "(1 client.scatter)")
    assert text.splitlines()[-1] == "  " + problems.SECOND_CASE, text  # and on the hidden case
    assert "`counts` is the 6 values those tasks returned, in the order of the limits" in text


REBUILT = """import numpy as np

def above(limit):
    data = np.random.default_rng(7).normal(20.0, 5.0, 2_000_000)
    return int((data > limit).sum())

limits = [10, 15, 20, 25, 30, 35]
"""
NOT_YET = {
    "starter-by-value": (STARTER, "by-value", "the 16 MB array went by value with every task"),
    "global-in-the-function": (ARRAY.replace("def above(data, limit):\n    return int((data > limit).sum())",
                                             "def above(limit):\n    return int((readings > limit).sum())")
                               + "counts = client.gather([client.submit(above, limit) for limit in limits])\n",
                               "captured", "it carried the array (`readings`), a global it reads"),
    "right-counts-in-the-notebook": (ARRAY + "readings_f = client.scatter(readings)\n"
                                     "decoy = client.gather([client.submit(above, readings_f, -limit)\n"
                                     "                       for limit in limits])\n"
                                     "counts = [int((readings > limit).sum()) for limit in limits]\n",
                                     "decoy", "0 of its 6 values are among what the 6 above tasks returned"),
    "scatter-per-task": (ARRAY + "counts = client.gather([client.submit(above, client.scatter(readings), limit) "
                         "for limit in limits])\n", "scatter-per-task", "the cell called scatter 6 times"),
    "rebuilt-in-every-task": (REBUILT + "counts = client.gather([client.submit(above, limit) for limit in limits])\n",
                              "no-scatter", "the cell never called scatter"),
    "scattered-but-never-passed": (REBUILT + "readings_f = client.scatter(np.ones(10))\n"
                                   "counts = client.gather([client.submit(above, limit) for limit in limits])\n",
                                   "scatter-unused", "but 0 of the 6 above tasks read the scattered copy"),
    "counts-in-another-order": (REFERENCE + "counts = counts[::-1]\n", "results",
                                "`counts` is not the 6 counts of readings above each limit"),
    "half-of-the-tasks": (ARRAY + "readings_f = client.scatter(readings)\n"
                          "half = client.gather([client.submit(above, readings_f, limit) for limit in limits[:3]])\n"
                          "counts = half + [int((readings > limit).sum()) for limit in limits[3:]]\n",
                          "local", "only 3 of the 6 above calls ran as Dask tasks"),
    "by-value-in-a-wrapper-that-says-it-is-small": (
        ARRAY + "class Small:\n    def __init__(self, a):\n        self.a = a\n\n    def __sizeof__(self):\n"
        "        return 64\n\ndef above(box, limit):\n    return int((box.a > limit).sum())\n\n"
        "decoy = client.scatter(readings, broadcast=True)\n"
        "counts = client.gather([client.submit(above, Small(readings), limit) for limit in limits])\n",
        "by-value", "the 16 MB array went by value with every task"),
    "answers-passed-in": (ARRAY + "readings_f = client.scatter(readings, broadcast=True)\n"
                          "def above(data, limit, answer):\n    return answer\n\n"
                          "counts = client.gather([client.submit(above, readings_f, limit,\n"
                          "                                       int((readings > limit).sum()))\n"
                          "                        for limit in limits])\n",
                          "given", "6 of the 6 values in `counts` are numbers the notebook had sent the above tasks"),
    "through-hpc": ("from eugo_lab import hpc\n" + ARRAY
                    + "counts = hpc.get([hpc.remote(above).remote(readings, limit) for limit in limits])\n",
                    "not-native", "ran through eugo_lab.hpc, not Dask's own API"),
}


@pytest.mark.parametrize("row", list(NOT_YET.values()), ids=list(NOT_YET))
def test_shortcuts_and_mistakes_are_named(client, row):
    body, mistake, message = row
    text = not_yet_for(check(body), mistake, message)
    assert str(expected_counts()[0]) not in text  # a not yet never contains the answer


def test_in_process_workers_cannot_be_graded(client):
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    inproc = distributed.Client(cluster)  # the newest client is the default
    try:
        verdict = run_exercise("dask-scatter", REFERENCE, setup="from distributed import get_client\n"
                               "from eugo_lab import exercises\nclient = get_client()\n", line=LINE)
        not_yet_for(verdict, "in-process", "a cluster without worker processes")
    finally:
        inproc.close()
        cluster.close()
