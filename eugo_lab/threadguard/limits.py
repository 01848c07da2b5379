"""Thread oversubscription guard: each worker process runs BLAS/OpenMP/Numba with cores ÷ workers threads.

Why: every NumPy process starts its BLAS with one thread per core, so 2 workers on 2 cores
run 4 BLAS threads that fight for the cores; we measured small matmuls 3-11x slower that
way than with one thread per worker (``benchmarks/optimizations.py`` measures it again).

How, per engine:

- the driver decides the limit (:func:`plan`) and hands it to the workers it starts in their
  environment (:func:`worker_env`): the local pool at spawn, the embedded Dask cluster's
  worker processes at spawn, local Ray through ``runtime_env``. The standard variables
  (``OMP_NUM_THREADS``...) take effect when a library loads;
- in the worker, :func:`apply_once` runs before the first task (local pool: at start;
  Dask and Ray: from ``_cluster.run_task``) and calls threadpoolctl's ``threadpool_limits``
  for libraries that were already loaded (Dask and Ray workers import NumPy before any task
  of ours), and ``numba.set_num_threads`` when Numba is loaded.

A user's own choice wins: any of the thread variables set in the driver's environment, or
``EUGO_THREADS_PER_WORKER`` (our explicit option, also ``hpc.init("local", threads_per_worker=N)``).
Workers of an existing cluster we did not start (``address=``) are left as their operator set them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from eugo_lab.threadguard.variables import LIMIT_ENV, THREAD_VARS, USER_ENV, apply_once, user_thread_vars


@dataclass(frozen=True)
class GuardPlan:
    """What the guard does for one runtime: the limit, why, and what it would have been."""

    threads: int | None  # per worker process; None: left alone
    cores: int
    workers: int
    default: int  # what each worker's BLAS would use without the guard (one thread per core)
    source: str  # "guard" | "user" | "external"
    user_vars: tuple[str, ...] = ()

    @property
    def applied(self) -> bool:
        """True when the guard sets the limit (not the user, not an external cluster)."""
        return self.source == "guard" and self.threads is not None


def plan(cores: int, workers: int, *, external: bool = False, explicit: int | None = None,
         env: Mapping[str, str] | None = None) -> GuardPlan:
    """The limit for ``workers`` worker processes sharing ``cores`` cores (pure)."""
    env = os.environ if env is None else env
    cores, workers = max(1, int(cores)), max(1, int(workers))
    per_host_workers = min(workers, cores) if external else workers
    if external:
        return GuardPlan(None, cores, per_host_workers, cores, "external")
    user = user_thread_vars(env)
    if explicit is None and env.get(LIMIT_ENV, "").strip().isdigit():
        explicit = int(env[LIMIT_ENV])
    if explicit is not None:
        return GuardPlan(max(1, explicit), cores, workers, cores, "user", (f"{LIMIT_ENV}={explicit}",))
    if user:
        return GuardPlan(None, cores, workers, cores, "user", user)
    return GuardPlan(max(1, cores // workers), cores, workers, cores, "guard")


def worker_env(p: GuardPlan) -> dict[str, str]:
    """The variables a worker process we start gets from the driver, so :func:`apply_once` knows the plan."""
    if p.source == "user" and p.threads is None:
        return {USER_ENV: ",".join(p.user_vars)}
    if p.threads is None:
        return {}
    env = {LIMIT_ENV: str(p.threads)}
    # Libraries read these when they load: a worker that imports NumPy later gets the limit for free.
    env.update({v: str(p.threads) for v in THREAD_VARS if not os.environ.get(v)})
    return env


def describe(p: GuardPlan) -> str:
    """``BLAS threads per worker: 1 (2 cores / 2 workers); was 2`` and the like, for the report."""
    if p.source == "external":
        return "BLAS threads per worker: left as the cluster's operator set them (workers we did not start)"
    if p.source == "user":
        what = ", ".join(p.user_vars)
        n = f"{p.threads}" if p.threads is not None else "your setting"
        return f"BLAS threads per worker: {n} (you set {what}; the guard left it)"
    return (f"BLAS threads per worker: {p.threads} ({p.cores} core{'s' if p.cores != 1 else ''} / "
            f"{p.workers} worker{'s' if p.workers != 1 else ''}); was {p.default}")


# The worker side and the variables live in .variables (light: the start-up imports them); they stay importable here.
__all__ = ["THREAD_VARS", "LIMIT_ENV", "USER_ENV", "GuardPlan", "user_thread_vars", "plan", "worker_env", "describe",
           "apply_once"]
