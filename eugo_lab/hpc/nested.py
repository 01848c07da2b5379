"""Tasks that submit tasks: one runtime for the driver and every task it runs.

Inside a local-pool worker, ``.remote()``, ``hpc.get``, ``hpc.wait``, ``hpc.as_completed``, ``hpc.put``
and ``hpc.map`` reach the driver's runtime through the worker's pipes
(:mod:`eugo_lab.backends.local_nested`), instead of starting a pool of the worker's own. Two halves:

- :class:`WorkerRuntime`, in the worker: what ``session.current()`` returns there. It pickles a call
  where it is made, sends it to the driver with the id of the task that made it, and waits for
  results by running what the driver sends it meanwhile (work-helping, see ``local_nested``).
- :class:`NestedServer`, on the driver: turns those requests into ordinary tasks of the runtime
  (traced with their parent, retried, cancelled like any other), answers the workers' waits, and
  cancels a task's children when the task fails or is cancelled.

Inside a task ``hpc.map`` submits one task per item and returns the list of their futures
(``hpc.get`` of it gives the values): batching and the automatic JIT are the driver's, applied to
the calls the driver makes.

What each engine does with a task that submits tasks:

- local pool (this module): the children go to the driver's runtime through the worker's pipes and
  are traced there with their parent; a parent waiting on them runs queued work on its own stack,
  so the pool never grows past its workers.
- Dask and Ray (:mod:`eugo_lab.hpc.engine_nested`): the worker's runtime submits the children to the
  same cluster, on the worker's own connection (the Dask worker's client, the Ray worker's
  ``ray.init``), never to a private pool. A parent waiting on them gives its slot back: on Dask it
  leaves the worker's thread pool while it waits (``distributed.secede``/``rejoin``: a thread more,
  never a process); on Ray it waits in ``ray.wait``, and Ray starts a worker process for each task
  that waits while others need to run (seconds each: deep recursion is slow on Ray). The children
  are not in the driver's trace (only the tasks the driver submitted are).
- threads: a task runs in the driver's process, so its ``.remote()`` goes to the driver's own
  runtime; a parent waiting on its children runs those not started yet on its own thread
  (``ThreadBackend._help_wait``, reached through ``eugo_lab.contract.waits``), so the pool never
  grows and a recursion deeper than the threads finishes (``fib(12)`` on two threads).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eugo_lab.contract import errors
from eugo_lab.contract.refs import ObjectRef, describe_type
from eugo_lab.contract.serialization import dumps_args, dumps_value, loads_value
from eugo_lab.contract.task import FunctionRecord, TaskOptions
from eugo_lab.hpc.future import STATE_CANCELLED, STATE_FINISHED, STATE_PENDING, Future, argument_token, collect, rebuild

if TYPE_CHECKING:
    from eugo_lab.backends.local_nested import NestedClient
    from eugo_lab.contract.base import ClusterInfo

_DEFAULT_OPTIONS = TaskOptions()


def _digest(payload: bytes) -> bytes:
    import hashlib  # only where a task submits tasks: hashlib loads OpenSSL

    return hashlib.blake2b(payload, digest_size=16).digest()


def _unpack_error(data: bytes) -> BaseException:
    """The child's exception as its parent raises it: the child's traceback as its cause."""
    exc = loads_value(data)
    text = getattr(exc, "remote_traceback", None)
    if text:
        exc.__cause__ = errors.RemoteTraceback(text)
    return exc


# -- in the worker ---------------------------------------------------------------------------------------
class _NotRecording:
    """A worker records nothing itself: its tasks' children are traced by the driver that runs them."""

    active = False
    in_region = False


class _WorkerStore:
    """``hpc.put`` and ``hpc.get`` of references inside a task: the pool's shared-memory store."""

    name = "local"
    oob_threshold = None  # a child's arguments travel in the request itself

    def __init__(self, client: NestedClient):
        self._client = client
        self._count = 0

    def put(self, obj: Any) -> ObjectRef:
        """Store ``obj`` in the pool's store from this worker; the driver owns the reference's lifetime."""
        from eugo_lab.backends.shm_store import write_object

        self._count += 1
        path = os.path.join(self._client.store_dir, f"obj-task-{os.getpid()}-{self._count}")
        nbytes = write_object(obj, path)
        try:
            ref_id = self._client.request("put", path, nbytes, describe_type(obj))
        except BaseException:
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        ref = ObjectRef(path, nbytes, describe_type(obj))
        ref.ref_id = ref_id  # the driver's id: the one every worker caches the object under
        outbox = self._client.outbox

        def release() -> None:
            # A finalizer may run in the middle of another frame's write: queue, never write here.
            outbox.append(("nest", "unref", ref_id))

        ref._release = release
        return ref

    def get_object(self, ref: ObjectRef) -> Any:
        """The value behind a reference, mapped from the store."""
        from eugo_lab.backends.shm_store import read_object

        return read_object(ref.location)

    def token(self, ref: ObjectRef) -> tuple:
        """What a reference becomes in a child's pickled arguments (the pool's own token)."""
        return ("ref", ref.ref_id, ref.location)

    def info(self) -> ClusterInfo:
        """The driver's pool, as ``hpc.cluster()`` shows it there."""
        return self._client.request("info")


class WorkerRuntime:
    """The runtime as a task on a local-pool worker sees it: the driver's, reached through the worker's pipes."""

    #: Read by the public API where a call inside a task takes another path (``hpc.map``, ``batch="auto"``).
    nested = True
    backend_name = "local"
    successor = None

    def __init__(self, client: NestedClient):
        self.client = client
        client.on_result = self._on_result
        self.recorder = _NotRecording()
        self.backend = _WorkerStore(client)
        self._futures: weakref.WeakValueDictionary[int, Future] = weakref.WeakValueDictionary()
        self._wanted: set[int] = set()  # children whose outcome the driver was asked for
        self._next_id = 0
        self._last_id = -1
        self._digests: weakref.WeakKeyDictionary[FunctionRecord, bytes] = weakref.WeakKeyDictionary()
        self._sent: set[bytes] = set()  # functions whose code this worker sent the driver

    def _new_id(self) -> int:
        if self._next_id > self._last_id:
            from eugo_lab.backends.local_nested import ID_BLOCK

            first = self.client.request("ids", ID_BLOCK)
            self._next_id, self._last_id = first, first + ID_BLOCK - 1
        tid = self._next_id
        self._next_id += 1
        return tid

    def _token_of(self, obj: Any) -> Any:
        return argument_token(obj, self.backend)

    def submit(self, fn: FunctionRecord, args: tuple, kwargs: dict, options: TaskOptions,
               on_done: Any = None) -> Future:
        """Submit ``fn(*args, **kwargs)`` as a child of the running task; its future returns at once."""
        name = options.name or fn.name
        args_bytes, tokens, _ = dumps_args(args, kwargs, function=name, token_of=self._token_of)
        deps = [t.task_id for t in tokens if type(t) is Future]
        refs = [t.ref_id for t in tokens if type(t) is ObjectRef]
        digest = self._digests.get(fn)
        if digest is None:
            digest = self._digests[fn] = _digest(fn.payload)
        payload = None if digest in self._sent else fn.payload
        opts = None if options == _DEFAULT_OPTIONS else dumps_value(options)
        tid = self._new_id()
        frames = self.client.frames
        parent = frames[-1].key if frames else -1
        fut = Future(tid, name, self._cancel)
        self._futures[tid] = fut
        self.client.send(("nest", "submit", parent, tid, digest, payload, fn.name, name, opts, args_bytes, deps,
                          refs))
        self._sent.add(digest)
        return fut

    def map(self, fn: Any, iterable: Iterable, batch: int | str = "auto") -> list[Future]:
        """``hpc.map`` inside a task: one child task per item, their futures in order."""
        record: FunctionRecord | None = getattr(fn, "_record", None)  # an @hpc.remote function
        if record is None:  # a plain function, as hpc.map takes it on the driver (no import of the remote
            # function's module here: it reaches the session, which reaches this module)
            name = (getattr(fn, "__qualname__", None) or type(fn).__name__).rsplit("<locals>.", 1)[-1]
            record, options = FunctionRecord(fn, name), _DEFAULT_OPTIONS
        else:
            options = fn._options
        return [self.submit(record, (item,), {}, options) for item in iterable]

    def wait_futures(self, futures: list[Future], n: int, timeout: float | None) -> bool:
        """Wait until ``n`` of ``futures`` are done, running what the driver sends meanwhile; False on timeout."""
        pending = [f for f in futures if f._state == STATE_PENDING]
        need = n - (len(futures) - len(pending))
        if need <= 0:
            return True
        want = []
        for f in pending:
            if self._futures.get(f.task_id) is not f:
                raise errors.HpcError(
                    f"{f!r} was not submitted inside this task: a task can wait only on the tasks it submitted "
                    "itself. Pass the future to the task as an argument instead (it then receives the value).")
            if f.task_id not in self._wanted:
                self._wanted.add(f.task_id)
                want.append(f.task_id)
        if want:
            self.client.send(("nest", "want", want))
        if need == len(pending):
            def ready() -> bool:
                while pending and pending[-1]._state != STATE_PENDING:
                    pending.pop()
                return not pending and all(f._state != STATE_PENDING for f in futures)
        else:
            def ready() -> bool:
                return sum(1 for f in pending if f._state != STATE_PENDING) >= need
        deadline = None if timeout is None else time.monotonic() + timeout
        return self.client.wait(ready, deadline, [f.task_id for f in pending])

    def _on_result(self, task_id: int, state: int, payload: bytes | None, error: bytes | None) -> None:
        self._wanted.discard(task_id)
        f = self._futures.get(task_id)
        if f is None:
            return
        if state == STATE_FINISHED:
            f._complete(STATE_FINISHED, payload=payload)
        else:
            f._complete(state, error=_unpack_error(error) if error is not None else
                        errors.cancelled(f.function, f.task_id))

    def _cancel(self, fut: Future) -> bool:
        done = fut._complete(STATE_CANCELLED, error=errors.cancelled(fut.function, fut.task_id))
        if done:
            self.client.send(("nest", "cancel", fut.task_id))
        return done

    def cancel_all(self) -> int:
        """Cancel every child of this worker's tasks still pending; returns how many."""
        return sum(1 for f in list(self._futures.values()) if f._state == STATE_PENDING and f.cancel())

    @property
    def pending_tasks(self) -> int:
        """Children submitted from this worker and not known to be done here."""
        return sum(1 for f in list(self._futures.values()) if f._state == STATE_PENDING)

    def shutdown(self) -> None:
        """Nothing to stop: the runtime is the driver's (``hpc.shutdown()`` inside a task only forgets this facade)."""


_worker_runtime: WorkerRuntime | None = None
_worker_lock = threading.Lock()


def worker_runtime() -> WorkerRuntime | None:
    """The :class:`WorkerRuntime` of this process when it is a local-pool worker running tasks, else None."""
    global _worker_runtime
    from eugo_lab.backends import local_nested

    client = local_nested.client
    if client is None:
        return None
    with _worker_lock:
        if _worker_runtime is None or _worker_runtime.client is not client:
            from eugo_lab.hpc import future

            _worker_runtime = WorkerRuntime(client)
            future._nested_wait = _worker_runtime.wait_futures
    return _worker_runtime


# -- the public calls inside a task -------------------------------------------------------------------------
# What ``hpc.get`` and friends are in a local-pool worker (``eugo_lab.hpc.__getattr__`` picks them there):
# the same behaviour as eugo_lab.hpc.api's, without importing the driver's runtime (its tracing and
# engines), which would cost a worker's first nested call ~100 ms.
def current(start: bool = True) -> WorkerRuntime | None:
    """The runtime of this worker's tasks (what ``session.current`` returns on the driver)."""
    return worker_runtime()


def running() -> WorkerRuntime:
    """The runtime of this worker's tasks; raises outside a local-pool worker."""
    rt = worker_runtime()
    if rt is None:
        raise errors.BackendError("eugo_lab.hpc.nested serves tasks on a local-pool worker only")
    return rt


def _collect(obj: Any, out: list) -> None:
    collect(obj, out, (Future, ObjectRef))


def _rebuild(obj: Any, rt: WorkerRuntime) -> Any:
    return rebuild(obj, (Future, ObjectRef),
                   lambda leaf: leaf._value() if type(leaf) is Future else rt.backend.get_object(leaf))


def _check_timeout(timeout: Any, call: str) -> None:
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or
                                not timeout >= 0):
        raise ValueError(f"{call}: timeout must be None (wait as long as it takes) or a number of seconds "
                         f">= 0, got {timeout!r}")


def get(obj: Any, timeout: float | None = None) -> Any:
    """``hpc.get`` inside a task: resolve futures and references (nested in lists, tuples, dicts) into values."""
    _check_timeout(timeout, "get()")
    rt = running()
    found: list = []
    _collect(obj, found)
    futures = [f for f in found if type(f) is Future]
    if futures and not rt.wait_futures(futures, len(futures), timeout):
        left = [f for f in futures if f._state == STATE_PENDING]
        raise errors.GetTimeoutError(
            f"get() timed out after {timeout} s with {len(left)} of {len(futures)} task(s) still running (first: "
            f"{left[0].function}(), task {left[0].task_id}); the tasks keep running. Call get() again to keep "
            "waiting, or hpc.cancel() them.")
    return _rebuild(obj, rt)


def wait(futures: Iterable[Future], num_returns: int = 1, timeout: float | None = None
         ) -> tuple[list[Future], list[Future]]:
    """``hpc.wait`` inside a task: ``(done, pending)`` once ``num_returns`` are done (or ``timeout``)."""
    futs = list(futures)
    bad = sorted({type(f).__name__ for f in futs if type(f) is not Future})
    if bad:
        raise TypeError(f"hpc.wait() takes hpc.Future objects, got {', '.join(bad)}")
    if not 0 <= num_returns <= len(futs):
        raise ValueError(f"num_returns must be between 0 and {len(futs)} (the number of futures), got {num_returns}")
    _check_timeout(timeout, "wait()")
    running().wait_futures(futs, num_returns, timeout)
    return [f for f in futs if f._state != STATE_PENDING], [f for f in futs if f._state == STATE_PENDING]


def as_completed(futures: Iterable[Future], timeout: float | None = None) -> Iterable[Future]:
    """``hpc.as_completed`` inside a task: each future as it finishes (failed ones too)."""
    futs = list(futures)
    _check_timeout(timeout, "as_completed()")
    rt = running()
    deadline = None if timeout is None else time.monotonic() + timeout
    left = list(futs)
    while left:
        done = [f for f in left if f._state != STATE_PENDING]
        if not done:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not rt.wait_futures(left, 1, remaining):
                raise errors.GetTimeoutError(f"as_completed() timed out after {timeout} s")
            continue
        for f in done:
            left.remove(f)
            yield f


def put(obj: Any) -> ObjectRef:
    """``hpc.put`` inside a task: store ``obj`` once in the pool's store; pass the reference to children."""
    if isinstance(obj, (Future, ObjectRef)):
        raise TypeError("hpc.put() takes a value, not a future or reference: pass the future to .remote() directly")
    return running().backend.put(obj)


def map(fn: Any, iterable: Iterable, batch: int | str = "auto") -> list[Future]:
    """``hpc.map`` inside a task: one child task per item; their futures, in order (``hpc.get`` gives the values)."""
    return running().map(fn, iterable, batch)


def cancel(futures: Future | Iterable[Future]) -> int:
    """``hpc.cancel`` inside a task: cancel children still pending; returns how many."""
    futs = [futures] if type(futures) is Future else list(futures)  # type: ignore[arg-type]
    return sum(1 for f in futs if f.cancel())
