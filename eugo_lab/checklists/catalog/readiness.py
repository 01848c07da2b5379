"""Workload readiness: whether a function is worth distributing, before you spend cluster time on it.

Measured on one local call of the learner's function (``fn``, ``args``, ``kwargs``), the
running runtime's per-task overhead, and a small traced trial (``trace``) for the pieces.
"""

from __future__ import annotations

from eugo_lab.analysis.findings import (
    BATCHES_PER_WORKER,
    BOUND_MIN_ITEM_S,
    COMPUTE_BOUND_RATIO,
    IO_BOUND_RATIO,
    OVERHEAD_RATIO,
    REPEAT_MIN_BYTES,
)
from eugo_lab.analysis.report import fmt_pct
from eugo_lab.checklists.model import Checklist, Item, register
from eugo_lab.checklists.subject import Call, Subject
from eugo_lab.contract.row import OK
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s

# A call is worth a task of its own when it is at least 10x the round trip's overhead: the
# overhead is then under a tenth of what each task costs, which parallelism easily repays.
# Below OVERHEAD_RATIO (the analysis' "tasks too small" line) scheduling costs more than the work.
WORTH_RATIO = 10.0
# Arguments from 1 MB (the analysis' repeated-argument threshold): each copy costs milliseconds to
# pickle and ship; a result that large costs the same on the way back.
BIG_BYTES = REPEAT_MIN_BYTES


def _timed_call(s: Subject) -> tuple[Call | None, str]:
    """The subject's timed local call; or None and why an item that reads it is not measured."""
    if s.fn is None:
        return None, "not measured: give fn= (and args=) to time one call"
    missing = s.call_failed()
    if missing:
        return None, missing
    assert s.call is not None
    return s.call, ""


def _sent(what: str, size: int, advice: str, small: str) -> tuple[bool, str]:
    """The verdict on data sent with each call: under ``BIG_BYTES`` it passes, saying ``small``; else ``advice``.

    ``what`` starts the sentence ("the result is"), the size in bytes follows it.
    """
    head = f"{what} {fmt_bytes(size, '.3g')}"
    if size >= BIG_BYTES:
        return False, f"{head}: {advice}"
    return True, f"{head}: {small}"


def task_size(s: Subject) -> tuple[bool | None, str]:
    """One call against the runtime's round trip of an empty task."""
    call, missing = _timed_call(s)
    if call is None:
        return None, missing
    trip, engine = s.overhead
    head = f"one call of {s.call_text} takes {fmt_s(call.seconds)} against {fmt_s(trip)} of scheduling overhead"
    ratio = call.seconds / trip if trip > 0 else float("inf")
    if ratio >= WORTH_RATIO:
        return True, f"{head} ({engine}): worth distributing"
    if ratio >= OVERHEAD_RATIO:
        return False, (f"{head} ({engine}): batch several calls per task (hpc.map batches for you), so each "
                       f"task runs at least {WORTH_RATIO:g}x the overhead")
    return False, f"{head} ({engine}): batch it or keep it local"


def argument_size(s: Subject) -> tuple[bool | None, str]:
    """The call's arguments, serialized as ``.remote()`` would send them."""
    if s.fn is None:
        return None, "not measured: give fn= and args= to size the arguments"
    from eugo_lab.contract.errors import SerializationError
    from eugo_lab.contract.serialization import dumps_args

    try:
        # Large buffers (arrays, bytes) stay out of band as views: sized without copying them.
        data, _, buffers = dumps_args(s.args, s.kwargs, function=s.call_text, oob_threshold=0)
    except SerializationError as exc:
        return False, f"the arguments cannot be sent to a worker: {exc}"
    size = len(data) + sum(b.nbytes for b in buffers)
    return _sent("arguments are", size, "use put (ref = hpc.put(data) once, then pass ref to every call) or let each "
                 "task load its own data", "small enough to pass by value")


def result_size(s: Subject) -> tuple[bool | None, str]:
    """The result of the local call, serialized as a worker would send it back."""
    call, missing = _timed_call(s)
    if call is None:
        return None, missing
    from eugo_lab.contract.serialization import dumps_value

    try:
        size = len(dumps_value(call.result))
    except Exception as exc:  # noqa: BLE001 - a result that cannot be pickled is the finding itself
        return False, f"the result cannot be sent back from a worker ({type(exc).__name__}: {exc})"
    return _sent("the result is", size, "return a summary, or write it to storage in the task and return the path",
                 "cheap to send back")


def bound(s: Subject) -> tuple[bool | None, str]:
    """CPU time over the time the local call could run (waiting for a core other programs held left out)."""
    call, missing = _timed_call(s)
    if call is None:
        return None, missing
    if call.seconds <= 0:
        return None, "not measured: the call was too short to tell"
    if call.seconds < BOUND_MIN_ITEM_S:
        # A task costs ~0.1 ms to send and collect: a call this short keeps a worker busy with the
        # handing-out, not with computing, whatever its CPU share says.
        return False, (f"one call takes {fmt_s(call.seconds)}, less than a task costs to send and collect: as a "
                       "task of its own it keeps the worker busy with overhead, not computing; give each task many "
                       "calls (hpc.map batches them) before more cores can help")
    ratio = call.cpu_share
    # Time queued for a core is the machine being busy, not the call waiting: said, and left out.
    busy = f" (plus {fmt_s(call.queued)} queued for a core other programs held)" if call.queued >= 0.1 * call.seconds \
        else ""
    head = f"one call used the CPU {fmt_pct(min(ratio, 1.0))} of its {fmt_s(call.seconds - call.queued)}{busy}"
    if ratio < IO_BOUND_RATIO:
        return False, (f"{head}: it mostly waits (I/O, network, sleep); more workers help only if what it waits on "
                       "serves them in parallel")
    kind = "compute-bound" if ratio >= COMPUTE_BOUND_RATIO else "mostly computing"
    return True, f"{head}: {kind}, more cores help"


def pieces(s: Subject) -> tuple[bool | None, str]:
    """Tasks in a traced trial that waited on no other task, against the worker count."""
    tr = s.trace
    if tr is None:
        return None, s.no_trace("how many independent pieces the work has")
    t = tr.tasks
    done = set(t["task_id"][t["status"] == OK].tolist())
    dependent = set(tr.deps["task"].tolist())
    n = len(done - dependent)
    w = max(tr.n_workers, 1)
    chained = len(done & dependent)
    tail = f" ({chained} more waited on other tasks)" if chained else ""
    want = BATCHES_PER_WORKER * w
    if n >= want:
        return True, f"the work splits into {n} independent pieces{tail}: {n / w:.3g} per worker on {w} workers"
    return False, (f"the work splits into {n} independent pieces{tail}: fewer than {want} ({BATCHES_PER_WORKER} per "
                   f"worker on {w}), so some workers will wait; split the input finer")


READINESS = register(Checklist(
    id="workload-readiness",
    order=1,  # its place on the course page (courses/index.ipynb)
    title="Workload readiness checklist",
    purpose="Verify a workload is worth distributing before you spend cluster time on it.",
    aliases=("readiness",),
    items=(
        Item("task-size", "One call does much more work than it costs to schedule",
             "Every task pays a fixed price to be sent out and to bring its result back. When the work inside is "
             "not many times that price, more workers only add more of it.", task_size, "fn"),
        Item("argument-size", "The arguments are small, or shared once with hpc.put",
             "Arguments are pickled and copied for every call. A large one sent to many tasks spends the run "
             "moving the same bytes.", argument_size, "fn"),
        Item("result-size", "The result is small enough to send back",
             "Results travel back to your notebook the same way. Large ones queue up in the driver.",
             result_size, "fn"),
        Item("bound", "One call keeps a core busy",
             "Workers add cores. Work that mostly waits for a disk or a service gains only as much as that disk "
             "or service can serve at once.", bound, "fn"),
        Item("pieces", "The work splits into more independent pieces than workers",
             "A worker with no piece to run costs as much as a busy one. Pieces that wait on each other run one "
             "after another, whatever the worker count.", pieces, "trace"),
        Item("side-effects", "Each piece touches only its own inputs and outputs",
             "Pieces run in separate processes, in any order. A global variable one piece changes is not seen by "
             "the others, and two pieces writing the same file overwrite each other."),
        Item("data-reachable", "Every worker can read the data",
             "On a cluster, a path on your laptop does not exist on the workers. Put inputs on shared storage or "
             "pass them in."),
    ),
))
