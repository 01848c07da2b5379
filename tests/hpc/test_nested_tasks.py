"""Tasks that submit tasks on the local pool: one runtime, a fixed process count, every child traced.

A task's ``.remote()``, ``get``, ``wait``, ``as_completed``, ``put`` and ``map`` go to the driver's
runtime (eugo_lab.hpc.nested); a task waiting on its children runs queued work on its own stack
(eugo_lab.backends.local_nested), so recursion deeper than the worker count finishes without a
process more. No assertion here depends on the machine's speed: process counts are sampled while
the work runs, and waits poll for a state with a generous deadline.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest
from _processes import children, wait_gone
from _waiting import wait_for_file
from trace_builder import TraceBuilder

from eugo_lab import hpc
from eugo_lab.analysis import analyze
from eugo_lab.backends.local_nested import MAX_ANY_DEPTH, MAX_HELP_DEPTH
from eugo_lab.contract.phases import CHILD_WAIT_PHASE
from eugo_lab.contract.row import CANCELLED
from eugo_lab.hpc import session
from eugo_lab.tracing.trace import Trace


@hpc.remote
def fib(n):
    if n < 2:
        return n
    a, b = fib.remote(n - 1), fib.remote(n - 2)
    return hpc.get(a) + hpc.get(b)


@hpc.remote
def qsort(xs):
    if len(xs) <= 1:
        return xs
    pivot, rest = xs[0], xs[1:]
    lo, hi = hpc.get(hpc.map(qsort, [[x for x in rest if x < pivot], [x for x in rest if x >= pivot]]))
    return lo + [pivot] + hi


@hpc.remote
def chain(n):
    return 0 if n == 0 else hpc.get(chain.remote(n - 1)) + 1


@hpc.remote
def child_fails(x):
    raise ValueError(f"bad child input {x}")


@hpc.remote
def parent_of_failing(x):
    return hpc.get(child_fails.remote(x))


@hpc.remote
def parent_catches(x):
    try:
        hpc.get(child_fails.remote(x))
    except ValueError as exc:
        return f"caught {type(exc).__name__}: {exc}"
    return "not raised"


@hpc.remote
def long_child(marker):
    with open(marker, "w") as f:
        f.write("started")
    for _ in range(2400):  # two minutes, in steps a cancellation interrupts
        time.sleep(0.05)
    return "finished"


@hpc.remote
def parent_of_long(marker):
    return hpc.get(long_child.remote(marker))


@hpc.remote
def total(xs):
    return sum(xs)


@hpc.remote
def put_wait_as_completed(n):
    ref = hpc.put(list(range(n)))
    futures = [total.remote(ref) for _ in range(3)]
    done, pending = hpc.wait(futures, num_returns=3)
    seen = [hpc.get(f) for f in hpc.as_completed(futures)]
    return seen, len(done), len(pending), hpc.get(ref)[-1]


@hpc.remote
def plus(a, b=100):
    return a + b


@hpc.remote
def passes_a_future_on(x):
    a = plus.remote(x, 1)
    b = plus.remote(a, 10)  # a child's future as another child's argument: a dependency
    return hpc.get(b)


@hpc.remote
def uses_result_and_map(x):
    futures = hpc.map(plus, [x, x + 1])  # a task's map: one child per item, as a list of futures
    return plus.remote(x, 2).result(), type(futures).__name__, hpc.get(futures)


@hpc.remote
def starts_a_pool():
    try:
        hpc.init(workers=1)
    except hpc.BackendError as exc:
        return str(exc)
    return "started"


@hpc.remote
def dies(x):
    os._exit(3)


@hpc.remote
def parent_of_dying(x):
    return hpc.get(dies.options(retries=1).remote(x))


@contextmanager
def peak_processes() -> Iterator[list[int]]:
    """Sample how many pool processes (workers and the template they fork from) run under this test.

    Counted by command line: a pool started inside a worker (what a task's .remote() used to do)
    runs the same commands; processes other tests left exiting (a Dask cluster's) do not count.
    """
    peak = [0]
    stop = threading.Event()
    me = psutil.Process()

    def pool_process(p: psutil.Process) -> bool:
        try:
            return "eugo_lab.backends" in " ".join(p.cmdline())
        except psutil.Error:
            return False

    def sample() -> None:
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], sum(1 for p in me.children(recursive=True) if pool_process(p)))
            except psutil.Error:
                pass
            stop.wait(0.005)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield peak
    finally:
        stop.set()
        t.join()


# The pool's processes: its workers and the template they are forked from. A task that starts
# a pool of its own (what .remote() inside a task used to do) would add at least two more.
WORKERS = 2
POOL_PROCESSES = WORKERS + 1


def test_recursive_fib_finishes_on_two_workers_with_a_fixed_process_count(local2):
    with peak_processes() as peak, hpc.trace() as region:
        assert hpc.get(fib.remote(15)) == 610
    assert peak[0] <= POOL_PROCESSES
    t = region.trace
    assert len(t) == 1973  # every call of fib(15), each a row: 2 * fib(16) - 1
    ids = set(t.tasks["task_id"].tolist())
    parent = t.parent
    roots = [int(i) for i, p in zip(t.tasks["task_id"], parent) if p == -1]
    assert len(roots) == 1
    assert set(parent.tolist()) - {-1} <= ids  # every parent is a task of the trace
    # fib(n >= 2) submits two children, fib(0) and fib(1) none: 986 parents of two each
    assert all(len(t.children(p)) == 2 for p in set(parent.tolist()) - {-1})
    assert len(set(parent.tolist()) - {-1}) == 986
    # a parent's wait on its children is a phase of its own row, and the analyses read it as such
    waits = t.phases["name"] == t.phase_names.index(CHILD_WAIT_PHASE)
    assert set(t.tasks["task_id"][t.phases["row"][waits]].tolist()) == set(parent.tolist()) - {-1}
    # (a worker's first task that submits tasks pays its imports: a straggler of warm-up, not of waiting)
    report = analyze(t)
    assert not {"io-bound", "io-bound-phase", "critical-path"} & {f.code for f in report.findings}
    assert report.serial_time < report.wall_time * WORKERS * 2  # the children's time is counted once
    round_trip = Trace.from_dict(t.to_dict())
    assert round_trip.parent.tolist() == parent.tolist()


def test_quicksort_with_nested_map(local2):
    import random

    xs = random.Random(7).sample(range(1000), 120)
    with peak_processes() as peak, hpc.trace() as region:
        assert hpc.get(qsort.remote(xs)) == sorted(xs)
    assert peak[0] <= POOL_PROCESSES
    assert (region.trace.parent >= 0).sum() == len(region.trace) - 1


def test_a_chain_deeper_than_one_workers_stack_finishes(local2):
    # 100 levels, each waiting on the next: past the depth at which a stack takes any queued
    # task, and deeper than one worker's stack holds, however the levels fall on the two workers.
    assert MAX_ANY_DEPTH < MAX_HELP_DEPTH < 100 < WORKERS * MAX_HELP_DEPTH
    with peak_processes() as peak:
        assert hpc.get(chain.remote(100)) == 100
    assert peak[0] <= POOL_PROCESSES


def test_a_childs_exception_reaches_the_parents_get_with_its_traceback(local2):
    with pytest.raises(ValueError) as info:
        hpc.get(parent_of_failing.remote(7))
    err = info.value
    assert "bad child input 7" in str(err)
    text = err.remote_traceback
    assert "in child_fails" in text and "in parent_of_failing" in text
    assert text.index("in child_fails") < text.index("in parent_of_failing")  # the child's frames first
    caught = hpc.get(parent_catches.remote(3))
    assert caught.startswith("caught ValueError: ") and "bad child input 3" in caught


def test_cancelling_a_parent_cancels_its_children(local2, tmp_path):
    marker = tmp_path / "child-started"
    rt = session.current()
    with hpc.trace() as region:
        f = parent_of_long.remote(str(marker))
        wait_for_file(marker)
        assert hpc.cancel(f) == 1
        with pytest.raises(hpc.TaskCancelledError):
            hpc.get(f)
        deadline = time.monotonic() + 60
        while rt.pending_tasks and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rt.pending_tasks == 0  # the child too: it would run two minutes otherwise
    t = region.trace
    child_rows = t.tasks["function"] == t.functions.index("long_child")
    assert child_rows.any() and (t.tasks["status"][child_rows] == CANCELLED).all()
    assert hpc.get(fib.remote(6)) == 8  # the pool goes on


def test_put_wait_and_as_completed_inside_a_task(local2):
    seen, done, pending, last = hpc.get(put_wait_as_completed.remote(100))
    assert seen == [4950, 4950, 4950] and (done, pending, last) == (3, 0, 99)


def test_shutdown_leaves_no_process_behind():
    hpc.init(workers=WORKERS)
    assert hpc.get(fib.remote(10)) == 55
    rt = session.current()
    running = fib.remote(18)  # still submitting and waiting when the pool goes
    deadline = time.monotonic() + 60
    while rt.tasks_submitted < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    pool = set(rt.backend.worker_pids()) | {rt.backend.template_pid()} - {None}
    assert len(pool) == POOL_PROCESSES and pool <= children()
    hpc.shutdown()
    assert not wait_gone(pool, timeout=10)
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(running)


def _parent_waiting_on_two_children() -> Trace:
    """Synthetic: a parent spends 0.9 s of its 1 s body waiting on two children that compute, one on each worker."""
    b = TraceBuilder(workers=2)
    parent = b.task("parent", worker=0, start=0.0, end=1.0, cpu=0.05)
    b.phase(parent, CHILD_WAIT_PHASE, 0.05, 0.95, 0.0)
    for tid, w in ((2, 0), (3, 1)):
        b.task("child", worker=w, start=0.1, end=0.9, task_id=tid)
        b.child(tid, 1)
    return b.build()


def test_a_parent_waiting_on_children_is_not_called_io_bound():
    t = _parent_waiting_on_two_children()
    assert t.parent.tolist() == [-1, 1, 1]
    report = analyze(t)
    codes = {f.code for f in report.findings}
    assert not {"io-bound", "io-bound-phase", "straggler", "critical-path"} & codes
    assert math.isclose(report.serial_time, 0.1 + 1.6, rel_tol=1e-9)  # the parent's own 0.1 s and the children


def _recursion(depth: int, leaf_body: float, leaf_trip: float) -> Trace:
    """A binary recursion ``depth`` levels deep: each inner task works 50 us, submits two children and waits
    on them; a bottom task runs ``leaf_body`` and comes back ``leaf_trip`` after it was submitted."""
    b = TraceBuilder(workers=2)
    ids = iter(range(1, 10_000))

    def node(level: int, at: float, parent: int | None) -> float:
        tid = next(ids)
        if level == depth:
            b.task("qsort", worker=tid % 2, ready=at, start=at + (leaf_trip - leaf_body) / 2,
                   end=at + (leaf_trip + leaf_body) / 2, received=at + leaf_trip, task_id=tid)
            if parent is not None:
                b.child(tid, parent)
            return at + leaf_trip
        row = len(b.tasks["task_id"])
        b.task("qsort", worker=tid % 2, ready=at, start=at, end=at, task_id=tid)  # its end is set below
        if parent is not None:
            b.child(tid, parent)
        lo = node(level + 1, at + 50e-6, tid)
        done = node(level + 1, lo, tid)  # the children come back one after another
        b.tasks["end"][row] = 1000.0 + done
        b.tasks["received"][row] = 1000.0 + done + 1e-4
        b.phase(row, CHILD_WAIT_PHASE, 50e-6, done, 0.0)
        return done + 1e-4

    node(0, 0.0, None)
    return b.build()


def test_a_recursion_down_to_tiny_pieces_is_priced_by_a_cutoff():
    """64 bottom tasks of 5 us, each a 2 ms round trip while its parent waits: the run is the overhead."""
    r = analyze(_recursion(6, 5e-6, 2e-3))
    f = r.finding("recursion-too-fine")
    assert f is not None, r.codes()
    assert f.evidence["bottom_tasks"] == 64 and f.evidence["tasks"] == 127
    assert math.isclose(f.evidence["median_overhead"], 2e-3 - 5e-6, rel_tol=1e-6)
    assert f.evidence["tasks_after"] < 127 and 0 < f.wall_after < r.wall_time
    assert "Stop recursing below a size" in f.advice and "qsort()" in f.advice


def test_a_recursion_whose_pieces_pay_their_overhead_is_no_finding():
    assert analyze(_recursion(4, 0.05, 0.052)).finding("recursion-too-fine") is None


def test_a_real_quicksort_to_single_elements_is_found_too_fine(local2):
    import random

    xs = random.Random(7).sample(range(10_000), 300)
    with hpc.trace() as region:
        assert hpc.get(qsort.remote(xs)) == sorted(xs)
    t = region.trace
    f = analyze(t).finding("recursion-too-fine")
    assert f is not None, [x.to_text() for x in analyze(t).findings]
    assert f.evidence["tasks"] == len(t) and f.evidence["bottom_tasks"] >= 10
    assert f.wall_after < t.wall_time


def _live_speedup(t: Trace) -> float:
    """The live view's "speedup so far" once every row of ``t`` has come in, at the end of its region."""
    from eugo_lab.cellrun.live_state import LiveState

    st = LiveState(start=t.t0, workers=t.n_workers)
    st.add(t)
    return st.snapshot(t.t0 + t.wall_time, unfinished=0, finished=True).speedup


def test_the_live_speedup_of_a_nested_run_is_the_summarys():
    """A parent waiting on its children is not work done twice: the live bar summed whole bodies (parents
    and the children inside their waits), 7.9x live against 0.2x in the summary."""
    t = _parent_waiting_on_two_children()
    assert math.isclose(_live_speedup(t), analyze(t).estimated_speedup, rel_tol=1e-9)
    assert math.isclose(_live_speedup(t), 1.7, rel_tol=1e-9)


def test_the_live_speedup_of_a_real_recursion_is_the_summarys(local2):
    with hpc.trace() as region:
        assert hpc.get(fib.remote(10)) == 55
    t = region.trace
    assert math.isclose(_live_speedup(t), analyze(t).estimated_speedup, rel_tol=1e-9)


def test_inside_a_worker_no_private_pool_is_started(local2):
    # The worker's runtime is the driver's: no template or pool process appears under a worker.
    with peak_processes() as peak:
        assert hpc.get(fib.remote(8)) == 21
    assert peak[0] <= POOL_PROCESSES
    assert all(not psutil.Process(pid).children() for pid in session.current().backend.worker_pids())
    assert os.getpid() not in session.current().backend.worker_pids()


def test_a_childs_future_passed_to_another_child_is_a_dependency(local2):
    with hpc.trace() as region:
        assert hpc.get(passes_a_future_on.remote(1)) == 12
    t = region.trace
    assert len(t.deps["task"]) == 1 and (t.parent >= 0).sum() == 2


def test_a_child_that_kills_its_worker_fails_its_parent_and_the_pool_recovers(local2):
    with pytest.raises((hpc.WorkerCrashedError, ValueError, hpc.HpcError)) as info:
        hpc.get(parent_of_dying.options(retries=1).remote(1), timeout=120)
    assert "dies()" in str(info.value) or "parent_of_dying()" in str(info.value)
    assert hpc.get(fib.remote(7)) == 13
    assert len(session.current().backend.worker_pids()) == WORKERS


def test_future_result_and_map_inside_a_task(local2):
    assert hpc.get(uses_result_and_map.remote(5)) == (7, "list", [105, 106])


def test_the_timeline_draws_a_parent_under_the_children_it_spans():
    from eugo_lab.render.glyphs import Palette, task_columns

    b = TraceBuilder(workers=1)
    b.task("child", worker=0, start=0.2, end=0.4, task_id=2)  # recorded first: it ended first
    b.task("parent", worker=0, start=0.0, end=1.0, task_id=1)
    b.child(2, 1)
    cols = task_columns(b.build(), 0.0, Palette(), merge=False)
    assert cols["task_id"] == [1, 2]


def test_map_items_that_submit_tasks(local2):
    # hpc.map's batches run several items in one task: their children have the batch as parent.
    with hpc.trace() as region:
        assert hpc.get(hpc.map(fib, [5, 6, 7])) == [5, 8, 13]
    assert (region.trace.parent >= 0).sum() > 0
    assert not session.current()._nested_server._children  # every parent's children forgotten once it ended


def test_hpc_init_inside_a_task_is_refused(local2):
    said = hpc.get(starts_a_pool.remote())
    assert said.startswith("hpc.init() was called inside a task") and "on the driver" in said
