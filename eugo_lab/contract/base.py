"""The small contract every execution engine implements, and the descriptor that names it.

A backend runs tasks and reports what happened; it knows nothing of tracing, retries,
dependencies, batching or widgets, which live in ``eugo_lab.hpc.session`` so that every
engine behaves the same and a new engine touches one file.

An :class:`EngineDescriptor` says what the rest of the package needs to know of an engine
without importing it (Dask and Ray are imported only when asked for): its name, where its
class is, whether it runs on this machine only, which addresses it takes, whether its tasks
are threads of this process, the options it takes. The registry of engines (``hpc.init``),
the ``%%eugo`` options and help, address routing, the timeline's bandwidth and the thread
guard all read it from :func:`engines`. A new engine is one module: its ``Backend``
subclass and one :func:`register_engine` call (see ``tests/backends/test_engine_descriptor.py``).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eugo_lab.contract.outcome import CANCELLED, CRASHED, ERROR, OK, Outcome
from eugo_lab.contract.refs import ObjectRef
from eugo_lab.contract.task import Task

__all__ = ["OK", "ERROR", "CRASHED", "CANCELLED", "Outcome", "DoneCallback", "WorkerInfo", "ClusterInfo", "Backend",
           "EngineDescriptor", "engine", "engines", "register_engine"]

# on_done(task, outcome): exactly once per attempt, from any thread (see eugo_lab.contract.outcome).
DoneCallback = Callable[[Task, Outcome], None]


@dataclass
class WorkerInfo:
    """One worker as the trace and ``hpc.cluster()`` show it."""

    index: int
    host: str = ""
    pid: int = 0
    address: str = ""
    gpu: int = -1  # the GPU this worker holds (the local pool's GPU workers), -1: none of its own


@dataclass
class ClusterInfo:
    """What ``hpc.cluster()`` returns: the engine, its size and where it lives."""

    backend: str
    workers: int
    cores: int
    memory: int
    gpus: int = 0
    address: str = "in-process"
    dashboard: str | None = None
    threads_per_worker: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    #: The workers' CPU, architecture and model (``AMD EPYC (x86-64, 2 cores)``, ``ARM Neoverse V2 (aarch64,
    #: 72 cores)``); machines of different kinds are listed each with how many workers run on it.
    cpu: str = ""
    #: Which worker holds which GPU: ``{worker index: device}`` (the local pool's GPU workers; engines that
    #: assign devices per task, Dask and Ray, leave it empty and count theirs in ``gpus``).
    gpu_workers: dict[int, int] = field(default_factory=dict)
    #: False when the cluster's GPUs have no device behind them: named on a machine where none was found
    #: (the local pool's ``gpus=[0]``, an embedded Dask cluster's ``resources={'GPU': 1}``); their tasks run
    #: on the CPU, and every display that mentions them says so.
    gpus_detected: bool = True

    def __repr__(self) -> str:
        gib = self.memory / 2**30
        parts = [
            f"backend={self.backend}",
            f"workers={self.workers}",
            f"cores={self.cores}",
            f"memory={gib:.1f} GiB",
            f"gpus={self.gpus}" + ("" if self.gpus_detected or not self.gpus else " (named, no GPU detected)"),
            f"address={self.address}",
        ]
        if self.threads_per_worker != 1:
            parts.insert(2, f"threads_per_worker={self.threads_per_worker}")
        if self.gpu_workers:
            held = ", ".join(f"worker {w}: GPU {d}" for w, d in sorted(self.gpu_workers.items()))
            parts.append(f"gpu_workers=[{held}]")
        if self.cpu:
            parts.append(f"cpu={self.cpu}")
        if self.dashboard:
            parts.append(f"dashboard={self.dashboard}")
        return "ClusterInfo(" + ", ".join(parts) + ")"


class Backend(ABC):
    """Base class of execution engines. Subclasses set ``name`` and implement the methods."""

    name: str = "?"
    # Arguments' buffers at least this large travel out of band through stage_buffers();
    # None: everything is pickled in band (engines that move bytes well on their own).
    oob_threshold: int | None = None

    @abstractmethod
    def start(self) -> None:
        """Start (or connect to) the engine; return once tasks can be submitted."""

    @abstractmethod
    def submit(self, task: Task, on_done: DoneCallback) -> None:
        """Queue ``task``; call ``on_done`` exactly once, from any thread, when it ends."""

    @abstractmethod
    def cancel(self, task: Task) -> None:
        """Stop ``task`` if queued or running; ``on_done`` reports ``CANCELLED`` unless it already ended."""

    @abstractmethod
    def put(self, obj: Any) -> ObjectRef:
        """Store ``obj`` once where workers can read it."""

    @abstractmethod
    def get_object(self, ref: ObjectRef) -> Any:
        """The value behind ``ref``, on the driver."""

    @abstractmethod
    def shutdown(self) -> None:
        """Stop the engine and every process it started; idempotent."""

    @abstractmethod
    def info(self) -> ClusterInfo:
        """Describe the engine for ``hpc.cluster()``."""

    @abstractmethod
    def workers(self) -> list[WorkerInfo]:
        """The workers known now (index, host, pid)."""

    def wait_ready(self, timeout: float = 60.0) -> None:  # noqa: B027 - optional hook
        """Block until the workers can run tasks (engines that start workers lazily override it)."""

    def stage_buffers(self, task_id: int, buffers: list[memoryview]) -> Any:
        """Copy a task's large argument buffers somewhere workers read them; return a handle.

        Called at ``.remote()`` time (the caller may change its arrays right after), only
        when ``oob_threshold`` is set. The handle reaches the worker with the task.
        """
        raise NotImplementedError(f"backend {self.name!r} does not stage buffers")

    def copied_bytes(self, staged: Any) -> int | None:
        """The bytes :meth:`stage_buffers` copied for this handle; ``None``: all of the buffers (no sharing)."""
        return None

    def release_staged(self, staged: Any) -> None:  # noqa: B027 - optional hook, default: nothing to free
        """Free what :meth:`stage_buffers` made, once the task is final (no retry will follow)."""

    def token(self, ref: ObjectRef) -> tuple:
        """What a reference becomes inside pickled arguments (see ``serialization``)."""
        return ("ref", ref.ref_id, ref.location)

    @property
    def worker_count(self) -> int:
        """How many tasks can run at once."""
        return self.info().workers

    @property
    def explicit_threads_per_worker(self) -> int | None:
        """The threads each worker was given by the user's choice (an option or its variable); ``None``: the engine's.

        The thread guard lets an explicit choice win over its own plan.
        """
        return None

    @property
    def started_workers_here(self) -> bool:
        """True when this process started the engine's workers (so they inherited its environment).

        False for workers that an address or a cluster passed in named: the thread guard's variables never
        reached them.
        """
        return False


@dataclass(frozen=True)
class EngineDescriptor:
    """What the package knows of an engine before (and without) importing it."""

    #: The name ``hpc.init(backend=...)`` and ``%%eugo -b`` take.
    name: str
    #: Where its :class:`Backend` subclass is: module and class name, imported on first use.
    module: str
    cls: str
    #: One line for the magic's help (``worker processes on this machine``).
    summary: str
    #: Runs on this machine only: it takes no address, and its data moves through memory, not a network.
    local: bool = False
    #: Its tasks are threads of this process (no worker processes): no thread limit applies to them.
    in_process: bool = False
    #: Address prefixes it takes (``tcp://``), and whole addresses (``auto``): an address routes to it.
    schemes: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()
    #: A ``HOST:PORT`` with no scheme is its (Dask's clients take one): the first engine that says so gets it.
    bare_addresses: bool = False
    #: It takes a cluster manager object (``hpc.init(cluster=...)``).
    takes_cluster: bool = False
    #: The options it takes beyond ``workers`` and ``address``, for the help (the class's signature decides).
    options: tuple[str, ...] = ()
    #: The package extra that installs what it needs (``pip install "eugo-lab[dask]"``); None: nothing more.
    extra: str | None = None
    #: The top-level packages it imports: looked up on the path (never imported: importing ray takes
    #: seconds and starts threads) to say whether it is installed before anything is shut down for it.
    packages: tuple[str, ...] = ()

    def takes_address(self, address: str) -> bool:
        """Whether ``address`` names a cluster of this engine (by its scheme, or whole)."""
        return address in self.addresses or any(address.startswith(s) for s in self.schemes)


# The engines in this package, in the order the options' messages list them; register_engine adds others.
_ENGINES: dict[str, EngineDescriptor] = {d.name: d for d in (
    EngineDescriptor("local", "eugo_lab.backends.local", "LocalBackend", "worker processes on this machine (default)",
                     local=True, options=("env", "threads_per_worker", "memory_limit", "cancel_grace", "gpus")),
    EngineDescriptor("dask", "eugo_lab.backends.dask", "DaskBackend", "a Dask cluster, embedded or at an address",
                     schemes=("tcp://", "tls://", "ws://", "wss://"), bare_addresses=True, takes_cluster=True,
                     options=("idle_timeout", "threads_per_worker", "dashboard", "timeout", "memory_limit", "resources",
                              "no_workers_timeout"), extra="dask", packages=("dask", "distributed")),
    EngineDescriptor("ray", "eugo_lab.backends.ray", "RayBackend", "a Ray cluster, local or at an address",
                     schemes=("ray://",), addresses=("auto",),
                     options=("num_gpus", "object_store_memory", "log_to_driver", "runtime_env", "memory_limit",
                              "cancel_grace"), extra="ray", packages=("ray",)),
    EngineDescriptor("threads", "eugo_lab.backends.threads", "ThreadBackend", "threads of this process",
                     local=True, in_process=True),
)}


def register_engine(descriptor: EngineDescriptor) -> None:
    """Make an engine known by its name (the engine's own module calls this; the same name again replaces it)."""
    _ENGINES[descriptor.name] = descriptor


def engines() -> dict[str, EngineDescriptor]:
    """Every known engine by name, in registration order."""
    return dict(_ENGINES)


def route_address(address: str) -> EngineDescriptor | None:
    """The engine ``address`` names, or None when no engine takes it.

    By its scheme or whole (``ray://``, ``auto``); a bare ``HOST:PORT`` goes to the first engine
    whose descriptor has ``bare_addresses``. ``hpc.init`` and ``%%eugo --address`` both route with this.
    """
    for d in _ENGINES.values():
        if d.takes_address(address):
            return d
    if _BARE_ADDRESS.match(address):
        return next((d for d in _ENGINES.values() if d.bare_addresses), None)
    return None


# HOST:PORT with no scheme (a bracketed IPv6 host, or a name or IPv4 address).
_BARE_ADDRESS = re.compile(r"^(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):\d{1,5}$")


def address_forms() -> str:
    """``tcp://HOST:PORT, ray://HOST:PORT, HOST:PORT or auto``: the forms the engines' descriptors take."""
    forms: list[str] = []
    for d in _ENGINES.values():
        forms.extend(f"{s}HOST:PORT" for s in d.schemes[:1])  # an engine's first scheme stands for its others
        forms.extend(d.addresses)
    with_host = [f for f in forms if "HOST" in f] + (["HOST:PORT"] if any(d.bare_addresses for d in _ENGINES.values())
                                                      else [])
    return ", ".join(with_host) + "".join(f" or {f}" for f in forms if "HOST" not in f)


def engine(name: str) -> EngineDescriptor | None:
    """The descriptor of engine ``name``, or ``None`` for a name no engine has."""
    return _ENGINES.get(name)
