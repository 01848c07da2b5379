"""A finding's advice in the engine's own API, for a cell written with Dask's or Ray's API rather than ``eugo_lab.hpc``.

The detectors word their advice in ``hpc`` calls. A trace recorded from a cell that used an
engine directly (``trace.meta["api"]``, set by :mod:`eugo_lab.native`) is about code that has
no ``hpc`` in it, so the findings whose fix is a call get that call in the engine's words; the
verdict, evidence and price stay the detector's. A finding without an entry here keeps its
advice: it names no ``hpc`` call (stragglers, partitions) or cannot arise from such a trace.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s
from eugo_lab.units import fmt_source as display_source

# (a finding, its trace's meta) -> (advice, fix) or (advice, fix, verdict) in the engine's words; None keeps the
# detector's own.
Wording = Callable[[Finding, dict[str, Any]], "tuple[str, ...] | None"]


def _more_workers(f: Finding) -> str:
    """How many workers the I/O-bound advice proposes (its detector puts the number in its fix)."""
    m = re.search(r"workers=(\d+)", f.fix or f.advice)
    return m.group(1) if m else "twice the cores'"


def _blocking(f: Finding, advice: str, fix: str, waited: str) -> tuple[str, str, str]:
    """The wait-inside-the-loop finding in an engine's words.

    ``{shown}`` in ``advice`` and ``fix`` is the wait's place; the verdict's "called get() on each task"
    becomes ``waited``.
    """
    shown = display_source(f.evidence["source"])
    return (advice.format(shown=shown), fix.format(shown=shown),
            f.verdict.replace("called get() on each task", waited))


def _repeated(f: Finding, advice: str, how: str) -> tuple[str, str]:
    """The repeated-argument finding in an engine's words.

    ``{name}`` in ``advice`` is the function; ``how`` is the engine's call that sends the argument once.
    """
    name = f.evidence["function"]
    size = fmt_bytes(f.evidence["bytes"], ".3g")
    return advice.format(name=name), f"send {name}()'s {size} argument once with {how}"


def _fan_out(f: Finding, call: str, instead: str, at_end: str, what: str, advice: str) -> tuple[str, str] | None:
    """The fan-out finding in an engine's words (None for its forms that name no API).

    A chain through the driver gets :func:`_through_driver`'s advice (``{fn}`` in ``call`` and ``instead`` is
    the function); the rest gets ``advice``.
    """
    if f.term != "Fan-out" or "passed_futures" in f.evidence:  # (that advice names no API)
        return None
    if "through_driver" in f.evidence:
        fn = f.evidence["function"]
        return _through_driver(f, call.format(fn=fn), instead.format(fn=fn), at_end, what)
    return advice, f.fix


def _dask_blocking(f: Finding, meta: dict[str, Any]) -> tuple[str, str, str]:
    return _blocking(f, "Submit all tasks first, then wait once: futures = client.map(fn, items) (or a list of "
                     "client.submit calls) and results = client.gather(futures) after the loop, instead of the "
                     ".result() at {shown} inside it; to use each result as soon as it is ready, loop over "
                     "as_completed(futures).",
                     "move the wait at {shown} out of the loop (client.gather once)",
                     # Dask's futures have no get(): the wait was a .result() or a one-future gather
                     "waited for each task")


def _dask_too_small(f: Finding, meta: dict[str, Any]) -> tuple[str, str] | None:
    size = f.evidence.get("suggested_batch")
    if size is None:
        return None
    name = f.evidence["function"]
    if name in meta.get("graph_functions", ()):
        # Tasks a collection made (dask.array, dask.dataframe, dask.delayed): their size is the chunking's.
        return (f"Larger pieces: {name}() tasks come from a Dask collection's graph, one per chunk or partition; "
                f"make each about {size} times larger (fewer chunks: x.rechunk(...) or chunks= when the array is "
                "made; fewer partitions: df.repartition(npartitions=...); fewer, bigger dask.delayed calls).",
                f"make {name}()'s chunks about {size} times larger")
    # client.map(..., batch_size=) only sends the submissions in groups: each item is still a task of its own.
    return (f"Batching: give each task about {size} items, e.g. a dask.bag with partitions that size, "
            f"db.from_sequence(items, partition_size={size}).map({name}).compute(), or client.map over chunks "
            f"items[i:i + {size}] of a function that loops over its chunk (client.map's batch_size= only groups "
            "the submissions: each item stays a task).",
            f"batch {name}() {size} items per task (dask.bag partitions)")


def _dask_repeated(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    return _repeated(f, "Send it once: data_future = client.scatter(data, broadcast=True) and pass data_future to "
                     "client.submit({name}, data_future, ...): each worker receives it once instead of with every "
                     "task (scatter a list as [data], or it scatters each element).", "client.scatter")


def _dask_serialization(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    return ("Send less: pass big inputs once with client.scatter() or let tasks load their own data, and return "
            "summaries instead of large results.", "send less data to and from the tasks (client.scatter, summaries)")


def _dask_io_bound(f: Finding, meta: dict[str, Any]) -> tuple[str, str] | None:
    if "more workers than cores" not in f.advice:
        return None  # the phase variant: prefetching is the same in any engine
    more = _more_workers(f)
    return (f"Waiting does not need a core: give the cluster more threads than cores, {more} in all "
            "(LocalCluster(n_workers=..., threads_per_worker=...)), or overlap the waits.",
            f"run {more} worker threads, more than cores")


def _dask_order(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    shown = display_source(f.evidence["source"])
    return (f"Handle results as they finish: `for fut in as_completed(futures): use(fut.result())` instead of the "
            f".result() at {shown} in submission order.",
            f"handle results with as_completed instead of the wait at {shown}")


def _slow_submission(f: Finding, call: str, send_once: str) -> tuple[str, str, str]:
    """The slow-submission finding in an engine's words: what was seen, and the fix its recorded cause calls for.

    Sending a big argument once is advised only where the detector found the submissions' arguments big
    (``cause`` "pickling": their pickling timed, or where it is not, a median of at least
    ``PICKLING_MIN_BYTES`` each): for arguments of a few bytes it would save nothing.
    """
    ev, fn = f.evidence, f.evidence["functions"][0]
    verdict = (f"The driver took {fmt_s(ev['span'])} to submit {ev['tasks']} tasks ({fmt_s(ev['gap'])} between "
               f"submissions), so workers sat idle {fmt_s(ev['idle_worker_time'])} while it did.")
    if ev.get("cause") == "pickling":
        advice = (f"Send big arguments once ({send_once}) and pass the reference to each task, or let each task "
                  "load its own data from an index, file name or seed.")
    else:
        advice = (f"Submit faster: build the inputs first and send them together ({call}), or let each task build "
                  "its own input from an index, file name or seed.")
    return advice, f"submit {fn}() tasks together", verdict


def _dask_slow_submission(f: Finding, meta: dict[str, Any]) -> tuple[str, str, str]:
    # Dask pickles a submitted argument later, on its event loop, untimed: whether the loop was slow from
    # building its inputs or from sending big ones is not known here, so the verdict says what was seen and
    # the advice names both fixes.
    fn = f.evidence["functions"][0]
    return _slow_submission(f, f"client.map({fn}, inputs)", "client.scatter(data, broadcast=True)")


def _through_driver(f: Finding, call: str, instead: str, at_end: str, what: str) -> tuple[str, str]:
    """The chain-through-the-driver advice (``critical._through_driver``) in an engine's words."""
    return (f"Keep the steps in order. Passing the {what} itself ({call} instead of {instead}, with {at_end} at "
            "the end) saves only the round trip through the notebook between steps; to go faster, make each step "
            "faster or split one step's own work into parallel tasks.",
            f"pass {f.evidence['function']}()'s {what}s along instead of their values")


def _dask_fan_out(f: Finding, meta: dict[str, Any]) -> tuple[str, str] | None:
    return _fan_out(f, "client.submit({fn}, fut)", "client.submit({fn}, fut.result())", "one .result()", "future",
                    "Fan out: submit independent steps together (pass futures to client.submit instead of calling "
                    ".result() between them) and split each step into several tasks.")


def _ray_blocking(f: Finding, meta: dict[str, Any]) -> tuple[str, str, str]:
    return _blocking(f, "Submit all tasks first, then call ray.get once: refs = [fn.remote(x) for x in items] and "
                     "results = ray.get(refs) after the loop, instead of the ray.get at {shown} inside it; to use "
                     "each result as soon as it is ready, loop with done, refs = ray.wait(refs, num_returns=1).",
                     "move the ray.get at {shown} out of the loop", "called ray.get on each task")


def _ray_too_small(f: Finding, meta: dict[str, Any]) -> tuple[str, str] | None:
    size = f.evidence.get("suggested_batch")
    if size is None:
        return None
    name = f.evidence["function"]
    return (f"Batching: give each task about {size} items, a remote function that loops over its chunk: "
            f"refs = [{name}_chunk.remote(items[i:i + {size}]) for i in range(0, len(items), {size})], so a task "
            "does enough work to pay for its scheduling.",
            f"batch {name}() {size} items per task")


def _ray_repeated(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    return _repeated(f, "Store it once: ref = ray.put(data) before the loop and {name}.remote(ref, ...) in it; Ray "
                     "stores an argument passed by value again at every .remote() (over 100 KiB it is put in the "
                     "object store each time), and a ref passed instead is read by the workers from the store.",
                     "ray.put")


def _ray_serialization(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    return ("Send less: store big inputs once with ray.put() and pass the ref, or let tasks load their own data, "
            "and return summaries instead of large results.",
            "send less data to and from the tasks (ray.put, summaries)")


def _ray_order(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    shown = display_source(f.evidence["source"])
    return (f"Handle results as they finish: `while refs: done, refs = ray.wait(refs, num_returns=1); "
            f"use(ray.get(done[0]))` instead of the ray.get at {shown} in submission order.",
            f"handle results with ray.wait instead of the ray.get at {shown}")


def _ray_slow_submission(f: Finding, meta: dict[str, Any]) -> tuple[str, str, str]:
    fn = f.evidence["functions"][0]
    return _slow_submission(f, f"[{fn}.remote(x) for x in inputs] after building them", "ray.put(data)")


def _ray_fan_out(f: Finding, meta: dict[str, Any]) -> tuple[str, str] | None:
    return _fan_out(f, "{fn}.remote(ref)", "{fn}.remote(ray.get(ref))", "one ray.get", "ObjectRef",
                    "Fan out: submit independent steps together (pass ObjectRefs to .remote() instead of calling "
                    "ray.get between them) and split each step into several tasks.")


def _captured(f: Finding, store: str, call: str, ref: str) -> tuple[str, str]:
    """The captured-object finding in an engine's words: ``store`` holds the object once, ``call`` passes it."""
    name, fn = f.evidence["variable"], f.evidence["function"]
    what = "data" if name.startswith("bound argument") else name
    return (f"Store it once with {ref} = {store.format(what=what)} and pass {ref} as an argument "
            f"({call.format(fn=fn, ref=ref)}), reading the argument instead of the "
            f"{'bound object' if what == 'data' else 'global'}: the workers then keep one copy instead of "
            "receiving it with every task.",
            f"pass {fn}()'s captured {name!r} once with {store.format(what=what)}")


def _dask_captured(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    return _captured(f, "client.scatter({what}, broadcast=True)", "client.submit({fn}, {ref}, ...)", "data_future")


def _ray_captured(f: Finding, meta: dict[str, Any]) -> tuple[str, str]:
    return _captured(f, "ray.put({what})", "{fn}.remote({ref}, ...)", "ref")


#: engine (``trace.meta["api"]``) -> finding code -> its wording in that engine's API.
ADVICE: dict[str, dict[str, Wording]] = {
    "dask": {
        Code.BLOCKING: _dask_blocking,
        Code.TASKS_TOO_SMALL: _dask_too_small,
        Code.REPEATED_ARGUMENT: _dask_repeated,
        Code.SERIALIZATION: _dask_serialization,
        Code.IO_BOUND: _dask_io_bound,
        Code.SUBMISSION_ORDER: _dask_order,
        Code.SLOW_SUBMISSION: _dask_slow_submission,
        Code.CRITICAL_PATH: _dask_fan_out,
        Code.CAPTURED_OBJECT: _dask_captured,
    },
    # Ray reports no CPU time per task: no I/O- or compute-bound finding arises from a Ray cell.
    "ray": {
        Code.BLOCKING: _ray_blocking,
        Code.TASKS_TOO_SMALL: _ray_too_small,
        Code.REPEATED_ARGUMENT: _ray_repeated,
        Code.SERIALIZATION: _ray_serialization,
        Code.SUBMISSION_ORDER: _ray_order,
        Code.SLOW_SUBMISSION: _ray_slow_submission,
        Code.CRITICAL_PATH: _ray_fan_out,
        Code.CAPTURED_OBJECT: _ray_captured,
    },
}


#: engine -> the findings that rest on a measure the engine does not report (Ray: CPU time per task), so a
#: trace of it reads as 0 there and the finding would state a number nobody measured: they are left out.
UNMEASURED: dict[str, frozenset[str]] = {
    "ray": frozenset({Code.IO_BOUND, Code.COMPUTE_BOUND, Code.IO_BOUND_PHASE, Code.COMPUTE_BOUND_PHASE}),
}


def in_engine_words(found: list[Finding], api: str | None, meta: dict[str, Any] | None = None) -> list[Finding]:
    """``found`` with each advice that has a wording for ``api`` rewritten in it (``None``: the hpc API, unchanged).

    Findings resting on what ``api``'s engine does not measure (:data:`UNMEASURED`) are dropped.
    """
    table = ADVICE.get(api or "")
    if not table:
        return found
    unmeasured = UNMEASURED.get(api or "", frozenset())
    out = []
    for f in found:
        if f.code in unmeasured:
            continue
        wording = table.get(f.code)
        said = wording(f, meta or {}) if wording is not None else None
        if said is None:
            out.append(f)
            continue
        changed = {"advice": said[0], "fix": said[1] if f.fix else f.fix}
        if len(said) > 2:
            changed["verdict"] = said[2]
        out.append(dataclasses.replace(f, **changed))
    return out
