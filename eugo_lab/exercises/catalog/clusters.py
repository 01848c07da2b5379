"""Exercise ``dask-cluster`` (Course 1, lesson 9): ship a large table to a Dask cluster once, not with every task.

The lesson starts ``cluster = LocalCluster(n_workers=2, ...)`` and connects with
``hpc.init(backend="dask", address=cluster.scheduler_address)``. A function defined in the
notebook travels to the workers pickled, with the globals it reads inside its pickle, and the
Dask engine sends the function with every task: a large global the task reads crosses the
network once per task.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.gains``, a read-only
table of 1,000,000 channel gains (8 MB) in the lesson, and ``p.seeds``, the twelve seeds 0-11; a
passing cell is run again, on the same cluster, on a hidden case of 250,000-500,000 gains (2-4 MB)
and 4-6 other seeds.

Starter cell (graded ``not yet``: the 8 MB table ``gains`` rides in the function's pickle,
sent with each of the 12 tasks)::

    %%eugo --exercise dask-cluster
    import numpy as np
    from eugo_lab import exercises

    p = exercises.problem("dask-cluster")  # this exercise's inputs: p.gains (8 MB) and p.seeds
    gains = p.gains

    @hpc.remote
    def channel_mean(seed):
        picks = np.random.default_rng(seed).integers(0, len(gains), 1_000)
        return float(gains[picks].mean())

    result = hpc.get([channel_mean.remote(seed) for seed in p.seeds])

Reference solution (the table stored on the cluster once, the task given its reference)::

    gains_ref = hpc.put(p.gains)

    @hpc.remote
    def channel_mean(gains, seed):
        picks = np.random.default_rng(seed).integers(0, len(gains), 1_000)
        return float(gains[picks].mean())

    result = hpc.get([channel_mean.remote(gains_ref, seed) for seed in p.seeds])

Criteria, in the order checked, each bytes, a count or a digest (never a duration), on the
inputs the run was handed: ``result`` equals the channel means, one per seed, computed here from
the checker's own copy of the table; ``channel_mean`` tasks ran, on the Dask engine, connected to
the scheduler of ``cluster`` (``cluster.scheduler_address``, or the string in ``address``), one per
seed; ``result`` is what those tasks returned, in seed order
(:func:`~eugo_lab.exercises.derivation.listed`); their arguments came to under
``MAX_SHIPPED_SHARE`` of the table, and so did the function's own pickle (what it captured);
the cell called ``hpc.put`` exactly once, and every task resolved that stored reference on its
worker. Then the same on the hidden case.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.analysis.findings import Code
from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.units import fmt_bytes

N = 12
FUNCTION = "channel_mean"
CHANNELS, PICKS, SEED = 1_000_000, 1_000, 1
# The hidden case: 2-4 MB, still thousands of times a reference's size (so a table carried in the function or
# sent by value fails there as in the lesson), and fewer seeds (each a task), so the second run costs less.
HIDDEN_CHANNELS = range(250_000, 500_001)
HIDDEN_N = (4, 5, 6)
HIDDEN_SEEDS = range(12, 1000)
# A stored reference is a few hundred bytes, one copy of the table 8 MB: 10% of the table is far
# from both, so a small argument never fails a correct cell and one copy always fails a wrong one.
MAX_SHIPPED_SHARE = 0.1
CONNECT = "hpc.init(backend=\"dask\", address=cluster.scheduler_address)"


@problems.declare("dask-cluster")
@dataclass(frozen=True, repr=False, eq=False)  # an array field: compared by identity, never element by element
class DaskClusterProblem(problems.Problem):
    """The table of channel gains (read-only) and the seeds, one task each."""

    gains: np.ndarray
    seeds: tuple[int, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> DaskClusterProblem:
        """The lesson's table (seed 1) and seeds 0-11; hidden: a smaller table from ``rng``, 4-6 other seeds."""
        if not hidden:
            gains = np.random.default_rng(SEED).normal(1.0, 0.01, CHANNELS)
            return cls(problems.frozen_array(gains), tuple(range(N)))
        size = rng.choice(HIDDEN_CHANNELS)
        gains = np.random.default_rng(rng.randrange(2**32)).normal(1.0, 0.01, size)
        return cls(problems.frozen_array(gains), tuple(rng.sample(HIDDEN_SEEDS, rng.choice(HIDDEN_N))))


def reference_result(p: DaskClusterProblem | None = None) -> list[float]:
    """What the tasks return, one per seed of ``p`` (the lesson's case by default): the mean of PICKS gains each."""
    p = p if p is not None else problems.lesson_case("dask-cluster")
    g = p.gains
    return [float(g[np.random.default_rng(seed).integers(0, len(g), PICKS)].mean()) for seed in p.seeds]


_SOLUTION = ("gains_ref = hpc.put(p.gains)  # stored on the cluster once\n\n\n"
             "@hpc.remote\n"
             "def channel_mean(gains, seed):  # the table arrives as an argument: the reference, resolved\n"
             "    picks = np.random.default_rng(seed).integers(0, len(gains), 1_000)\n"
             "    return float(gains[picks].mean())\n\n\n"
             "result = hpc.get([channel_mean.remote(gains_ref, seed) for seed in p.seeds])")
HINTS = {
    DEFAULT: Hint("Store the table on the cluster once with put, and give every task the reference put returns as "
                  "an argument, instead of letting the function read the table as a global.", _SOLUTION),
    "no-cluster": Hint("Run the lesson's 'Start a cluster' cell, which makes `cluster`, and the cell after it, which "
                       "connects to it; then this cell again.", "from dask.distributed import LocalCluster\n"
                       "cluster = LocalCluster(n_workers=2, threads_per_worker=1)\n" + CONNECT),
    "results": Hint("`result` must be the channel means in the order of p.seeds, each from the table p.gains: "
                    "get() on the list of futures keeps the list's order.", _SOLUTION),
    "local": Hint("Submit each mean as a channel_mean task with .remote, one per seed in p.seeds.", _SOLUTION),
    "wrong-engine": Hint("Connect to the cluster before running the cell: initialise the runtime with the Dask "
                         "engine and the address of `cluster`'s scheduler.", CONNECT),
    "own-cluster": Hint("Give the runtime the address of the lesson's scheduler: without one, the Dask engine "
                        "starts a cluster of its own.", CONNECT),
    "not-from-tasks": Hint("Make `result` what get() returns for the channel_mean tasks of this cell, not "
                           "means computed here in the notebook or kept from an earlier cell.", _SOLUTION),
    "captured": Hint("The function reads the table as a global, so the table is pickled inside the function, "
                     "and the Dask engine sends the function with every task. Take the table as an argument of "
                     "the function instead, and pass it the reference put returns.", _SOLUTION),
    "by-value": Hint("Passing the table itself as the argument copies it into every task. Store it once with put "
                     "and pass the reference instead: a few hundred bytes per task.", _SOLUTION),
    "put-per-task": Hint("Call put once, before the tasks, and pass the same reference to every one.", _SOLUTION),
    "no-put": Hint("Store the table on the cluster with put and pass the reference to the tasks, rather than "
                   "having every task make or load a table of its own.", _SOLUTION),
    "ref-unused": Hint("Pass the reference put returned to every task as its argument, so each task reads the "
                       "stored copy on its worker.", _SOLUTION),
    "given": Hint("Let each channel_mean task compute its mean from the stored table and its seed: pass it only the "
                  "table's reference and the seed, never a mean worked out here in the notebook.", _SOLUTION),
    problems.CARRY_OVER: Hint("Store p.gains, the exercise's table, with put and submit one task for each seed in "
                              "p.seeds, instead of a table of your own, seeds or means written into the cell.",
                              "p = exercises.problem(\"dask-cluster\")\n" + _SOLUTION),
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


@exercise("dask-cluster", lesson="01-distributed-python/09-moving-to-a-dask-cluster.ipynb",
          title="Ship a large table to the cluster once", hints=HINTS)
def dask_cluster(a: Attempt) -> Verdict:
    """Grade a run on the lesson's Dask cluster: the right means, from tasks that read one stored copy of the table."""
    result = a.require("result")
    p = problems.given(a)  # the checker's own copy of the inputs the run was handed
    n_seeds = len(p.seeds)
    if not measure.same_within_tolerance(list(result) if isinstance(result, tuple) else result, reference_result(p)):
        return a.not_yet(f"`result` is not the {n_seeds} channel means in seed order (the order of p.seeds), each "
                         "taken from the table of gains p.gains.", mistake="results")
    n = steps.tasks_ran(a, FUNCTION, "the means")
    a.require_engine("dask", n, " (this machine's pool), not on the Dask cluster: the runtime was not connected "
                     "to it when the cell ran.")
    want = given_address(a.namespace)
    have = connected_address()
    if have is None or _scheme_less(have) != _scheme_less(want):
        return a.not_yet("your tasks ran on a Dask cluster, but not on the one in `cluster`: the Dask engine "
                         "without an address starts a separate Dask cluster of eugo's own.", mistake="own-cluster")
    if n < n_seeds:
        return a.not_yet(f"only {measure.plural(n, 'mean')} of {n_seeds} ran as {FUNCTION} tasks.", mistake="local")
    came = derivation.listed(result, a.trace, FUNCTION, name="result")
    steps.from_tasks(a, came, FUNCTION)
    steps.fetched(a, result, FUNCTION, "result", mistake="not-from-tasks")
    steps.not_handed_in(a, FUNCTION, result, "result")
    table = p.gains.nbytes
    size = fmt_bytes(table, ".3g")
    limit = MAX_SHIPPED_SHARE * table
    shipped = measure.bytes_in(a.trace, FUNCTION)
    fn = measure.carried(a.trace, FUNCTION)
    captured = a.report.finding(Code.CAPTURED_OBJECT)
    details = (f"{fmt_bytes(shipped, '.3g')} of arguments shipped",
               f"Captured object finding: {'yes' if captured is not None else 'no'}")
    if fn is not None and fn.payload_bytes > limit:
        # How the table got into the pickle is said only when the pickle's captured names show it.
        how = (" (" + ", ".join(f"`{name}`" for name, _ in fn.captured) + "), a global it reads" if fn.captured
               else " inside its own pickle (a default argument, or an object it holds, not a global)")
        return a.not_yet(f"the {FUNCTION} function was pickled at {fmt_bytes(fn.payload_bytes, '.3g')}: it carried "
                         f"the {size} table of gains{how}, and the Dask engine sent it "
                         f"{measure.plural(fn.sends, 'time')}, with every task, so "
                         f"{fmt_bytes(fn.bytes_sent, '.3g')} crossed to the cluster for one table.",
                         mistake="captured", details=details)
    if shipped > limit:
        return a.not_yet(f"the {n} {FUNCTION} tasks were sent {fmt_bytes(shipped, '.3g')} of arguments in all, about "
                         f"{fmt_bytes(shipped / n, '.3g')} each: the {size} table went by value with every task.",
                         mistake="by-value", details=details)
    puts = len(a.trace.puts["ref"])
    if puts > 1:
        return a.not_yet(f"the cell called put {puts} times: each call stores another copy of the {size} table on "
                         "the cluster.", mistake="put-per-task", details=details)
    if puts == 0:
        return a.not_yet(f"the cell never called put, and the {FUNCTION} tasks' own arguments were small: whatever "
                         f"they read, it was not one stored copy of the {size} table that put keeps on the cluster "
                         "for every task to read.", mistake="no-put", details=details)
    stored = set(np.asarray(a.trace.puts["ref"]).tolist())
    reading = measure.tasks_resolving(a.trace, FUNCTION, stored)
    if reading < n:
        return a.not_yet(f"the cell stored the table with put, but {reading} of the {n} {FUNCTION} tasks read the "
                         "stored copy on their workers: the reference put returned did not reach "
                         f"{'them' if not reading else 'the others'} as an argument.", mistake="ref-unused",
                         details=details)
    pickled = fmt_bytes(fn.payload_bytes, ".3g") if fn is not None else "no bytes (sent before this cell)"
    return a.passed(f"the {n} {FUNCTION} tasks ran on the Dask cluster in `cluster`, and all read the one stored "
                    f"copy of the table on their workers ({measure.plural(puts, 'hpc.put')})",
                    f"their arguments came to {fmt_bytes(shipped, '.3g')} in all and the function's pickle to "
                    f"{pickled}, each under {MAX_SHIPPED_SHARE:.0%} of the table's {size}",
                    f"`result` is the {n} values those tasks returned, in seed order",
                    details=details)
