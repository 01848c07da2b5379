"""The BLAS/OpenMP thread variables: which the user set, and applying the driver's limit in a worker.

Apart from :mod:`eugo_lab.threadguard.limits` (which plans the limit and re-exports these
names) because both ends of a local pool's start-up need them: the driver builds the worker
template's environment from them before it starts that process, and each worker applies
the limit before its first task. Every import on those paths delays the first result
(the limits module's dataclasses and inspect cost ~5 ms), so this module imports ``os``, ``sys``
and the settings only (not even ``typing`` or ``collections``).
"""

from __future__ import annotations

import os
import sys

from eugo_lab.settings import THREADS_PER_WORKER_ENV, THREADS_USER_ENV

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (and collections) before the template starts
if TYPE_CHECKING:
    from collections.abc import Mapping

#: The variables BLAS/OpenMP/NumExpr/Numba read for their thread counts.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS")
#: The limit the driver chose for its workers (or the user's explicit choice, set in the driver's environment).
LIMIT_ENV = THREADS_PER_WORKER_ENV
#: Set by the driver when the user chose thread variables themselves: the worker then changes nothing.
USER_ENV = THREADS_USER_ENV


def user_thread_vars(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``VAR=value`` for each thread variable the user set (the driver's environment)."""
    env = os.environ if env is None else env
    return tuple(f"{v}={env[v]}" for v in THREAD_VARS if env.get(v))


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
