"""Tasks that submit tasks on the local pool: a worker's side of the conversation with the driver.

A task body that calls ``.remote()``, ``hpc.get``, ``hpc.wait``, ``hpc.put`` or ``hpc.map`` inside a
local-pool worker talks to the driver's runtime over the worker's own pipes (no second pool, no
new process): requests go up the result pipe as ``("nest", op, ...)`` frames, answers come down
the task pipe between the worker's tasks. The runtime's facade over this connection is
:mod:`eugo_lab.hpc.nested`; this module knows frames, the worker's stack and the pipes only.

Work-helping. A task blocked in ``get()`` on its children does not idle its process: it tells the
driver (``("block", task, helping, ids it waits for)``), and while it waits it runs what the driver
sends it, on its own stack, until what it waits for is done (``("unblock", task)``). The driver
sends a blocked worker one task at a time, once the worker has nothing else left to run (see
``local_placement.Placement.help``): a queued child it waits for, else another child of the task waiting on top,
else, while the stack is at most ``MAX_ANY_DEPTH`` tasks deep, the oldest queued task.

Why that never deadlocks, at any depth of recursion, with the process count fixed: a task waits
only on tasks it submitted itself (a future passed to another task is a dependency, resolved
before that task starts), so each waits on tasks that started after it. Take the blocked task
that started last: each child it waits on is either queued (its own worker takes it), or running
on top of some stack (it started later, so it is not blocked: it makes progress), or buried
under another task on some stack (the top of that stack started later still, so it is not
blocked either). Some task always makes progress, whatever else the stacks hold. Tasks a worker
prefetched before it blocked arrive on its pipe too and run on its stack as well (at most a
prefetch's worth).

Depth bound. Taking any queued task keeps a worker busy while its children run elsewhere, but
every task taken that way may wait in turn and take another: stacks grew to 64 in ``fib(15)``. So
only shallow stacks (``MAX_ANY_DEPTH``) take any task; deeper ones take children of their top task
only, which keeps a stack as deep as the recursion. A stack of ``MAX_HELP_DEPTH`` waiting tasks
takes nothing more: each level costs ~15 Python frames and a few C frames, and an unbounded stack
would end in a ``RecursionError`` or a crashed worker. What its top task waits for then goes to
another waiting worker whose stack has room (it could not take it otherwise: it is no child of
its own), so the proof above holds until every worker's stack is full: a recursion nested deeper
than ``MAX_HELP_DEPTH`` times the worker count waits on itself. 64 levels a worker cover
divide-and-conquer recursions (depth ~log n) and chains of a hundred levels and more.

Cancellation. The driver's SIGUSR1 raises ``TaskCancelled`` in the task running on top of the
stack only; a cancelled task buried below finds its id on the next turn of its wait (the driver
sends ``("wake",)`` so the wait turns at once). While this module reads or writes a frame the
running task is unset, so the signal never lands half-way through a frame.
"""

from __future__ import annotations

import collections
import math
import os
import pickle
import select
import sys
import time
from collections.abc import Callable
from typing import Any

from eugo_lab.backends.local_wire import LEN as _LEN
from eugo_lab.contract import phases as _phase
from eugo_lab.contract import run_queue
from eugo_lab.contract.errors import TaskCancelled
from eugo_lab.contract.phases import CHILD_WAIT_PHASE

#: Waiting tasks one worker's stack holds while it still takes their children (see the module docstring).
MAX_HELP_DEPTH = 64
#: ...and while it also takes any queued task, not only children of the task waiting on top: deeper
#: stacks that take any task grow with the number of tasks started, not with the recursion's depth.
MAX_ANY_DEPTH = 2
# What a blocked worker tells the driver it takes (see local_placement.Placement.help).
HELP_NONE, HELP_CHILDREN, HELP_ANY = 0, 1, 2
# Python frames a level of helping costs, with room for the task bodies' own: the recursion
# limit a worker that nests runs under.
_FRAMES_PER_LEVEL = 40
#: Task ids a worker reserves from the driver at a time: one round trip per this many submissions.
ID_BLOCK = 256
# A frame larger than this is read into a buffer of its own size, not through the shared one.
_LARGE_FRAME = 1 << 20

TIMEOUT = object()  # what FrameReader.next returns when its deadline passed

#: The connection of this worker process, once its task loop started (None on the driver).
client: NestedClient | None = None


class FrameReader:
    """``<8-byte length><pickle>`` frames from a pipe, whole, with an optional deadline."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = bytearray()

    def next(self, deadline: float | None = None) -> Any:
        """The next message; ``None`` at end of file; :data:`TIMEOUT` once ``deadline`` (monotonic) passed."""
        buf = self.buf
        size = _LEN.size
        while True:
            if len(buf) >= size:
                (n,) = _LEN.unpack_from(buf, 0)
                if len(buf) - size >= n:
                    msg = pickle.loads(memoryview(buf)[size : size + n])
                    del buf[: size + n]
                    return msg
                if n >= _LARGE_FRAME:
                    return self._read_large(n)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    return TIMEOUT
            data = os.read(self.fd, 1 << 20)
            if not data:
                return None
            buf += data

    def _read_large(self, n: int) -> Any:
        """One large frame read straight into a buffer of its size (no growing and copying)."""
        size = _LEN.size
        out = bytearray(n)
        have = len(self.buf) - size
        out[:have] = memoryview(self.buf)[size:]
        self.buf.clear()
        view = memoryview(out)
        while have < n:
            got = os.readv(self.fd, [view[have:]])
            if not got:
                return None
            have += got
        del view
        return pickle.loads(out)


class Frame:
    """One task running on this worker's stack: its id, and the CPU and run-queue time of its waits."""

    __slots__ = ("key", "helped_cpu", "waited_cpu", "waited_runq")

    def __init__(self, key: int):
        self.key = key
        self.helped_cpu = 0.0  # CPU of the tasks it ran on its stack while waiting
        self.waited_cpu = 0.0  # all CPU while waiting: theirs, and its own reading of answers
        self.waited_runq = 0.0  # run-queue seconds while it waited: the tasks it ran meanwhile count theirs


class NestedClient:
    """The worker's connection to the driver's runtime while its tasks run.

    ``send(msg)`` writes one frame up the result pipe; ``handle(msg)`` is the worker loop's own
    handler of a task-pipe message (a task, a function, a dropped object), which returns False
    for ``exit``; ``cancels`` is the worker's record of cancelled task ids (``local_worker._Cancels``).
    """

    def __init__(self, reader: FrameReader, send: Callable[[tuple], None], cancels: Any,
                 handle: Callable[[tuple], bool], store_dir: str = ""):
        self.reader = reader
        self.store_dir = store_dir  # the pool's shared-memory store (hpc.put inside a task writes there)
        self._send = send
        self.cancels = cancels
        self.handle = handle
        self.deferred: collections.deque[tuple] = collections.deque()  # tasks that arrived during a request
        self.frames: list[Frame] = []
        self.replies: dict[int, Any] = {}
        self._request_ids = 0
        #: Called with ``(task id, state, payload, error)`` when the driver sends a child's outcome.
        self.on_result: Callable[[int, int, bytes | None, Any], None] | None = None
        self.outbox: list[tuple] = []  # messages queued where sending was not safe (a finalizer)
        self._raised_limit = False

    # -- the worker loop ----------------------------------------------------------------------
    def next_message(self) -> Any:
        """The worker loop's next message: a task deferred during a request first, then the pipe."""
        if self.deferred:
            return self.deferred.popleft()
        return self.reader.next()

    def push(self, key: int) -> Frame:
        """A task starts on this stack."""
        frame = Frame(key)
        self.frames.append(frame)
        return frame

    def pop(self) -> None:
        """The task on top of the stack ended."""
        self.frames.pop()

    # -- sending ------------------------------------------------------------------------------
    def send(self, msg: tuple, check: bool = True) -> None:
        """Write one frame, with the running task unset so a cancel signal cannot cut the frame.

        ``check``: then raise ``TaskCancelled`` if the running task was cancelled meanwhile.
        """
        cancels = self.cancels
        running, cancels.running = cancels.running, None
        try:
            if self.outbox:
                queued, self.outbox = self.outbox, []
                for m in queued:
                    self._send(m)
            self._send(msg)
        finally:
            cancels.running = running
        if check and running is not None and running in cancels.ids:
            raise TaskCancelled("the driver cancelled this task")

    def request(self, op: str, *args: Any) -> Any:
        """Ask the driver and wait for its answer, without running other tasks meanwhile."""
        self._request_ids += 1
        rid = self._request_ids
        self.send(("nest", op, rid, *args))
        cancels = self.cancels
        running, cancels.running = cancels.running, None
        try:
            while rid not in self.replies:
                msg = self.reader.next()
                if msg is None:
                    os._exit(0)  # the driver is gone
                self.take(msg, inline=False)
        finally:
            cancels.running = running
        reply = self.replies.pop(rid)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    # -- waiting ------------------------------------------------------------------------------
    def wait(self, ready: Callable[[], bool], deadline: float | None, waiting: list[int] = ()) -> bool:  # type: ignore[assignment]
        """Run what the driver sends until ``ready()``; False once ``deadline`` (monotonic) passed first.

        ``waiting``: the ids of the tasks waited for, which the driver sends this worker first.

        The wait is recorded as the waiting task's :data:`CHILD_WAIT_PHASE`, with the CPU the
        task itself used meanwhile (the tasks it ran on its stack report their own).
        """
        if ready():
            return True
        frame = self.frames[-1] if self.frames else None
        key = frame.key if frame is not None else -1
        self._ensure_stack()
        depth = len(self.frames)
        helping = HELP_ANY if depth <= MAX_ANY_DEPTH else HELP_CHILDREN if depth < MAX_HELP_DEPTH else HELP_NONE
        self.send(("block", key, helping, waiting), check=False)
        record = _phase.recording_phases()
        cancels = self.cancels
        running, cancels.running = cancels.running, None
        t0 = time.perf_counter()
        c0 = time.process_time()
        q0 = run_queue.waited_ns()
        h0 = frame.helped_cpu if frame is not None else 0.0
        try:
            while not ready():
                if key in cancels.ids:
                    raise TaskCancelled("the driver cancelled this task")
                msg = self.deferred.popleft() if self.deferred else self.reader.next(deadline)
                if msg is TIMEOUT:
                    return False
                if msg is None:
                    os._exit(0)  # the driver is gone
                self.take(msg, inline=True)
            return True
        finally:
            cancels.running = running
            t1 = time.perf_counter()
            helped = frame.helped_cpu - h0 if frame is not None else 0.0
            if frame is not None:
                frame.waited_cpu += time.process_time() - c0
                queued = run_queue.since(q0)
                if not math.isnan(queued):
                    frame.waited_runq += queued
            if record is not None:
                own = max(0.0, time.process_time() - c0 - helped)
                record.append((CHILD_WAIT_PHASE, t0, t1, own, math.nan))
            self.send(("unblock", key), check=False)

    def take(self, msg: tuple, inline: bool) -> None:
        """Act on one message from the driver; ``inline``: a task that arrives runs now, on this stack."""
        kind = msg[0]
        if kind == "res":
            if self.on_result is not None:
                self.on_result(*msg[1:])
        elif kind == "reply":
            self.replies[msg[1]] = msg[2]
        elif kind == "wake":
            pass  # a cancelled task below is to look at its id now
        elif kind == "run" and not inline:
            self.deferred.append(msg)
        elif kind == "run":
            self._run_inline(msg)
        elif not self.handle(msg):  # exit: the pool is shutting down, also mid-task
            os._exit(0)

    def _run_inline(self, msg: tuple) -> None:
        """Run a task on top of the waiting one; its CPU is its own, not the waiting task's."""
        below = self.frames[-1] if self.frames else None
        phases = _phase.recording_phases()
        c0 = time.process_time()
        try:
            self.handle(msg)
        finally:
            _phase.set_recording_phases(phases)  # the task below goes on recording its own phases
            if below is not None:
                below.helped_cpu += time.process_time() - c0

    def _ensure_stack(self) -> None:
        """Raise the recursion limit once, so MAX_HELP_DEPTH levels of helping fit."""
        if not self._raised_limit:
            self._raised_limit = True
            need = sys.getrecursionlimit() + MAX_HELP_DEPTH * _FRAMES_PER_LEVEL
            sys.setrecursionlimit(need)


def own_cpu(stats: Any, frame: Frame) -> Any:
    """``stats`` of a task that waited on its children, with its waits' CPU and run-queue time taken out.

    The worker measures a body's CPU as the process's, which includes the children it ran
    while waiting; those report their own rows, and counting them twice would make the
    parent look like it computed for its whole wait. The analyses leave the wait's span out
    of the body (the :data:`CHILD_WAIT_PHASE` phase, which keeps the wait's own CPU), so the
    CPU left here is that of the body outside its waits.
    """
    if stats is None or (frame.waited_cpu <= 0.0 and frame.waited_runq <= 0.0):
        return stats
    from eugo_lab.contract.row import ROW_FIELDS, ROW_TAIL, pack_tail

    cpu = max(0.0, stats.cpu - frame.waited_cpu)
    runq = stats.runq if math.isnan(stats.runq) else max(0.0, stats.runq - frame.waited_runq)
    tail = stats.tail
    if tail is not None:
        names = ROW_FIELDS[len(ROW_FIELDS) - len(ROW_TAIL.unpack(tail)):]
        values = dict(zip(names, ROW_TAIL.unpack(tail)))
        values["cpu"] = cpu
        values["runq"] = runq
        tail = pack_tail(*(values[n] for n in names))
    return stats._replace(cpu=cpu, runq=runq, tail=tail)


def install(reader: FrameReader, send: Callable[[tuple], None], cancels: Any,
            handle: Callable[[tuple], bool], store_dir: str) -> NestedClient:
    """Make this worker process's connection (:data:`client`); its task loop reads through it."""
    global client
    client = NestedClient(reader, send, cancels, handle, store_dir)
    return client
