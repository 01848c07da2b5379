"""Task rows as the recorder stores them: packed segments, built into columns only when read.

A segment is either a ``bytearray`` of packed rows (:mod:`eugo_lab.contract.row`), sealed
and never written again, or one ``hpc.map`` batch kept compact (:class:`BatchRows`).
:class:`TaskRows` is a range of them, which a :class:`~eugo_lab.tracing.trace.Trace`
turns into NumPy columns the first time it is read. Shared by the recorder (which writes
segments) and the trace (which reads them); NumPy is imported only when rows are built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eugo_lab.contract.row import TASK_COLUMNS, TASK_INT_COLUMNS, row_dtype


class BatchRows:
    """The rows of one ``hpc.map`` batch, kept compact until read.

    What the items share is held once, plus per-item ids, statuses and end offsets. Items
    run back to back inside the batch's body, so item i spans ``ends[i-1]..ends[i]``
    (offsets from the body's start). CPU time, bytes and (de)serialization time are shared
    out evenly over the items; CPU and run-queue time in proportion to each item's duration.
    """

    __slots__ = ("ids", "status", "shared", "_ends", "_n", "body_start", "cpu_share", "runq_share")

    def __init__(self, ids: Sequence[int], status: int | Sequence[int], shared: dict[str, float], ends: Any,
                 body_start: float, cpu_share: float, runq_share: float = float("nan")):
        self.ids = ids
        self.status = status
        self.shared = shared
        # The offsets stay as the worker sent them (float64 bytes, or an ItemEnds of groups)
        # until the columns are built: expanding 6,000 items per batch on the I/O thread
        # while the traced hpc.map ran was a tenth of a 100,000-item map's time.
        self._ends = ends
        self._n = len(ends) // 8 if isinstance(ends, (bytes, bytearray)) else len(ends)
        self.body_start = body_start
        self.cpu_share = cpu_share
        self.runq_share = runq_share  # run-queue seconds per second of body; NaN: not measured

    @property
    def ends(self) -> Any:
        """Each item's end, seconds after the body's start (float64, one per item; built on first use)."""
        import numpy as np

        e = self._ends
        if not isinstance(e, np.ndarray):  # two threads may both build it: the same array either way
            e = (np.frombuffer(e, dtype=np.float64) if isinstance(e, (bytes, bytearray))
                 else np.asarray(e, dtype=np.float64))
            self._ends = e
        return e

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """Bytes this batch holds once read: 8 per item for the offsets, 8 more for ids that are not a range."""
        return 8 * self._n + (0 if isinstance(self.ids, range) else 8 * len(self.ids))

    def columns(self) -> dict[str, Any]:
        """One NumPy array per task column, a row per item."""
        import numpy as np

        n = len(self.ends)
        stops = self.body_start + self.ends
        starts = np.empty(n)
        if n:
            starts[0] = self.body_start
            starts[1:] = stops[:-1]
        ids = self.ids
        cols = {c: np.full(n, v, dtype=np.int64 if c in TASK_INT_COLUMNS else np.float64)
                for c, v in self.shared.items()}
        cols["task_id"] = (np.arange(ids.start, ids.stop, ids.step, dtype=np.int64) if isinstance(ids, range)
                           else np.asarray(ids, dtype=np.int64))
        cols["status"] = np.broadcast_to(np.asarray(self.status, dtype=np.int64), (n,))
        cols["start"], cols["end"] = starts, stops
        cols["cpu"] = (stops - starts) * self.cpu_share
        cols["runq"] = (stops - starts) * self.runq_share
        return cols


class TaskRows:
    """Recorded task rows not yet turned into columns: segments shared with the recorder.

    Building columns costs about a memory copy of the rows, so a region's end only keeps a
    reference to the segments (sealed, never written again) and a :class:`Trace` builds
    its columns the first time they are read; the traced code does not wait for it.
    """

    __slots__ = ("segments", "skip", "n")

    def __init__(self, segments: list[bytearray | BatchRows], skip: int, n: int):
        self.segments = segments
        self.skip = skip  # rows of the first segment that belong before this range
        self.n = n

    def __len__(self) -> int:
        return self.n

    def build(self) -> dict[str, Any]:
        """Fresh, writable int64/float64 NumPy arrays, one per task column."""
        import numpy as np

        parts: dict[str, list] = {c: [] for c in TASK_COLUMNS}
        for i, seg in enumerate(self.segments):
            if isinstance(seg, BatchRows):
                cols = seg.columns()
            else:
                packed = np.frombuffer(seg, dtype=row_dtype())
                cols = {c: packed[c] for c in TASK_COLUMNS}
            for c in TASK_COLUMNS:
                parts[c].append(cols[c][self.skip:] if i == 0 and self.skip else cols[c])
        out = {}
        for c in TASK_COLUMNS:
            dtype = np.int64 if c in TASK_INT_COLUMNS else np.float64
            out[c] = np.concatenate(parts[c]).astype(dtype, copy=False) if parts[c] else np.empty(0, dtype)
        return out
