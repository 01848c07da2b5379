"""Facts the checkers read off a trace: task counts, how many tasks were in flight together, batches, bytes.

Pure functions of a :class:`~eugo_lab.tracing.Trace` (and plain values), so a checker's
criteria can be tested on built traces as well as on real runs. Nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.analysis.findings import Code
from eugo_lab.analysis.timeline import Units, units
from eugo_lab.analysis.timeline import measure as union_length
from eugo_lab.tracing.driver_calls import META_KEY as DRIVER_CALLS
from eugo_lab.tracing.recorder import LABELS_KEY
from eugo_lab.units import fmt_source as display_source
from eugo_lab.units import plural  # noqa: F401 - the catalog counts through measure.plural


def engine(trace: Any) -> str:
    """The engine the traced tasks ran on (``local``, ``threads``, ``dask``, ``ray``), as the trace records it."""
    return str(trace.meta.get("backend", "local"))


def runs_function(trace: Any, name: str, function: str) -> bool:
    """The tasks the trace names ``name`` ran ``function``: its own name, or a name given it with ``options(name=)``.

    A trace names tasks by their label; the runtime records which function each other label stood
    for (:data:`~eugo_lab.tracing.recorder.LABELS_KEY`), so a renamed task is still its function's.
    """
    return name == function or (trace.meta.get(LABELS_KEY) or {}).get(name) == function


def driver_calls(trace: Any, function: str) -> int | None:
    """How many times ``function`` ran in the notebook's own process during the cell, outside any task.

    Recorded by the runtime while a graded cell runs (:mod:`eugo_lab.tracing.driver_calls`): a call
    through a helper, a wrapper or a plain loop counts; a task's body, on any engine, does not.
    ``None``: the run was not watched (a trace from ``hpc.trace()`` or built by hand), so nothing is known.
    """
    record = trace.meta.get(DRIVER_CALLS)
    if record is None:
        return None
    return int(record.get(function, 0))


def tasks(trace: Any, function: str | None = None) -> int:
    """Tasks of ``function`` (all if None): first attempts, so a retried task counts once; map items one each."""
    return int(np.count_nonzero(trace.first_attempts(function)))


def short_of(trace: Any, function: str, seconds: list[float]) -> tuple[int, float, float]:
    """Tasks of ``function`` that ran for less time than each call is known to need; ``(count, shortest run, need)``.

    ``seconds``: the least time each call takes, one per call (a task that sleeps its input). Both
    sides sorted, the k-th shortest finished first attempt must last at least the k-th smallest
    need: a sleep never returns early, so this holds on any machine, however busy (load only adds
    time). ``shortest run``/``need``: the first pair that falls short (0 when none does). A count that
    differs from ``len(seconds)`` is left to the checks that count tasks: ``(0, 0, 0)``.
    """
    t = trace.tasks
    sel = trace.first_attempts(function) & (np.asarray(t["status"]) == 0)
    runs = np.sort(np.asarray(t["end"])[sel] - np.asarray(t["start"])[sel])
    needs = np.sort(np.asarray(seconds, dtype=float))
    if len(runs) != len(needs) or not len(runs):
        return 0, 0.0, 0.0
    short = runs < needs * 0.95 - 0.001  # clock granularity, never the machine's speed
    if not short.any():
        return 0, 0.0, 0.0
    k = int(np.argmax(short))
    return int(short.sum()), float(runs[k]), float(needs[k])


def dispatch_units(trace: Any, function: str | None = None) -> Units:
    """The trace's dispatch units (a task, or an ``hpc.map`` batch), all or those of ``function``."""
    u = units(trace)
    if function is None:
        return u
    code = trace.functions.index(function) if function in trace.functions else -1
    sel = u.function == code
    return Units(**{k: (v[sel] if k != "row_unit" else v) for k, v in vars(u).items()})


def max_in_flight(trace: Any) -> int:
    """The most tasks that were submitted and not yet received at one moment (queued ones included).

    Independent of the worker count and of the machine's speed: a loop that waits for each
    task before submitting the next never has more than 1 in flight; submitting them all
    first puts all of them in flight at once.
    """
    t = trace.tasks
    first = trace.first_attempts()
    s, e = np.asarray(t["submit"])[first], np.asarray(t["received"])[first]
    ok = np.isfinite(s) & np.isfinite(e)
    if not ok.any():
        return 0
    times = np.concatenate([s[ok], e[ok]])
    deltas = np.concatenate([np.ones(int(ok.sum())), -np.ones(int(ok.sum()))])
    order = np.lexsort((deltas, times))  # at equal times an end before a start
    return int(np.cumsum(deltas[order]).max())


def concurrency(trace: Any) -> float:
    """Average number of task bodies running at once while any ran (varies run to run: for details, not criteria)."""
    u = units(trace)
    if not len(u):
        return 0.0
    span = union_length(u.occ_start, u.occ_end)
    return float((u.occ_end - u.occ_start).sum() / span) if span > 0 else 0.0


def waits(trace: Any) -> list[tuple[str, int, str]]:
    """The driver's blocking calls in order: (kind, number of futures, ``cell line N`` or ``file:line``)."""
    b = trace.blocks
    order = np.argsort(np.asarray(b["start"]), kind="stable")
    kinds = trace.block_kinds
    return [(kinds[int(b["kind"][i])], int(b["futures"][i]), display_source(trace.sources[int(b["source"][i])]))
            for i in order.tolist()]


def tasks_in_process(trace: Any, function: str, host: str, pid: int) -> int:
    """How many of ``function``'s tasks (first attempts) ran on a worker that is the process ``pid`` on ``host``.

    From the trace's record of which process each worker is (``trace.workers``): the notebook's own
    ``(host, pid)`` finds the tasks whose body ran in a thread of the notebook (the threads engine).
    A worker the trace has no record of counts as another process.
    """
    workers = np.asarray(trace.tasks["worker"])[trace.first_attempts(function)].tolist()
    return sum(1 for w in workers if tuple(trace.workers.get(int(w), ())) == (host, pid))


def workers_used(trace: Any, function: str | None = None) -> int:
    """How many distinct workers ran tasks (of ``function``)."""
    u = dispatch_units(trace, function)
    return int(len(np.unique(u.worker)))


def bytes_in(trace: Any, function: str | None = None) -> int:
    """Pickled argument bytes shipped to the workers (of ``function``): what .remote() sent."""
    u = dispatch_units(trace, function)
    return int(np.asarray(u.bytes_in).sum())


def same_within_tolerance(value: Any, expected: Any) -> bool:
    """``value`` equals ``expected`` (NumPy arrays and pandas objects compared by value, floats closely).

    Within NumPy's default tolerance, unlike the JIT's exact :func:`eugo_lab.jit.checked.bit_identical`: a
    learner's parallel sum adds in another order than the reference and may differ in the last bits.
    """
    try:
        if isinstance(expected, np.ndarray) or isinstance(value, np.ndarray):
            a, b = np.asarray(value), np.asarray(expected)
            return a.shape == b.shape and bool(np.allclose(a, b, equal_nan=True))
        if isinstance(expected, float) or isinstance(value, float):
            return bool(np.isclose(float(value), float(expected)))
        if isinstance(expected, (list, tuple)) and isinstance(value, (list, tuple)):
            return len(value) == len(expected) and all(same_within_tolerance(v, x) for v, x in zip(value, expected))
        return bool(value == expected)
    except (TypeError, ValueError):
        return False


def blocking_loop(report: Any) -> tuple[str, int] | None:
    """Where the run's Blocking finding puts the get() in a loop (``cell line N``) and how many tasks it serialized."""
    blocking = report.finding(Code.BLOCKING)
    if blocking is None:
        return None
    return display_source(blocking.evidence["source"]), int(blocking.evidence["serialized_tasks"])


def left_by_earlier_cell(value: Any, before: dict[str, Any], skip: tuple[str, ...] = ()) -> str | None:
    """The name of a NumPy array an earlier cell left (in ``before``) that ``value`` is, or a view of; else None.

    An array that existed before the cell was not computed by it, whatever the cell ran beside
    it. Identity and shared memory only: equal values prove nothing, since an honest cell
    recomputes the very numbers an earlier one did. ``skip``: names not to compare (the graded
    name itself, which the cell may update in place). Names starting with ``_`` are IPython's.
    """
    if not isinstance(value, np.ndarray):
        return None
    for name, old in before.items():
        if name in skip or name.startswith("_") or not isinstance(old, np.ndarray):
            continue
        if old is value or np.shares_memory(old, value):
            return name
    return None


#: The driver calls that hand over a task's value (``hpc.get``, ``Future.result``, ``await``).
TAKING = ("get", "await")


def values_taken(trace: Any) -> int:
    """How many futures the driver's get()/result()/await calls took values of (a future taken twice counts twice).

    Every ``hpc.get`` and ``Future.result`` is recorded, even on a future already done, so 0
    means the cell never took a task's value: whatever it kept was computed in the driver.
    """
    b = trace.blocks
    kinds = trace.block_kinds
    return int(sum(int(n) for k, n in zip(np.asarray(b["kind"]).tolist(), np.asarray(b["futures"]).tolist())
                   if kinds[k] in TAKING))


def taken_singly_before(trace: Any, moment: float) -> int:
    """How many get()/result()/await calls took one future's value and returned before ``moment`` (a trace time)."""
    b = trace.blocks
    kinds = trace.block_kinds
    return int(sum(1 for k, n, e in zip(np.asarray(b["kind"]).tolist(), np.asarray(b["futures"]).tolist(),
                                        np.asarray(b["end"]).tolist())
                   if kinds[k] in TAKING and n == 1 and e < moment))


def values_taken_before(trace: Any, moment: float) -> int:
    """How many futures' values get()/result()/await calls took that returned before ``moment`` (a trace time).

    Whatever the count of each call: a call on every task cannot return before the last result, so any
    take that did took some results while others still ran (``hpc.get(done)`` after ``hpc.wait`` counts).
    """
    b = trace.blocks
    kinds = trace.block_kinds
    return int(sum(n for k, n, e in zip(np.asarray(b["kind"]).tolist(), np.asarray(b["futures"]).tolist(),
                                        np.asarray(b["end"]).tolist())
                   if kinds[k] in TAKING and e < moment))


#: The driver calls that wait on one future in particular: a get()/result()/await of it, an ``hpc.wait``
#: on it alone, a loop of ``done()`` on it (recorded as a ``done`` wait). ``as_completed`` and a wait on
#: several futures wake at whichever finishes first, so they never hold a finished result back.
WAITING_ON_ONE = ("get", "await", "wait", "done")
#: Two finishes closer than this fraction of the typical (median) gap between consecutive finishes of
#: the run's tasks are a tie: which came first is the machine's timing, not the order the loop chose.
TIE_FRACTION = 0.25


@dataclass(frozen=True)
class HeldUp:
    """The driver waited on one task while results of others sat finished and not yet taken.

    Tasks are named by their number in submission order (1 = the first submitted), as the learner
    counts the list they made.
    """

    waited_on: int  # the task the driver waited on
    kind: str  # how it waited: a kind of :data:`WAITING_ON_ONE`
    source: str  # where (``cell line N``)
    finished: tuple[int, ...]  # the tasks that had finished before it and were not taken yet
    slowest: bool  # the task waited on ran the longest of them all


def submission_numbers(trace: Any, function: str) -> dict[int, int]:
    """``{task id: its number in submission order, from 1}`` for ``function``'s tasks (first attempts)."""
    t = trace.tasks
    first = trace.first_attempts(function)
    ids = np.asarray(t["task_id"])[first]
    order = np.lexsort((ids, np.asarray(t["submit"])[first]))
    return {int(ids[i]): n + 1 for n, i in enumerate(order.tolist())}


def first_taken(trace: Any) -> dict[int, float]:
    """``{task id: when the driver first took its value by itself}`` (the end of the recorded call).

    By a get()/result()/await of that one future, or an ``as_completed`` loop that waited for it and yielded it.
    """
    b = trace.blocks
    kinds = trace.block_kinds
    out: dict[int, float] = {}
    for k, e, task in zip(np.asarray(b["kind"]).tolist(), np.asarray(b["end"]).tolist(),
                          np.asarray(b["task"]).tolist()):
        if task >= 0 and kinds[k] in (*TAKING, "as_completed"):
            out[task] = min(out.get(task, e), e)
    return out


def held_up(trace: Any, function: str) -> HeldUp | None:
    """The first wait of the driver on one of ``function``'s tasks while another had finished before it, untaken.

    Reads the runtime's record only: when each task's result reached the driver (``received``), and
    each wait with the task it was on (the blocks' ``task``). A wait counts when its task was still
    running as the wait began; another task counts when it finished before the one waited on (by more
    than a tie, :data:`TIE_FRACTION` of the median gap between finishes) and before the wait ended (a
    wait with a timeout may end first), and the driver had not taken it when the wait began: by a take
    of that one future, or possibly by a call that took several at once before (:func:`uncovered`: a
    ``hpc.wait`` loop that then gets the list of done futures never waits on one of them). Taking
    results in the order they finish never gives one, on any machine: the driver then only waits on a
    task when every earlier-finished one is taken. None: no such wait.
    """
    t = trace.tasks
    first = trace.first_attempts(function)
    ids = np.asarray(t["task_id"])[first].tolist()
    received = dict(zip(ids, np.asarray(t["received"])[first].tolist()))
    received = {k: v for k, v in received.items() if np.isfinite(v)}
    if len(received) < 2:
        return None
    gaps = np.diff(np.sort(np.fromiter(received.values(), float)))
    gaps = gaps[gaps > 0]
    tie = TIE_FRACTION * float(np.median(gaps)) if len(gaps) else 0.0
    body = dict(zip(ids, (np.asarray(t["end"])[first] - np.asarray(t["start"])[first]).tolist()))
    numbers = submission_numbers(trace, function)
    taken = first_taken(trace)
    b = trace.blocks
    kinds = trace.block_kinds
    many = taken_together(trace)
    for i in np.argsort(np.asarray(b["start"]), kind="stable").tolist():
        kind, x = kinds[int(b["kind"][i])], int(b["task"][i])
        start, end = float(b["start"][i]), float(b["end"][i])
        if kind not in WAITING_ON_ONE or int(b["futures"][i]) != 1 or x not in received:
            continue
        if received[x] - start <= tie:  # it had finished (or as good as) when the driver turned to it
            continue
        sat = [y for y, r in received.items()
               if y != x and r < min(received[x] - tie, end) and taken.get(y, np.inf) > start]
        sat = sorted(numbers[y] for y in uncovered(sat, received, [m for m in many if m[0] <= start], tie))
        if sat:
            longest = max(body.values(), key=lambda d: d if np.isfinite(d) else -1.0)
            return HeldUp(numbers[x], kind, display_source(trace.sources[int(b["source"][i])]), tuple(sat),
                          bool(np.isfinite(body[x]) and body[x] >= longest))
    return None


def taken_together(trace: Any) -> list[tuple[float, int]]:
    """``(end, futures)`` of each get()/result()/await that took several futures in one call, by end.

    The record names the task of a call on one future only; a call on several (``hpc.get(done)`` after
    ``hpc.wait``) took that many values, of futures finished by the time it returned.
    """
    b = trace.blocks
    kinds = trace.block_kinds
    out = [(float(e), int(n)) for k, e, n in zip(np.asarray(b["kind"]).tolist(), np.asarray(b["end"]).tolist(),
                                                  np.asarray(b["futures"]).tolist())
           if kinds[k] in TAKING and n > 1]
    return sorted(out)


def uncovered(tasks: list[int], received: dict[int, float], takes: list[tuple[float, int]], tie: float) -> list[int]:
    """The ``tasks`` (finished, with no take of their own recorded) that no call on several futures can have taken.

    ``takes``: ``(end, futures)`` of such calls (:func:`taken_together`). A call took at most its count of
    futures, each finished by the time it returned (within ``tie``); which ones is not recorded, so the
    benefit of the doubt goes to the cell: the earliest-finished tasks are matched to the earliest calls, which
    covers as many as any assignment can (a task finished by one call's end is finished by every later one's).
    """
    left = sorted(tasks, key=lambda y: received[y])
    for end, n in sorted(takes):
        can = [y for y in left if received[y] <= end + tie][:n]
        left = [y for y in left if y not in can]
    return left


def spans(numbers: tuple[int, ...] | list[int]) -> str:
    """``2-5, 7, 8 and 10``: sorted numbers, runs of three or more written as ranges."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    said = [s for a, b in runs for s in ((f"{a}-{b}",) if b > a + 1 else dict.fromkeys((f"{a}", f"{b}")))]
    return ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else said[0]


def last_received(trace: Any, function: str | None = None) -> float:
    """When the driver received the last result of ``function``'s tasks (first attempts; NaN: none)."""
    received = np.asarray(trace.tasks["received"])[trace.first_attempts(function)]
    received = received[np.isfinite(received)]
    return float(received.max()) if len(received) else float("nan")


def carried(trace: Any, function: str) -> Any:
    """The :class:`~eugo_lab.tracing.provenance.FunctionShipped` of ``function`` that carried the most captured bytes.

    ``None`` when its payload was not sent in the region (a function sent before the cell).
    """
    shipped = [f for f in trace.functions_shipped if f.function == function]
    return max(shipped, key=lambda f: f.captured_bytes, default=None)


def tasks_resolving(trace: Any, function: str, refs: set[int]) -> int:
    """How many of ``function``'s tasks resolved one of the stored references ``refs`` on their workers."""
    r = trace.refs
    f = trace.facts
    code = trace.functions.index(function) if function in trace.functions else -1
    own = set(np.asarray(f["task"])[np.asarray(f["function"]) == code].tolist())
    return len({t for t, ref in zip(np.asarray(r["task"]).tolist(), np.asarray(r["ref"]).tolist())
                if t in own and ref in refs})


def code_references(fn: Any, names: set[str] | frozenset[str], namespace: dict[str, Any] | None = None) -> set[str]:
    """Which of ``names`` the code of ``fn`` refers to (its nested functions and ``with`` blocks included).

    ``fn`` may be an ``@hpc.remote`` function (its wrapped function is read). With ``namespace``
    (the cell's), the functions of that namespace that ``fn`` calls by name are read too, one
    level deep, so a helper that does the work counts as part of it. Reads code objects only:
    nothing is called.
    """
    seen: set[str] = set()

    def codes(f: Any) -> list[Any]:
        f = getattr(f, "__wrapped__", f)
        code = getattr(f, "__code__", None)
        out, stack = [], [code] if code is not None else []
        while stack:
            c = stack.pop()
            out.append(c)
            stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
        return out

    top = codes(fn)
    # Globals only: a local variable that happens to share a name (``out = ...`` beside an earlier cell's ``out``)
    # refers to nothing of the namespace.
    found = {n for c in top for n in c.co_names if n in names}
    for c in top:
        for n in (*c.co_names, *c.co_freevars):  # a helper is a global of the cell, or a closure's variable
            helper = (namespace or {}).get(n)
            if n in seen or not callable(helper) or getattr(helper, "__wrapped__", helper) is fn:
                continue
            seen.add(n)
            found |= {m for k in codes(helper) for m in k.co_names if m in names}
    return found


def packed_speedup(sizes: list[float], workers: int) -> float:
    """How much faster ``workers`` finish tasks of these ``sizes`` than one, each task going to the least-loaded one.

    A deterministic replay by work, not by measured time: the tasks are handed out in the
    order given (the order they were submitted), each to the worker with the least work so
    far, as a pool with a queue does. The result (total work over the busiest worker's) is the
    same on a busy machine and an idle one, since no duration enters it.
    """
    if workers < 1:
        raise ValueError(f"packed_speedup needs at least 1 worker, got {workers}")
    total = float(sum(sizes))
    if total <= 0:
        return 0.0
    loads = [0.0] * int(workers)
    for size in sizes:
        loads[loads.index(min(loads))] += float(size)
    return total / max(loads)



def submitted_together(trace: Any, function: str) -> int:
    """The most tasks of ``function`` the driver submitted with no blocking wait between them.

    Both are the driver's own calls, in the order its code made them, so this is a count, not
    a duration: a loop that waits for each task before submitting the next gives 1 however
    fast or slow the machine is; submitting every piece first, then one get(), gives them all.
    """
    submits = np.sort(np.asarray(trace.tasks["submit"])[trace.first_attempts(function)])
    submits = submits[np.isfinite(submits)]
    if not len(submits):
        return 0
    waits = np.sort(np.asarray(trace.blocks["start"], dtype=float))
    gap = np.searchsorted(waits, submits, side="right")  # how many waits began before each submit
    return int(np.bincount(gap).max())


def tasks_reading_stored(trace: Any, function: str) -> dict[int, int]:
    """``{task id: stored object}`` for ``function``'s tasks that read one on their worker, from an engine's records.

    A cell in Dask's or Ray's own API (:mod:`eugo_lab.native`): ``meta["refs_read"]`` pairs a task with
    the ``client.scatter``/``ray.put`` it was passed (the number of that call, as in ``trace.puts``).
    """
    mine = set(np.asarray(trace.tasks["task_id"])[trace.first_attempts(function)].tolist())
    return {int(t): int(p) for t, p in trace.meta.get("refs_read", ()) if int(t) in mine}


def driver_submits(trace: Any, function: str) -> dict[int, float]:
    """``{task id: when the driver's own call submitted it}`` for ``function``'s tasks (first attempts).

    A plain ``.remote()`` is sent as the driver calls it: its ``submit`` time. The items of an ``hpc.map``
    (and ``.remote()`` calls the runtime coalesced into batches) are sent by the runtime, a window at a
    time as results come back, long after the one call that made them: the driver's moment for each is the
    earliest send of its run of consecutive task ids (the ids one call took at once; a batch's own id,
    taken later, always breaks the run between two calls).
    """
    t = trace.tasks
    first = trace.first_attempts(function)
    ids = np.asarray(t["task_id"])[first]
    submit = np.asarray(t["submit"], dtype=float)[first]
    batched = np.asarray(t["batch"])[first] >= 0
    order = np.argsort(ids, kind="stable")
    out: dict[int, float] = {}
    run: list[int] = []  # positions (in ``order``) of the current run of batched items

    def close() -> None:
        if run:
            moment = float(np.nanmin(submit[run])) if np.isfinite(submit[run]).any() else float("nan")
            out.update({int(ids[k]): moment for k in run})
            run.clear()

    for k in order.tolist():
        if batched[k] and run and ids[k] == ids[run[-1]] + 1:
            run.append(k)
            continue
        close()
        if batched[k]:
            run.append(k)
        else:
            out[int(ids[k])] = float(submit[k])
    close()
    return out


@dataclass(frozen=True)
class WaitBetween:
    """A blocking wait of the driver that began after it had submitted some of a function's tasks, not all."""

    kind: str  # the call that waited (``get``, ``wait``, ``as_completed``, ``await``, ``done``)
    futures: int  # how many futures it was on
    source: str  # where (``cell line N``)
    task: int  # the one task it was on, by its number in submission order; 0: several, or another function's
    submitted: int  # tasks of the function the driver had submitted when it began
    total: int  # tasks of the function in all


def wait_between_submissions(trace: Any, function: str) -> WaitBetween | None:
    """The driver's first blocking wait between its first and its last submission of ``function``'s tasks.

    Both are the driver's own calls (:func:`driver_submits`: an ``hpc.map`` counts as submitted when it
    was called, however its runtime paced the sends), so this is an order, not a duration: a cell that
    submits everything before it waits never has one, on any machine; one that takes a result (or waits
    for one) before submitting the rest always does. None: no such wait.
    """
    moments = driver_submits(trace, function)
    at = np.sort(np.fromiter((m for m in moments.values() if np.isfinite(m)), float))
    if len(at) < 2:
        return None
    b = trace.blocks
    starts = np.asarray(b["start"], dtype=float)
    inside = np.flatnonzero((starts > at[0]) & (starts < at[-1]))
    if not len(inside):
        return None
    i = int(inside[np.argmin(starts[inside])])
    numbers = submission_numbers(trace, function)
    task = int(b["task"][i])
    return WaitBetween(trace.block_kinds[int(b["kind"][i])], int(b["futures"][i]),
                       display_source(trace.sources[int(b["source"][i])]),
                       numbers.get(task, 0) if int(b["futures"][i]) == 1 else 0,
                       int(np.searchsorted(at, starts[i], side="left")), len(at))


def in_cell(source: str) -> bool:
    """The displayed source (:func:`eugo_lab.units.fmt_source`) is a line of the graded cell, not a library file."""
    return source.startswith("cell line ")


def where(source: str) -> str:
    """`` at cell line 5`` for a line of the cell; else `` in code outside the cell (thread.py:58)``.

    A wait made by a library the cell called (a thread pool calling get(), say) is recorded at the
    library's line: saying "at thread.py:58" as if it were the learner's would send them looking for it.
    """
    return f" at {source}" if in_cell(source) else f" in code outside the cell ({source})"
