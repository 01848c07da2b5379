"""The trace row: one task attempt as every layer sees it, defined once.

The worker shim measures a task and packs its half of the row; the recorder appends rows;
the :class:`~eugo_lab.tracing.trace.Trace` turns them into columns; the analyses and
renderers read the columns and the status codes. All of them import this module, which
holds no state and imports nothing heavy (worker processes load it at start-up).

A row is 136 packed bytes, :data:`ROW_FIELDS` as int64/float64: the driver's head (what
only the driver knows: ids, worker, status, submit/ready/received times) followed by the
worker's tail (body times, CPU, run-queue wait, bytes), which the worker packs itself so the
driver's busiest thread packs 9 fields per task, not 17.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Any, NamedTuple

# -- outcome of an attempt: one set of codes, from the worker to the trace's status column --------
OK = 0  # the body returned (a batch: every item ran; failed items are listed separately)
ERROR = 1  # the body raised
CRASHED = 2  # the worker died holding the task, or the task was stopped at its memory limit
CANCELLED = 3  # stopped by hpc.cancel (or an Interrupt); never retried
STATUS_NAMES = ("ok", "error", "crashed", "cancelled")

# -- columns ---------------------------------------------------------------------------------------
TASK_INT_COLUMNS = ("task_id", "attempt", "function", "worker", "status", "batch", "bytes_in", "bytes_out")
# ``runq``: seconds the body's thread spent runnable but waiting for a core (Linux schedstat);
# NaN where it was not measured (no /proc/thread-self/schedstat, e.g. macOS; see _worker).
TASK_FLOAT_COLUMNS = ("submit", "ready", "start", "end", "received", "cpu", "deser", "ser", "runq")
TASK_COLUMNS = TASK_INT_COLUMNS + TASK_FLOAT_COLUMNS
PHASE_COLUMNS = ("row", "name", "start", "end", "cpu", "runq")
# One row per driver wait. ``task``: the task of the one future the call waited on or took (a get()/
# result()/await of one future, a wait() on one, the future an as_completed() loop yielded, a done()
# polled until it said True); -1 for a call on several futures, and in a trace saved before the column.
BLOCK_COLUMNS = ("kind", "start", "end", "futures", "source", "task")
# One row per data dependency: task ``task`` was passed the future of task ``on``.
DEP_COLUMNS = ("task", "on")
# One row per task submitted from inside another task's body: task ``task`` was submitted by the
# running task ``parent`` (tasks the driver submitted have no row). Kept apart from the packed row
# like the dependencies: a trace without nested tasks carries nothing for it.
PARENT_COLUMNS = ("task", "parent")

# One row per dependency through the driver: task ``task`` was passed (as an argument, or an element of a
# list/tuple/dict argument) a value that a get()/result() of the same region had returned for task ``on``.
# Kept apart from DEP_COLUMNS: readers of ``Trace.deps`` count tasks that were passed futures.
DRIVER_DEP_COLUMNS = ("task", "on")
# One row per attempt that held a GPU (a gpus= task): its task (an hpc.map batch: the batch's id),
# attempt and device. Kept apart from the packed row: traces without GPU tasks carry nothing for
# it, and the row's hot path stays as it is. ``Trace.gpu`` spreads it into a per-row column (-1: none).
GPU_COLUMNS = ("task", "attempt", "gpu")
# One row per task sent a large argument: ``key`` identifies that argument (the same object,
# the same key), so repeats are counted by what was sent, not by the pickle's exact size.
ARG_COLUMNS = ("task", "key")
# Tasks whose arguments pickle to fewer bytes than this get no ``ARG_COLUMNS`` row: the
# Serialization finding counts repeats from 1 MB (analysis.findings.REPEAT_MIN_BYTES).
ARG_KEY_MIN_BYTES = 100_000
# -- facts a worker saw from inside a traced task (TaskStats.facts), and driver events -------------------
# One row per attempt of a task submitted inside a traced region (an hpc.map batch: its id): its
# function (code), the BLAS/OpenMP threads in effect when its body started (-1: no such library
# loaded), whether it asked for a GPU (gpus=: 1) and, for such a task, the GPU its worker process
# really has (-1: none; a local-pool GPU worker named by gpus=[0] on a machine without one has none).
# ``imports``: how many modules the attempt's own code imported (unpickling its function and arguments,
# running its body; modules of eugo_lab, the runtime's, not counted), and ``import_s`` the seconds that
# took, measured on the worker (backends.import_clock): a worker's warm-up, not the task's work
# (-1: not recorded, a trace saved before the column). ``pickling_cpu``: CPU seconds of the attempt's
# unpickling and pickling, by the worker's CPU clock (its thread's on the threads engine, where the steps'
# wall time also holds waits for the interpreter lock).
FACT_COLUMNS = ("task", "attempt", "function", "blas_threads", "gpu_task", "device", "imports", "import_s",
                "pickling_cpu")
FACT_FLOAT_COLUMNS = ("import_s", "pickling_cpu")
# One row per stored reference (hpc.put) an attempt resolved on its worker.
REF_COLUMNS = ("task", "attempt", "ref")
# One row per hpc.put made in the region: its ref id, its stored bytes and when (time.time()).
PUT_COLUMNS = ("ref", "bytes", "time")
# What a traced task's worker sends back (TaskStats.facts): (digest, blas_threads, refs, device, imports,
# import_s, pickling_cpu).
# ``digest`` is the result's eugo_lab.contract.digest.Digest when its payload is large (the worker
# holds the value), else None: the driver digests the payload it received when somebody asks.
FACT_DIGEST, FACT_BLAS, FACT_REFS, FACT_DEVICE, FACT_IMPORTS, FACT_IMPORT_S, FACT_PICKLING_CPU = range(7)
# Results whose pickle is at least this large are digested on the worker (it holds the value; the
# driver would have to unpickle it) and their payload is not kept by the trace.
DIGEST_ON_WORKER_BYTES = 64 * 1024
# ...except an hpc.map batch whose payload is at most this many bytes an item (a pickled int or
# float takes 2-10): the driver keeps it and digests its items, so the worker never looks at them.
SMALL_ITEM_BYTES = 16

# What a trace saved before a column existed reads as (``Trace.from_dict``, hand-built traces),
# in the task table and the phase table alike.
COLUMN_DEFAULTS = {"runq": float("nan")}

# -- the packed row ----------------------------------------------------------------------------------
# Packing costs about as much as building a tuple, and turning rows into columns later is a
# memcpy-speed NumPy pass instead of converting every Python number again (~0.5 us a row
# when we did).
ROW_FIELDS = ("task_id", "attempt", "function", "worker", "status", "batch", "submit", "ready", "received",
              "start", "end", "cpu", "deser", "ser", "runq", "bytes_in", "bytes_out")
ROW_HEAD = struct.Struct("<6q3d")  # driver: task_id .. received
ROW_TAIL = struct.Struct("<6d2q")  # worker: start .. bytes_out
ROW = struct.Struct("<6q3d6d2q")
ROW_SIZE = ROW.size
pack_row = ROW.pack  # all 17 fields, in ROW_FIELDS order
pack_head = ROW_HEAD.pack
pack_tail = ROW_TAIL.pack


@functools.cache
def row_dtype() -> Any:
    """The NumPy structured dtype of a packed row (NumPy is imported on first use only)."""
    import numpy as np

    return np.dtype([(c, "<i8" if c in TASK_INT_COLUMNS else "<f8") for c in ROW_FIELDS])


class Phase(NamedTuple):
    """One ``hpc.phase`` span, as offsets in seconds from the body's start."""

    name: str
    start: float
    end: float
    cpu: float
    runq: float = math.nan  # seconds waiting for a core during the phase (see TaskStats.runq)


class TaskProfile(NamedTuple):
    """One profiled task attempt's samples, as the recorder and the trace keep them (``Trace.profiles``)."""

    task_id: int
    attempt: int
    function: str
    worker: int
    data: bytes  # TaskStats.profile: read with eugo_lab.profile (Profile.from_trace)


class TaskStats(NamedTuple):
    """What a worker measured about one attempt; travels back with its outcome.

    Times are seconds; ``start_wall`` is ``time.time()`` on the worker when it took the
    task, and the body starts ``deser`` seconds later.
    """

    start_wall: float
    body: float  # the function's own run (a batch: every item's)
    cpu: float  # CPU seconds of the body
    deser: float  # unpickling the arguments
    ser: float  # pickling the result
    bytes_in: int  # pickled arguments
    bytes_out: int  # pickled result
    phases: list[Phase] | None  # hpc.phase spans, None when the task marked none
    item_ends: bytes | None  # a batch: each item's end offset from the body's start, float64 bytes
    tail: bytes | None  # a single task: the row's worker half, packed (ROW_TAIL)
    # -- profiling (eugo_lab.profile) --
    # The task's samples, a serialized pyinstrument session, when it ran profiled (hpc.profile,
    # %%eugo --profile). A profiled task sends tail=None, so the recorder's fast path never
    # sees it and the unprofiled hot path has no new test. Last, with a default: every
    # existing constructor and the local wire (a plain tuple) stay as they were.
    profile: bytes | None = None
    # Seconds the body's thread waited on a run queue for a core (Linux schedstat): time the
    # body was ready to compute but the cores were busy. NaN where not measured (see
    # backends._worker: no schedstat on this platform, or a function whose bodies are tiny).
    runq: float = math.nan
    # What a traced task saw from inside (see FACT_DIGEST..FACT_DEVICE): a plain tuple, sent
    # only for tasks submitted inside a traced region (Task.probe); None otherwise.
    facts: tuple | None = None

    @property
    def body_start(self) -> float:
        """Wall-clock time the body started (after the arguments were unpickled)."""
        return self.start_wall + self.deser

    def stopped(self) -> TaskStats:
        """These stats for an attempt stopped at its memory limit: no result, one attempt even for a batch."""
        return self._replace(bytes_out=0, item_ends=None, tail=None)

    @classmethod
    def from_wire(cls, raw: tuple | None) -> TaskStats | None:
        """Adopt a plain tuple of the fields without a copy (~0.1 us): how the local pool's pipes carry stats.

        Pickling the named tuple itself costs ~1.5 us more per task on each side; a plain
        tuple of the same fields is the local wire format, re-typed here on arrival.
        """
        return None if raw is None else tuple.__new__(cls, raw)
