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
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from eugo_lab.settings import THREADS_PER_WORKER_ENV, THREADS_USER_ENV

#: The variables BLAS/OpenMP/NumExpr/Numba read for their thread counts.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS")
#: The limit the driver chose for its workers (or the user's explicit choice, set in the driver's environment).
LIMIT_ENV = THREADS_PER_WORKER_ENV
#: Set by the driver when the user chose thread variables themselves: the worker then changes nothing.
USER_ENV = THREADS_USER_ENV


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


def user_thread_vars(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``VAR=value`` for each thread variable the user set (the driver's environment)."""
    env = os.environ if env is None else env
    return tuple(f"{v}={env[v]}" for v in THREAD_VARS if env.get(v))


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


# -- worker side --------------------------------------------------------------------------------------
_applied: dict[str, object] | None = None


def apply_once() -> dict[str, object] | None:
    """Apply the driver's plan in this worker process, once; returns what was done (None: nothing to do).

    Cheap after the first call (one global test): ``run_task`` calls it before every task.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = {}
    if os.environ.get(USER_ENV):
        _applied = {"left": os.environ[USER_ENV]}
        return _applied
    raw = os.environ.get(LIMIT_ENV, "")
    if not raw.isdigit():
        return _applied  # not a worker we started: leave it as its operator set it
    n = max(1, int(raw))
    for v in THREAD_VARS:
        os.environ.setdefault(v, str(n))  # for libraries this process loads later
    done: dict[str, object] = {"threads": n}
    if "numpy" in sys.modules:  # a BLAS already loaded read its thread count at load: set it now
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=n)
            done["threadpoolctl"] = True
        except Exception:  # noqa: BLE001 - threadpoolctl missing or a library refusing: the env still applies
            done["threadpoolctl"] = False
    numba = sys.modules.get("numba")
    if numba is not None:
        try:
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        except Exception:  # noqa: BLE001 - numba's threading layer not usable here
            pass
    _applied = done
    return _applied
