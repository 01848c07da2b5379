"""The ``dask-cluster`` exercise on real Dask clusters (loopback): the reference passes; each mistake, its message."""

from __future__ import annotations

import pytest
from _clusters import dask_cli_cluster
from _exercise_cells import code_in, run_exercise, tier_code

from eugo_lab import hpc
from eugo_lab.exercises import catalog
from eugo_lab.exercises.catalog.clusters import overlapped

# The lesson's function with fewer darts (a few ms a task), and the local results computed
# here as plain calls, as the lesson's first cell does on the local pool.
SETUP = """
import random
import types
from eugo_lab import hpc

@hpc.remote
def darts(seed, n=50_000):
    rng = random.Random(seed)
    return sum(rng.random() ** 2 + rng.random() ** 2 < 1.0 for _ in range(n))

local_result = [darts(seed) for seed in range(12)]
cluster = types.SimpleNamespace(scheduler_address={address!r})
"""
REFERENCE = "futures = [darts.remote(seed) for seed in range(12)]\nresult = hpc.get(futures)\n"
LOOP = "result = []\nfor seed in range(12):\n    result.append(hpc.get(darts.remote(seed)))\n"
LINE = "--no-live"  # no -w: the connected runtime is reused as it is (a -w would start another cluster)


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


def check(address: str, body: str = REFERENCE, setup_address: str | None = None, extra: str = ""):
    """Run ``body`` as the exercise cell against the lesson's ``cluster`` at ``setup_address`` (default ``address``)."""
    setup = SETUP.format(address=setup_address or address) + extra
    return run_exercise("dask-cluster", body, setup=setup, line=LINE)


def not_yet(verdict) -> str:
    """The verdict's text, after checking it is a ``not yet``."""
    text = verdict.to_text()
    assert text.splitlines()[0] == "exercise dask-cluster: not yet", text
    return text


def test_registered_with_its_lesson():
    ex = catalog.get("dask-cluster")
    assert ex.lesson == "01-distributed-python/08-moving-to-a-dask-cluster.ipynb"


def test_reference_passes(two_workers):
    connect(two_workers)
    v = check(two_workers)
    text = v.to_text()
    assert v.passed, text
    assert text.splitlines()[0] == "exercise dask-cluster: passed"
    assert "on the Dask cluster in `cluster`" in text
    assert "127.0.0.1" not in text and "tcp://" not in text  # deterministic lines: no address
    assert any("workers used of 2" in d for d in v.details)


def test_reference_passes_with_the_address_written_without_scheme(two_workers):
    connect(two_workers)
    v = check(two_workers, setup_address=two_workers.split("://", 1)[1])
    assert v.passed, v.to_text()


def test_loop_that_waits_for_each_task_names_the_line(two_workers):
    connect(two_workers)
    text = not_yet(check(two_workers, LOOP))
    assert "called get() at cell line 4 after each task" in text  # line 1 is the %%eugo line
    assert "futures = [darts.remote(seed) for seed in range(12)]" in tier_code("dask-cluster", "blocking-loop")
    assert code_in(text) == []


def test_still_on_the_local_pool(two_workers):
    hpc.init(workers=2)
    try:
        text = not_yet(check(two_workers))
    finally:
        hpc.shutdown()
    assert "ran on the local engine" in text
    assert "hpc.init(backend=\"dask\", address=cluster.scheduler_address)" in tier_code("dask-cluster", "wrong-engine")


def test_eugos_own_dask_cluster_is_not_the_given_one(two_workers):
    hpc.init(backend="dask", workers=2)  # embedded: a cluster of its own
    try:
        text = not_yet(check(two_workers))
    finally:
        hpc.shutdown()
    assert "not on the one in `cluster`" in text


def test_results_that_differ_from_the_local_run(two_workers):
    connect(two_workers)
    body = "futures = [darts.remote(seed) for seed in range(12)]\nresult = hpc.get(futures)[::-1]\n"
    assert "`result` differs from `local_result`" in not_yet(check(two_workers, body))


def test_too_few_tasks(two_workers):
    connect(two_workers)
    body = "result = hpc.get([darts.remote(seed) for seed in range(6)])\n"
    assert "only 6 simulations of 12 ran as darts tasks" in not_yet(check(two_workers, body))


def test_no_cluster_to_check_against(two_workers):
    connect(two_workers)
    text = not_yet(check(two_workers, extra="cluster = None\naddress = None\n"))
    assert "there is no cluster to check against" in text


def test_every_task_on_the_one_worker_of_a_cluster():
    with dask_cli_cluster(n_workers=1) as c:
        try:
            connect(c.address)
            text = not_yet(check(c.address))
        finally:
            hpc.shutdown()
    assert "all 12 tasks ran on one worker of a cluster with 1" in text
    assert "the cluster has a single worker" in text and "n_workers=2" in tier_code("dask-cluster", "one-worker")
    assert overlapped(hpc.last_trace(), "darts") == 0


# A table of cells on the two-worker cluster: an honest variant passes; the shortcuts (the right
# list, not what this cell's tasks returned) fail, each saying what happened.
TABLE_PASS = {
    # hpc.map instead of .remote, other names: the same simulations, batched
    "honest-map": "sims = hpc.map(darts, range(12))\nresult = list(hpc.get(sims))\n",
}
TABLE_NOT_YET = {
    "shortcut-local-copy-beside-decoy": ("hpc.get([darts.remote(seed, n=10) for seed in range(12)])\n"
                                         "result = list(local_result)\n",
                                         "`result` was not computed from the tasks' results: 0 of its 12 values are "
                                         "among what the 12 darts tasks returned"),
    "shortcut-computed-in-the-notebook": ("hpc.get([darts.remote(0) for seed in range(12)])\n"
                                          "result = [darts(seed) for seed in range(12)]\n",
                                          "1 of its 12 values are among what the 12 darts tasks returned"),
}


@pytest.mark.parametrize("body", list(TABLE_PASS.values()), ids=list(TABLE_PASS))
def test_table_passes(two_workers, body):
    connect(two_workers)
    v = check(two_workers, body)
    text = v.to_text()
    assert v.passed, text
    assert "on the Dask cluster in `cluster`, on 2 of its 2 workers" in text
    assert "of them submitted with no wait between them" in text
    assert "`result` is the 12 values those tasks returned, in seed order" in text


@pytest.mark.parametrize(("body", "message"), list(TABLE_NOT_YET.values()), ids=list(TABLE_NOT_YET))
def test_table_not_yet(two_workers, body, message):
    connect(two_workers)
    v = check(two_workers, body)
    text = not_yet(v)
    assert message in text and v.mistake == "not-from-tasks", text
    assert code_in("\n".join(v.lines[:-1])) == []


def test_the_evidence_names_the_workers_that_ran_tasks():
    # Three workers: the same sentence states the other count (computed from the trace, not fixed).
    with dask_cli_cluster(n_workers=3) as c:
        try:
            connect(c.address)
            v = check(c.address)
        finally:
            hpc.shutdown()
    assert v.passed and "on 3 of its 3 workers" in v.to_text(), v.to_text()
