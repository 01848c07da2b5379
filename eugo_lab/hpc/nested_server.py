"""The driver's side of tasks that submit tasks: each request of a task on the local pool, served by the runtime.

A task's ``.remote()``, ``get``, ``put`` and ``map`` (:mod:`eugo_lab.hpc.nested`, in the worker) arrive
here over the worker's pipes; each child becomes an ordinary task with its parent recorded. Its own
module so that the session can serve them without importing the worker side (which builds remote
functions, and so would close a circle through the session).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from eugo_lab.contract import errors
from eugo_lab.contract.refs import ObjectRef
from eugo_lab.contract.serialization import StoredValue, dumps_value, loads_value
from eugo_lab.contract.task import FunctionRecord, TaskOptions
from eugo_lab.hpc.future import STATE_FAILED, STATE_FINISHED, STATE_PENDING, Future

if TYPE_CHECKING:
    from eugo_lab.hpc.session import Runtime

#: What a child submitted without options gets (the worker sends none then: see nested.WorkerRuntime.submit).
_DEFAULT_OPTIONS = TaskOptions()


def _pack_error(exc: BaseException) -> bytes:
    """A child's exception for the worker that waits on it; a stand-in when it does not pickle."""
    try:
        return dumps_value(exc)
    except Exception:  # noqa: BLE001 - any failure: the message still reaches the parent
        return dumps_value(errors.TaskError(f"{type(exc).__name__}: {exc}"))



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
            payload = f._result_payload()
            if isinstance(payload, StoredValue):  # a large result in the pool's store: sent in band, as bytes,
                payload = payload.inline()  # since the driver's future may let the stored copy go before it is read
            msg = ("res", f.task_id, STATE_FINISHED, payload, None)
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
