"""Build fully specified synthetic traces for analysis tests (a fake clock, like pyinstrument's tests).

Times given to the builder are seconds relative to ``T0``; every unspecified field gets a
documented default so each test states only what it is about.
"""

from __future__ import annotations

import math

from eugo_lab.contract.row import FACT_COLUMNS, TASK_FLOAT_COLUMNS, TASK_INT_COLUMNS
from eugo_lab.tracing.trace import Trace

T0 = 1000.0


class TraceBuilder:
    def __init__(self, workers: int = 2, backend: str = "local", cores: int = 2):
        self.meta = {"backend": backend, "workers": workers, "cores": cores, "threads_per_worker": 1}
        self.tasks: dict[str, list] = {c: [] for c in TASK_INT_COLUMNS + TASK_FLOAT_COLUMNS}
        self.phases: dict[str, list] = {"row": [], "name": [], "start": [], "end": [], "cpu": [], "runq": []}
        self.blocks: dict[str, list] = {"kind": [], "start": [], "end": [], "futures": [], "source": [], "task": []}
        self.functions: list[str] = []
        self.phase_names: list[str] = []
        self.sources: list[str] = []
        self.block_kinds: list[str] = []
        self.workers = {w: (f"host-{w}", 40000 + w) for w in range(workers)}
        self.deps: dict[str, list] = {"task": [], "on": []}
        # Dependencies through the driver (task was passed a value a get() returned for on).
        self.driver_deps: dict[str, list] = {"task": [], "on": []}
        self.arg_keys: dict[str, list] = {"task": [], "key": []}
        self.facts: dict[str, list] = {c: [] for c in FACT_COLUMNS}
        self.parents: dict[str, list] = {"task": [], "parent": []}
        self.deps_recorded = False
        self.driver_spans: dict[str, list] = {"kind": [], "task": [], "bytes": [], "start": [], "end": []}
        self.driver_short: dict[str, float] | None = None
        self.shipped: list = []  # FunctionShipped records: function payloads sent to workers
        self._next_id = 1

    @staticmethod
    def _code(table: list[str], name: str) -> int:
        if name not in table:
            table.append(name)
        return table.index(name)

    def task(self, fn: str = "f", *, worker: int = 0, start: float, end: float, ready: float | None = None,
             submit: float | None = None, received: float | None = None, cpu: float | None = None,
             deser: float = 0.0, ser: float = 0.0, bytes_in: int = 100, bytes_out: int = 100, status: int = 0,
             batch: int = -1, attempt: int = 1, task_id: int | None = None, runq: float = math.nan) -> int:
        """Add one row; ``ready``/``submit`` default to ``start - deser``, ``received`` to ``end + ser``,
        ``cpu`` to the body time, ``runq`` (run-queue wait) to NaN (not measured). Returns the row index."""
        ready = start - deser if ready is None else ready
        submit = ready if submit is None else submit
        received = end + ser if received is None else received
        cpu = end - start if cpu is None else cpu
        if task_id is None:
            task_id = self._next_id
        self._next_id = max(self._next_id, task_id) + 1
        row = len(self.tasks["task_id"])
        ints = dict(task_id=task_id, attempt=attempt, function=self._code(self.functions, fn), worker=worker,
                    status=status, batch=batch, bytes_in=bytes_in, bytes_out=bytes_out)
        floats = dict(submit=T0 + submit, ready=T0 + ready, start=T0 + start, end=T0 + end, received=T0 + received,
                      cpu=cpu, deser=deser, ser=ser, runq=runq)
        for k, v in {**ints, **floats}.items():
            self.tasks[k].append(v)
        return row

    def phase(self, row: int, name: str, start: float, end: float, cpu: float, runq: float = math.nan) -> None:
        self.phases["row"].append(row)
        self.phases["name"].append(self._code(self.phase_names, name))
        self.phases["start"].append(T0 + start)
        self.phases["end"].append(T0 + end)
        self.phases["cpu"].append(cpu)
        self.phases["runq"].append(runq)

    def dep(self, task_id: int, on: int) -> None:
        """Record that ``task_id`` was passed the future of ``on`` (marks the trace's deps as recorded)."""
        self.deps["task"].append(task_id)
        self.deps["on"].append(on)
        self.deps_recorded = True

    def child(self, task_id: int, parent: int) -> None:
        """Record that task ``task_id`` was submitted from inside the body of task ``parent``."""
        self.parents["task"].append(task_id)
        self.parents["parent"].append(parent)

    def driver_dep(self, task_id: int, on: int) -> None:
        """Record that ``task_id`` was passed the value a get() returned for ``on`` (through the driver)."""
        self.driver_deps["task"].append(task_id)
        self.driver_deps["on"].append(on)
        self.meta["driver_deps_recorded"] = True

    def arg(self, task_id: int, key: int) -> None:
        """Record that ``task_id`` was sent the large argument ``key`` (as the driver does at .remote())."""
        self.arg_keys["task"].append(task_id)
        self.arg_keys["key"].append(key)

    def imports(self, row: int, modules: int, seconds: float = -1.0, pickling_cpu: float = -1.0) -> None:
        """Record the facts of ``row``'s attempt, as workers send: it imported ``modules`` modules in ``seconds``
        and its unpickling and pickling took ``pickling_cpu`` CPU seconds (-1: not recorded, as in a trace saved
        before they were)."""
        t = self.tasks
        for c, v in zip(FACT_COLUMNS, (t["task_id"][row], t["attempt"][row], t["function"][row], -1, 0, -1, modules,
                                       seconds, pickling_cpu)):
            self.facts[c].append(v)

    def block(self, start: float, end: float, futures: int = 1, kind: str = "get",
              source: str = "/home/student/loop.py:7", task: int = -1) -> None:
        self.blocks["task"].append(task)
        self.blocks["kind"].append(self._code(self.block_kinds, kind))
        self.blocks["start"].append(T0 + start)
        self.blocks["end"].append(T0 + end)
        self.blocks["futures"].append(futures)
        self.blocks["source"].append(self._code(self.sources, source))

    def submission(self, task_id: int, start: float, pickled: float, end: float, nbytes: int = 0) -> None:
        """Record one submission the driver timed (a span each for serializing and submitting, as the runtime does)."""
        for kind, a, b in ((0, start, pickled), (1, pickled, end)):
            for c, v in (("kind", kind), ("task", task_id), ("bytes", nbytes if kind == 0 else 0), ("start", T0 + a),
                         ("end", T0 + b)):
                self.driver_spans[c].append(v)

    def short_submissions(self, serializing: float, submitting: float, count: int) -> None:
        """Record the summed time of submissions too short for spans (the runtime's ``driver_short``)."""
        self.driver_short = {"serializing": serializing, "submitting": submitting, "submits": count}

    def build(self, end: float | None = None, start: float = 0.0) -> Trace:
        """The trace; the region spans ``start``..``end`` (default: the last received time)."""
        if end is None:
            end = max([r - T0 for r in self.tasks["received"]] + [e - T0 for e in self.blocks["end"]] + [start])
        meta = {**self.meta, "region_start": T0 + start, "region_end": T0 + end}
        if self.deps_recorded:
            meta["deps_recorded"] = True
        if self.driver_short is not None or self.driver_spans["kind"]:
            meta["driver_short"] = self.driver_short or {"serializing": 0.0, "submitting": 0.0, "submits": 0}
        return Trace.from_columns(tasks=self.tasks, phases=self.phases, blocks=self.blocks, deps=self.deps,
                                  driver_deps=self.driver_deps, shipped=self.shipped,
                                  arg_keys=self.arg_keys, driver_spans=self.driver_spans, facts=self.facts,
                                  parents=self.parents,
                                  functions=self.functions, phase_names=self.phase_names, sources=self.sources,
                                  block_kinds=self.block_kinds, workers=self.workers, meta=meta)


def even_trace(workers: int = 2, per_worker: int = 2, duration: float = 1.0, fn: str = "f") -> Trace:
    """``workers × per_worker`` independent tasks, all ready at 0, back to back with no overhead."""
    b = TraceBuilder(workers=workers)
    for k in range(per_worker):
        for w in range(workers):
            b.task(fn, worker=w, ready=0.0, start=k * duration, end=(k + 1) * duration)
    return b.build()
