"""``Trace``: the immutable record of one traced region or ``%%eugo`` cell.

Columns are read-only NumPy arrays. Times are stored as wall-clock seconds since the
epoch (``time.time()`` on the process that measured them); views such as
:meth:`Trace.to_dataframe` shift them so the region starts at 0.

Clock alignment: tasks on the local pool run on the driver's host, so their wall clocks
are the same clock. Times from workers on other hosts are shifted onto the driver's clock
when the region closes (``recorder.align_clocks``, NTP-style bounds from the driver's own
ready/received times); durations never depend on it because each is measured with one
process's monotonic clock.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from eugo_lab.contract.phases import RUNTIME_PHASE_PREFIX
from eugo_lab.contract.row import (
    ARG_COLUMNS,
    BLOCK_COLUMNS,
    COLUMN_DEFAULTS,
    DEP_COLUMNS,
    DRIVER_DEP_COLUMNS,
    FACT_COLUMNS,
    FACT_FLOAT_COLUMNS,
    GPU_COLUMNS,
    PARENT_COLUMNS,
    PHASE_COLUMNS,
    PUT_COLUMNS,
    REF_COLUMNS,
    STATUS_NAMES,
    TASK_FLOAT_COLUMNS,
    TASK_INT_COLUMNS,
    TaskProfile,
)
from eugo_lab.jsonfile import JsonFile
from eugo_lab.tracing import driver as _driver
from eugo_lab.tracing import provenance
from eugo_lab.tracing.provenance import FunctionShipped, Refused, Result
from eugo_lab.tracing.segments import TaskRows

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = 1


def _frozen(a: Any, dtype: str) -> np.ndarray:
    arr = np.array(a, dtype=dtype)
    arr.setflags(write=False)
    return arr


def gpu_per_row(tasks: dict[str, Any], gpus: dict[str, Any]) -> np.ndarray:
    """The GPU each task row held (-1: none), from the ``GPU_COLUMNS`` table of attempts that held one.

    A row matches its own ``(task_id, attempt)``, or, an ``hpc.map`` item, its batch's.
    """
    tid, batch = np.asarray(tasks["task_id"], dtype="int64"), np.asarray(tasks["batch"], dtype="int64")
    out = np.full(tid.shape[0], -1, dtype="int64")
    held_tasks = np.asarray(gpus["task"], dtype="int64")
    if held_tasks.size:
        held = {(k, a): d for k, a, d in zip(held_tasks.tolist(), list(gpus["attempt"]), list(gpus["gpu"]))}
        rows = np.flatnonzero(np.isin(tid, held_tasks) | np.isin(batch, held_tasks))  # only those: a loop
        attempt = np.asarray(tasks["attempt"], dtype="int64")
        for i, k, b, a in zip(rows.tolist(), tid[rows].tolist(), batch[rows].tolist(), attempt[rows].tolist()):
            out[i] = held.get((k, a), held.get((b, a), -1))
    return out


def _side_table(columns: Sequence[str], table: dict[str, Any] | None) -> dict[str, np.ndarray]:
    """A side table (facts, refs, puts) as read-only arrays; missing (a trace made before it): empty."""
    table = table or {}
    # A column added after the trace was saved reads as -1 (not recorded) on each of its rows.
    n = max((len(v) for v in table.values()), default=0)
    return {c: _frozen(table.get(c, [-1] * n), "float64" if c == "time" or c in FACT_FLOAT_COLUMNS else "int64")
            for c in columns}


def _column(table: dict[str, Any], c: str, dtype: str, n: int, fix: Any = None) -> np.ndarray:
    """Column ``c`` of a task or phase table; a column added after the trace was made reads as its default."""
    if c not in table and c in COLUMN_DEFAULTS:
        return _frozen(np.full(n, COLUMN_DEFAULTS[c]), dtype)
    return _frozen(table[c] if fix is None else fix(table[c]), dtype)


def _blocks(table: dict[str, Any]) -> dict[str, np.ndarray]:
    """The driver-wait columns; ``task``, added after the others, reads as -1 (not known) where absent."""
    n = len(table["kind"])
    return {c: _frozen(table[c] if c in table else np.full(n, -1),
                       "float64" if c in ("start", "end") else "int64") for c in BLOCK_COLUMNS}


# Building a lazy trace's columns happens once; the lock keeps two readers from doing it twice.
_BUILD_LOCK = threading.Lock()


class Trace(JsonFile):
    """What happened in a traced region: every task attempt, its phases, and driver waits."""

    #: The region's ``hpc.map_partitions`` calls (:class:`~eugo_lab.hpc.partitions.PartitionsRun`), in call order:
    #: live objects a checker reads in the notebook's process, never saved with the trace.
    partition_runs: tuple[Any, ...] = ()

    def __init__(self, *, tasks: dict[str, np.ndarray] | TaskRows, phases: dict[str, np.ndarray],
                 blocks: dict[str, np.ndarray], functions: list[str], phase_names: list[str], sources: list[str],
                 block_kinds: list[str], workers: dict[int, tuple[str, int]], meta: dict[str, Any],
                 deps: dict[str, np.ndarray] | None = None, driver_deps: dict[str, np.ndarray] | None = None,
                 profiles: Sequence[TaskProfile] = (),
                 gpus: dict[str, np.ndarray] | None = None, arg_keys: dict[str, np.ndarray] | None = None,
                 facts: dict[str, Any] | None = None, refs: dict[str, Any] | None = None,
                 puts: dict[str, Any] | None = None, refused: Sequence[Refused] = (),
                 shipped: Sequence[FunctionShipped] = (), attempts: Sequence[Any] | None = None,
                 results: Sequence[Result] | None = None,
                 driver_spans: dict[str, Any] | None = None, parents: dict[str, np.ndarray] | None = None):
        #: The driver's submissions that took at least ``driver.SPAN_MIN_S``: ``kind`` (0 serializing,
        #: 1 submitting), ``task``, ``bytes``, ``start``, ``end``; :attr:`driver` is the whole lane.
        self.driver_spans = _driver.frozen_spans(driver_spans) if driver_spans is not None else _driver.empty_spans()
        self._driver: dict[str, np.ndarray] | None = None
        self.deps = deps if deps is not None else {c: _frozen([], "int64") for c in DEP_COLUMNS}
        #: Tasks submitted from inside another task: ``task`` and the ``parent`` that submitted it (see :attr:`parent`).
        self.parents = ({c: _frozen(parents[c], "int64") for c in PARENT_COLUMNS} if parents is not None
                        else {c: _frozen([], "int64") for c in PARENT_COLUMNS})
        self._parent: np.ndarray | None = None
        #: Dependencies through the driver (``task``, ``on``): ``task`` was passed a value that a get() or
        #: result() in the region returned for ``on`` (meta ``driver_deps_recorded``: the runtime looked).
        self.driver_deps = ({c: _frozen(driver_deps[c], "int64") for c in DRIVER_DEP_COLUMNS}
                            if driver_deps is not None else {c: _frozen([], "int64") for c in DRIVER_DEP_COLUMNS})
        #: The attempts that held a GPU (``task``, ``attempt``, ``gpu``); :attr:`gpu` spreads them over the rows.
        self.gpus = gpus if gpus is not None else {c: _frozen([], "int64") for c in GPU_COLUMNS}
        self._gpu: np.ndarray | None = None
        #: Tasks sent a large argument (``task``) and which one (``key``: the same object, the same key).
        self.arg_keys = arg_keys if arg_keys is not None else {c: _frozen([], "int64") for c in ARG_COLUMNS}
        self._tasks = tasks if isinstance(tasks, dict) else None
        self._rows = None if isinstance(tasks, dict) else tasks
        self.phases = phases
        self.blocks = blocks
        self.functions = tuple(functions)
        self.phase_names = tuple(phase_names)
        self.sources = tuple(sources)
        self.block_kinds = tuple(block_kinds)
        self.workers = dict(workers)
        self.meta = dict(meta)
        #: The objects the region's get()/result() calls handed the driver, by identity
        #: (:class:`~eugo_lab.tracing.returned.Handed`): live, set by the runtime's region as it closes, never
        #: saved; None for a trace read back, built by hand or recorded from an engine's own API.
        self.handed: Any = None
        #: Other live facts of the run for graders, by key (the calls of a notebook step kept by value,
        #: :data:`~eugo_lab.tracing.driver_calls.VALUES_KEY`): never saved, empty for a trace read back.
        self.live: dict[str, Any] = {}
        #: Profiled task attempts (``hpc.profile``): read with ``eugo_lab.profile.Profile.from_trace``.
        self.profiles = tuple(profiles)
        # -- provenance: recorded for tasks submitted inside the region (see eugo_lab.tracing.provenance)
        # Facts, refs and results come either built (a saved trace) or as the recorder's raw attempts
        # (provenance.Attempt), filed on first read so a region pays nothing for them at its close.
        self._attempts = list(attempts) if attempts is not None else None
        self._facts = _side_table(FACT_COLUMNS, facts) if attempts is None else None
        self._refs = _side_table(REF_COLUMNS, refs) if attempts is None else None
        self._raw_results: list[Any] = []
        #: The ``hpc.put`` calls made in the region: ``ref``, ``bytes``, ``time`` (``time.time()``).
        self.puts = _side_table(PUT_COLUMNS, puts)
        #: The resource requests refused in the region (``hpc.ResourceRequestError``), in order.
        self.refused = tuple(refused)
        #: The functions whose payload was sent to workers in the region (see :attr:`bytes_shipped`).
        self.functions_shipped = tuple(shipped)
        self._results: tuple[Result, ...] | None = None if attempts is not None else tuple(results or ())

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_columns(cls, *, tasks: dict[str, Any] | TaskRows, phases: dict[str, array], blocks: dict[str, array],
                     **tables: Any) -> Trace:
        """Build from columns (``array.array``, lists or NumPy; ints as int64, times as float64).

        ``tasks`` may also be the recorder's unbuilt :class:`~eugo_lab.tracing.segments.TaskRows`:
        the columns are then built the first time :attr:`tasks` is read.
        """
        if isinstance(tasks, TaskRows):
            t: dict[str, np.ndarray] | TaskRows = tasks
        else:
            n = len(tasks["task_id"])
            t = {c: _column(tasks, c, "int64", n) for c in TASK_INT_COLUMNS}
            t.update({c: _column(tasks, c, "float64", n) for c in TASK_FLOAT_COLUMNS})
        deps = tables.pop("deps", None)
        d = {c: _frozen(deps[c], "int64") for c in DEP_COLUMNS} if deps is not None else None
        keys = tables.pop("arg_keys", None)
        a = {c: _frozen(keys[c], "int64") for c in ARG_COLUMNS} if keys is not None else None
        for name, columns in (("puts", PUT_COLUMNS),):
            if tables.get(name) is not None:
                tables[name] = _side_table(columns, tables[name])
        gpus = tables.pop("gpus", None)
        if gpus is not None:
            tables["gpus"] = {c: _frozen(gpus[c], "int64") for c in GPU_COLUMNS}
        n = len(phases["row"])
        p = {c: _column(phases, c, "int64" if c in ("row", "name") else "float64", n) for c in PHASE_COLUMNS}
        b = _blocks(blocks)
        return cls(tasks=t, phases=p, blocks=b, deps=d, arg_keys=a, **tables)

    @property
    def tasks(self) -> dict[str, np.ndarray]:
        """One read-only array per task column (built from the recorder's rows on first read)."""
        if self._tasks is None:
            with _BUILD_LOCK:
                if self._tasks is None:
                    cols = self._rows.build()  # type: ignore[union-attr]
                    for arr in cols.values():
                        arr.setflags(write=False)
                    self._tasks, self._rows = cols, None
        return self._tasks

    @property
    def gpu(self) -> np.ndarray:
        """Per task row, the GPU its attempt held (``-1``: none); an ``hpc.map`` item shows its batch's.

        Only ``gpus=`` tasks hold one: on the local pool the device of the GPU worker that ran
        it, on Dask the one its worker was given, on Ray ``ray.get_gpu_ids()``.
        """
        if self._gpu is None:
            out = gpu_per_row(self.tasks, self.gpus)
            out.setflags(write=False)
            self._gpu = out
        return self._gpu

    @property
    def parent(self) -> np.ndarray:
        """Per task row, the id of the task whose body submitted it (``-1``: the driver submitted it)."""
        if self._parent is None:
            out = np.full(len(self), -1, dtype="int64")
            if len(self.parents["task"]):
                of = dict(zip(self.parents["task"].tolist(), self.parents["parent"].tolist()))
                ids = self.tasks["task_id"].tolist()
                out[:] = [of.get(t, -1) for t in ids]
            out.setflags(write=False)
            self._parent = out
        return self._parent

    def children(self, task_id: int) -> list[int]:
        """Ids of the tasks that task ``task_id`` submitted from its body, in submission order."""
        sel = self.parents["parent"] == task_id
        return self.parents["task"][sel].tolist()

    def gpu_tasks(self) -> dict[int, int]:
        """``{device: tasks that held it}``, counting each task once (not each attempt); ``{}`` when none did."""
        gpu = self.gpu
        if not (gpu >= 0).any():
            return {}
        first = self.first_attempts() & (gpu >= 0)
        devices, counts = np.unique(gpu[first], return_counts=True)
        return dict(zip(devices.tolist(), counts.tolist()))

    # -- counting tasks: one place for what "a task" is --------------------------------------------
    def first_attempts(self, function: str | None = None) -> np.ndarray:
        """A mask of the rows that are a task's first attempt (of ``function`` only, if given).

        A retried task counts once, by its first attempt; an ``hpc.map`` item is a row of its own.
        A function the trace never saw selects nothing.
        """
        t = self.tasks
        first = np.asarray(t["attempt"]) == 1
        if function is None:
            return first
        if function not in self.functions:
            return np.zeros_like(first)
        return first & (np.asarray(t["function"]) == self.functions.index(function))

    def task_counts(self) -> dict[str, int]:
        """``{function: tasks}`` over first attempts, for every function the trace saw (0 for none ran)."""
        codes = np.asarray(self.tasks["function"], dtype="int64")[self.first_attempts()]
        counts = np.bincount(codes, minlength=len(self.functions))
        return {name: int(counts[i]) for i, name in enumerate(self.functions)}

    def status_counts(self) -> dict[str, int]:
        """Attempts by how they ended: ``{"ok": n, "error": n, "crashed": n, "cancelled": n}``."""
        counts = np.bincount(np.asarray(self.tasks["status"], dtype="int64"), minlength=len(STATUS_NAMES))
        return {name: int(counts[i]) for i, name in enumerate(STATUS_NAMES)}
    # -- provenance ------------------------------------------------------------------------------
    def _file_attempts(self) -> None:
        """Turn the recorder's raw attempts into the fact and ref tables and the raw results (once)."""
        with _BUILD_LOCK:
            if self._attempts is not None:
                facts, refs, self._raw_results = provenance.file_attempts(self._attempts, self.functions)
                self._facts, self._refs = _side_table(FACT_COLUMNS, facts), _side_table(REF_COLUMNS, refs)
                self._attempts = None

    @property
    def facts(self) -> dict[str, np.ndarray]:
        """Per traced attempt (an ``hpc.map`` batch: its id), what its worker saw: ``FACT_COLUMNS``.

        Only tasks submitted inside the region carry facts (``contract.row.FACT_COLUMNS``).
        """
        if self._facts is None:
            self._file_attempts()
        return self._facts  # type: ignore[return-value]

    @property
    def refs(self) -> dict[str, np.ndarray]:
        """The stored references (``hpc.put`` ref ids) each traced attempt resolved on its worker: ``REF_COLUMNS``."""
        if self._refs is None:
            self._file_attempts()
        return self._refs  # type: ignore[return-value]

    def _all_results(self) -> tuple[Result, ...]:
        if self._results is None:
            self._file_attempts()
            with _BUILD_LOCK:
                if self._results is None:
                    self._results = provenance.digest_results(self._raw_results)
                    self._raw_results = []  # the payloads they came from are no longer held
        return self._results

    def results(self, function: str | None = None) -> list[Result]:
        """What tasks returned: the digest of each task's first successful attempt, in task-id order.

        Only tasks submitted inside the region are recorded. ``function`` keeps that
        function's tasks (the name the trace shows). An ``hpc.map`` batch of scalars gives
        one :class:`~eugo_lab.tracing.provenance.Result` per item, any other batch one for its
        list of results. Compare a value with ``eugo_lab.tracing.digest.digest(value) == r.digest``.
        """
        return [r for r in self._all_results() if function is None or r.function == function]

    @property
    def bytes_shipped(self) -> int:
        """Bytes the region sent to workers: every attempt's pickled arguments plus the function payloads sent."""
        return int(self.tasks["bytes_in"].sum()) + sum(f.bytes_sent for f in self.functions_shipped)

    def _fact_rows(self, function: str | None) -> np.ndarray:
        """Rows of :attr:`facts` of ``function`` (all with ``None``), each task's first attempt recorded."""
        f = self.facts
        sel = np.ones(len(f["task"]), dtype=bool)
        if function is not None:
            code = self.functions.index(function) if function in self.functions else -1
            sel &= f["function"] == code
        rows = np.flatnonzero(sel)
        order = rows[np.lexsort((f["attempt"][rows], f["task"][rows]))]
        _, first = np.unique(f["task"][order], return_index=True)
        return order[first]

    def blas_threads(self, function: str | None = None) -> dict[int, int]:
        """``{task id: BLAS/OpenMP threads}`` in effect as each task's body started (first attempt; -1: no library)."""
        rows = self._fact_rows(function)
        return dict(zip(self.facts["task"][rows].tolist(), self.facts["blas_threads"][rows].tolist()))

    def gpu_devices(self, function: str | None = None) -> dict[int, int]:
        """``{task id: device}`` for ``gpus=`` tasks: the GPU their worker really had (``-1``: none), first attempt.

        Unlike :attr:`gpu` (the device the engine assigned), this is what the worker found: a
        local-pool GPU worker named by ``gpus=[0]`` on a machine without a GPU reads ``-1``.
        """
        rows = self._fact_rows(function)
        rows = rows[self.facts["gpu_task"][rows] == 1]
        return dict(zip(self.facts["task"][rows].tolist(), self.facts["device"][rows].tolist()))

    def resolved_refs(self, function: str | None = None) -> set[int]:
        """The ``hpc.put`` ref ids the tasks of ``function`` (all with ``None``) resolved on their workers."""
        r = self.refs
        if function is None:
            return set(r["ref"].tolist())
        f = self.facts
        code = self.functions.index(function) if function in self.functions else -1
        tasks = set(f["task"][f["function"] == code].tolist())
        return {ref for t, ref in zip(r["task"].tolist(), r["ref"].tolist()) if t in tasks}

    # -- the driver's time ----------------------------------------------------------------------
    @property
    def driver(self) -> dict[str, np.ndarray]:
        """The driver lane: segments from the region's start to its end (``eugo_lab.tracing.driver.segments``).

        Kinds ``serializing``, ``submitting``, ``blocked`` and ``own work``; times in seconds
        since :attr:`t0`; their durations add up to :attr:`wall_time`.
        """
        if self._driver is None:
            self._driver = _driver.segments(self)
        return self._driver

    def driver_breakdown(self) -> dict[str, float]:
        """Seconds the driver spent per kind (``serializing``, ``submitting``, ``blocked``, ``own work``).

        They add up to :attr:`wall_time`; submissions too short for a segment of their own
        count under their kinds here (see ``eugo_lab.tracing.driver``).
        """
        return _driver.breakdown(self, self.driver)

    def driver_dataframe(self) -> pd.DataFrame:
        """:attr:`driver` as a DataFrame, one row per segment, with its ``duration``."""
        import pandas as pd

        d = self.driver
        return pd.DataFrame({**{c: d[c] for c in _driver.SEGMENT_COLUMNS}, "duration": d["end"] - d["start"]})

    # -- basic facts ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._rows) if self._tasks is None else int(self._tasks["task_id"].shape[0])

    @property
    def t0(self) -> float:
        """Wall-clock time the region started (all relative times count from here)."""
        return float(self.meta.get("region_start", 0.0))

    @property
    def wall_time(self) -> float:
        """Seconds from the region's start to its end."""
        return float(self.meta.get("region_end", 0.0)) - self.t0

    @property
    def n_workers(self) -> int:
        """Workers the engine had (the ideal speedup)."""
        return int(self.meta.get("workers", max(len(self.workers), 1)))

    def __repr__(self) -> str:
        return (f"<Trace {len(self)} task rows, {len(self.functions)} functions, "
                f"backend={self.meta.get('backend', '?')}, workers={self.n_workers}>")

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    # -- views -----------------------------------------------------------------------------------
    def to_dataframe(self) -> pd.DataFrame:
        """One row per task attempt (per item for ``hpc.map``); times in seconds from ``t0``."""
        import pandas as pd

        t = self.tasks
        t0 = self.t0
        funcs = np.array(self.functions, dtype=object)
        hosts = {w: h for w, (h, _) in self.workers.items()}
        pids = {w: p for w, (_, p) in self.workers.items()}
        worker = t["worker"]
        return pd.DataFrame({
            "function": funcs[t["function"]] if len(self) else np.array([], dtype=object),
            "task_id": t["task_id"],
            "attempt": t["attempt"],
            "worker": worker,
            "host": [hosts.get(int(w), "") for w in worker],
            "pid": [pids.get(int(w), 0) for w in worker],
            "status": np.array(STATUS_NAMES, dtype=object)[t["status"]] if len(self) else np.array([], dtype=object),
            "batch": t["batch"],
            "submit": t["submit"] - t0,
            "ready": t["ready"] - t0,
            "start": t["start"] - t0,
            "end": t["end"] - t0,
            "received": t["received"] - t0,
            "duration": t["end"] - t["start"],
            "cpu": t["cpu"],
            "runq": t["runq"],
            "deser": t["deser"],
            "ser": t["ser"],
            "bytes_in": t["bytes_in"],
            "bytes_out": t["bytes_out"],
            "gpu": self.gpu,
        })

    def phases_dataframe(self, markers: bool = False) -> pd.DataFrame:
        """One row per ``hpc.phase`` span: ``task_id``, ``phase``, ``start``, ``end``, ``cpu``, ``runq``.

        The spans the runtime records itself (the JIT's verdicts and trial, names starting with
        ``contract.phases.RUNTIME_PHASE_PREFIX``) are left out unless ``markers``: the frame holds
        the phases the tasks' code marked.
        """
        import pandas as pd

        p = self.phases
        names = np.array(self.phase_names, dtype=object)
        if not markers and len(p["row"]):
            own = np.array([not str(n).startswith(RUNTIME_PHASE_PREFIX) for n in self.phase_names], dtype=bool)
            keep = own[np.asarray(p["name"])]
            p = {k: np.asarray(v)[keep] for k, v in p.items()}
        return pd.DataFrame({
            "task_id": self.tasks["task_id"][p["row"]],
            "phase": names[p["name"]] if len(p["row"]) else np.array([], dtype=object),
            "start": p["start"] - self.t0,
            "end": p["end"] - self.t0,
            "cpu": p["cpu"],
            "runq": p["runq"],
        })

    def blocks_dataframe(self) -> pd.DataFrame:
        """One row per blocking ``get()``/``wait()``: ``kind``, ``start``, ``end``, ``futures``, ``source``, ``task``.

        ``task``: the task of the one future the call waited on or took (-1: several).
        """
        import pandas as pd

        b = self.blocks
        return pd.DataFrame({
            "kind": [self.block_kinds[k] for k in b["kind"]],
            "start": b["start"] - self.t0,
            "end": b["end"] - self.t0,
            "futures": b["futures"],
            "source": [self.sources[s] for s in b["source"]],
            "task": b["task"],
        })

    # -- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN stored as null)."""
        def col(a: np.ndarray) -> list:
            if a.dtype.kind == "f":
                return [None if math.isnan(x) else x for x in a.tolist()]
            return a.tolist()

        return {
            "schema_version": SCHEMA_VERSION,
            "meta": self.meta,
            "functions": list(self.functions),
            "phase_names": list(self.phase_names),
            "sources": list(self.sources),
            "block_kinds": list(self.block_kinds),
            "workers": {str(k): list(v) for k, v in self.workers.items()},
            "tasks": {k: col(v) for k, v in self.tasks.items()},
            "phases": {k: col(v) for k, v in self.phases.items()},
            "blocks": {k: col(v) for k, v in self.blocks.items()},
            "deps": {k: col(v) for k, v in self.deps.items()},
            **({"parents": {k: col(v) for k, v in self.parents.items()}} if len(self.parents["task"]) else {}),
            **({"driver_deps": {k: col(v) for k, v in self.driver_deps.items()}}
               if len(self.driver_deps["task"]) else {}),
            "arg_keys": {k: col(v) for k, v in self.arg_keys.items()},
            **({"gpus": {k: col(v) for k, v in self.gpus.items()}} if len(self.gpus["task"]) else {}),
            "facts": {k: col(v) for k, v in self.facts.items()},
            "refs": {k: col(v) for k, v in self.refs.items()},
            "puts": {k: col(v) for k, v in self.puts.items()},
            "refused": [list(r) for r in self.refused],
            "functions_shipped": [[f.function, f.payload_bytes, f.captured_bytes, [list(c) for c in f.captured],
                                   f.sends] for f in self.functions_shipped],
            "results": [provenance.result_to_list(r) for r in self._all_results()],
            **({"driver_spans": {k: col(v) for k, v in self.driver_spans.items()}}
               if len(self.driver_spans["kind"]) else {}),
            **({"profiles": [[p.task_id, p.attempt, p.function, p.worker, base64.b64encode(p.data).decode()]
                             for p in self.profiles]} if self.profiles else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        """Inverse of :meth:`to_dict`; rejects unknown schema versions with a clear message."""
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"this trace has schema_version {version!r}; this eugo_lab reads version {SCHEMA_VERSION}. "
                "Upgrade eugo_lab, or re-record the trace."
            )

        def nan(xs: list) -> list:
            return [math.nan if x is None else x for x in xs]

        n = len(d["tasks"]["task_id"])
        # Columns added within schema 1 ("runq") read as their default in a trace saved before them.
        tasks = {c: _column(d["tasks"], c, "int64", n) for c in TASK_INT_COLUMNS}
        tasks.update({c: _column(d["tasks"], c, "float64", n, nan) for c in TASK_FLOAT_COLUMNS})
        n = len(d["phases"]["row"])
        phases = {c: _column(d["phases"], c, "int64" if c in ("row", "name") else "float64", n, nan)
                  for c in PHASE_COLUMNS}
        blocks = _blocks({c: nan(v) for c, v in d["blocks"].items()})
        # "deps" arrived within schema 1; a trace saved before it has none (and no "deps_recorded").
        deps = {c: _frozen(d.get("deps", {}).get(c, []), "int64") for c in DEP_COLUMNS}
        arg_keys = {c: _frozen(d.get("arg_keys", {}).get(c, []), "int64") for c in ARG_COLUMNS}  # also within schema 1
        # "gpus" too (only traces in which a task held a GPU carry it).
        gpus = {c: _frozen(d.get("gpus", {}).get(c, []), "int64") for c in GPU_COLUMNS}
        # The provenance tables too: a trace saved before them has none.
        prov = {"facts": d.get("facts"), "refs": d.get("refs"), "puts": d.get("puts"),
                "refused": [Refused(int(t), f, dict(q), float(w)) for t, f, q, w in d.get("refused", ())],
                "shipped": [FunctionShipped(f, int(p), int(c), tuple((n, int(b)) for n, b in cap), int(s))
                            for f, p, c, cap, s in d.get("functions_shipped", ())],
                "results": [provenance.result_from_list(r) for r in d.get("results", ())]}
        # "parents" too (only traces with tasks submitted by tasks carry it), and "driver_deps" (only traces
        # with such a dependency carry it).
        parents = {c: _frozen(d.get("parents", {}).get(c, []), "int64") for c in PARENT_COLUMNS}
        driver_deps = {c: d.get("driver_deps", {}).get(c, []) for c in DRIVER_DEP_COLUMNS}
        return cls(tasks=tasks, phases=phases, blocks=blocks, deps=deps, driver_deps=driver_deps, gpus=gpus,
                   arg_keys=arg_keys, **prov, parents=parents,
                   driver_spans=d.get("driver_spans"),  # within schema 1 too: a trace saved before it has none
                   functions=d["functions"],
                   phase_names=d["phase_names"],
                   sources=d["sources"], block_kinds=d["block_kinds"],
                   workers={int(k): (v[0], int(v[1])) for k, v in d["workers"].items()}, meta=d["meta"],
                   profiles=[TaskProfile(int(t), int(a), f, int(w), base64.b64decode(b))
                             for t, a, f, w, b in d.get("profiles", ())])

    def to_chrome_trace(self, path: str | None = None) -> dict[str, Any]:
        """Chrome/Perfetto trace-event JSON (open it at ui.perfetto.dev); written to ``path`` if given.

        One track per worker plus a ``driver`` track for blocking calls; phases nest
        inside their task's slice.
        """
        t0 = self.t0
        us = 1e6
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": f"eugo_lab {self.meta.get('backend', '')}"}},
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "driver"}},
        ]
        for w in sorted(set(self.tasks["worker"].tolist()) | set(self.workers)):
            if w >= 0:
                events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": w + 1,
                               "args": {"name": f"worker {w}"}})
        t = self.tasks
        gpu = self.gpu
        for i in range(len(self)):
            s, e = t["start"][i], t["end"][i]
            if math.isnan(s) or math.isnan(e):
                continue
            args = {"task_id": int(t["task_id"][i]), "attempt": int(t["attempt"][i]),
                    "status": STATUS_NAMES[t["status"][i]], "cpu_s": float(t["cpu"][i]),
                    "runq_s": None if math.isnan(t["runq"][i]) else float(t["runq"][i]),
                    "bytes_in": int(t["bytes_in"][i]), "bytes_out": int(t["bytes_out"][i])}
            if gpu[i] >= 0:
                args["gpu"] = int(gpu[i])
            events.append({
                "name": self.functions[t["function"][i]], "cat": STATUS_NAMES[t["status"][i]], "ph": "X",
                "ts": (s - t0) * us, "dur": max(e - s, 0) * us, "pid": 1, "tid": int(t["worker"][i]) + 1,
                "args": args,
            })
        p = self.phases
        for j in range(len(p["row"])):
            row = int(p["row"][j])
            events.append({"name": self.phase_names[p["name"][j]], "cat": "phase", "ph": "X",
                           "ts": (p["start"][j] - t0) * us, "dur": max(p["end"][j] - p["start"][j], 0) * us,
                           "pid": 1, "tid": int(t["worker"][row]) + 1})
        b = self.blocks
        for j in range(len(b["kind"])):
            events.append({"name": f"{self.block_kinds[b['kind'][j]]}() blocked", "cat": "blocking", "ph": "X",
                           "ts": (b["start"][j] - t0) * us, "dur": max(b["end"][j] - b["start"][j], 0) * us,
                           "pid": 1, "tid": 0,
                           "args": {"futures": int(b["futures"][j]), "source": self.sources[b["source"][j]]}})
        doc = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"schema_version": SCHEMA_VERSION}}
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
        return doc
