"""Ray: a local Ray instance on this machine, or a running Ray cluster.

``hpc.init(backend="ray", workers=4)`` starts Ray here with 4 CPUs (loopback only, no
dashboard, quiet logging, every process tied to this one: see ``_start_local``);
``hpc.init(address="ray://head:10001")`` or
``hpc.init(address="auto")`` connects to a running cluster. If this process is already
connected to Ray (``ray.init()`` was called by the user), that connection is used as is
and left alone at ``hpc.shutdown()``.

Every task is one Ray task running ``_ray_task``, which runs the body through the same
``execute`` code as the local pool. Ray's own retries are off (``max_retries=0``): a task
whose worker died is reported CRASHED and the eugo runtime decides whether to re-run it.

Memory limits (``@hpc.remote(memory=...)``, which also reserves Ray's ``memory`` resource,
and ``hpc.init(backend="ray", memory_limit=...)``, a default for every task) are enforced
in the worker by the shared watchdog (``_worker._MemoryWatchdog``): Ray itself only
schedules by the ``memory`` resource, and its memory monitor acts on the whole node at 95 %.
A task over its limit is stopped inside its worker process, which Ray keeps using. Should
the watchdog have to kill the process (a task that ignores the stop), it first stores the
verdict in Ray's internal key-value store (GCS), where the driver reads it when Ray reports
the worker dead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import ray
import ray.exceptions as rex

from eugo_lab.backends import _cluster
from eugo_lab.backends._gcs_watch import LOST_AFTER, PROBE_SECONDS, GcsWatch
from eugo_lab.backends._lifeline import Lifeline
from eugo_lab.contract import base, outcome
from eugo_lab.contract.errors import BackendError, TaskCancelled
from eugo_lab.contract.outcome import Crash, Outcome
from eugo_lab.contract.refs import ObjectRef, describe_type
from eugo_lab.contract.task import Task

log = logging.getLogger("eugo_lab")

_DRIVER = uuid.uuid4().hex[:12]
_INFO_MAX_AGE = 2.0
FORCE_CANCEL_AFTER = 2.0  # seconds a running task may take to honour a gentle cancel (cancel_grace)
_KV_NAMESPACE = "eugo"  # Ray internal-KV namespace of memory-limit verdicts (see _memory_kill_hook)
# Set once this process's Ray connection has lost its cluster: Ray cannot detach from a dead
# cluster (ray.shutdown() blocks), so no new connection can be made until the process restarts.
_dead_cluster: str | None = None
# Ray ends this whole process ("the core worker has already been shutdown ... The process will
# exit") when a thread of ours calls it while or after ray.shutdown() runs, and ray.is_initialized()
# still says True for a moment after the core worker is gone. Our threads' Ray calls (a force-cancel
# timer, the reporter's memory verdict) and our ray.shutdown() therefore take turns on this lock, and
# a thread checks that Ray is up inside it.
_RAY_CALLS = threading.Lock()
# Errors that mean "the process or node holding the task went away": the runtime may retry.
_CRASHES: tuple[type[BaseException], ...] = tuple(
    getattr(rex, n) for n in ("WorkerCrashedError", "NodeDiedError", "OwnerDiedError", "ObjectLostError",
                              "LocalRayletDiedError") if hasattr(rex, n)
)
_OOM: tuple[type[BaseException], ...] = tuple(getattr(rex, n) for n in ("OutOfMemoryError",) if hasattr(rex, n))


def _job_config() -> Any:
    """A JobConfig giving local workers the driver's ``sys.path``, so they import what it imports.

    (Ray itself adds only the driver's working directory; the local pool and Dask's
    spawned workers get the whole path, and a task must not fail on Ray alone.)
    """
    from ray.job_config import JobConfig

    paths = list(dict.fromkeys(os.path.abspath(p or os.getcwd()) for p in sys.path))
    paths = [p for p in paths if os.path.isdir(p)]
    try:
        # A worker puts each entry at the *front* of its sys.path in turn (sys.path.insert(0, p)),
        # which reverses the list: pass it reversed, so the worker searches in the driver's
        # order. In the driver's order a checkout on PYTHONPATH comes before site-packages; in
        # the reverse order a Jupyter kernel's workers imported the *installed* eugo_lab (and
        # user packages) instead of the one the kernel runs.
        return JobConfig(_py_driver_sys_path=paths[::-1])
    except TypeError:  # pragma: no cover - a Ray without this (private) option
        return JobConfig(runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}})


def _memory_kill_hook(kv_key: str) -> Any:
    """What a worker's watchdog calls before it kills the process: store the verdict in the GCS."""

    def report(verdict: dict) -> None:
        from ray.experimental.internal_kv import _internal_kv_put

        _internal_kv_put(kv_key, json.dumps(verdict), namespace=_KV_NAMESPACE)

    return report


def _raise_task_cancelled(signum: int, frame: Any) -> None:
    raise TaskCancelled("the driver cancelled this task (hpc.cancel)")


@contextlib.contextmanager
def _cancels_raise_task_cancelled() -> Iterator[None]:
    """While a task body runs, Ray's gentle cancel raises ``hpc.TaskCancelled`` in it, as on the local pool.

    Ray stops a running task with ``_thread.interrupt_main()``, which runs the main thread's
    SIGINT handler: Python's default raises ``KeyboardInterrupt``. Ours raises the one type
    a task can catch on every engine. Outside the body (a worker between tasks) Ray's own
    handler is back. Tasks Ray runs off the main thread keep Ray's behaviour.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _raise_task_cancelled)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _ray_task_body(fn_key: tuple, fn_payload: bytes, name: str, args: bytes, deps: dict | None, is_batch: bool,
                   probe: bool, limit: int | None, kv_key: str, ref_ids: tuple, *ref_values: Any) -> tuple:
    """The Ray task: run the body via ``execute``; return its outcome and who ran it."""
    # A Ray worker process runs one task at a time, so process CPU time is the task's
    # (BLAS threads included), as on the local pool, and a memory limit measures this task alone.
    _cluster.mark_engine_worker("ray")  # a .remote() in the body submits to this cluster (hpc.engine_nested)
    on_kill = _memory_kill_hook(kv_key) if limit else None
    try:
        with _cancels_raise_task_cancelled():
            status, payload, detail, stats = _cluster.run_task(fn_key, fn_payload, name, args, deps, is_batch,
                                                               ref_ids, ref_values, time.process_time, limit, on_kill,
                                                               probe)
    except TaskCancelled:  # landed outside the body (unpickling, pickling the result): nobody waits for it
        raise KeyboardInterrupt from None  # Ray's own way of ending a cancelled task
    ctx = ray.get_runtime_context()
    host, pid = _cluster.host_and_pid()
    # The GPU Ray gave this task (num_gpus=): its id as Ray numbers the node's devices; -1 for none.
    ids = ray.get_gpu_ids()
    gpu = int(ids[0]) if ids and str(ids[0]).isdigit() else (0 if ids else -1)
    return status, payload, detail, stats, (ctx.get_worker_id(), host, pid, ctx.get_node_id(), gpu)


_ray_task = ray.remote(max_retries=0)(_ray_task_body)


@ray.remote(num_cpus=0, max_retries=0)
def _ray_describe_cpu() -> str:
    from eugo_lab.hardware.cpu import describe_cpu

    return describe_cpu()


# How long the pre-flight TCP check may take: Ray itself keeps retrying an unreachable head
# for over 35 s, far too long for a notebook cell to sit silent.
PREFLIGHT_TIMEOUT_S = 5.0


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``ray://host:port`` or ``host:port`` address (IPv6 in brackets), else ``None``."""
    from urllib.parse import urlsplit

    try:
        target = urlsplit(address if "://" in address else f"ray://{address}")
        port = target.port
    except ValueError:  # a port that is not a number
        return None
    return (target.hostname, port) if target.hostname and port else None


def _preflight(address: str) -> None:
    """Fail fast, naming the address, when nothing listens at a ``ray://`` or ``host:port`` address."""
    if address == "auto":
        return  # Ray finds the local cluster itself
    import socket

    target = _host_port(address)
    if target is None:
        raise ValueError(f"ray backend: address {address!r} is not 'ray://host:port', 'host:port' or 'auto'")
    try:
        socket.create_connection(target, timeout=PREFLIGHT_TIMEOUT_S).close()
    except OSError as exc:
        raise BackendError(
            f"ray backend: nothing answers at {address} ({type(exc).__name__}: {exc}). Check that the Ray head "
            "runs (ray start --head) and that this machine can reach that host and port."
        ) from exc


_SINGLE_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextlib.contextmanager
def _single_node_mode() -> Iterator[None]:
    """While Ray starts: multi-node support off, so its node IP (and its servers) stay on 127.0.0.1.

    See ``RayBackend._start_local``. Restores the variable and Ray's constant afterwards.
    """
    from ray._private import ray_constants

    old_env = os.environ.get(_SINGLE_NODE_ENV)
    old_const = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    os.environ[_SINGLE_NODE_ENV] = "0"
    if old_const is not None:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop(_SINGLE_NODE_ENV, None)
        else:
            os.environ[_SINGLE_NODE_ENV] = old_env
        if old_const is not None:
            ray_constants.ENABLE_RAY_CLUSTER = old_const


# How often a local Ray start that timed out is tried (Ray's own wait for its node is a fixed 30 s).
_START_TRIES = 2
_NODE_TIMED_OUT = "timed out during startup"  # in the error ray.init raises when its node did not register


def _end_new_processes(me: Any, before: set[int]) -> None:
    """SIGKILL the children of ``me`` not in ``before``, with their descendants (after a failed ``ray.init``)."""
    import psutil

    with contextlib.suppress(Exception):
        ray.shutdown()
    doomed = []
    for child in me.children():
        if child.pid in before:
            continue
        with contextlib.suppress(psutil.Error):
            doomed.extend([child, *child.children(recursive=True)])
    for proc in doomed:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(doomed, timeout=10)


class RayBackend(base.Backend):
    """Tasks run as Ray tasks."""

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, cluster: Any = None, *,
                 num_gpus: int | None = None, object_store_memory: int | None = None,
                 log_to_driver: bool = True, runtime_env: dict | None = None,
                 memory_limit: int | str | None = None, cancel_grace: float = FORCE_CANCEL_AFTER):
        """Options of a local instance or a connection (``workers``, ``address``... as ``hpc.init``).

        ``memory_limit``: the default per-task memory limit (a task's ``memory=`` wins).
        ``cancel_grace``: seconds a cancelled running task gets to stop (``hpc.TaskCancelled``
        is raised in it) before its worker process is killed.
        """
        from eugo_lab.units import parse_bytes, parse_grace

        if cluster is not None:
            raise ValueError("cluster= is for Dask cluster managers; for Ray pass address='ray://host:10001' "
                             "or address='auto'")
        if address is not None and workers is not None:
            raise ValueError("workers= applies to a local Ray instance only; a Ray cluster's size is set where "
                             "it is started (ray start, the autoscaler)")
        self.n_workers = workers
        self.address = address
        self.num_gpus = num_gpus
        self.object_store_memory = object_store_memory
        self.log_to_driver = log_to_driver
        self.runtime_env = runtime_env
        self.memory_limit = parse_bytes(memory_limit, "memory_limit")
        self.cancel_grace = parse_grace(cancel_grace)
        self._lifeline: Lifeline | None = None
        self._owned = False
        self._ctx: Any = None
        self._reporter: _cluster.Reporter | None = None
        self._index = _cluster.WorkerIndex()
        self._nodes_cache: tuple[float, list] | None = None
        self._cpu_cache: tuple[frozenset, str] | None = None  # (node ids, what their CPUs are)
        self._stopped = False
        self._lock = threading.Lock()
        self._timers: set[threading.Timer] = set()  # force-cancel timers not fired yet (see cancel)
        self._watch: GcsWatch | None = None
        self._lost: str | None = None  # why the cluster is considered gone (see _on_gcs_lost)

    @classmethod
    def in_task(cls) -> RayBackend:
        """The engine as a task running on a Ray worker sees it: this worker's own Ray connection, borrowed.

        Its tasks go to the cluster the driver uses. It never starts or stops Ray (``_owned`` is False: its
        ``shutdown`` cancels only its own tasks) and watches no GCS (the driver's engine does that).
        """
        if not ray.is_initialized():
            raise BackendError("ray backend: a task asked for the Ray engine of its worker, but Ray is not "
                               "initialised in this process (is it a Ray worker?)")
        be = cls()
        be._reporter = _cluster.Reporter("eugo-ray-task-report")
        return be

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Start Ray locally, connect to ``address``, or reuse this process's Ray connection."""
        if _dead_cluster is not None:
            raise BackendError(f"ray backend: this process is still attached to a Ray cluster that went away "
                               f"({_dead_cluster}). Restart the kernel (or the Python process), then call hpc.init().")
        if ray.is_initialized():
            if self.address is not None or self.n_workers is not None:
                log.warning("eugo_lab: this process is already connected to Ray; using that connection "
                            "(workers=/address= are ignored). Call ray.shutdown() first to start a new one.")
            self._owned = False
        else:
            opts: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": self.log_to_driver}
            if self.runtime_env is not None:
                opts["runtime_env"] = self.runtime_env
            if self.address is None:
                from eugo_lab.backends.local_process import usable_cores

                opts.update(address="local", num_cpus=self.n_workers or usable_cores(), include_dashboard=False,
                            job_config=_job_config())
                # Thread oversubscription guard: one task per worker process, num_cpus of them.
                from eugo_lab.threadguard import limits as thread_guard

                guard_env = thread_guard.worker_env(thread_guard.plan(usable_cores(), opts["num_cpus"]))
                if guard_env:
                    renv = dict(opts.get("runtime_env") or {})
                    renv["env_vars"] = {**guard_env, **dict(renv.get("env_vars") or {})}  # the user's own win
                    opts["runtime_env"] = renv
                if self.num_gpus is not None:
                    opts["num_gpus"] = self.num_gpus
                if self.object_store_memory is not None:
                    opts["object_store_memory"] = self.object_store_memory
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never phone home from a classroom
                # On a busy machine (two cores, a class on one Binder node) Ray's metrics agent can take
                # over 20 s to come up, and the raylet gives up on it after 15 s by default: the local
                # instance then fails to start at all. A user's own setting wins.
                os.environ.setdefault("RAY_raylet_start_wait_time_s", "60")
            else:
                _preflight(self.address)
                opts["address"] = self.address
            try:
                if self.address is None:
                    self._ctx = self._start_local(opts)
                else:
                    self._ctx = ray.init(**opts)
            except Exception as exc:
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
                hint = ""
                if "auth" in str(exc).lower():
                    hint = (" The cluster uses token authentication: make its token available "
                            "(~/.ray/auth_token or RAY_AUTH_TOKEN) and set RAY_AUTH_MODE=token before starting Python.")
                raise BackendError(f"ray backend: could not start or reach {where}: {type(exc).__name__}: "
                                   f"{str(exc)[:500]}{hint}") from exc
            self._owned = True
        self._reporter = _cluster.Reporter("eugo-ray-report")
        self._watch_gcs()

    def _watch_gcs(self) -> None:
        """Probe the cluster's GCS so that its loss fails tasks clearly (see ``_gcs_watch``)."""
        try:
            gcs = ray.get_runtime_context().gcs_address
        except Exception:  # noqa: BLE001 - Ray Client mode (ray://): its client server reports a lost cluster
            return
        parsed = _host_port(gcs) if isinstance(gcs, str) else None
        if parsed is not None:
            self._watch = GcsWatch(*parsed, on_lost=lambda: self._on_gcs_lost(gcs))

    def _on_gcs_lost(self, gcs: str) -> None:
        global _dead_cluster
        if self._stopped:
            return
        self._lost = (
            f"the Ray cluster at {gcs} stopped answering: its GCS refused connections for about "
            f"{PROBE_SECONDS * LOST_AFTER:.0f} s, so the unfinished tasks failed and their results are gone. Ray "
            "cannot detach this process from a cluster that died, and ends it about a minute after losing the "
            "cluster (Ray's gcs_rpc_server_reconnect_timeout_s): save what you need, restart the kernel, then "
            "call hpc.init(...) again once the cluster is back"
        )
        _dead_cluster = f"the cluster at {gcs}"
        log.warning("eugo_lab: %s.", self._lost)
        rep = self._reporter
        if rep is not None:
            rep.finish_all(Outcome.crashed(Crash(outcome.ENGINE_LOST, message=self._lost + ".")))

    def _start_local(self, opts: dict[str, Any]) -> Any:
        """``ray.init`` a single-node instance that listens on loopback only and dies with this process.

        Loopback: Ray derives what its servers bind from the node's IP. With the machine's
        outward address as node IP (Ray's default on Linux; measured with Ray 2.60) the gRPC
        servers of the GCS, the raylet (node and object manager), the driver and every worker
        and the dashboard agent bind every interface (``[::]``), the metrics exporters of the
        dashboard agent, the autoscaler monitor and the dashboard head bind ``0.0.0.0``, and
        the agents' HTTP/gRPC ports bind the outward address. With 127.0.0.1 as node IP every
        one of them binds 127.0.0.1 (the C++ servers choose 127.0.0.1 over 0.0.0.0 exactly
        when the node IP is 127.0.0.1). But on Linux Ray replaces 127.0.0.1 by the outward
        address, even when given ``_node_ip_address="127.0.0.1"``
        (``services.resolve_ip_for_localhost``), unless multi-node support is off, which is
        what ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` says: the switch behind Ray's
        loopback-only default on macOS and Windows. Ray reads it once, at import, into
        ``ray_constants.ENABLE_RAY_CLUSTER``: we set both while Ray starts and restore them
        afterwards, so a later connection to a real cluster (``address=``) from this process
        is unaffected. The processes Ray starts inherit the variable. No dashboard UI is
        started (``include_dashboard=False``: nothing listens on 8265), though Ray still runs
        its dashboard head process, on loopback like the rest.

        Lifetime: Ray ties the processes it starts directly (GCS, raylet, monitors) to this
        one with ``PR_SET_PDEATHSIG``, but not the raylet's agents, which outlive a killed
        kernel; a :class:`~eugo_lab.backends._lifeline.Lifeline` watcher reaps them all.
        """
        import psutil

        me = psutil.Process()
        before = {p.pid for p in me.children()}
        for attempt in range(1, _START_TRIES + 1):
            try:
                with _single_node_mode():
                    ctx = ray.init(**opts)
                break
            except BaseException as exc:
                # A start that failed half way (a node that timed out on a busy machine) leaves the GCS,
                # monitors and agents it started running: end them, so a failed start leaves nothing behind.
                _end_new_processes(me, before)
                if attempt == _START_TRIES or not isinstance(exc, Exception) or _NODE_TIMED_OUT not in str(exc):
                    raise
                # Ray gives its node a fixed 30 s to register, however busy the machine: once more, from scratch.
                log.warning("eugo_lab: the local Ray node did not start within Ray's 30 s on this busy machine; "
                            "starting it again (attempt %d of %d)", attempt + 1, _START_TRIES)
                with contextlib.suppress(Exception):
                    ray.shutdown()
        started = [p.pid for p in me.children() if p.pid not in before]
        try:
            self._lifeline = Lifeline(started)
        except OSError as exc:  # pragma: no cover - cannot start a process now: Ray still works
            log.warning("eugo_lab: could not start the lifeline watcher of the local Ray instance (%s); its "
                        "processes may outlive this one if it is killed", exc)
        return ctx

    def shutdown(self) -> None:
        """Cancel what is pending; stop Ray if this backend started or connected it; idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._watch is not None:
            self._watch.stop()
        self._stop_timers()
        rep = self._reporter
        if self._lost is not None:
            # ray.cancel and ray.shutdown would block until Ray ends the process: only let go.
            if self._lifeline is not None:
                self._lifeline.close()
            if rep is not None:
                rep.cancel_all()
                rep.stop()
            return
        if rep is not None:
            for ref in rep.cancel_all():
                if ref is not None:
                    try:
                        ray.cancel(ref, force=True)
                    except Exception:  # noqa: BLE001 - Ray may be going away already
                        pass
        if self._owned:
            with _RAY_CALLS:
                ray.shutdown()
        if self._lifeline is not None:
            self._lifeline.close()  # the watcher reaps whatever ray.shutdown() left behind
            self._lifeline = None
        if rep is not None:
            rep.stop()

    # -- tasks ----------------------------------------------------------------------------
    def _nodes(self, fresh: bool = False) -> list[dict]:
        cached = self._nodes_cache
        now = time.monotonic()
        if not fresh and cached is not None and now - cached[0] < _INFO_MAX_AGE:
            return cached[1]
        if cached is not None and self._watch is not None and not self._watch.answers_now():
            # The GCS stopped answering: ray.nodes() would block (on the reporter thread, when a crashed
            # task is resubmitted) until Ray ends the process. Keep the last view; the watch declares
            # the cluster lost and fails the tasks with a message that says so.
            return cached[1]
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        self._nodes_cache = (now, nodes)
        return nodes

    def _check_resources(self, task: Task, wanted: dict[str, float]) -> None:
        for fresh in (False, True):  # a cached view first; a fresh one before refusing
            offers = [n.get("Resources") or {} for n in self._nodes(fresh)]
            if _cluster.offered(wanted, offers):
                return
        raise _cluster.no_offer_error(task, wanted, offers, engine="Ray", unit="node", how=(
            "Ray with the resource (hpc.init(backend='ray', num_gpus=1), ray start --num-gpus 1)"))

    def submit(self, task: Task, on_done: base.DoneCallback) -> None:
        """Submit one Ray task; its outcome is reported from the reporter thread."""
        if self._stopped or not ray.is_initialized():
            raise _cluster.shut_down_error("Ray")
        if self._lost is not None:
            raise BackendError(f"ray backend: {self._lost}.")
        opts = task.options
        wanted = _cluster.wanted_resources(task, cpus=True)
        if opts.memory:
            wanted["memory"] = opts.memory
        self._check_resources(task, wanted)
        fn = task.fn
        name = task.label
        refs = [t for t in task.tokens if type(t) is ObjectRef]
        remote = _ray_task
        if opts.cpus != 1 or opts.gpus or opts.resources or opts.memory:
            remote = _ray_task.options(num_cpus=opts.cpus, num_gpus=opts.gpus or 0,
                                       resources=dict(opts.resources) or None, memory=opts.memory)
        limit = opts.memory or self.memory_limit
        attempt = task.attempt
        kv_key = f"memory-{_DRIVER}-{task.task_id}-{attempt}" if limit else ""
        try:
            oref = remote.remote((_DRIVER, fn.fid), fn.payload, name, task.args, task.deps_payload,
                                 task.is_batch, task.probe, limit, kv_key, tuple(r.ref_id for r in refs),
                                 *(r.location for r in refs))
        except Exception as exc:
            raise BackendError(f"ray backend: could not submit {name}(): {exc}") from exc
        # The payload is an argument of every Ray task: inlined in the task's spec when small, a new
        # object in the store with each call when large; either way it travels with each task.
        fn.count_send()
        rep = self._reporter
        assert rep is not None
        rep.register(task, on_done, oref)
        oref.future().add_done_callback(lambda cf: rep.post(self._settle, task, attempt, cf, kv_key))

    def _settle(self, task: Task, attempt: int, cf: Any, kv_key: str = "") -> None:
        rep = self._reporter
        assert rep is not None
        try:
            value = cf.result()
        except BaseException as exc:  # noqa: BLE001 - every failure becomes an outcome
            self._settle_error(task, attempt, exc, kv_key)
            return
        st, payload, detail, stats, (worker_id, host, pid, _node, device) = value
        worker = self._index.index(worker_id, host, pid)
        result = outcome.from_worker(st, payload, detail, stats, worker, task.is_batch)
        gpu = _cluster.held_gpu(task, device)
        rep.finish(task, attempt, result._replace(gpu=gpu) if gpu >= 0 else result)

    @staticmethod
    def _memory_verdict(kv_key: str) -> Crash | None:
        """The verdict a worker's watchdog stored before it killed itself running this attempt, if any."""
        try:
            from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_get

            with _RAY_CALLS:
                if not ray.is_initialized():
                    return None
                raw = _internal_kv_get(kv_key, namespace=_KV_NAMESPACE)
                if raw is None:
                    return None
                _internal_kv_del(kv_key, namespace=_KV_NAMESPACE)
            verdict = json.loads(raw)
        except Exception:  # noqa: BLE001 - GCS unreachable, a Ray without internal KV: an ordinary crash
            return None
        if not (isinstance(verdict, dict) and verdict.get("kind") == outcome.MEMORY):
            return None
        return Crash.from_dict(verdict)

    def _settle_error(self, task: Task, attempt: int, exc: BaseException, kv_key: str = "") -> None:
        rep = self._reporter
        assert rep is not None
        if isinstance(exc, rex.TaskCancelledError) or type(exc).__name__ == "CancelledError":
            rep.finish(task, attempt, Outcome.cancelled("Ray cancelled it"))
        elif isinstance(exc, _CRASHES) or (_OOM and isinstance(exc, _OOM)):
            # A dead worker: our watchdog may have killed it for the task's memory limit (the
            # verdict is in the KV store; never retried), or Ray's memory monitor for the
            # node's memory (OutOfMemoryError), or something else. The last two are retried
            # like any crash, since the node may have memory to spare next time.
            verdict = self._memory_verdict(kv_key) if kv_key else None
            rep.finish(task, attempt, Outcome.crashed(verdict or Crash(outcome.DIED)))
        else:
            # Our task body never raises, so this is Ray failing to run it (arguments that do
            # not unpickle on the worker, a missing module, ...): report the underlying cause.
            cause = getattr(exc, "cause", None)
            if isinstance(exc, rex.RayTaskError) and isinstance(cause, BaseException):
                exc = cause
            payload, tb = _cluster.error_outcome(exc, "ray")
            rep.finish(task, attempt, Outcome(base.ERROR, payload, traceback=tb))

    def cancel(self, task: Task) -> None:
        """Report the task cancelled now and stop it.

        A queued task is dropped. A running one first gets Ray's gentle cancel (an
        exception raised inside the task: its worker process survives, so no replacement
        has to start); if it is still running ``cancel_grace`` seconds later (stuck in C
        code, or it caught the exception), ``force=True`` ends its worker process.
        """
        rep = self._reporter
        if rep is None:
            return
        oref = rep.cancel(task)
        if oref is None:
            return
        try:
            ray.cancel(oref, force=False)
        except Exception:  # noqa: BLE001 - finished in the meantime
            return
        timer = threading.Timer(self.cancel_grace, self._force_cancel, (oref,))
        timer.daemon = True
        with self._lock:
            self._timers.add(timer)
        timer.start()

    def _force_cancel(self, oref: Any) -> None:
        with self._lock:
            self._timers.discard(threading.current_thread())  # type: ignore[arg-type]
        with _RAY_CALLS:
            if self._stopped or not ray.is_initialized():
                return
            try:
                ready, _ = ray.wait([oref], timeout=0)
                if not ready:
                    ray.cancel(oref, force=True)
            except Exception:  # noqa: BLE001 - finished, or Ray is shutting down
                pass

    def _stop_timers(self) -> None:
        """Call off the force-cancel timers still waiting; their tasks' references are let go here, now."""
        with self._lock:
            timers, self._timers = list(self._timers), set()
        for timer in timers:
            timer.cancel()
            timer.join(1.0)
            timer.args = ()

    # -- objects --------------------------------------------------------------------------------
    def put(self, obj: Any) -> ObjectRef:
        """``ray.put``: stored once in the object store; NumPy arrays are read zero-copy by workers."""
        if self._stopped:
            raise _cluster.shut_down_error("Ray")
        if self._lost is not None:
            raise BackendError(f"ray backend: {self._lost}.")
        oref = ray.put(obj)
        nbytes = int(getattr(obj, "nbytes", 0) or 0)
        return ObjectRef(oref, nbytes, describe_type(obj))

    def get_object(self, ref: ObjectRef) -> Any:
        """``ray.get`` on the driver."""
        if self._lost is not None:  # ray.get would wait until Ray ends the process
            raise BackendError(f"ray backend: {self._lost}.")
        return ray.get(ref.location)

    def token(self, ref: ObjectRef) -> tuple:
        """The Ray reference travels as a top-level task argument (Ray resolves those); the token names it."""
        return ("ref", ref.ref_id)

    # -- info -----------------------------------------------------------------------------------------
    def info(self) -> base.ClusterInfo:
        """CPUs, memory and GPUs of the alive nodes, the GCS address and the dashboard (if any)."""
        if self._stopped or not ray.is_initialized():
            return base.ClusterInfo(backend="ray", workers=0, cores=0, memory=0, address="(stopped)")
        if self._lost is not None:  # ray.nodes() would block
            return base.ClusterInfo(backend="ray", workers=0, cores=0, memory=0, address="(cluster lost)")
        nodes = self._nodes(fresh=True)
        total: dict[str, float] = {}
        for n in nodes:
            for k, v in (n.get("Resources") or {}).items():
                total[k] = total.get(k, 0) + v
        cpus = int(total.get("CPU", 0))
        try:
            address = ray.get_runtime_context().gcs_address
        except Exception:  # noqa: BLE001 - Ray client mode
            address = self.address or "?"
        dashboard = getattr(self._ctx, "dashboard_url", None) or None
        if dashboard and not dashboard.startswith("http"):
            dashboard = "http://" + dashboard
        return base.ClusterInfo(backend="ray", workers=cpus, cores=cpus, memory=int(total.get("memory", 0)),
                                gpus=int(total.get("GPU", 0)), address=address, dashboard=dashboard,
                                extra={"nodes": len(nodes), "owned": self._owned}, cpu=self._cpus(nodes))

    def _cpus(self, nodes: list[dict]) -> str:
        """The nodes' CPUs: this machine's for a local instance, else one small task pinned to each node, once."""
        if self._owned:
            return _cluster.this_cpu()
        key = frozenset(n.get("NodeID", "") for n in nodes)
        cached = self._cpu_cache
        if cached is None or cached[0] != key:
            try:
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                refs = [_ray_describe_cpu.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                    n["NodeID"], soft=False)).remote() for n in nodes if n.get("NodeID")]
                answers = ray.get(refs, timeout=10)
            except Exception:  # noqa: BLE001 - nodes without eugo_lab, a node leaving: unknown, not an error
                answers = []
            cached = self._cpu_cache = (key, _cluster.describe_cpus(answers))
        return cached[1]

    def workers(self) -> list[base.WorkerInfo]:
        """Ray worker processes that have run tasks of this runtime (index, host, pid)."""
        return self._index.all()

    @property
    def started_workers_here(self) -> bool:
        """True for a local Ray this process started (not one reached at an address)."""
        return bool(self._owned) and self.address is None

    @property
    def worker_count(self) -> int:
        """Tasks that can run at once: the cluster's CPUs (at least 1)."""
        if self._stopped or not ray.is_initialized() or self._lost is not None:
            return 1
        return max(1, int(sum((n.get("Resources") or {}).get("CPU", 0) for n in self._nodes())))


__all__ = ["RayBackend"]
