"""Record a cell that uses Ray's own API (``@ray.remote``, ``.remote()``, ``ray.get``, ``ray.wait``, ``ray.put``).

Ray keeps no per-task record the notebook can read without its dashboard, except the profile
events every worker sends to Ray's control store (what ``ray.timeline()`` exports): for each
task, when its worker deserialized the arguments, executed the body and stored the outputs,
with the worker's id. :class:`RayRecording` wraps, for the cell's duration, the calls that
submit tasks (``RemoteFunction._remote``: every ``f.remote()`` and ``f.options(...).remote()``)
and the driver's ``ray.get``/``ray.wait``/``ray.put``, then reads ``ray.timeline()`` for the
tasks it saw submitted and writes both through a fresh Recorder into the same Trace as any cell.

The driver's side also gives the values ``ray.get`` returned for the cell's tasks (small ones:
``Trace.results``), which tasks were passed a ``ray.put`` reference as a top-level argument (Ray
resolves those on the worker; ``meta["refs_read"]``: ``[task, put]``) and every ``ray.wait``'s
refs given, ``num_returns`` asked and refs returned ready (``meta["wait_calls"]``).

Ray sends profile events about once a second, so collecting them adds a second or two after
the cell. What Ray does not report is said in ``trace.meta["not_recorded"]``.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from eugo_lab.contract import given
from eugo_lab.contract.row import ARG_KEY_MIN_BYTES, OK, TaskStats
from eugo_lab.contract.serialization import wire_bytes
from eugo_lab.native.errors import NotComparable
from eugo_lab.tracing.recorder import Recorder
from eugo_lab.tracing.trace import Trace

NOT_RECORDED = (
    "CPU time per task: Ray does not measure it, so no task is called I/O- or compute-bound",
    "result sizes (bytes out): Ray's timeline does not carry them",
    "transfers between workers: Ray does not expose which object moved where, or when",
    "whether a task failed: Ray's timeline does not say, so every task that ran is drawn as finished",
)
# Ray passes an argument of up to 100 KiB inside the task's spec and puts a larger one into the object store
# during .remote() itself (Ray's ``max_direct_call_object_size``): a .remote() with arguments that large spent
# its time serializing and storing them, one with smaller ones mostly handing the task on.
RAY_INLINE_MAX_BYTES = 100 * 1024
#: Results of at most this many bytes are kept by the driver for the trace's result digests (numbers, short
#: lists: what a grader compares), so a large array result is not held a second time.
RESULT_KEEP_BYTES = 64 * 1024
# How long to wait for the workers' profile events of every task the cell submitted (they come ~1 s apart).
COLLECT_TIMEOUT_S = 8.0


def ray_running() -> bool:
    """Whether this process is connected to Ray (``ray.init`` was called), without importing Ray."""
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def _size(value: Any) -> int:
    """Bytes a by-value argument travels as (:func:`wire_bytes`; an ObjectRef: 0, a dependency)."""
    import ray

    if isinstance(value, ray.ObjectRef):
        return 0
    return wire_bytes(value)


def is_engine_function(qualified: str) -> bool:
    """Whether a remote function (``module.name``, as Ray names it) is Ray's own, defined in a ``ray`` module."""
    return qualified == "ray" or qualified.startswith("ray.")


def _source() -> str:
    """``file:line`` of the notebook's code that called into Ray."""
    import ray

    skip = (os.path.dirname(os.path.abspath(ray.__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    f: Any = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(skip):
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


@dataclass
class RayDriverCalls:
    """The driver's side of a Ray cell: submissions (by task id), arguments, puts and waits (``time.time()``)."""

    submitted: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    bytes_in: dict[str, int] = field(default_factory=dict)
    arg_key: dict[str, int] = field(default_factory=dict)
    deps: dict[str, list[str]] = field(default_factory=dict)
    received: dict[str, float] = field(default_factory=dict)
    #: task id -> whether its function is one of Ray's own (a library of Ray's submitting tasks for the cell:
    #: ray.data, ray.util): recorded, but named as the engine's work (``meta["engine_functions"]``).
    engine: dict[str, bool] = field(default_factory=dict)
    #: task id -> when its ``.remote()`` began and returned (``time.time()``): the driver's time submitting it.
    calls: dict[str, tuple[float, float]] = field(default_factory=dict)
    puts: list[tuple[float, int]] = field(default_factory=list)
    blocks: list[tuple[str, float, float, int, str]] = field(default_factory=list)
    _objects: dict[int, int] = field(default_factory=dict)
    _keep: list[Any] = field(default_factory=list)
    _saved: list[tuple[Any, str, Any]] = field(default_factory=list)
    _local: threading.local = field(default_factory=threading.local)
    #: task id -> the value ``ray.get`` handed the notebook for it (values of up to RESULT_KEEP_BYTES).
    results: dict[str, Any] = field(default_factory=dict)
    #: ``ray.put`` ObjectRef (hex) -> the number of the put that made it.
    put_refs: dict[str, int] = field(default_factory=dict)
    #: task id -> the puts passed to it as top-level arguments (Ray resolves those on the worker).
    reads: dict[str, list[int]] = field(default_factory=dict)
    #: Every ``ray.wait``: (refs given, num_returns asked, refs returned ready).
    wait_calls: list[tuple[int, int, int]] = field(default_factory=list)
    #: Every ``ray.wait`` again: (whether it was given a timeout, the task ids of the refs it returned ready).
    wait_details: list[tuple[bool, list[str]]] = field(default_factory=list)
    #: The most CPUs a task may ask for (a re-run held to that many, :mod:`eugo_lab.native.baseline`); None: any.
    cpu_cap: float | None = None

    def _check_cpus(self, fn: Any, options: dict[str, Any]) -> None:
        """Refuse a task the capped re-run cannot hold to its CPUs (it would wait forever, or run uncounted)."""
        if self.cpu_cap is None:
            return
        asked = options.get("num_cpus")
        asked = 1.0 if asked is None else float(asked)
        name = getattr(fn, "_function_name", "").rsplit(".", 1)[-1] or "a task"
        cap = f"{self.cpu_cap:g} CPU{'s' if self.cpu_cap != 1 else ''}"
        if asked < 1 or asked != int(asked):
            raise NotComparable(f"{name} asks for {asked:g} CPUs: tasks that ask for less than one whole CPU run "
                                f"several to a CPU, so a run held to {cap} would not be one task per CPU. Drop "
                                "num_cpus (or give a whole number) to compare, or run without --compare/--scaling")
        if asked > self.cpu_cap:
            raise NotComparable(f"{name} asks for {asked:g} CPUs, more than the {cap} of this comparison run, so it "
                                "could never start; ask --scaling for counts of at least that many")

    def _keep_results(self, refs: list[Any], values: list[Any]) -> None:
        """Keep the small values ``ray.get`` returned for the cell's tasks (the first value of each task)."""
        for ref, value in zip(refs, values):
            tid = ref.task_id().hex() if hasattr(ref, "task_id") else None
            if tid in self.submitted and tid not in self.results and _size(value) <= RESULT_KEEP_BYTES:
                self.results[tid] = value

    def _got(self, refs: list[Any], when: float) -> None:
        for ref in refs:
            tid = ref.task_id().hex()
            if tid in self.submitted:
                self.received[tid] = min(self.received.get(tid, when), when)

    def install(self) -> None:
        """Wrap ``RemoteFunction._remote``, ``ray.get``, ``ray.wait`` and ``ray.put`` until :meth:`uninstall`."""
        import ray
        from ray.remote_function import RemoteFunction

        notes = self

        def remote(orig: Any) -> Any:
            def wrapper(fn: Any, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any) -> Any:
                notes._check_cpus(fn, options)
                t = time.time()
                out = orig(fn, args, kwargs, *rest, **options)
                t_end = time.time()
                refs = out if isinstance(out, list) else [out]
                if refs and isinstance(refs[0], ray.ObjectRef):
                    tid = refs[0].task_id().hex()
                    notes.submitted.setdefault(tid, t)
                    qualified = str(getattr(fn, "_function_name", ""))
                    notes.names[tid] = qualified.rsplit(".", 1)[-1] or "task"
                    notes.engine[tid] = is_engine_function(qualified)
                    values = [*(args or ()), *(kwargs or {}).values()]
                    given.note(notes.names[tid], values)
                    sizes = [(_size(v), v) for v in values]
                    notes.bytes_in[tid] = sum(s for s, _ in sizes)
                    big = max(sizes, key=lambda sv: sv[0], default=(0, None))
                    if big[0] >= ARG_KEY_MIN_BYTES:
                        n = notes._objects.setdefault(id(big[1]), len(notes._objects))
                        notes._keep.append(big[1])
                        notes.arg_key[tid] = n
                    notes.deps[tid] = [v.task_id().hex() for v in values if isinstance(v, ray.ObjectRef)]
                    # Sizing the arguments above is ours: the call's span is Ray's own time in it.
                    notes.calls.setdefault(tid, (t, t_end))
                    reads = [notes.put_refs[v.hex()] for v in values
                             if isinstance(v, ray.ObjectRef) and v.hex() in notes.put_refs]
                    if reads:
                        notes.reads[tid] = reads
                return out
            return wrapper

        def waiting(kind: str, orig: Any) -> Any:
            def wrapper(refs: Any, *args: Any, **kwargs: Any) -> Any:
                if getattr(notes._local, "waiting", False):
                    return orig(refs, *args, **kwargs)
                many = isinstance(refs, (list, tuple))
                source, start = _source(), time.time()
                notes._local.waiting = True
                try:
                    out = orig(refs, *args, **kwargs)
                finally:
                    notes._local.waiting = False
                    end = time.time()
                    notes.blocks.append((kind, start, end, len(refs) if many else 1, source))
                done = out[0] if kind == "wait" else (list(refs) if many else [refs])
                notes._got([r for r in done if isinstance(r, ray.ObjectRef)], end)
                if kind == "wait":
                    asked = kwargs.get("num_returns", args[0] if args else 1)
                    notes.wait_calls.append((len(refs) if many else 1, int(asked), len(out[0])))
                    timeout = kwargs.get("timeout", args[1] if len(args) > 1 else None)
                    notes.wait_details.append((timeout is not None, [r.task_id().hex() for r in out[0]
                                                                     if isinstance(r, ray.ObjectRef)]))
                else:
                    notes._keep_results(done, out if many else [out])
                return out
            return wrapper

        def put(orig: Any) -> Any:
            def wrapper(value: Any, *args: Any, **kwargs: Any) -> Any:
                t = time.time()
                out = orig(value, *args, **kwargs)
                if isinstance(out, ray.ObjectRef):
                    notes.put_refs.setdefault(out.hex(), len(notes.puts))
                notes.puts.append((t, _size(value)))
                return out
            return wrapper

        for owner, name, make in ((RemoteFunction, "_remote", remote), (ray, "get", lambda o: waiting("get", o)),
                                  (ray, "wait", lambda o: waiting("wait", o)), (ray, "put", put)):
            original = getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, make(original))

    def uninstall(self) -> None:
        """Put Ray's own functions back."""
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        self._keep.clear()


def _timeline() -> list[dict[str, Any]]:
    """``ray.timeline()`` without the notice Ray logs on each call about where it will read events from.

    The notice is about Eugo's own call, not the learner's code, so it must not reach the cell's output.
    """
    import ray

    state_log = logging.getLogger("ray._private.state")
    level = state_log.level
    state_log.setLevel(logging.ERROR)
    try:
        return ray.timeline()
    finally:
        state_log.setLevel(level)


def _spans(events: list[dict[str, Any]], wanted: set[str]) -> dict[str, dict[str, Any]]:
    """Per task id in ``wanted``: its worker (``tid``) and its ``task:*`` spans in seconds, from ``ray.timeline()``.

    Ray 2.60 puts the task id on the whole task's event (``task::<function>``, ``args.task_id``) and
    none on its parts (``task:deserialize_arguments``, ``task:execute``, ``task:store_outputs``), which
    nest inside it on the same worker: each part goes to the task whose span holds it (a worker runs
    one task at a time). A part that names its task itself is taken by that name.
    """
    out: dict[str, dict[str, Any]] = {}
    whole: dict[str, list[tuple[float, float, str]]] = {}  # worker -> (start, end, task id) of its tasks
    for ev in events:
        args = ev.get("args") or {}
        if str(ev.get("cat", "")).startswith("task::") and args.get("task_id") in wanted and "ts" in ev:
            start, end = ev["ts"] / 1e6, (ev["ts"] + ev.get("dur", 0)) / 1e6
            whole.setdefault(str(ev.get("tid", "")), []).append((start, end, args["task_id"]))
    for ev in events:
        cat = str(ev.get("cat", ""))
        if not cat.startswith("task:") or cat.startswith("task::") or "ts" not in ev:
            continue
        worker = str(ev.get("tid", ""))
        start, end = ev["ts"] / 1e6, (ev["ts"] + ev.get("dur", 0)) / 1e6
        tid = (ev.get("args") or {}).get("task_id")
        if tid is None:
            mid = (start + end) / 2
            tid = next((t for s, e, t in whole.get(worker, ()) if s <= mid <= e), None)
        if tid not in wanted:
            continue
        row = out.setdefault(tid, {"worker": worker, "node": str(ev.get("pid", ""))})
        row[cat] = (start, end)
    return out


class RayRecording:
    """Record the Ray tasks a cell submits: :meth:`start` before the cell, :meth:`stop` after.

    ``slots``: the CPUs the cell was held to (a comparison run, :mod:`eugo_lab.native.baseline`):
    the trace's workers, and each task is drawn in the first of that many lanes free when it
    started (Ray may run them on more worker processes than it lets run at once). ``cpu_cap``:
    tasks asking for more CPUs, or for part of one, are refused at submission.
    """

    def __init__(self, slots: int | None = None, cpu_cap: float | None = None) -> None:
        self.driver = RayDriverCalls(cpu_cap=cpu_cap)
        self.recorder = Recorder()
        self.slots = slots
        self._mark: Any = None
        #: Rows as the live view reads them, filed by :meth:`poll` as Ray's events arrive; None: no view.
        self.live: Recorder | None = None
        self._live_mark: Any = None
        self._lanes = 0  # the view's lanes: the CPUs Ray offers (a task may come on another worker process)
        self._lock = threading.Lock()  # poll() from the poller's thread, stop() from the cell's
        self._filed: dict[str, int] = {}  # task id -> its row's id, in the order the view got the rows
        self._worker_lanes: dict[str, int] = {}  # Ray worker -> lane, in the order their tasks were filed
        self._filed_ends: dict[str, float] = {}  # task id -> when its body ended, for the filed tasks

    def with_live_view(self) -> int:
        """Also file rows for a live view as Ray's events arrive (call before :meth:`start`); returns its lanes.

        Ray sends a task's events about a second after it ran, so the view runs that much behind the
        workers; the rows it drew are the first rows of the Trace, in the same order and lanes.
        """
        import ray

        self.live = Recorder()
        self._lanes = self.slots or int(ray.cluster_resources().get("CPU", 0)) or 1
        return self._lanes

    @property
    def workers(self) -> int:
        """The live view's task slots (Ray's CPUs)."""
        return max(self._lanes, 1)

    def unfinished(self) -> int:
        """Tasks the cell submitted whose events have not arrived yet (the live view's pending count)."""
        return max(len(self.driver.submitted) - len(self._filed), 0)

    def start(self) -> RayRecording:
        """Wrap the driver's Ray calls."""
        self._mark = self.recorder.open_region()
        if self.live is not None:
            self._live_mark = self.live.open_region()
            for lane in range(self._lanes):
                self.live.worker_seen(lane, "", 0)
        self.driver.install()
        return self

    def poll(self) -> None:
        """File into :attr:`live` the cell's tasks whose events Ray has sent since the last poll."""
        if self.live is None:
            return
        drv = self.driver
        wanted = set(drv.submitted) - set(self._filed)  # (copies taken under the GIL: the cell adds to them)
        if not wanted:
            return
        spans = _spans(_timeline(), wanted)  # (sleeps 1 s itself for the events in flight)
        new = sorted(((tid, sp) for tid, sp in spans.items() if "task:execute" in sp),
                     key=lambda x: (drv.submitted[x[0]], x[1]["task:execute"][0]))
        host, local_ip = socket.gethostname(), _local_ip()
        with self._lock:
            self._filed_ends.update((tid, sp["task:execute"][1]) for tid, sp in new)
            for tid, sp in new:
                if tid in self._filed:
                    continue
                self._filed[tid] = len(self._filed)
                lane = self._worker_lanes.get(sp["worker"])
                if lane is None:
                    lane = self._worker_lanes[sp["worker"]] = len(self._worker_lanes)
                    self.live.worker_seen(lane, host if sp["node"] in (local_ip, "127.0.0.1") else sp["node"], 0)
                self._record_row(self.live, tid, sp, lane, self._filed, self._filed_ends)

    def stop(self, meta: dict[str, Any] | None = None, ended: float | None = None) -> Trace:
        """Unwrap the driver, read the workers' profile events for the cell's tasks, and return the Trace."""
        import ray

        end = time.time() if ended is None else ended  # (ended: when the cell's code ended)
        self.driver.uninstall()
        if self.live is not None:
            self.live.close_region(self._live_mark, {})
        wanted = set(self.driver.submitted)
        spans: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + COLLECT_TIMEOUT_S
        while wanted:
            spans = _spans(_timeline(), wanted)  # (sleeps 1 s itself for the events in flight)
            if all("task:execute" in spans.get(t, {}) for t in wanted) or time.monotonic() > deadline:
                break
        slots = self.slots or int(ray.cluster_resources().get("CPU", 0)) or 1
        trace = self._write(spans, slots, meta or {})
        trace.meta["region_end"] = end  # collecting the events is not the cell's time
        return trace

    def _write(self, spans: dict[str, dict[str, Any]], slots: int, meta: dict[str, Any]) -> Trace:
        rec, drv = self.recorder, self.driver
        host = socket.gethostname()
        local_ip = _local_ip()
        lanes: dict[str, int] = {}
        ran = [(tid, s) for tid, s in spans.items() if "task:execute" in s]
        # In submission order; with a live view, the rows it drew first, as it drew them (its last update
        # draws the Trace's rows after those), with its lanes: a lane per Ray worker in the order first seen.
        filed = self._filed
        ran.sort(key=lambda x: (filed.get(x[0], len(filed)), drv.submitted[x[0]], x[1]["task:execute"][0]))
        ids = {tid: i for i, (tid, _) in enumerate(ran)}
        ends = {tid: s["task:execute"][1] for tid, s in ran}
        missing = len(drv.submitted) - len(ran)
        packed = _pack([s["task:execute"] for _, s in ran], self.slots) if self.slots else None
        for k, (tid, s) in enumerate(ran):
            slot = s["worker"] if packed is None else packed[k]
            lane = lanes.get(slot)
            if lane is None:
                lane = lanes[slot] = len(lanes)
                rec.worker_seen(lane, host if s["node"] in (local_ip, "127.0.0.1") else s["node"], 0)
            self._record_row(rec, tid, s, lane, ids, ends)
        for tid, (start, end) in sorted(drv.calls.items(), key=lambda kv: kv[1]):
            # Ray serializes the arguments and puts a large one into the object store inside .remote():
            # that time is serializing (the driver's breakdown shows it as such), the rest handing the task on.
            nbytes = drv.bytes_in.get(tid, 0)
            pickled = end if nbytes > RAY_INLINE_MAX_BYTES else start
            rec.driver.spent(start, pickled, end, ids.get(tid, -1), nbytes)
        for tid, value in drv.results.items():  # what ray.get handed the notebook: Trace.results digests it
            if tid in ids:
                try:
                    payload = pickle.dumps(value, protocol=5)
                except Exception:  # noqa: BLE001 - a value plain pickle refuses gets no digest
                    continue
                rec.attempts.append((ids[tid], 1, drv.names.get(tid, "task"), True, payload, None, None, None, None))
        for i, (when, nbytes) in enumerate(drv.puts):
            rec.record_put(i, nbytes, when)
        for kind, start, end, n, source in sorted(drv.blocks, key=lambda b: b[1]):
            rec.record_block(kind, start, end, n, source)
        not_recorded = list(NOT_RECORDED)
        if missing:
            not_recorded.append(f"{missing} submitted task(s) sent no profile events in time (still running, or "
                                "Ray dropped them): they are not on the timeline")
        local = all(h == host for h, _ in rec.workers.values())
        # By name, as the trace files functions: a name the notebook's own functions also have stays the notebook's.
        own = sorted({drv.names.get(tid, "task") for tid, _ in ran if drv.engine.get(tid)}
                     - {drv.names.get(tid, "task") for tid, _ in ran if not drv.engine.get(tid)})
        full = {"backend": "ray", "api": "ray", "driver_deps_recorded": False,  # values through ray.get: not yet
                "engine_functions": own,
                "workers": slots, "cores": os.cpu_count() if local else 0,
                "not_recorded": not_recorded, "failures_unreported": True,  # (NOT_RECORDED's last sentence)
                "refs_read": sorted([ids[t], p] for t, ps in drv.reads.items() if t in ids for p in set(ps)),
                "wait_calls": [list(w) for w in drv.wait_calls],
                # per ray.wait: was it given a timeout (it may return before num_returns are ready), and which of
                # the cell's tasks it reported ready (trace ids)
                "wait_details": [{"timeout": bool(t), "ready": [ids[r] for r in ready if r in ids]}
                                 for t, ready in drv.wait_details], **meta}
        return rec.close_region(self._mark, full)


    def _record_row(self, rec: Recorder, tid: str, s: dict[str, Any], lane: int, ids: dict[str, int],
                    ends: dict[str, float]) -> None:
        """Task ``tid``'s row (its spans ``s``) into ``rec`` as row ``ids[tid]``, with its dependencies in ``ids``."""
        drv = self.driver
        start, stop = s["task:execute"]
        deser = s.get("task:deserialize_arguments", (start, start))
        ser = s.get("task:store_outputs", (stop, stop))
        submit = drv.submitted[tid]
        ready = max([submit, *(ends[d] for d in drv.deps.get(tid, ()) if d in ends)])
        received = max(drv.received.get(tid, ser[1]), ser[1])
        stats = TaskStats(start_wall=deser[0], body=stop - start, cpu=math.nan,
                          deser=max(start - deser[0], 0.0), ser=max(ser[1] - ser[0], 0.0),
                          bytes_in=drv.bytes_in.get(tid, 0), bytes_out=0, phases=None, item_ends=None, tail=None)
        rec.record_task(ids[tid], 1, drv.names.get(tid, "task"), lane, OK, -1, submit, ready, received, stats)
        deps = sorted({ids[d] for d in drv.deps.get(tid, ()) if d in ids})
        if deps:
            rec.record_deps(ids[tid], deps)
        if tid in drv.arg_key:
            rec.record_arg(ids[tid], drv.arg_key[tid])


def _pack(spans: list[tuple[float, float]], slots: int) -> list[int]:
    """A lane of ``slots`` for each ``(start, end)``: the first free at its start, else the one free soonest.

    A run held to ``slots`` CPUs never has more tasks running at once; Ray's stamps of one task's
    end and the next one's start on the freed CPU can overlap by a hair, hence "free soonest".
    """
    ends = [float("-inf")] * slots
    out = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda i: spans[i][0]):
        start, end = spans[i]
        free = [k for k in range(slots) if ends[k] <= start]
        k = free[0] if free else min(range(slots), key=lambda k: ends[k])
        ends[k] = end
        out[i] = k
    return out


def _local_ip() -> str:
    """The address Ray names this node by."""
    import ray

    return str(ray.util.get_node_ip_address())
