"""Exercise ``dask-cluster`` (Course 1, lesson 8): the same simulations on a Dask cluster, side by side.

The lesson starts ``cluster = LocalCluster(n_workers=2, ...)``, connects with
``hpc.init(backend="dask", address=cluster.scheduler_address)`` and keeps the local pool's
run of the same twelve simulations in ``local_result``.

Starter cell (graded ``not yet``: it runs on the cluster, but waits for each task in turn)::

    %%eugo --exercise dask-cluster
    result = []
    for seed in range(12):
        result.append(hpc.get(darts.remote(seed)))

Reference solution (same magic)::

    %%eugo --exercise dask-cluster
    futures = [darts.remote(seed) for seed in range(12)]
    result = hpc.get(futures)

Criteria: the 12 ``darts`` tasks ran on the Dask engine, connected to the scheduler of
``cluster`` (``cluster.scheduler_address``; or the string in ``address``), not on the local
pool nor on an embedded Dask cluster the runtime started itself; ``result`` equals
``local_result``, and is what the ``darts`` tasks of this cell returned, in seed order
(:func:`~eugo_lab.exercises.derivation.listed`: a result copied from ``local_result`` beside a
decoy call fails); no Blocking finding; the tasks ran on at least two workers, and were
submitted with no wait between them (the order of the driver's own calls: no wall-clock window
or overlap in time, so the verdict is the same on a busy VM and on one core). How many tasks
overlapped in time is a measured detail.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from eugo_lab.analysis.findings.overlap import overlap_share
from eugo_lab.exercises import derivation, measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise

N = 12
FUNCTION = "darts"
CONNECT = "hpc.init(backend=\"dask\", address=cluster.scheduler_address)"
_SOLUTION = (f"{CONNECT}\nfutures = [{FUNCTION}.remote(seed) for seed in range({N})]\nresult = hpc.get(futures)")
HINTS = {
    DEFAULT: Hint("Connect the runtime to the lesson's cluster (the Dask engine, at the scheduler address of "
                  "`cluster`), then submit the twelve simulations and wait for them with one get().", _SOLUTION),
    "no-cluster": Hint("Run the lesson's 'Start a cluster' cell, which makes `cluster` and connects to it, then "
                       "this cell again.", "from dask.distributed import LocalCluster\n"
                       "cluster = LocalCluster(n_workers=2, threads_per_worker=1)\n" + CONNECT),
    "no-local": Hint("Run the lesson's first cell of simulations (the one on the local pool that keeps "
                     "`local_result`), then this cell again.", "local_result = hpc.get([darts.remote(seed) for seed "
                     f"in range({N})])"),
    "local": Hint(f"Submit each of the {N} simulations as a task with .remote, one per seed.", _SOLUTION),
    "wrong-engine": Hint("Connect to the cluster before running the cell: initialise the runtime with the Dask "
                         "engine and the address of `cluster`'s scheduler.", CONNECT),
    "own-cluster": Hint("Give the runtime the address of the lesson's scheduler: without one, the Dask engine "
                        "starts a cluster of its own.", CONNECT),
    "results": Hint(f"`result` must be the {N} values in seed order, as the local run made them: get() on the "
                    "list of futures keeps the list's order.", _SOLUTION),
    "not-from-tasks": Hint(f"Make `result` what get() returns for the {N} simulations submitted to the cluster in "
                           "this cell, not a copy of the local run's list.", _SOLUTION),
    "blocking-loop": Hint("Take get() out of the loop: submit all twelve first, then wait for the list once.",
                          _SOLUTION),
    "one-worker": Hint("Let the scheduler spread the tasks: a cluster of two workers or more, and every task "
                       "submitted before the cell waits for any.",
                       "cluster = LocalCluster(n_workers=2, threads_per_worker=1)\n" + CONNECT + "\n"
                       f"futures = [{FUNCTION}.remote(seed) for seed in range({N})]\nresult = hpc.get(futures)"),
}

def _scheme_less(address: str) -> str:
    """``tcp://127.0.0.1:8786`` -> ``127.0.0.1:8786`` (Dask reports the scheme; a person may leave it out)."""
    return address.split("://", 1)[-1].rstrip("/")


def given_address(namespace: dict[str, Any]) -> str:
    """The scheduler the lesson asks for: ``cluster.scheduler_address``, else the string in ``address``."""
    cluster = namespace.get("cluster")
    found = getattr(cluster, "scheduler_address", None) if cluster is not None else None
    if isinstance(found, str) and found:
        return found
    address = namespace.get("address")
    if isinstance(address, str) and address:
        return address
    raise NotYet("there is no cluster to check against: this exercise reads the scheduler's address from "
                 "`cluster` (the LocalCluster the lesson starts in 'Start a cluster'), and this notebook has none.",
                 mistake="no-cluster")


def connected_address() -> str | None:
    """The address of the scheduler the running runtime talks to, or None when no runtime runs."""
    from eugo_lab import hpc

    if not hpc.is_initialized():
        return None
    return str(hpc.cluster().address)


def overlapped(trace: Any, function: str) -> int:
    """How many ``function`` tasks ran, for part of their time at least, while another of them was running."""
    u = measure.dispatch_units(trace, function)
    return int(np.count_nonzero(overlap_share(u) > 0))


@exercise("dask-cluster", lesson="01-distributed-python/08-moving-to-a-dask-cluster.ipynb",
          title="The same cell on a Dask cluster", hints=HINTS)
def dask_cluster(a: Attempt) -> Verdict:
    """Grade a run on the lesson's Dask cluster: the right engine and scheduler, overlap, the local results."""
    result = a.require("result")
    if "local_result" not in a.namespace:
        raise NotYet("there is no `local_result` to compare with: it is the local pool's run of the same "
                     f"{N} simulations, made by the lesson's first run of them, which has not run in this kernel.",
                     mistake="no-local")
    local = a.namespace["local_result"]  # made by an earlier cell on purpose: not a.require, which wants this cell's
    backend = str(a.trace.meta.get("backend", "local"))
    n = measure.tasks(a.trace, FUNCTION)
    if n == 0:
        return a.not_yet(f"no {FUNCTION} task ran in this cell: the simulations ran here in the notebook, not on "
                         "the cluster.", mistake="local")
    if backend != "dask":
        return a.not_yet(f"your cell's {measure.plural(n, 'task')} ran on the {backend} engine (this machine's pool), "
                         "not on the Dask cluster: the runtime was not connected to it when the cell ran.",
                         mistake="wrong-engine")
    want = given_address(a.namespace)
    have = connected_address()
    if have is None or _scheme_less(have) != _scheme_less(want):
        return a.not_yet("your tasks ran on a Dask cluster, but not on the one in `cluster`: the Dask engine "
                         "without an address starts a separate Dask cluster of eugo's own.", mistake="own-cluster")
    if n < N:
        return a.not_yet(f"only {measure.plural(n, 'simulation')} of {N} ran as {FUNCTION} tasks.",
                         mistake="local")
    if not measure.same_result(result, local):
        return a.not_yet(f"`result` differs from `local_result`, the local pool's run of the same {N} simulations.",
                         mistake="results")
    came = derivation.listed(result, a.trace, FUNCTION, name="result")
    if not came:
        return a.not_yet(f"{came.why}: the graded list must be what the cluster's tasks returned.",
                         mistake="not-from-tasks")
    blocked = measure.blocking_loop(a.report)
    if blocked is not None:
        where, k = blocked
        return a.not_yet(f"your tasks ran on the cluster, but the loop called get() at {where} after each task, so "
                         f"{k} tasks ran one at a time, each paying the trip through the scheduler in turn (the "
                         "Blocking finding).", mistake="blocking-loop")
    used = measure.workers_used(a.trace, FUNCTION)
    together = overlapped(a.trace, FUNCTION)
    if used < 2:
        return a.not_yet(f"all {N} tasks ran on one worker of a cluster with {a.workers}, so nothing ran side by side"
                         + ("; the cluster has a single worker." if a.workers < 2
                            else ": each was waited for before the next was submitted."), mistake="one-worker")
    submitted = measure.submitted_together(a.trace, FUNCTION)
    if submitted < 2:
        # The order of the driver's own submits and waits, not overlap in time: the same on a busy machine.
        return a.not_yet(f"the tasks ran on {used} workers, but the cell waited after each one it submitted, before "
                         "submitting the next, so they never had the chance to run side by side.",
                         mistake="blocking-loop")
    return a.passed(f"the {n} {FUNCTION} tasks ran on the Dask cluster in `cluster`, on {used} of its {a.workers} "
                    f"workers, {submitted} of them submitted with no wait between them",
                    f"no Blocking finding; `result` is the {n} values those tasks returned, in seed order, and "
                    "equals `local_result` from the local pool",
                    details=(f"{used} workers used of {a.workers}",
                             f"{together} of {n} tasks ran while another was running"))
