"""Which worker of the local pool runs the next queued task: the queues, prefetching, ``cpus=N`` and GPUs.

:class:`Placement` holds what waits (the CPU queue, the GPU queue, the children of tasks that
submit tasks) and what the pool learnt about each function's cost, and hands tasks to workers
through the ``send`` it is given. It runs on the pool's I/O thread only, so it takes no lock.
What a worker is and how a task travels to it are :mod:`~eugo_lab.backends.local_process`'s
and the pool's; when a worker dies, :mod:`~eugo_lab.backends.local_recovery` puts its unstarted
tasks back here.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable

from eugo_lab.backends import local_nested
from eugo_lab.backends.local_process import Worker
from eugo_lab.contract.item_cost import ItemCost, task_seconds
from eugo_lab.contract.row import TaskStats
from eugo_lab.contract.task import Task

# Where a task of this pool is (Task.state): waiting in a queue here, sent to a worker, or final
# (finished, failed, cancelled or crashed: its outcome was reported, anything later is ignored).
QUEUED, SENT, DONE = 0, 1, 2

# How much work a worker may hold beyond the task it runs. Prefetching hides the round
# trip for tiny tasks; for long tasks it would strand work on a busy worker at the tail,
# so we prefetch only about PREFETCH_SECONDS of measured work, at most MAX_PREFETCH tasks.
PREFETCH_SECONDS = 0.002
MAX_PREFETCH = 32
# Unknown functions get one task prefetched until their first result tells us more.
DEFAULT_PREFETCH = 1


def slots(task: Task) -> int:
    """Worker processes a task holds while it runs: ``cpus=`` rounded up, at least one."""
    cpus = task.options.cpus
    return 1 if cpus <= 1 else math.ceil(cpus)


def fits_stack(task: Task) -> bool:
    """A task a worker may run on top of a waiting one: it needs no GPU and no more than that one worker."""
    return not task.options.gpus and slots(task) == 1


class Placement:
    """The pool's waiting tasks and the rule that picks a worker for each.

    ``send(worker, task)`` writes a task to a worker (and marks it :data:`SENT`); ``gpu_pool``:
    the pool has GPU workers, whose ``gpus=`` tasks wait in :attr:`gpu_queue`.
    """

    def __init__(self, send: Callable[[Worker, Task], None], gpu_pool: bool):
        self.send = send
        self.gpu_pool = gpu_pool
        self.queue: collections.deque[Task] = collections.deque()
        self.gpu_queue: collections.deque[Task] = collections.deque()  # gpus= tasks, for GPU workers only
        self.item_cost: dict[int, ItemCost] = {}  # by function id: sizes what a worker may prefetch
        self.held: dict[int, list[Worker]] = {}  # by task id: the idle workers a cpus=N task holds
        # Tasks submitted from inside a task, queued, by the id of that parent: a parent waiting on
        # them runs them on its own worker (local_nested). Entries go when the parent ends.
        self.children: dict[int, collections.deque[Task]] = {}

    # -- what waits ------------------------------------------------------------------------
    def _queue_of(self, task: Task) -> collections.deque[Task]:
        return self.gpu_queue if self.gpu_pool and task.options.gpus else self.queue

    def enqueue(self, task: Task) -> None:
        """A submitted task joins the tail of its queue (and its parent's children, if a task submitted it)."""
        task.state = QUEUED
        self._queue_of(task).append(task)
        if task.parent >= 0:
            kids = self.children.get(task.parent)
            if kids is None:
                kids = self.children[task.parent] = collections.deque()
            kids.append(task)

    def requeue(self, tasks: list[Task]) -> None:
        """Tasks a dead worker had prefetched, never started: back to the head of their queues, in order."""
        for t in reversed(tasks):
            if t.state != DONE:
                t.state = QUEUED
                self._queue_of(t).appendleft(t)

    def take_all(self) -> list[Task]:
        """Empty both queues: what waited, GPU tasks first (the pool fails them at shutdown)."""
        pending = list(self.gpu_queue) + list(self.queue)
        self.gpu_queue.clear()
        self.queue.clear()
        return pending

    def ended(self, task_id: int) -> None:
        """A task is final: it has no children to take any more."""
        if self.children:
            self.children.pop(task_id, None)

    # -- what a function costs ---------------------------------------------------------------
    def record_cost(self, task: Task, stats: TaskStats, keep: int) -> None:
        """Learn from a finished task how long its function's items take; estimates of at most ``keep`` functions."""
        cost = self.item_cost.get(task.fn.fid)
        if cost is None:
            if len(self.item_cost) >= keep:  # the oldest function's estimate goes first
                del self.item_cost[next(iter(self.item_cost))]
            cost = self.item_cost[task.fn.fid] = ItemCost()
        cost.add(task_seconds(stats), task.item_count if task.is_batch else 1)

    def capacity(self, task: Task) -> int:
        """Tasks a worker may hold (the one it runs and those prefetched) when the next one is ``task``."""
        cost = self.item_cost.get(task.fn.fid)
        if cost is None:
            return 1 + DEFAULT_PREFETCH
        return 1 + min(MAX_PREFETCH, cost.items_in(PREFETCH_SECONDS))

    # -- handing tasks to workers --------------------------------------------------------------
    def dispatch(self, live: list[Worker]) -> None:
        """Hand queued tasks to ``live`` workers (greeted, alive, not held) while they have room."""
        if self.gpu_pool:
            self._dispatch_gpu(live)
        else:
            self._fill(self.queue, live)

    def _fill(self, queue: collections.deque[Task], workers: list[Worker], spare: list[Worker] | None = None) -> None:
        """Hand ``queue``'s tasks, in order, to the least-loaded of ``workers`` while one has room.

        ``spare``: the workers a ``cpus=N`` task may hold besides the one it runs on (default: ``workers``).
        """
        while queue:
            task = queue[0]
            if task.state != QUEUED:  # cancelled while queued, or taken by a waiting parent (help)
                queue.popleft()
                continue
            if task.options.cpus > 1 and slots(task) > 1:
                if not self._send_wide(task, workers, spare or workers):
                    return
                queue.popleft()
                workers = [w for w in workers if w.held_by is None]
                continue
            w = min(workers, key=lambda w: len(w.inflight))
            if len(w.inflight) >= self.capacity(task):
                return
            queue.popleft()
            self.send(w, task)

    def _send_wide(self, task: Task, first: list[Worker], spare: list[Worker]) -> bool:
        """Send a ``cpus=N`` task to an idle worker of ``first`` and hold ``N - 1`` other idle ones of ``spare``.

        False (nothing sent) while fewer are idle: the task waits at the head of its queue.
        CPU workers are held before GPU workers, which stay free for GPU tasks.
        """
        main = next((w for w in first if not w.inflight), None)
        if main is None:
            return False
        others = sorted((w for w in spare if w is not main and not w.inflight and w.held_by is None),
                        key=lambda w: w.gpu >= 0)[: slots(task) - 1]
        if len(others) < slots(task) - 1:
            return False
        for w in others:
            w.held_by = task
        self.held[task.task_id] = others
        self.send(main, task)
        return True

    def release(self, task: Task) -> None:
        """The workers a ``cpus=N`` task held go back to the pool (it ended, or its worker died)."""
        for w in self.held.pop(task.task_id, ()):
            w.held_by = None

    def forget_holder(self, w: Worker) -> None:
        """``w`` died while held idle for a ``cpus=N`` task: that task no longer holds it (its replacement is free)."""
        if w.held_by is not None:
            held = self.held.get(w.held_by.task_id, [])
            if w in held:
                held.remove(w)
            w.held_by = None

    def help(self, workers: list[Worker]) -> None:
        """Give each worker whose top task waits on tasks it submitted, and that runs nothing else, a task to run.

        One task at a time, in this order: the oldest queued child it waits for (what its get()
        reads first), a task that a worker whose stack is full waits for (that worker cannot take
        it itself), its newest other child, then, on a shallow stack only, the oldest task in the
        queue (the largest piece of a recursion, which keeps the worker busy while its own children
        run elsewhere). See local_nested for why that never deadlocks and keeps stacks shallow.
        """
        queue = self.queue
        stranded: set[int] = set()  # what the top tasks of full stacks wait for
        for w in workers:
            if w.blocked and w.blocked[-1][1] == local_nested.HELP_NONE and not w.dead:
                stranded |= w.blocked[-1][2]
        for w in workers:
            blocked = w.blocked
            if not blocked or w.dead or len(w.inflight) != len(blocked):
                continue
            key, helping, waiting = blocked[-1]
            if helping == local_nested.HELP_NONE:
                continue
            kids = self.children.get(key)
            pick = None
            if kids:
                while kids and kids[0].state != QUEUED:  # taken by another worker, or cancelled
                    kids.popleft()
                pick = next((t for t in kids if t.task_id in waiting and t.state == QUEUED and fits_stack(t)),
                            None)
            if pick is None and stranded:
                pick = next((t for t in queue if t.task_id in stranded and t.state == QUEUED and fits_stack(t)),
                            None)
            if pick is None and kids:
                pick = next((t for t in reversed(kids) if t.state == QUEUED and fits_stack(t)), None)
            if pick is None and helping == local_nested.HELP_ANY:
                while queue and queue[0].state != QUEUED:
                    queue.popleft()
                pick = next((t for t in queue if t.state == QUEUED and fits_stack(t)), None)
            if pick is not None:
                self.send(w, pick)

    def _dispatch_gpu(self, live: list[Worker]) -> None:
        """Dispatch in a pool with GPU workers: GPU tasks to GPU workers, the rest to CPU workers first.

        A CPU task goes to an idle CPU worker, else to an idle GPU worker (when no GPU task
        waits), else is prefetched by a CPU worker: an idle worker beats a prefetch slot. A GPU
        worker holds one CPU task at most (no prefetch), so a GPU task that comes next waits for
        at most that one.
        """
        gpu_live = [w for w in live if w.gpu >= 0]
        cpu_live = [w for w in live if w.gpu < 0]
        if gpu_live:
            self._fill(self.gpu_queue, gpu_live, live)
            gpu_live = [w for w in gpu_live if w.held_by is None]
            cpu_live = [w for w in cpu_live if w.held_by is None]
        queue = self.queue
        while queue:
            task = queue[0]
            if task.state != QUEUED:
                queue.popleft()
                continue
            if task.options.cpus > 1 and slots(task) > 1:
                ok = cpu_live + ([g for g in gpu_live if not g.inflight] if not self.gpu_queue else [])
                if not self._send_wide(task, ok, ok):
                    return
                queue.popleft()
                gpu_live = [w for w in gpu_live if w.held_by is None]
                cpu_live = [w for w in cpu_live if w.held_by is None]
                continue
            w = min(cpu_live, key=lambda w: len(w.inflight)) if cpu_live else None
            if w is None or w.inflight:
                idle = [g for g in gpu_live if not g.inflight] if not self.gpu_queue else []
                if idle:
                    w = idle[0]
                elif w is None or len(w.inflight) >= self.capacity(task):
                    return
            queue.popleft()
            self.send(w, task)
