"""Provenance in a trace: what each task returned, what its function carried, what the region stored and was refused.

The recorder keeps the raw facts cheaply while a region is open (a reference to each small
result payload, the digests workers computed for large ones, the function records' send
counts); the :class:`~eugo_lab.tracing.trace.Trace` turns them into these records when
somebody reads them. Graders compare a learner's value with ``trace.results(fn)`` through
:func:`eugo_lab.tracing.digest.digest`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from eugo_lab.contract.digest import Digest, digest, scalars_only
from eugo_lab.contract.row import (
    FACT_BLAS,
    FACT_COLUMNS,
    FACT_DEVICE,
    FACT_DIGEST,
    FACT_IMPORT_S,
    FACT_IMPORTS,
    FACT_PICKLING_CPU,
    FACT_REFS,
    REF_COLUMNS,
)
from eugo_lab.contract.serialization import loads_value

#: How many captured objects a :class:`FunctionShipped` names (the largest).
CAPTURED_NAMED = 5


class Result(NamedTuple):
    """The digest of what one task returned (its first successful attempt).

    ``items``: 0 for a single task or one item of an ``hpc.map`` batch of scalars (digested
    item by item, ``task_id`` the item's); for a batch of other values, one digest of the
    list of its results, ``task_id`` the batch's and ``items`` its length.
    """

    task_id: int
    function: str
    digest: Digest
    items: int = 0


class FunctionShipped(NamedTuple):
    """A function whose pickled payload was sent to workers during the region.

    ``payload_bytes``: its pickle; ``captured_bytes``: what its captured globals and closure
    cells account for in it; ``captured``: the largest of them ``((name, bytes), ...)``;
    ``sends``: how many times the payload went to workers in the region (the local pool: once
    per worker process; Dask and Ray: with every task attempt).
    """

    function: str
    payload_bytes: int
    captured_bytes: int
    captured: tuple[tuple[str, int], ...]
    sends: int

    @property
    def bytes_sent(self) -> int:
        """Bytes of function payload this region shipped: ``payload_bytes * sends``."""
        return self.payload_bytes * self.sends


class Refused(NamedTuple):
    """A resource request no worker could meet (``hpc.ResourceRequestError``): which task, what, when."""

    task_id: int
    function: str
    request: dict[str, float]
    time: float


#: What the runtime's I/O thread leaves in ``Recorder.attempts`` per attempt of a task submitted in a
#: traced region (an ``hpc.map`` batch: one): ``(task_id, attempt, function, ok, payload,
#: TaskStats.facts or None, gpus=, the batch's item ids or None, its failed items or None)``.
Attempt = tuple[int, int, str, bool, bytes, "tuple | None", float, Any, "dict | None"]
# A successful attempt, as digest_results reads it:
# (task_id, attempt, function, payload or None, digest or None, item ids or None, failed item indices).
RawResult = tuple[int, int, str, "bytes | None", "Digest | None", Any, frozenset]


def file_attempts(attempts: list[Attempt], functions: tuple[str, ...]) -> tuple[dict, dict, list[RawResult]]:
    """The fact and ref tables (columns as lists) and the raw results of ``attempts``.

    A result the worker digested (a large payload) keeps its digest; any other keeps its
    payload (the reference the driver received, no copy) for :func:`digest_results`.
    """
    code = {name: i for i, name in enumerate(functions)}
    facts: dict[str, list] = {c: [] for c in FACT_COLUMNS}
    refs: dict[str, list] = {c: [] for c in REF_COLUMNS}
    results: list[RawResult] = []
    for task_id, attempt, function, ok, payload, seen, gpus, item_ids, item_errors in attempts:
        if seen is not None:
            gpu_task = 1 if gpus else 0
            imports = seen[FACT_IMPORTS] if len(seen) > FACT_IMPORTS else -1  # a worker of an older version
            import_s = seen[FACT_IMPORT_S] if len(seen) > FACT_IMPORT_S else -1.0
            pickling_cpu = seen[FACT_PICKLING_CPU] if len(seen) > FACT_PICKLING_CPU else -1.0
            for c, v in zip(FACT_COLUMNS, (task_id, attempt, code.get(function, -1), seen[FACT_BLAS], gpu_task,
                                           seen[FACT_DEVICE] if gpu_task else -1, imports, import_s,
                                           pickling_cpu)):
                facts[c].append(v)
            for ref in seen[FACT_REFS]:
                refs["task"].append(task_id)
                refs["attempt"].append(attempt)
                refs["ref"].append(ref)
        if ok:
            found = seen[FACT_DIGEST] if seen is not None else None
            results.append((task_id, attempt, function, None if found is not None else payload, found, item_ids,
                            frozenset(item_errors or ())))
    return facts, refs, results


def digest_results(raw: list[RawResult]) -> tuple[Result, ...]:
    """The :class:`Result` of each task's first successful attempt, in task-id order."""
    seen: set[int] = set()
    out: list[Result] = []
    for task_id, _attempt, function, payload, found, item_ids, failed in sorted(raw, key=lambda r: (r[0], r[1])):
        if task_id in seen:
            continue
        seen.add(task_id)
        if found is not None:  # digested on the worker (a large payload)
            out.append(Result(task_id, function, found, len(item_ids) if item_ids is not None else 0))
            continue
        if payload is None:
            continue
        # A result kept in the pool's shared memory (a StoredValue) decodes itself; its digest pickles
        # the value again where it needs a pickle (the one it has holds only the small part).
        inband = payload if type(payload) is bytes else None
        if item_ids is None:
            out.append(Result(task_id, function, digest(loads_value(payload), inband)))
            continue
        values = loads_value(payload)
        if scalars_only(values):
            out.extend(Result(int(tid), function, digest(v)) for i, (tid, v) in enumerate(zip(item_ids, values))
                       if i not in failed)
        else:
            out.append(Result(task_id, function, digest(values, inband), len(values)))
    out.sort(key=lambda r: r.task_id)
    return tuple(out)


def shipped_since(snapshot: dict[int, tuple[Any, int]], records: list[Any]) -> tuple[FunctionShipped, ...]:
    """The functions whose payload was sent after ``snapshot`` (``{fid: (record, sends)}``), by name."""
    out = []
    for rec in records:
        n = rec.sends - snapshot.get(rec.fid, (None, 0))[1]
        if n > 0:
            payload = rec.payload
            out.append(FunctionShipped(rec.name, len(payload), rec.captured_bytes, rec.captured[:CAPTURED_NAMED], n))
    return tuple(sorted(out, key=lambda f: (f.function, -f.payload_bytes)))


def result_to_list(r: Result) -> list:
    """A JSON-ready form of ``r`` (``result_from_list`` reads it back)."""
    return [r.task_id, r.function, r.digest.to_list(), r.items]


def result_from_list(d: list) -> Result:
    """Inverse of :func:`result_to_list`."""
    return Result(int(d[0]), d[1], Digest.from_list(d[2]), int(d[3]))
