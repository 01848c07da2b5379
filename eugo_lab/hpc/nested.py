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
from eugo_lab.hpc.future import STATE_CANCELLED, STATE_FAILED, STATE_FINISHED, STATE_PENDING, Future

if TYPE_CHECKING:
    from eugo_lab.backends.local_nested import NestedClient
    from eugo_lab.contract.base import ClusterInfo
    from eugo_lab.hpc.session import Runtime

_DEFAULT_OPTIONS = TaskOptions()


def _digest(payload: bytes) -> bytes:
    import hashlib  # only where a task submits tasks: hashlib loads OpenSSL

    return hashlib.blake2b(payload, digest_size=16).digest()


def _pack_error(exc: BaseException) -> bytes:
    """A child's exception for the worker that waits on it; a stand-in when it does not pickle."""
    try:
        return dumps_value(exc)
    except Exception:  # noqa: BLE001 - any failure: the message still reaches the parent
        return dumps_value(errors.TaskError(f"{type(exc).__name__}: {exc}"))


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
        t = type(obj)
        if t is Future:
            return ("fut", obj.task_id)
        if t is ObjectRef:
            return self.backend.token(obj)
        return None

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
        from eugo_lab.hpc.remote_function import RemoteFunction, remote

        rf = fn if isinstance(fn, RemoteFunction) else remote(fn)
        return [self.submit(rf._record, (item,), {}, rf._options) for item in iterable]

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
    t = type(obj)
    if t is Future or t is ObjectRef:
        out.append(obj)
    elif t in (list, tuple, set, frozenset):
        for x in obj:
            _collect(x, out)
    elif t is dict:
        for x in obj.values():
            _collect(x, out)


def _rebuild(obj: Any, rt: WorkerRuntime) -> Any:
    t = type(obj)
    if t is Future:
        return obj._value()
    if t is ObjectRef:
        return rt.backend.get_object(obj)
    if t in (list, tuple, set, frozenset):
        return t(_rebuild(x, rt) for x in obj)
    if t is dict:
        return {k: _rebuild(v, rt) for k, v in obj.items()}
    return obj


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



# -- on the driver ---------------------------------------------------------------------------------------
class NestedServer:
    """The driver's side: the requests of tasks that submit tasks, served by the runtime (on the pool's I/O thread)."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.backend: Any = rt.backend
        self._lock = threading.Lock()
        self._functions: dict[bytes, FunctionRecord] = {}  # by digest of the code, whichever worker sent it
        self._futures: dict[int, Future] = {}  # children's futures, while their parent runs
        self._children: dict[int, list[int]] = {}  # by parent task id
        self._refs: dict[int, ObjectRef] = {}  # hpc.put inside tasks, until the worker drops its reference

    def handle(self, worker: int, msg: tuple) -> None:
        """One ``("nest", op, ...)`` request from worker ``worker``."""
        op = msg[1]
        if op == "submit":
            self._submit(*msg[2:])
        elif op == "want":
            for tid in msg[2]:
                self._want(worker, tid)
        elif op == "cancel":
            f = self._futures.get(msg[2])
            if f is not None:
                f.cancel()
        elif op == "ids":
            self.backend.tell(worker, ("reply", msg[2], self.rt.new_id_block(msg[3])))
        elif op == "put":
            rid, path, nbytes, type_name = msg[2:]
            ref = self.backend.adopt(path, nbytes, type_name)
            self._refs[ref.ref_id] = ref
            if self.rt.recorder.active:
                self.rt.recorder.record_put(ref.ref_id, nbytes, time.time())
            self.backend.tell(worker, ("reply", rid, ref.ref_id))
        elif op == "unref":
            self._refs.pop(msg[2], None)
        elif op == "info":
            self.backend.tell(worker, ("reply", msg[2], self.backend.info()))
        else:
            raise errors.BackendError(f"unknown request {op!r} from a task on worker {worker}")

    def _submit(self, parent: int, tid: int, digest: bytes, payload: bytes | None, fname: str, name: str,
                opts: bytes | None, args_bytes: bytes, deps: list[int], refs: list[int]) -> None:
        try:
            rec = self._functions.get(digest)
            if rec is None:
                if payload is None:
                    raise errors.BackendError(f"the driver lost the code of {fname}() sent by a task")
                rec = FunctionRecord(None, fname)  # type: ignore[arg-type]  # the driver never calls it
                rec._payload = payload
                self._functions[digest] = rec
            options = _DEFAULT_OPTIONS if opts is None else loads_value(opts)
            tokens: list[Any] = []
            for d in deps:
                dep = self._futures.get(d)
                if dep is None:
                    raise errors.HpcError(f"task {name}() was passed a future its parent task did not submit")
                tokens.append(dep)
            tokens += [self._refs[r] for r in refs if r in self._refs]
            fut = self.rt.submit_pickled(tid, rec, args_bytes, tokens, options, name, parent)
        except Exception as exc:  # noqa: BLE001 - the child's future carries it to the parent's get()
            fut = Future(tid, name)
            fut._complete(STATE_FAILED, error=exc if isinstance(exc, errors.HpcError) else
                          errors.HpcError(f"task {name}() could not be submitted from its parent task: {exc}"))
        with self._lock:
            self._futures[tid] = fut
            kids = self._children.get(parent)
            if kids is None:
                kids = self._children[parent] = []
            kids.append(tid)

    def _want(self, worker: int, tid: int) -> None:
        f = self._futures.get(tid)
        if f is None:
            err = errors.HpcError(f"the driver knows no task {tid} submitted by this task (it ended, or was "
                                  "never submitted)")
            self.backend.tell(worker, ("res", tid, STATE_FAILED, None, _pack_error(err)))
            return
        f.add_done_callback(lambda done: self._deliver(worker, done))

    def _deliver(self, worker: int, f: Future) -> None:
        if f._state == STATE_FINISHED:
            msg = ("res", f.task_id, STATE_FINISHED, f._result_payload(), None)
        else:
            msg = ("res", f.task_id, f._state, None, _pack_error(f._error or errors.cancelled(f.function, f.task_id)))
        self.backend.tell(worker, msg)

    def task_ended(self, task_id: int, ok: bool) -> None:
        """An attempt of task ``task_id`` ended: forget its children's futures; cancel those pending unless ``ok``.

        Its children can no longer be waited on (only the attempt that submitted a future may
        wait on it), and the children of an attempt that failed, crashed or was cancelled would
        only compute for nobody (a retried attempt submits its own). The runtime calls this for
        every attempt, an ``hpc.map`` batch's too, whose items may submit tasks.
        """
        if task_id not in self._children:
            return
        with self._lock:
            kids = self._children.pop(task_id, ())
            futures = [self._futures.pop(k, None) for k in kids]
        if not ok:
            for f in futures:
                if f is not None and f._state == STATE_PENDING:
                    f.cancel()
