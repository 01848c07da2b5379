"""Dask distributed: an embedded cluster, a running scheduler, or any Dask cluster manager.

``hpc.init(backend="dask", workers=4)`` starts an embedded cluster that listens on
127.0.0.1 only: the scheduler in this process, the workers (one thread each) in a process of
their own (see ``_WorkerProcesses``: a script needs no ``if __name__ == "__main__":`` guard,
and the workers end with this process, even when it is SIGKILLed).
``hpc.init(address="tcp://host:8786")`` connects to a running scheduler;
``hpc.init(cluster=obj)`` takes any object with a ``scheduler_address`` (``LocalCluster``,
dask-jobqueue's ``SLURMCluster``, dask-kubernetes...).

Every task is one Dask task that runs ``_dask_task`` on a worker, which runs the body
through the same ``execute`` code as the local pool. Retries stay in the eugo runtime:
tasks are submitted with ``retries=0``, and an embedded cluster's scheduler gives up on a
task after its first worker death (``allowed-failures=0``), which we report as CRASHED so
the runtime retries it (a scheduler we merely connect to keeps its own setting and may
re-run the task itself first; a ``KilledWorker`` still ends as CRASHED here). Dask blames a
worker's death on every task the worker held, not only the one it was running: a task queued
behind one that kills its worker ends CRASHED too, and its retry counts. (Ray starts a task's
process only to run it, so there the crash is the culprit's alone.) An ``hpc.map`` batch that
crashed goes again item by item (``Runtime._batch_crashed``: Dask cannot say how far it got).

Memory limits (``@hpc.remote(memory=...)``, ``hpc.init(backend="dask", memory_limit=...)``,
a default for every task) are enforced on the worker by the shared watchdog (see
``_worker._MemoryWatchdog``): the task is stopped inside its worker, which stays up, and
reported with the limit and the growth seen, never retried. Should the watchdog have to
kill the worker process (a task that ignores the stop), it first logs the verdict on the
scheduler's event log (topic ``MEMORY_TOPIC``), where the driver finds it when Dask
reports the worker lost. Dask's own per-worker ``memory_limit`` (the nanny's) is left at
Dask's default: it guards the worker process as a whole, not a task.

Results are awaited on the client's event loop (many gathers in flight at once, one
round trip each) and reported from our own thread (see ``_cluster.Reporter``).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import dask
import distributed
from dask.sizeof import sizeof
from dask.utils import parse_timedelta
from distributed.scheduler import KilledWorker, NoValidWorkerError, NoWorkerError
from distributed.worker_memory import parse_memory_limit

from eugo_lab.backends import _cluster
from eugo_lab.backends._lifeline import Lifeline
from eugo_lab.contract import base, outcome
from eugo_lab.contract.errors import BackendError
from eugo_lab.contract.outcome import Crash, Outcome
from eugo_lab.contract.refs import ObjectRef, describe_type
from eugo_lab.contract.task import Task

log = logging.getLogger("eugo_lab")

_DRIVER = uuid.uuid4().hex[:12]  # makes function-cache keys and Dask keys unique per driver process
_INFO_MAX_AGE = 2.0  # seconds a fetched scheduler_info() may be reused for resource checks
MEMORY_TOPIC = "eugo-memory"  # scheduler event-log topic of memory-limit kills (see _memory_kill_hook)
# How long the watchdog waits after logging a kill before it ends the worker: the event goes
# out on the worker's batched stream within milliseconds; this leaves a wide margin.
_EVENT_FLUSH_S = 0.5
_WORKERS_START_S = 60.0  # how long the embedded cluster's workers may take to register (a loaded machine)
_WORKERS_EXIT_S = 5.0  # how long their process may take to exit on SIGTERM before it is killed


def _memory_kill_hook() -> Any:
    """What a worker's watchdog calls before it kills the process: log the verdict on the scheduler."""
    # Both looked up here, on the task's thread: get_worker() and the current key are per thread.
    worker = distributed.get_worker()
    key = worker.get_current_task()

    def report(verdict: dict) -> None:
        worker.log_event(MEMORY_TOPIC, {"key": key, **verdict})
        time.sleep(_EVENT_FLUSH_S)

    return report


def _dask_task(fn_key: tuple, fn_payload: bytes, name: str, args: bytes, deps: dict | None, is_batch: bool,
               probe: bool, limit: int | None, ref_ids: tuple, *ref_values: Any) -> tuple:
    """The Dask task: run the body via ``execute``; return its outcome and who ran it."""
    _cluster.mark_engine_worker("dask")  # a .remote() in the body submits to this scheduler (hpc.engine_nested)
    on_kill = _memory_kill_hook() if limit else None
    status, payload, extra, stats = _cluster.run_task(fn_key, fn_payload, name, args, deps, is_batch, ref_ids,
                                                      ref_values, time.thread_time, limit, on_kill, probe)
    try:
        address = distributed.get_worker().address
    except ValueError:  # pragma: no cover - not on a Dask worker (never in practice)
        address = ""
    host, pid = _cluster.host_and_pid()
    return status, payload, extra, stats, (address, host, pid, _cluster.cuda_device())


def parse_idle_timeout(value: Any) -> float | None:
    """``"10m"`` -> 600.0, ``30`` -> 30.0, ``None`` -> ``None``; raise ``ValueError`` otherwise."""
    if value is None:
        return None
    try:
        seconds = parse_timedelta(value, default="seconds")
    except (ValueError, TypeError, KeyError):
        seconds = None
    if seconds is None or isinstance(value, bool) or seconds <= 0:
        raise ValueError(f"idle_timeout must be a positive number of seconds or a string like '30s' or '10m', "
                         f"got {value!r}")
    return float(seconds)


@dataclass(frozen=True)
class IdleStop:
    """One time the idle timer stopped the embedded cluster: what it measured and what was left.

    ``at``: wall-clock time (``time.time()``) when the timer fired. ``idle_s``: seconds without a
    task or a stored object at that moment (at least ``timeout``: the timer checks a few times per
    timeout). ``workers``: the workers registered then, ``worker_pids`` their processes, and
    ``exit_code`` the status of the process that held them once the close returned (``None``:
    it was still running).
    """

    at: float
    idle_s: float
    timeout: float
    workers: int
    worker_pids: tuple[int, ...]
    exit_code: int | None


# Every idle stop of this process's embedded clusters, newest last (a backend replaced by hpc.init
# is gone, but a grader still tells a value priced from its stop from one of the current cell).
_ALL_STOPS: collections.deque[IdleStop] = collections.deque(maxlen=100)


def recorded_idle_stops() -> tuple[IdleStop, ...]:
    """The idle stops of every embedded cluster this process started, oldest first (the last 100)."""
    return tuple(_ALL_STOPS)


class _WorkerProcesses:
    """The embedded cluster's workers: one ``dask spec`` process running a nanny per worker.

    Why not ``LocalCluster(processes=True)``: its nannies run in this process and start the
    workers through multiprocessing, which re-imports the caller's ``__main__`` (spawn and
    forkserver alike), so a plain script without an ``if __name__ == "__main__":`` guard ran
    its top level again in every worker and failed with "Nanny failed to start". In the
    ``dask spec`` process ``__main__`` is Dask's own (guarded) module, while the nannies do
    what they did here: start the workers, and replace one that dies (SIGKILL, the memory
    watchdog) so that the cluster keeps its size.

    Lifetime: a worker dies with its nanny (Dask's parent-alive pipe), and a
    :class:`~eugo_lab.backends._lifeline.Lifeline` watcher kills the whole process tree
    when this process goes away, even by SIGKILL (nothing in this process runs then). The
    process starts in its own session, so a Ctrl+C or Jupyter's Interrupt (which signal the
    driver's process group) does not stop the workers.
    """

    def __init__(self, n: int, nthreads: int, resources: dict[str, float] | None, scheduler_file: str):
        # Each worker declares its task threads as the resource CPU (unless the caller declared CPU itself),
        # so that cpus=N can be asked of it: see DaskBackend._resources.
        resources = {"CPU": nthreads, **(resources or {})}
        # Dask's "auto" memory limit, split as LocalCluster splits it: the machine's memory
        # over the workers (a nanny alone would give each worker memory * nthreads / cores).
        memory_limit = parse_memory_limit("auto", 1, n, logger=log)
        opts = {"scheduler_file": scheduler_file, "nthreads": nthreads, "host": "127.0.0.1",
                "resources": resources, "memory_limit": memory_limit, "silence_logs": logging.ERROR,
                # A backstop for a lifeline that never started: a nanny gives up when it finds no
                # scheduler (or its worker cannot reach it) within this time, instead of waiting forever.
                "death_timeout": _WORKERS_START_S}
        spec = {str(i): {"cls": "distributed.Nanny", "opts": {**opts, "name": i}} for i in range(n)}
        self.gpus_present = True  # the GPUs the workers declare have devices behind them (see ClusterInfo)
        if resources and resources.get("GPU"):
            # Workers that offer GPUs: each one pinned to a device of its own, as dask-cuda pins them
            # (without it every worker's tasks would share device 0). Devices as the local pool finds them.
            from eugo_lab.backends import local_gpus

            devices = local_gpus.resolve()
            self.gpus_present = bool(devices.tokens) and devices.present
            for i in range(n if devices.tokens else 0):
                spec[str(i)]["opts"]["env"] = {local_gpus.CUDA_VISIBLE: devices.tokens[i % len(devices)]}
        env = dict(os.environ)
        # Workers must import what this process imports (the modules of the tasks): give
        # them its sys.path. They also get its Dask configuration, as nannies running here did.
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p or os.getcwd() for p in sys.path))
        # As quiet as the nannies' silence_logs=ERROR, also while they start and close.
        env["DASK_LOGGING__DISTRIBUTED"] = "error"
        # Thread oversubscription guard: n processes x nthreads task threads share the cores.
        from eugo_lab.backends.local_process import usable_cores
        from eugo_lab.threadguard import limits as thread_guard

        env.update(thread_guard.worker_env(thread_guard.plan(usable_cores(), n * max(1, nthreads))))
        try:
            env["DASK_INTERNAL_INHERIT_CONFIG"] = dask.config.serialize(dask.config.config)
        except (TypeError, ValueError):  # pragma: no cover - a config value JSON cannot hold
            log.debug("eugo_lab: the Dask configuration is not JSON-serializable; workers use their own")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_spec", "--spec", json.dumps(spec)],
            env=env, start_new_session=True, stdin=subprocess.DEVNULL,
        )
        self.lifeline: Lifeline | None = None
        try:
            self.lifeline = Lifeline([self.proc.pid])
        except OSError as exc:  # pragma: no cover - cannot start a process now: the cluster still works
            log.warning("eugo_lab: could not start the lifeline watcher of the local Dask workers (%s); they "
                        "may outlive this process if it is killed", exc)

    def exited(self) -> int | None:
        """The exit status of the workers' process, or None while it runs."""
        return self.proc.poll()

    def close(self, timeout: float = _WORKERS_EXIT_S) -> None:
        """Stop the nannies and their workers (SIGTERM: they close properly), then kill what is left."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        if self.lifeline is not None:
            self.lifeline.close()  # the watcher kills the nannies and workers still running
            self.lifeline = None
        if self.proc.poll() is None:  # pragma: no cover - no lifeline, or it could not kill
            self.proc.kill()
        self.proc.wait()


_EMBEDDED: weakref.WeakSet[DaskBackend] = weakref.WeakSet()  # backends that started an embedded cluster


def _shut_down_at_exit() -> None:
    for backend in list(_EMBEDDED):
        try:
            backend.shutdown()
        except Exception:  # noqa: BLE001 - interpreter exit
            pass


# Registered after distributed's exit hooks (imported above), so it runs before them (atexit
# is last in, first out): the client lets its results go and the workers close before Dask's
# hook closes the scheduler under them. The other way round, each worker goes through a slower
# shutdown that logs errors, and results still held are recomputed on workers that are leaving.
atexit.register(_shut_down_at_exit)


class DaskBackend(base.Backend):
    """Tasks run as Dask tasks on a ``distributed`` cluster."""

    name = "dask"

    def __init__(self, workers: int | None = None, address: str | None = None, cluster: Any = None, *,
                 idle_timeout: Any = None, threads_per_worker: int = 1, dashboard: bool = True,
                 timeout: float = 5.0, memory_limit: int | str | None = None,
                 resources: dict[str, float] | None = None, no_workers_timeout: Any = "60s"):
        from eugo_lab.units import parse_bytes

        if cluster is not None and address is not None:
            raise ValueError("pass either address= or cluster= to the dask backend, not both")
        if cluster is not None and not hasattr(cluster, "scheduler_address"):
            raise TypeError(f"cluster= must be a Dask cluster manager (an object with .scheduler_address), "
                            f"got {type(cluster).__name__}")
        if (address is not None or cluster is not None) and workers is not None:
            raise ValueError("workers= applies to the embedded Dask cluster only; size an existing cluster "
                             "with its own tools (cluster.scale(n), dask worker ...)")
        self.n_workers = workers
        self.address = address
        self.cluster = cluster
        self.idle_timeout = parse_idle_timeout(idle_timeout)
        if self.idle_timeout is not None and (address is not None or cluster is not None):
            raise ValueError("idle_timeout= applies to the embedded Dask cluster only (hpc.init(backend='dask'))")
        self.threads_per_worker = threads_per_worker
        self.dashboard = dashboard
        self.timeout = float(timeout)
        # The default per-task limit (a task's memory= option wins), as on the local pool.
        self.memory_limit = parse_bytes(memory_limit, "memory_limit")
        # Tasks queued while the embedded cluster has no worker fail after this long with
        # NoWorkersError instead of waiting forever (Dask's no-workers-timeout; a scheduler
        # you connect to keeps its own setting).
        self.no_workers_timeout = parse_timedelta(no_workers_timeout)
        self.worker_resources = dict(resources or {})
        self.client: distributed.Client | None = None
        self._local: distributed.LocalCluster | None = None  # the embedded cluster's scheduler, when we started it
        self._procs: _WorkerProcesses | None = None  # and its workers
        self._lifecycle = threading.RLock()
        self._reporter: _cluster.Reporter | None = None
        self._index = _cluster.WorkerIndex()
        self._info_cache: tuple[float, dict] | None = None
        self._cpu_cache: tuple[frozenset, str] | None = None  # (worker addresses, what their CPUs are)
        self._live_refs: set[int] = set()
        self._stopped = False
        self._idle_stopped = False
        # Why the embedded cluster stopped, each time its idle timer stopped it (a cost lesson's
        # grader reads these: a cluster shut down by hand leaves no entry).
        self.idle_stops: list[IdleStop] = []
        self._this_stop: IdleStop | None = None  # the stop that ended the current (stopped) cluster, once recorded
        self._idle_thread: threading.Thread | None = None
        self._idle_wake = threading.Event()
        self._borrowed = False  # the client is a worker's own (in_task): never closed here

    @classmethod
    def in_task(cls) -> DaskBackend:
        """The engine as a task running on a Dask worker sees it: the worker's own client, borrowed.

        Its tasks go to the scheduler the worker belongs to (the driver's). The client is the
        worker's (``distributed.get_client()``): this backend never closes it, and its
        ``shutdown`` cancels only its own tasks.
        """
        try:
            worker = distributed.get_worker()
        except ValueError as exc:
            raise BackendError("dask backend: a task asked for the Dask engine of its worker, but this thread "
                               "is not running a task of a Dask worker") from exc
        be = cls(address=worker.scheduler.address)
        be.client = distributed.get_client()
        be._borrowed = True
        be._reporter = _cluster.Reporter("eugo-dask-task-report")
        return be

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def embedded(self) -> bool:
        """True when this backend starts (and stops) its own cluster."""
        return self.address is None and self.cluster is None

    def start(self) -> None:
        """Start the embedded cluster or connect; raises ``BackendError`` naming the address."""
        self._reporter = _cluster.Reporter("eugo-dask-report")
        self._connect()
        # The idle spell starts now, not when the reporter was made: starting the workers can take longer than a
        # short timeout on a loaded machine, and the timer would then close the cluster before its first task.
        self._reporter.last_activity = time.monotonic()
        if self.idle_timeout is not None:
            self._idle_thread = threading.Thread(target=self._idle_loop, name="eugo-dask-idle", daemon=True)
            self._idle_thread.start()

    def _make_local(self, n: int) -> None:
        """Start the embedded cluster: its workers' process, then the scheduler here; wait for the workers."""
        # The workers find the scheduler through this file, so their process can start first
        # and import Dask while the scheduler starts here (a fixed port chosen in advance
        # could be taken by then).
        folder = tempfile.mkdtemp(prefix="eugo-dask-")
        scheduler_file = os.path.join(folder, "scheduler.json")
        try:
            self._procs = _WorkerProcesses(n, self.threads_per_worker, self.worker_resources or None, scheduler_file)
            # A LocalCluster without workers: the scheduler in this process, on its event loop.
            self._local = distributed.LocalCluster(
                n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                worker_dashboard_address=None, silence_logs=logging.ERROR,
                # The eugo runtime retries crashed tasks itself: Dask must not re-run them too.
                # The scheduler always serves HTTP (health, metrics); without a dashboard it would
                # take port 8787 and warn when a second cluster finds it taken, so every embedded
                # cluster gets a free loopback port and the dashboard itself only when asked for.
                scheduler_kwargs={"allowed_failures": 0, "dashboard": self.dashboard,
                                  "scheduler_file": scheduler_file},
            )
            self.client = distributed.Client(self._local, set_as_default=False, timeout=self.timeout)
            self._wait_for_workers(self.client, n)
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # every nanny read it when it was created

    def _wait_for_workers(self, client: distributed.Client, n: int) -> None:
        """Block until ``n`` workers registered, as LocalCluster did; fail early if their process ends."""
        procs = self._procs
        assert procs is not None
        deadline = time.monotonic() + _WORKERS_START_S
        while len(client.scheduler_info(n_workers=-1)["workers"]) < n:
            code = procs.exited()
            if code is not None:
                raise BackendError(f"the process of its workers exited with status {code} (its error, if any, "
                                   "is printed above)")
            if time.monotonic() > deadline:
                raise BackendError(f"its workers did not start within {_WORKERS_START_S:g} s")
            time.sleep(0.02)

    def _connect(self) -> None:
        if self.embedded:
            n = self.n_workers
            if n is None:
                from eugo_lab.backends.local_process import usable_cores

                n = usable_cores()
            try:
                with dask.config.set({"distributed.scheduler.no-workers-timeout": self.no_workers_timeout}):
                    self._make_local(n)
            except BaseException as exc:
                self._close_quietly()  # also on Ctrl+C while the workers start: nothing of it stays behind
                if not isinstance(exc, Exception):
                    raise
                raise BackendError(f"dask backend: could not start a local Dask cluster of {n} workers: {exc}") from exc
            _EMBEDDED.add(self)
            log.info("eugo_lab: started a local Dask cluster at %s", self._local.scheduler_address)
        else:
            target: Any = self.address
            where = self.address
            kwargs: dict[str, Any] = {}
            if self.cluster is not None:
                where = self.cluster.scheduler_address
                # A distributed Cluster (LocalCluster, dask-jobqueue, dask-kubernetes...) is passed
                # as is (the client then uses its security settings); anything else that only
                # has a scheduler_address is connected to by address.
                if isinstance(self.cluster, distributed.deploy.Cluster):
                    target = self.cluster
                else:
                    target = where
                    if getattr(self.cluster, "security", None) is not None:
                        kwargs["security"] = self.cluster.security
            try:
                self.client = distributed.Client(target, set_as_default=False, timeout=self.timeout, **kwargs)
            except Exception as exc:  # OSError/TimeoutError from the comm layer, ValueError for bad addresses
                self._close_quietly()
                raise BackendError(
                    f"dask backend: could not connect to the Dask scheduler at {where} within {self.timeout:g} s "
                    f"({type(exc).__name__}: {exc}). Check that the scheduler runs and that this machine can "
                    "reach that host and port."
                ) from exc
        self._info_cache = None
        self._idle_stopped = False
        self._this_stop = None

    def _close_quietly(self) -> None:
        client, local, procs = self.client, self._local, self._procs
        self.client = self._local = self._procs = None
        if client is not None and not self._borrowed:
            try:
                client.close(timeout=5)
            except Exception:  # noqa: BLE001 - closing what already failed
                pass
        # The workers first: closed by their nannies they leave at once, while a closing
        # scheduler's "close" sends each through a slower path (seconds) that logs errors.
        if procs is not None:
            procs.close()
        if local is not None:
            try:
                local.close(timeout=10)
            except Exception:  # noqa: BLE001
                pass

    def _ensure_client(self) -> distributed.Client:
        client = self.client
        if client is not None:
            return client
        with self._lifecycle:
            if self._stopped:
                raise _cluster.shut_down_error("Dask")
            if self.client is None:
                log.info("eugo_lab: starting a new local Dask cluster (the previous one stopped after being idle)")
                self._connect()
                if self._reporter is not None:
                    # A new cluster is not idle: without this, the idle loop could read the old
                    # cluster's last activity and close the new one before the task that
                    # started it is even submitted (seen on a loaded machine).
                    self._reporter.last_activity = time.monotonic()
            return self.client  # type: ignore[return-value]

    def shutdown(self) -> None:
        """Cancel what is pending, close the client, and stop the embedded cluster; idempotent."""
        with self._lifecycle:
            if self._stopped:
                return
            self._stopped = True
            self._idle_wake.set()
            if self._reporter is not None:
                handles = self._reporter.cancel_all()
                client = self.client
                if client is not None and handles:
                    try:
                        client.cancel([h for h in handles if h is not None], force=True)
                    except Exception:  # noqa: BLE001 - the scheduler may be gone already
                        pass
            self._close_quietly()
            if self._reporter is not None:
                self._reporter.stop()

    # -- idle shutdown ---------------------------------------------------------------------
    def _idle_loop(self) -> None:
        timeout = self.idle_timeout
        assert timeout is not None
        step = min(1.0, timeout / 4)
        while not self._idle_wake.wait(step):
            rep = self._reporter
            if self.client is None or rep is None or rep.busy or self._live_refs:
                continue
            idle = time.monotonic() - rep.last_activity
            if idle < timeout:
                continue
            with self._lifecycle:
                if self._stopped or self.client is None or rep.busy or self._live_refs:
                    continue
                if time.monotonic() - rep.last_activity < timeout:
                    continue
                idle = time.monotonic() - rep.last_activity
                log.warning("eugo_lab: shutting down the local Dask cluster after %.0f s without tasks "
                            "(idle_timeout=%g s); the next task starts a new one", idle, timeout)
                at = time.time()
                workers = self._registered_workers()
                procs = self._procs
                self._idle_stopped = True  # before closing: info() reads it while the close runs
                self._close_quietly()
                code = procs.exited() if procs is not None else None
                stop = IdleStop(at=at, idle_s=idle, timeout=timeout, workers=len(workers),
                                worker_pids=tuple(workers), exit_code=code)
                self.idle_stops.append(stop)
                _ALL_STOPS.append(stop)
                self._this_stop = stop

    def _registered_workers(self) -> list[int]:
        """The process ids of the workers registered now (empty when the scheduler cannot say)."""
        client = self.client
        if client is None:
            return []
        try:
            # Asked of the workers themselves: the scheduler's worker list does not carry their pids.
            pids = client.run(os.getpid)
        except Exception:  # noqa: BLE001 - a scheduler or worker already closing: nothing to list
            return []
        return sorted(int(p) for p in pids.values())

    # -- tasks -------------------------------------------------------------------------------
    def _scheduler_info(self, client: distributed.Client, fresh: bool = False) -> dict:
        cached = self._info_cache
        now = time.monotonic()
        if not fresh and cached is not None and now - cached[0] < _INFO_MAX_AGE:
            return cached[1]
        info = client.scheduler_info(n_workers=-1)
        self._info_cache = (now, info)
        return info

    def _resources(self, client: distributed.Client, task: Task) -> dict[str, float] | None:
        """The Dask resources ``task`` asks for, checked against what the workers offer.

        ``cpus=``: the embedded cluster's workers declare their task threads as the resource
        ``CPU``, and every task asks for its ``cpus=`` of it, so a ``cpus=2`` task holds two of a
        worker's threads and nothing else runs on them meanwhile. On a cluster we connect to,
        workers offer ``CPU`` only if started with it (``dask worker --resources "CPU=4"``), so
        only a task whose ``cpus=`` is not 1 asks for it (Dask counts a resource among the tasks
        that ask for it, not others), and one that no worker offers is refused.
        """
        opts = task.options
        wanted = _cluster.wanted_resources(task, cpus=self.embedded or opts.cpus != 1)
        if not wanted:
            return None
        for fresh in (False, True):  # a cached view first; a fresh one before refusing
            offers = [w.get("resources") or {} for w in self._scheduler_info(client, fresh)["workers"].values()]
            if _cluster.offered(wanted, offers):
                return wanted
        need = ", ".join(f"{k}={v:g}" for k, v in wanted.items())
        how = (f"a cluster whose workers have it (hpc.init(backend='dask', threads_per_worker={math.ceil(opts.cpus)}) "
               "gives each worker that many threads)" if self.embedded and set(wanted) == {"CPU"} else
               f'workers with the resource (dask worker ... --resources "{need}")')
        raise _cluster.no_offer_error(task, wanted, offers, engine="Dask", unit="worker", how=how)

    def _connection_lost(self) -> bool:
        """The client gave up on its scheduler (Dask closes it after a few seconds of failed reconnects)."""
        client = self.client
        if client is None or self._stopped:
            return False
        return getattr(client, "status", "running") in ("closed", "closing")

    def _lost_message(self, what: str) -> str:
        where = self.address or (self.cluster.scheduler_address if self.cluster is not None else "its local cluster")
        return (f"the connection to the Dask scheduler at {where} {what}. Check that the scheduler is running "
                "and reachable, then call hpc.init(...) to connect again (a new embedded cluster: hpc.init()).")

    def submit(self, task: Task, on_done: base.DoneCallback) -> None:
        """Submit one Dask task; its outcome is reported from the reporter thread."""
        if self._stopped:
            raise _cluster.shut_down_error("Dask")
        if self._connection_lost():
            raise BackendError(self._lost_message("is closed: the scheduler stopped answering"))
        client = self._ensure_client()
        resources = self._resources(client, task)
        fn = task.fn
        name = task.label
        refs = [t for t in task.tokens if type(t) is ObjectRef]
        attempt = task.attempt
        key = f"{name}-{_DRIVER}-{task.task_id}-{attempt}"
        limit = task.options.memory or self.memory_limit
        reporter = self._reporter
        assert reporter is not None
        try:
            dfut = client.submit(
                _dask_task, (_DRIVER, fn.fid), fn.payload, name, task.args, task.deps_payload,
                task.is_batch, task.probe, limit, tuple(r.ref_id for r in refs), *(r.location for r in refs),
                key=key, pure=False, retries=0, resources=resources,
            )
        except Exception as exc:
            raise BackendError(f"dask backend: could not submit {name}(): {exc}") from exc
        fn.count_send()  # the payload is an argument of every Dask task: it travels with each one
        reporter.register(task, on_done, dfut)
        asyncio.run_coroutine_threadsafe(self._watch(dfut, task, attempt, key if limit else None),
                                         client.loop.asyncio_loop)

    async def _watch(self, dfut: distributed.Future, task: Task, attempt: int, limited_key: str | None) -> None:
        try:
            value = await dfut._result(raiseit=False)
        except BaseException as exc:  # noqa: BLE001 - the client was closed, the connection lost...
            value = exc
        status = dfut.status
        del dfut  # the worker may drop the result now: we hold it as bytes
        rep = self._reporter
        if rep is not None:
            rep.post(self._settle, task, attempt, status, value, limited_key)

    def _memory_verdict(self, key: str) -> Crash | None:
        """The verdict a worker's watchdog logged before it killed itself running ``key``, if any."""
        client = self.client
        if client is None:
            return None
        try:
            events = client.get_events(MEMORY_TOPIC)
        except Exception:  # noqa: BLE001 - scheduler gone: an ordinary crash then
            return None
        for _, msg in reversed(events):
            if isinstance(msg, dict) and msg.get("key") == key:
                return Crash.from_dict(msg)
        return None

    def _settle(self, task: Task, attempt: int, status: str, value: Any, limited_key: str | None = None) -> None:
        rep = self._reporter
        assert rep is not None
        if status == "finished" and isinstance(value, tuple) and len(value) == 5:
            st, payload, detail, stats, (address, host, pid, device) = value
            worker = self._index.index(address, host, pid, address)
            result = outcome.from_worker(st, payload, detail, stats, worker, task.is_batch)
            gpu = _cluster.held_gpu(task, device)
            rep.finish(task, attempt, result._replace(gpu=gpu) if gpu >= 0 else result)
            return
        exc = value[1] if isinstance(value, tuple) and len(value) == 3 else value
        if isinstance(exc, KilledWorker):
            # The worker died while running the task (SIGKILL, segfault, out of memory), or
            # our watchdog killed it for the task's memory limit and logged why.
            verdict = self._memory_verdict(limited_key) if limited_key else None
            rep.finish(task, attempt, Outcome.crashed(verdict or Crash(outcome.DIED)))
        elif isinstance(exc, (NoWorkerError, NoValidWorkerError)):
            message = (f"the Dask cluster had no worker able to run it ({exc}). Start workers "
                       "(dask worker ...), or call hpc.init() for a new cluster.")
            rep.finish(task, attempt, Outcome.crashed(Crash(outcome.NO_WORKERS, message=message)))
        elif status == "cancelled" or isinstance(exc, (asyncio.CancelledError, concurrent.futures.CancelledError)):
            reason = getattr(exc, "reason", None)
            if reason == "scheduler-connection-lost" or self._connection_lost():
                # Nobody cancelled it: the scheduler went away (stopped, crashed, unreachable).
                rep.finish(task, attempt, Outcome.crashed(Crash(outcome.ENGINE_LOST, message=self._lost_message(
                    "was lost while the task was queued or running, and its result with it"))))
                return
            reason = reason or "Dask cancelled it (the scheduler restarted or the client closed)"
            rep.finish(task, attempt, Outcome.cancelled(f"it was cancelled: {reason}"))
        else:
            if not isinstance(exc, BaseException):
                exc = BackendError(f"dask backend: the task ended in state {status!r} without a result")
            payload, tb = _cluster.error_outcome(exc, "dask")
            rep.finish(task, attempt, Outcome(base.ERROR, payload, traceback=tb))

    def cancel(self, task: Task) -> None:
        """Report the task cancelled now; Dask forgets it (a running body finishes unseen)."""
        rep = self._reporter
        if rep is None:
            return
        dfut = rep.cancel(task)
        client = self.client
        if dfut is not None and client is not None:
            try:
                client.cancel([dfut], force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    # -- objects --------------------------------------------------------------------------------
    def put(self, obj: Any) -> ObjectRef:
        """Scatter ``obj`` to one worker; Dask copies it to the workers whose tasks need it."""
        if self._connection_lost():
            raise BackendError(self._lost_message("is closed: the scheduler stopped answering"))
        client = self._ensure_client()
        [dfut] = client.scatter([obj], broadcast=False, hash=False)
        ref = ObjectRef(dfut, sizeof(obj), describe_type(obj))
        rid = ref.ref_id
        self._live_refs.add(rid)
        if self._reporter is not None:
            self._reporter.last_activity = time.monotonic()
        ref._release = lambda: self._live_refs.discard(rid)  # dropping the Dask future frees the data
        return ref

    def get_object(self, ref: ObjectRef) -> Any:
        """Gather the stored object to the driver."""
        if self._connection_lost():
            raise BackendError(self._lost_message("is closed, and the objects stored through it are gone"))
        return ref.location.result()

    def token(self, ref: ObjectRef) -> tuple:
        """The object travels as a Dask dependency (an extra task argument), the token names it."""
        return ("ref", ref.ref_id)

    # -- info ---------------------------------------------------------------------------------------
    def info(self) -> base.ClusterInfo:
        """Workers, threads, memory and GPUs the scheduler reports, its address and dashboard."""
        client = self.client
        if self._connection_lost():
            return base.ClusterInfo(backend="dask", workers=0, cores=0, memory=0, address="(scheduler lost)",
                                    extra={"state": self._lost_message("is closed")})
        if client is None:
            state = "stopped after being idle; the next task starts it again" if self._idle_stopped else "stopped"
            extra: dict[str, Any] = {"state": state}
            if self._idle_stopped and self._this_stop is not None:
                extra["idle_stop"] = self._this_stop  # what the timer measured, once the close is done
            return base.ClusterInfo(backend="dask", workers=0, cores=0, memory=0, address=f"({state})",
                                    extra=extra)
        sinfo = self._scheduler_info(client, fresh=True)
        workers = sinfo.get("workers", {})
        threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
        memory = sum(int(w.get("memory_limit") or 0) for w in workers.values())
        gpus = sum((w.get("resources") or {}).get("GPU", 0) for w in workers.values())
        dashboard = None
        # The scheduler lists its HTTP server as "dashboard" even when it serves no dashboard
        # pages (dashboard=False): only link one that was asked for.
        if self.dashboard and "dashboard" in sinfo.get("services", {}):
            try:
                dashboard = client.dashboard_link
            except Exception:  # noqa: BLE001 - no dashboard
                dashboard = None
        return base.ClusterInfo(
            backend="dask", workers=len(workers), cores=threads, memory=memory, gpus=int(gpus),
            address=sinfo.get("address") or client.scheduler.address, dashboard=dashboard,
            threads_per_worker=max(1, threads // len(workers)) if workers else 1,
            extra={"embedded": self.embedded}, cpu=self._cpus(client, workers),
            gpus_detected=self._procs is None or self._procs.gpus_present,
        )

    def _cpus(self, client: distributed.Client, workers: dict) -> str:
        """The workers' CPUs: this machine's for the embedded cluster, else asked of each worker once."""
        if self.embedded:
            return _cluster.this_cpu()
        key = frozenset(workers)
        cached = self._cpu_cache
        if cached is None or cached[0] != key:
            try:
                from eugo_lab.hardware.cpu import describe_cpu

                answers = client.run(describe_cpu, workers=list(workers)) if workers else {}
            except Exception:  # noqa: BLE001 - workers without eugo_lab, a worker leaving: unknown, not an error
                answers = {}
            cached = self._cpu_cache = (key, _cluster.describe_cpus(list(answers.values())))
        return cached[1]

    def workers(self) -> list[base.WorkerInfo]:
        """Workers registered now (with stable indices) plus any seen earlier running tasks."""
        client = self.client
        if client is not None:
            try:
                for addr, w in sorted(self._scheduler_info(client).get("workers", {}).items()):
                    self._index.index(addr, w.get("host", ""), int(w.get("pid") or 0), addr)
            except Exception:  # noqa: BLE001 - scheduler unreachable: report what we know
                pass
        return self._index.all()

    @property
    def started_workers_here(self) -> bool:
        """True while the embedded cluster's worker processes, started here, run."""
        return self._procs is not None

    @property
    def worker_count(self) -> int:
        """Tasks that can run at once: the cluster's threads (at least 1)."""
        client = self.client
        if client is None:
            return max(1, (self.n_workers or 1) * self.threads_per_worker)
        try:
            workers = self._scheduler_info(client).get("workers", {})
        except Exception:  # noqa: BLE001
            return 1
        return max(1, sum(int(w.get("nthreads", 0)) for w in workers.values()))


__all__ = ["DaskBackend", "IdleStop", "recorded_idle_stops"]
