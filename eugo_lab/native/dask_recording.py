"""Record a cell that uses Dask's own API on an existing ``distributed.Client`` into a :class:`Trace`.

:class:`DaskRecording` registers the worker half (:mod:`eugo_lab.native.dask_worker`) on every
worker and installs the driver half (:mod:`eugo_lab.native.dask_driver`) for the cell; when
the cell ends it collects both and writes them through a fresh
:class:`~eugo_lab.tracing.recorder.Recorder`, row by row as the runtime does, so the Trace is
the one every analysis reads:

- one task row per attempt of a Dask task that finished in the cell: its lane is the worker
  thread that ran it (a Dask worker with two threads runs two tasks at once, as two local-pool
  workers would), ``start``/``end`` Dask's own compute span, ``cpu`` Dask's ``thread-cpu``
  metric, ``bytes_in`` the by-value arguments the driver sent with it, ``bytes_out`` its
  result's size (Dask's ``nbytes``), ``submit`` when the notebook's call sent it, ``ready``
  when its last dependency finished, ``received`` when the driver learnt it was done (a task
  inside a graph, whose result only its dependents read: its end);
- the data dependencies between tasks, the large arguments (the same object, the same key),
  each ``scatter`` as a stored object, and every wait of the driver with the notebook's line;
- transfers between workers in ``meta["transfers"]`` (``task``, ``source`` and ``target`` lanes,
  ``bytes``, ``start``, ``end``);
- the results the driver received (small ones: ``Trace.results``), which tasks read a scattered
  copy on their worker (``meta["refs_read"]``: ``[task, scatter]``, from the worker's record of the
  task's dependencies), what each function weighed as pickled into every task
  (``Trace.functions_shipped``), and whether the workers share the notebook's process
  (``meta["in_process"]``: then nothing is pickled or sent).
"""

from __future__ import annotations

import math
import os
import pickle
import threading
import time
from typing import Any

from eugo_lab.contract.row import ERROR, OK, TaskStats
from eugo_lab.contract.serialization import captured_sizes
from eugo_lab.native.dask_driver import DriverCalls
from eugo_lab.native.dask_worker import PLUGIN_NAME, TaskLog, take_log
from eugo_lab.tracing.provenance import FunctionShipped
from eugo_lab.tracing.recorder import Recorder
from eugo_lab.tracing.trace import Trace

#: What Dask does not tell us per task, said in the trace instead of guessed (``trace.meta["not_recorded"]``).
NOT_RECORDED = (
    "(un)pickling time per task: Dask does not time it per task, so it is counted as 0 s",
    "bytes of arguments held inside a Dask collection's graph: only arguments given to submit/map are sized",
    "CPU time of a task that failed: Dask books its metrics as failed, so it is unknown (NaN)",
    "run-queue wait within a task's body: read over the worker's whole hand-off of the task, so it is capped "
    "at the body's time off the CPU",
    "a task's first run on a new executor thread: its run-queue wait (the thread did not exist when it was read)",
)


#: Key prefixes of the tasks Dask adds to a graph for its own bookkeeping, not the notebook's work:
#: ``finalize-`` gathers a collection's chunks into the one value ``compute()`` returns
#: (``dask.delayed.finalize``, ``dask._expr.HLGFinalizeCompute``); ``shuffle-barrier-`` waits for a P2P
#: shuffle's or rechunk's transfers (``distributed.shuffle._core.barrier_key``). Their tasks are recorded
#: (their time is the run's), and their functions named in ``meta["engine_functions"]``: no finding aims
#: its advice at them (:func:`eugo_lab.analysis.findings.context.aims_at_engine`).
ENGINE_KEY_PREFIXES = ("finalize-", "shuffle-barrier-")


def is_engine_key(key: Any) -> bool:
    """Whether the Dask key ``key`` (a string, or a tuple whose first item names it) is one of Dask's own tasks."""
    name = key[0] if isinstance(key, tuple) and key else key
    return str(name).startswith(ENGINE_KEY_PREFIXES)


def default_client() -> Any | None:
    """The notebook's default ``distributed.Client`` if one is running (None without one, or without Dask imported)."""
    import sys

    if "distributed" not in sys.modules:  # the cell cannot be using a client that was never imported
        return None
    import distributed

    try:
        client = distributed.default_client()
    except ValueError:  # "No clients found"
        return None
    return client if client.status == "running" else None


def _key_name(key: str) -> str:
    """The function a Dask key stands for (``inc-3f2a`` -> ``inc``; ``('chunk', 0)`` -> ``chunk``)."""
    from dask.utils import key_split

    return str(key_split(key))


class DaskRecording:
    """Record the Dask tasks a cell runs on ``client``: :meth:`start` before the cell, :meth:`stop` after.

    :meth:`poll` (from one thread, while the cell runs) takes what the workers logged so far and,
    with ``live=True``, writes it at once into :attr:`live` for the live view. Task ids are given
    in the order rows arrive (each poll's in submission order), the same in the live rows and in
    the Trace, so the view's last update finds exactly the rows it had not drawn.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.driver = DriverCalls()
        self.recorder = Recorder()
        #: Rows as the live view reads them (provisional: a result's arrival is the task's end); None: no view.
        self.live: Recorder | None = None
        self._mark: Any = None
        self._started = False
        self._lock = threading.Lock()  # poll() from the view's thread, stop() from the cell's
        self._rows: list[tuple[dict[str, Any], int]] = []  # (row, lane) in id order
        self._ids: dict[str, int] = {}
        self._ends: dict[str, float] = {}
        self._lanes: dict[tuple[str, int], int] = {}
        self._per_worker: dict[str, int] = {}
        self._base: dict[str, int] = {}
        self._n = 0
        self._nthreads: list[int] = []

    def start(self) -> DaskRecording:
        """Register the worker plugin on every worker and wrap the driver's Dask calls."""
        self.client.register_plugin(TaskLog(), name=PLUGIN_NAME)
        self._lay_out(self.client.scheduler_info())
        self._mark = self.recorder.open_region()
        if self.live is not None:
            self._live_mark = self.live.open_region()
            for lane in range(self._n):
                self.live.worker_seen(lane, "", 0)
        self.driver.install(self.client)
        self._started = True
        return self

    def with_live_view(self) -> int:
        """Also write rows for a live view as they arrive (call before :meth:`start`); returns its lanes."""
        self.live = Recorder()
        return max(sum(int(w.get("nthreads", 1)) for w in self.client.scheduler_info().get("workers", {}).values()), 1)

    @property
    def workers(self) -> int:
        """Task slots (worker threads) of the cluster: the trace's workers."""
        return max(self._n, 1)

    def _lay_out(self, info: dict[str, Any]) -> None:
        """Lanes: each worker's threads, workers in address order (a worker that joins later goes last)."""
        for address, w in sorted(info.get("workers", {}).items()):
            if address not in self._base:
                self._base[address] = self._n
                self._n += int(w.get("nthreads", 1))
                self._nthreads.append(int(w.get("nthreads", 1)))

    def unfinished(self) -> int:
        """Futures the cell submitted that have not finished yet (the live view's pending count)."""
        drv = self.driver
        return max(len(drv.submitted) - sum(1 for k in drv.submitted if k in self._ends), 0)

    def poll(self) -> None:
        """Take the workers' logs so far and file their rows (into :attr:`live` too)."""
        logs = self.client.run(take_log)
        self._absorb([log for log in logs.values() if log is not None])

    def stop(self, meta: dict[str, Any] | None = None, ended: float | None = None) -> Trace:
        """Unwrap the driver, collect every worker's log, and return the cell's Trace."""
        end = time.time() if ended is None else ended  # (ended: when the cell's code ended)
        self.driver.uninstall()
        try:
            self.poll()
        finally:
            _unregister(self.client)
            if self.live is not None:
                self.live.close_region(self._live_mark, {})
        trace = self._write(meta or {})
        trace.meta["region_end"] = end  # collecting the logs is not the cell's time
        return trace

    def _absorb(self, logs: list[dict[str, Any]]) -> None:
        drv, t0 = self.driver, self._mark[3]
        with self._lock:
            new = []
            for log in sorted(logs, key=lambda lg: lg["address"]):
                addr = log["address"]
                if addr not in self._base:  # joined after the cell began
                    self._base[addr] = self._n
                    self._n += log["nthreads"]
                    self._nthreads.append(log["nthreads"])
                for r in sorted(log["tasks"], key=lambda r: r["start"] if math.isfinite(r["start"]) else math.inf):
                    lane = self._lanes.get((addr, r["thread"]))
                    if lane is None:
                        k = self._per_worker.get(addr, 0)
                        self._per_worker[addr] = k + 1
                        lane = self._lanes[(addr, r["thread"])] = self._base[addr] + min(k, log["nthreads"] - 1)
                        self.recorder.worker_seen(lane, log["host"], log["pid"])
                    r["address"] = addr
                    start = r["start"] if math.isfinite(r["start"]) else t0
                    r["submit"] = drv.submit_time(r["key"], start, t0)
                    new.append((r, lane))
            # Within a poll, ids in submission order (ties: start), so "the next task submitted" means what it says.
            new.sort(key=lambda x: (x[0]["submit"], x[0]["start"]))
            for r, _lane in new:
                self._ids.setdefault(r["key"], len(self._ids))
                self._ends[r["key"]] = max(self._ends.get(r["key"], -math.inf), r["stop"])
            self._rows.extend(new)
            if self.live is not None:
                for r, lane in new:
                    self._record(self.live, r, lane, attempt=1, received=r["stop"])

    def _record(self, rec: Recorder, r: dict[str, Any], lane: int, attempt: int, received: float) -> None:
        """One row of task ``r`` into ``rec``, with its dependencies and its large argument."""
        drv, key = self.driver, r["key"]
        tid = self._ids[key]
        ready = max([r["submit"], *(self._ends[d] for d in r["deps"] if d in self._ends)])
        start, stop = r["start"], r["stop"]
        body = stop - start if math.isfinite(stop) and math.isfinite(start) else math.nan
        runq = r.get("runq", math.nan)
        if math.isfinite(runq) and math.isfinite(body):
            # The thread's wait is read from when the worker hands it the task until it hears the task
            # ended, a little wider than the body: within the body it can be at most its time off the CPU.
            runq = min(runq, max(body - (r["cpu"] if math.isfinite(r["cpu"]) else 0.0), 0.0))
        # A worker of an in-process cluster (LocalCluster(processes=False): an inproc:// address) takes the
        # driver's objects as they are: nothing is pickled or copied, so no argument bytes are sent to it.
        shared = str(r.get("address", "")).startswith("inproc://")
        stats = TaskStats(start_wall=start, body=body, cpu=r["cpu"], deser=0.0, ser=0.0,
                          bytes_in=0 if shared else drv.bytes_in.get(key, 0), bytes_out=r["nbytes"], phases=None,
                          item_ends=None, tail=None, runq=runq)
        rec.record_task(tid, attempt, _key_name(key), lane, OK if r["status"] == "ok" else ERROR, -1,
                        r["submit"], ready, received, stats)
        deps = sorted({self._ids[d] for d in r["deps"] if d in self._ids})
        if deps:
            rec.record_deps(tid, deps)
        through = sorted({self._ids[d] for d in drv.driver_deps.get(key, ()) if d in self._ids})
        if through and attempt == 1:
            rec.record_driver_deps(tid, through)
        if key in drv.arg_key and attempt == 1 and not shared:
            rec.record_arg(tid, drv.arg_key[key])

    def _write(self, meta: dict[str, Any]) -> Trace:
        rec, drv = self.recorder, self.driver
        t0 = self._mark[3]
        attempts: dict[str, int] = {}
        lane_of = {addr: lane for (addr, _), lane in self._lanes.items()}
        transfers = []
        rows = self._rows
        for r, lane in rows:
            key = r["key"]
            attempt = attempts[key] = attempts.get(key, 0) + 1  # the first attempt is 1, as the runtime counts
            stop = r["stop"]
            received = max(drv.received.get(key, stop), stop) if math.isfinite(stop) else drv.received.get(key, t0)
            self._record(rec, r, lane, attempt, received)
            for t in r["transfers"]:
                transfers.append({"task": self._ids[key], "source": lane_of.get(t["source"], -1), "target": lane,
                                  "bytes": r["fetched"], "start": t["start"], "end": t["stop"]})
        for start, end, key in drv.submit_spans:
            # Dask's submit hashes the arguments to name the task and builds its graph; it pickles them later, on
            # its event loop: the call is submitting, and no time of it is the arguments' pickling.
            rec.driver.spent(start, start, end, self._ids.get(key, -1), drv.bytes_in.get(key, 0))
        for i, (when, nbytes) in enumerate(drv.scatters):
            rec.record_put(i, nbytes, when)
        for kind, start, end, futures, source in sorted(drv.blocks, key=lambda b: b[1]):
            rec.record_block(kind, start, end, futures, source)
        in_process = any(str(r.get("address", "")).startswith("inproc://") for r, _ in rows)
        refs_read = self._provenance(rows)
        hosts = {h for h, _ in rec.workers.values()}
        local = bool(hosts) and hosts <= {_hostname()}
        # Functions with a task that had no future of its own: a collection's graph made it (chunks, partitions).
        graph = sorted({_key_name(r["key"]) for r, _ in rows if r["key"] not in drv.submitted})
        own = sorted({_key_name(r["key"]) for r, _ in rows if is_engine_key(r["key"])})
        full = {"backend": "dask", "api": "dask", "workers": self.workers, "graph_functions": graph,
                "engine_functions": own,
                # The driver's time in client.submit is timed, but no part of it is the arguments' pickling (see
                # above): a zero there is not a measurement (the slow-submission finding would blame the loop).
                "serializing_timed": False,
                "threads_per_worker": max(self._nthreads, default=1),
                "cores": os.cpu_count() if local else 0, "transfers": transfers,
                "not_recorded": list(NOT_RECORDED), "in_process": in_process, "refs_read": refs_read, **meta}
        trace = rec.close_region(self._mark, full)
        if not in_process:  # an in-process worker takes the function object itself: nothing is pickled
            trace.functions_shipped = _shipped(drv.functions.values())
        return trace

    def _provenance(self, rows: list[tuple[dict[str, Any], int]]) -> list[list[int]]:
        """File the results the driver received as the tasks' results; return ``[task, scatter]`` reads.

        Results: what each task's future handed the notebook (``Trace.results`` digests them), a
        value Dask's worker computed, never one the notebook made. Reads: a task whose worker
        record lists a scattered key among its dependencies read that scattered copy on its worker.
        """
        drv, rec = self.driver, self.recorder
        for key, value in drv.results.items():
            tid = self._ids.get(key)
            if tid is None:
                continue
            try:
                payload = pickle.dumps(value, protocol=5)
            except Exception:  # noqa: BLE001 - a value plain pickle refuses gets no digest
                continue
            rec.attempts.append((tid, 1, _key_name(key), True, payload, None, None, None, None))
        reads: set[tuple[int, int]] = set()
        for r, _ in rows:
            for d in r["deps"]:
                if d in drv.scattered:
                    reads.add((self._ids[r["key"]], drv.scattered[d]))
        return [list(x) for x in sorted(reads)]


def _shipped(functions: Any) -> tuple[FunctionShipped, ...]:
    """What each submitted function weighed as Dask pickles it into every task: its payload, its captures, sends."""
    import cloudpickle

    out = []
    for fn, name, sends in functions:
        try:
            payload = len(cloudpickle.dumps(fn, protocol=5))
        except Exception:  # noqa: BLE001 - Dask's submit failed the same way; nothing was sent
            continue
        captured = captured_sizes(fn, payload)
        out.append(FunctionShipped(name, payload, sum(n for _, n in captured), captured[:3], sends))
    return tuple(out)


def _unregister(client: Any) -> None:
    """Remove the worker plugin; a worker that left meanwhile took its copy with it."""
    try:
        client.unregister_worker_plugin(PLUGIN_NAME)
    except (ValueError, KeyError, OSError):  # not registered any more, or the scheduler is gone
        pass


def _hostname() -> str:
    import socket

    return socket.gethostname()
