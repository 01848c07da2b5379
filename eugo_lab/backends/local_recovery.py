"""What the local pool does when a worker process dies: which of its tasks crashed and which wait again.

A dying worker costs only the task it was running: that one is reported as crashed (the runtime
retries it; a batch's report says which of its items finished, see ``outcome.BatchProgress``),
the tasks it had prefetched go back to the head of the queue, and the pool starts a replacement.
Workers that keep dying before they say hello mean a broken environment: past
:data:`MAX_FAILED_STARTS_PER_WORKER` in a row per worker the pool gives up and fails its tasks
(:func:`no_workers_message`) instead of respawning forever.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from eugo_lab.backends.local_placement import DONE, Placement
from eugo_lab.backends.local_process import Worker
from eugo_lab.backends.shm_store import sweep_results
from eugo_lab.contract import outcome
from eugo_lab.contract.errors import describe_exit
from eugo_lab.contract.outcome import Crash, Outcome
from eugo_lab.contract.task import Task

# Workers that die before saying hello, in a row, before the pool gives up: a broken
# environment (missing package, bad PYTHONPATH) must fail tasks, not respawn forever.
MAX_FAILED_STARTS_PER_WORKER = 3


def reap(w: Worker, store_dir: str) -> int | None:
    """Close a dead worker's pipes and collect its exit code; free the results it stored and never announced."""
    w.close_pipes()
    try:
        code = w.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - pipe closed, process stuck
        w.proc.kill()
        code = w.proc.wait()
    # Results it wrote into the store and never announced (it died between writing one and
    # sending its name): nobody else knows their names. Every name it sent was read before the EOF.
    if w.pid:
        sweep_results(store_dir, w.pid)
    return code


def _crash(w: Worker, code: int | None) -> Crash:
    """Why the worker died: the memory limit that had it killed, else its exit."""
    return w.kill_reason if isinstance(w.kill_reason, Crash) else Crash(outcome.DIED, exit_code=code)


def settle(w: Worker, code: int | None, placement: Placement, report: Callable[[Task, Outcome], None]) -> None:
    """Report or requeue every task the dead worker ``w`` held, and free the workers they held."""
    inflight = list(w.inflight)
    w.inflight.clear()
    if w.blocked:
        # Tasks were waiting on its stack, each on top of another: which of the others had
        # started is not known here, so all of them count as crashed (a crash is retried).
        w.blocked.clear()
        crash = _crash(w, code)
        for t in inflight:
            placement.release(t)
            if t.state != DONE:
                t.state = DONE
                report(t, Outcome.crashed(crash, w.index))
        inflight = []
    if inflight:
        running, rest = inflight[0], inflight[1:]
        placement.release(running)
        # Prefetched tasks never started: back to the head of the queue, in order.
        placement.requeue(rest)
        if running.state != DONE:
            running.state = DONE
            report(running, _lost(w, running, code))
    w.progress.clear()
    placement.forget_holder(w)


def _lost(w: Worker, running: Task, code: int | None) -> Outcome:
    """The crash of the task ``w`` was running; for a batch, which of its items finished and which group ran."""
    lost = Outcome.crashed(_crash(w, code), w.index)
    if running.is_batch:  # see BatchProgress
        parts, ends, begun, size = w.progress.get(running.task_id) or ((), (), 0.0, 1)
        done = parts[-1][1] if parts else 0
        lost = lost._replace(progress=outcome.BatchProgress(
            tuple(parts), (done, min(done + size, running.item_count)), begun, tuple(ends)))
    return lost


def no_workers_message(failed_starts: int, code: int | None) -> str:
    """Why the pool gave up: its workers kept exiting (the last with ``code``) before they could start."""
    return (
        f"the local pool has no workers: {failed_starts} worker processes in a row exited with "
        f"{describe_exit(code)} before they could start. Check that eugo_lab and the packages your "
        f"tasks import are installed for {sys.executable}, then call hpc.init() to start a new pool."
    )
