"""The ``dask-cluster`` exercise on real Dask clusters (loopback): ship the table once; each mistake, its message."""

from __future__ import annotations

import pytest
from _clusters import dask_cli_cluster
from _exercise_cells import not_yet_for, passed_with, run_exercise, tier_code

from eugo_lab import hpc
from eugo_lab.exercises import catalog, problems
from eugo_lab.exercises.catalog.clusters import reference_result

# The lesson's inputs, handed out by the checker (the 8 MB table, the seeds), and the lesson's `cluster`. `gains` is
# bound in this earlier cell: the hidden second run gets the hidden case's table under that name.
SETUP = """
import types
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("dask-cluster")
gains = p.gains  # 8 MB
cluster = types.SimpleNamespace(scheduler_address={address!r})
"""
# The task as the starter writes it: it reads the table as a global.
GLOBAL = """
@hpc.remote
def channel_mean(seed):
    picks = np.random.default_rng(seed).integers(0, len(gains), 1_000)
    return float(gains[picks].mean())

"""
# The task as the reference writes it: the table is an argument.
ARGUMENT = """
@hpc.remote
def channel_mean(gains, seed):
    picks = np.random.default_rng(seed).integers(0, len(gains), 1_000)
    return float(gains[picks].mean())

"""
REBUILT = """
@hpc.remote
def channel_mean(seed):
    table = np.random.default_rng(1).normal(1.0, 0.01, 1_000_000)
    picks = np.random.default_rng(seed).integers(0, len(table), 1_000)
    return float(table[picks].mean())

"""
STARTER = GLOBAL + "result = hpc.get([channel_mean.remote(seed) for seed in range(12)])\n"
REFERENCE = ("gains_ref = hpc.put(gains)\n" + ARGUMENT
             + "result = hpc.get([channel_mean.remote(gains_ref, seed) for seed in p.seeds])\n")
LINE = "--no-live"  # no -w: the connected runtime is reused as it is (a -w would start another cluster)
# The means computed here in the notebook, as a learner in a hurry would.
IN_THE_NOTEBOOK = "[float(gains[np.random.default_rng(s).integers(0, len(gains), 1_000)].mean()) for s in range(12)]"


def connect(address: str) -> None:
    """Connect the runtime to ``address``, as the lesson's cell does before the exercise."""
    hpc.init(backend="dask", address=address)


@pytest.fixture(scope="module")
def two_workers():
    """A ``dask scheduler`` and two ``dask worker`` processes; the runtime is shut down before they stop."""
    with dask_cli_cluster(n_workers=2) as c:
        try:
            yield c.address
        finally:
            hpc.shutdown()


def check(address: str, body: str = REFERENCE, extra: str = ""):
    """Run ``body`` as the exercise cell against the lesson's ``cluster`` at ``address``."""
    return run_exercise("dask-cluster", body, setup=SETUP.format(address=address) + extra, line=LINE)


def test_registered_with_its_lesson():
    ex = catalog.get("dask-cluster")
    assert ex.lesson == "01-distributed-python/09-moving-to-a-dask-cluster.ipynb"
    assert ex.title == "Ship a large table to the cluster once"


PASS = {
    "reference": REFERENCE,
    # other names, the reference by keyword, the futures kept in a dict first
    "honest-keyword-and-dict": ("stored = hpc.put(gains)\n"
                                "@hpc.remote\n"
                                "def channel_mean(seed, table):\n"
                                "    picks = np.random.default_rng(seed).integers(0, len(table), 1_000)\n"
                                "    return float(table[picks].mean())\n\n"
                                "futs = {s: channel_mean.remote(s, table=stored) for s in p.seeds}\n"
                                "result = hpc.get([futs[s] for s in p.seeds])\n"),
    # each task returns (seed, mean), taken as they finish; the cell keeps the means in seed order
    "honest-pairs-as-completed": ("table = hpc.put(gains)\n"
                                  "@hpc.remote\n"
                                  "def channel_mean(seed, *, g):\n"
                                  "    picks = np.random.default_rng(seed).integers(0, len(g), 1_000)\n"
                                  "    return seed, float(g[picks].mean())\n\n"
                                  "futs = [channel_mean.remote(seed, g=table) for seed in p.seeds]\n"
                                  "got = {}\nfor f in hpc.as_completed(futs):\n    s, m = hpc.get(f)\n"
                                  "    got[s] = m\nresult = [got[s] for s in p.seeds]\n"),
}


@pytest.mark.parametrize("body", list(PASS.values()), ids=list(PASS))
def test_passes(two_workers, body):
    connect(two_workers)
    text = passed_with(check(two_workers, body), "the 12 channel_mean tasks ran on the Dask cluster in `cluster`, "
                       "and all read the one stored copy")
    assert "(1 hpc.put)" in text and "each under 10% of the table's 8 MB" in text
    assert "`result` is the 12 values those tasks returned, in seed order" in text
    assert "127.0.0.1" not in text and "tcp://" not in text  # deterministic lines: no address
    assert text.splitlines()[-1] == "  " + problems.SECOND_CASE, text  # and on the hidden case


NOT_YET = {
    "starter-table-in-the-function": (STARTER, "captured",
                                      "it carried the 8 MB table of gains (`gains`), a global it reads, and the Dask "
                                      "engine sent it 12 times, with every task"),
    "table-by-value": (ARGUMENT + "result = hpc.get([channel_mean.remote(gains, seed) for seed in range(12)])\n",
                       "by-value", "the 8 MB table went by value with every task"),
    "put-per-task": (ARGUMENT + "result = hpc.get([channel_mean.remote(hpc.put(gains), seed) for seed in range(12)])\n",
                     "put-per-task", "the cell called put 12 times"),
    "table-rebuilt-in-every-task": (REBUILT + "result = hpc.get([channel_mean.remote(seed) for seed in range(12)])\n",
                                    "no-put",
                                    "the cell never called put, and the channel_mean tasks' own arguments were small"),
    "put-but-never-passed": ("gains_ref = hpc.put(gains)\n" + REBUILT
                             + "result = hpc.get([channel_mean.remote(seed) for seed in range(12)])\n",
                             "ref-unused", "but 0 of the 12 channel_mean tasks read the stored copy"),
    "results-in-another-order": ("gains_ref = hpc.put(gains)\n" + ARGUMENT
                                 + "result = hpc.get([channel_mean.remote(gains_ref, s) for s in range(12)])[::-1]\n",
                                 "results", "`result` is not the 12 channel means in seed order"),
    "half-in-the-notebook": ("gains_ref = hpc.put(gains)\n" + ARGUMENT
                             + "result = hpc.get([channel_mean.remote(gains_ref, s) for s in range(6)])\n"
                             + f"result += {IN_THE_NOTEBOOK}[6:]\n",
                             "local", "only 6 means of 12 ran as channel_mean tasks"),
    "means-in-the-notebook": (f"result = {IN_THE_NOTEBOOK}\n", "local",
                              "no task ran in this cell, so the means came from the notebook"),
    # shortcuts: the right list, not what this cell's tasks returned
    "shortcut-notebook-beside-decoy": ("gains_ref = hpc.put(gains)\n" + ARGUMENT
                                       + "hpc.get([channel_mean.remote(gains_ref, 0) for _ in range(12)])\n"
                                       + f"result = {IN_THE_NOTEBOOK}\n", "not-from-tasks",
                                       "`result` was not computed from the tasks' results: 1 of its 12 values are "
                                       "among what the 12 channel_mean tasks returned"),
    "shortcut-typed-by-hand": ("gains_ref = hpc.put(gains)\n" + ARGUMENT
                               + "hpc.get([channel_mean.remote(gains_ref, 0) for _ in range(12)])\n"
                               + f"result = {reference_result()!r}\n", "not-from-tasks",
                               "`result` was not computed from the tasks' results"),
    "shortcut-copied-from-an-earlier-cell": ("gains_ref = hpc.put(gains)\n" + ARGUMENT
                                             + "hpc.get([channel_mean.remote(gains_ref, 1) for _ in range(12)])\n"
                                             + "result = list(earlier)\n", "not-from-tasks",
                                             "`result` was not computed from the tasks' results"),
    # the means worked out here and handed to tasks that only return them (by argument, or from a dict of answers)
    "shortcut-answer-passed-in": ("gains_ref = hpc.put(gains)\n"
                                  "@hpc.remote\ndef channel_mean(g, seed, answer):\n    return answer\n\n"
                                  f"answers = {IN_THE_NOTEBOOK.replace('range(12)', 'p.seeds')}\n"
                                  "result = hpc.get([channel_mean.remote(gains_ref, s, m)\n"
                                  "                  for s, m in zip(p.seeds, answers)])\n",
                                  "given", "12 of the 12 values in `result` are numbers the notebook had sent the "
                                  "channel_mean tasks"),
    "shortcut-answer-in-a-tuple": ("gains_ref = hpc.put(gains)\n"
                                   "@hpc.remote\ndef channel_mean(g, seed, answer):\n    return seed, answer\n\n"
                                   f"answers = {IN_THE_NOTEBOOK.replace('range(12)', 'p.seeds')}\n"
                                   "pairs = hpc.get([channel_mean.remote(gains_ref, s, m)\n"
                                   "                 for s, m in zip(p.seeds, answers)])\n"
                                   "result = [m for _, m in pairs]\n", "given", "the tasks only handed them back"),
    "shortcut-answers-looked-up": ("gains_ref = hpc.put(gains)\n"
                                   "@hpc.remote\ndef channel_mean(g, seed, lookup):\n    return lookup[seed]\n\n"
                                   f"answers = dict(zip(p.seeds, {IN_THE_NOTEBOOK.replace('range(12)', 'p.seeds')}))\n"
                                   "result = hpc.get([channel_mean.remote(gains_ref, s, answers) for s in p.seeds])\n",
                                   "given", "the tasks only handed them back"),
}
# An earlier cell that computed the means honestly, for the row that copies them.
EARLIER = ("earlier_ref = hpc.put(gains)\n" + ARGUMENT.replace("channel_mean", "earlier_mean")
           + "earlier = hpc.get([earlier_mean.remote(earlier_ref, s) for s in range(12)])\n")


@pytest.mark.parametrize(("body", "mistake", "message"), list(NOT_YET.values()), ids=list(NOT_YET))
def test_not_yet(two_workers, body, mistake, message):
    connect(two_workers)
    not_yet_for(check(two_workers, body, extra=EARLIER if "earlier" in body else ""), mistake, message)


def test_still_on_the_local_pool(two_workers):
    hpc.init(workers=2)
    try:
        v = check(two_workers)
    finally:
        hpc.shutdown()
    not_yet_for(v, "wrong-engine", "ran on the local engine")
    assert "hpc.init(backend=\"dask\", address=cluster.scheduler_address)" in tier_code("dask-cluster", "wrong-engine")


def test_eugos_own_dask_cluster_is_not_the_given_one(two_workers):
    hpc.init(backend="dask", workers=2)  # embedded: a cluster of its own
    try:
        v = check(two_workers)
    finally:
        hpc.shutdown()
    not_yet_for(v, "own-cluster", "not on the one in `cluster`")


def test_no_cluster_to_check_against(two_workers):
    connect(two_workers)
    v = check(two_workers, extra="cluster = None\naddress = None\n")
    not_yet_for(v, "no-cluster", "there is no cluster to check against")


def test_the_address_may_be_written_without_its_scheme(two_workers):
    connect(two_workers)
    v = run_exercise("dask-cluster", REFERENCE, setup=SETUP.format(address=two_workers.split("://", 1)[1]), line=LINE)
    assert v.passed, v.to_text()


def test_on_the_local_pool_the_same_starter_ships_the_table_once_per_worker():
    # The lesson's point in numbers: the local pool sends a function once per worker process, the Dask engine with
    # every task. The trace's send count says which, whatever the machine's speed.
    from eugo_lab.exercises.measure import carried

    hpc.init(workers=2)
    try:
        ip_setup = SETUP.format(address="tcp://127.0.0.1:1")
        v = run_exercise("dask-cluster", STARTER, setup=ip_setup, line="-w 2 --no-live")
        sends = carried(hpc.last_trace(), "channel_mean").sends
    finally:
        hpc.shutdown()
    not_yet_for(v, "wrong-engine", "ran on the local engine")
    assert 1 <= sends <= 2
