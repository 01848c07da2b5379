"""The driver's own time in a traced region: serializing, submitting, blocked, and its own Python work.

The recorder keeps two things for the driver (:class:`DriverLog`), besides the blocking
waits it already records:

- a span for every ``.remote()``/``hpc.map`` submission that took at least
  :data:`SPAN_MIN_S`: when the driver pickled its arguments (``serializing``) and when it
  handed the task on (``submitting``: staging out-of-band buffers, dependency gates, the
  engine's queue);
- for the shorter submissions, only their summed seconds and their count. They are the
  hot path of a loop of tiny tasks (a span each would be a row per task), and each is
  narrower than a pixel of the timeline, so their total is exact in the breakdown and the
  timeline draws them inside the ``own work`` segment around them (its hover says how
  many submissions it held).

:func:`segments` partitions the region's wall time into segments of four kinds, so the
driver lane accounts for the whole cell; :func:`breakdown` gives the seconds per kind
(the short submissions moved from ``own work`` to their kinds). Both add up to the
region's wall time.
"""

from __future__ import annotations

import threading
from array import array
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the recorder imports this module on the driver's start-up path: NumPy loads with a Trace
    import numpy as np

#: Submissions at least this long (pickling plus handing on) get spans of their own. A bare
#: ``.remote()`` costs ~0.15 ms on the local pool and one pixel of a 720-pixel timeline of a
#: one-second cell is 1.4 ms: under 1 ms a span would draw nothing visible and cost a row per
#: tiny task; such submissions are summed instead (see the module docstring).
SPAN_MIN_S = 0.001

#: The kinds of recorded spans (their codes in the ``kind`` column).
SPAN_KINDS = ("serializing", "submitting")
#: Every kind of driver segment, in the order the breakdown lists them.
KINDS = ("serializing", "submitting", "blocked", "own work")
SPAN_COLUMNS = ("kind", "task", "bytes", "start", "end")
SEGMENT_COLUMNS = ("kind", "start", "end", "task", "bytes", "submits", "label")
_INT = ("kind", "task", "bytes")


def empty_spans() -> dict[str, np.ndarray]:
    """A span table with no rows (read-only columns)."""
    import numpy as np

    out = {}
    for c in SPAN_COLUMNS:
        a = np.zeros(0, dtype="int64" if c in _INT else "float64")
        a.setflags(write=False)
        out[c] = a
    return out


def frozen_spans(cols: dict[str, Any]) -> dict[str, np.ndarray]:
    """Read-only NumPy columns from lists, ``array.array`` or arrays."""
    import numpy as np

    out = {}
    for c in SPAN_COLUMNS:
        a = np.array(cols.get(c, ()), dtype="int64" if c in _INT else "float64")
        a.setflags(write=False)
        out[c] = a
    return out


class DriverLog:
    """What the recorder keeps of the driver's submissions (see the module docstring).

    Written by whichever threads submit; its own lock, never the row store's (the I/O
    thread holds that one while it records results).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Drop everything (no region open)."""
        self.spans = {c: array("q" if c in _INT else "d") for c in SPAN_COLUMNS}
        # Seconds of the submissions shorter than SPAN_MIN_S, cumulative (regions slice by difference).
        self.short_serializing = 0.0
        self.short_submitting = 0.0
        self.short_count = 0

    def submitted(self, started: float, pickled: float, ended: float, task: int, args: bytes,
                  buffers: list | None = None, copied: int | None = None) -> None:
        """One submission: ``started`` before pickling, ``pickled`` after it, ``ended`` when it was handed on.

        ``args`` and ``buffers``: the task's pickled arguments and out-of-band buffers (their size is
        counted only for a span long enough to keep: the tiny ones are the hot path). ``copied``: the
        bytes of ``buffers`` the engine really copied, when it shared some with an earlier task (the
        local pool's large arguments by value): the span's bytes are what the driver serialized.
        """
        with self._lock:
            if not self._counted_short(started, pickled, ended):
                self._keep(started, pickled, ended, task, len(args) + (
                    copied if copied is not None else sum(b.nbytes for b in buffers) if buffers else 0))

    def spent(self, started: float, pickled: float, ended: float, task: int, nbytes: int) -> None:
        """One submission timed outside the runtime (an engine's own ``.remote()``), with its arguments' bytes.

        Filed as :meth:`submitted` files the runtime's: a span each for serializing and submitting, or
        the short submissions' totals.
        """
        with self._lock:
            if not self._counted_short(started, pickled, ended):
                self._keep(started, pickled, ended, task, nbytes)

    def _counted_short(self, started: float, pickled: float, ended: float) -> bool:
        """Add a submission shorter than a span worth keeping to the totals (under the lock); True if it was."""
        if ended - started >= SPAN_MIN_S:
            return False
        self.short_serializing += pickled - started
        self.short_submitting += ended - pickled
        self.short_count += 1
        return True

    def _keep(self, started: float, pickled: float, ended: float, task: int, nbytes: int) -> None:
        """The two spans of one submission (the caller holds the lock)."""
        s = self.spans
        for kind, a, b in ((0, started, pickled), (1, pickled, ended)):
            s["kind"].append(kind)
            s["task"].append(task)
            s["bytes"].append(nbytes if kind == 0 else 0)
            s["start"].append(a)
            s["end"].append(b)

    def mark(self) -> tuple[int, float, float, int]:
        """Where the log is now (a region's start)."""
        with self._lock:
            return len(self.spans["kind"]), self.short_serializing, self.short_submitting, self.short_count

    def since(self, mark: tuple[int, float, float, int]) -> tuple[dict[str, array], dict[str, float]]:
        """The spans recorded since ``mark`` and the short submissions' totals (the ``driver_short`` meta)."""
        n, ser, sub, count = mark
        with self._lock:
            spans = {c: col[n:] for c, col in self.spans.items()}
            short = {"serializing": self.short_serializing - ser, "submitting": self.short_submitting - sub,
                     "submits": self.short_count - count}
        return spans, short


def _fmt(x: float) -> str:
    from eugo_lab.units import fmt_seconds

    return fmt_seconds(x)


def segments(trace: Any) -> dict[str, np.ndarray]:
    """The driver's time in ``trace`` as consecutive segments from the region's start to its end.

    Columns: ``kind`` (one of :data:`KINDS`), ``start``/``end`` (seconds since the region
    started), ``task`` (the task a serializing/submitting segment was for, else -1),
    ``bytes`` (what was pickled), ``submits`` (in an ``own work`` segment: the short
    submissions inside it) and ``label`` (what the segment was, as its hover says it).
    Where spans overlap (several driver threads) a segment takes the first kind of
    :data:`KINDS` that covers it.
    """
    import numpy as np

    from eugo_lab.units import fmt_bytes

    t0, t1 = trace.t0, trace.t0 + max(trace.wall_time, 0.0)
    spans = getattr(trace, "driver_spans", None) or empty_spans()
    b = trace.blocks
    kinds = np.asarray(trace.block_kinds, dtype=object)
    src = np.asarray(trace.sources, dtype=object)
    # Per kind: (starts, ends, per-interval label).
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for code in range(len(SPAN_KINDS)):
        sel = np.flatnonzero(np.asarray(spans["kind"]) == code)
        parts.append((np.clip(spans["start"][sel], t0, t1), np.clip(spans["end"][sel], t0, t1),
                      np.asarray(spans["task"])[sel], np.asarray(spans["bytes"])[sel]))
    parts.append((np.clip(np.asarray(b["start"], float), t0, t1), np.clip(np.asarray(b["end"], float), t0, t1),
                  np.full(len(b["start"]), -1), np.asarray(b["futures"], dtype="int64")))
    cuts = np.unique(np.concatenate([[t0, t1]] + [p[0] for p in parts] + [p[1] for p in parts]))
    lo, hi = cuts[:-1], cuts[1:]
    kind = np.full(lo.size, len(KINDS) - 1)
    which = np.full(lo.size, -1)
    for k in range(len(parts) - 1, -1, -1):  # the first kind of KINDS wins: written last
        s, e = parts[k][0], parts[k][1]
        keep = e > s
        if not keep.any():
            continue
        idx = np.flatnonzero(keep)
        order = idx[np.argsort(s[idx], kind="stable")]
        ss, ee = s[order], e[order]
        # Intervals covering [lo, hi): started at or before lo, ending after it.
        n_started = np.searchsorted(ss, lo, side="right")
        n_ended = np.searchsorted(np.sort(ee), lo, side="right")
        cov = n_started - n_ended > 0
        kind[cov] = k
        which[cov] = order[np.clip(n_started[cov] - 1, 0, None)]
    # Merge neighbours of the same kind and the same span (own work: all neighbours).
    if lo.size:
        new = np.ones(lo.size, dtype=bool)
        new[1:] = (kind[1:] != kind[:-1]) | (which[1:] != which[:-1])
        firsts = np.flatnonzero(new)
        starts, ends = lo[firsts], np.append(lo[firsts[1:]], hi[-1])
        kind, which = kind[firsts], which[firsts]
    else:
        starts = ends = np.zeros(0)
    submits = np.zeros(kind.size, dtype="int64")
    short = int(trace.meta.get("driver_short", {}).get("submits", 0) or 0)
    if short and kind.size:
        # Where the short submissions were: tasks submitted without a span of their own.
        t = trace.tasks
        first = np.asarray(t["attempt"]) == 1
        spanned = np.isin(np.asarray(t["task_id"]), np.asarray(spans["task"])) | np.isin(
            np.asarray(t["batch"]), np.asarray(spans["task"]))
        at = np.asarray(t["submit"], float)[first & ~spanned]
        seg = np.searchsorted(starts, at, side="right") - 1
        seg = seg[(seg >= 0) & (seg < kind.size)]
        submits = np.bincount(seg, minlength=kind.size).astype("int64")
        submits[kind != len(KINDS) - 1] = 0
    task = np.full(kind.size, -1, dtype="int64")
    nbytes = np.zeros(kind.size, dtype="int64")
    labels = []
    for i, (k, w) in enumerate(zip(kind.tolist(), which.tolist())):
        dur = _fmt(float(ends[i] - starts[i]))
        if k < len(SPAN_KINDS):
            task[i] = int(parts[k][2][w])
            nbytes[i] = int(parts[k][3][w]) if k == 0 else 0
            fn = _function_of(trace, task[i])
            labels.append(f"serializing the arguments of {fn} ({fmt_bytes(int(nbytes[i]), '.3g')}): {dur}" if k == 0
                          else f"submitting {fn}: {dur}")
        elif k == len(SPAN_KINDS):
            n = int(parts[k][3][w])
            labels.append(f"blocked in {kinds[b['kind'][w]]}() on {n} future{'' if n == 1 else 's'} at "
                          f"{src[b['source'][w]]}: {dur}")
        else:
            n = int(submits[i])
            labels.append(f"own Python work: {dur}" + (f" (with {n} submission{'' if n == 1 else 's'} of under "
                                                       f"{_fmt(SPAN_MIN_S)} each)" if n else ""))
    return {"kind": np.asarray([KINDS[k] for k in kind.tolist()], dtype=object), "start": starts - t0,
            "end": ends - t0, "task": task, "bytes": nbytes, "submits": submits,
            "label": np.asarray(labels, dtype=object)}


def _function_of(trace: Any, task: int) -> str:
    """``f() task 12`` for a task id (its batch's function for an ``hpc.map`` batch), or ``task 12``."""
    import numpy as np

    t = trace.tasks
    hit = np.flatnonzero((np.asarray(t["task_id"]) == task) | (np.asarray(t["batch"]) == task))
    if not hit.size:
        return f"task {task}"
    return f"{trace.functions[int(t['function'][hit[0]])]}() task {task}"


def breakdown(trace: Any, segs: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """Seconds per kind of :data:`KINDS`; they add up to the region's wall time.

    The short submissions (no span, see :data:`SPAN_MIN_S`) are inside ``own work``
    segments; their measured totals move from ``own work`` to ``serializing`` and ``submitting``.
    """
    segs = segments(trace) if segs is None else segs
    dur = segs["end"] - segs["start"]
    out = {k: float(dur[segs["kind"] == k].sum()) for k in KINDS}
    short = trace.meta.get("driver_short") or {}
    moved = 0.0
    for k in SPAN_KINDS:
        x = min(float(short.get(k, 0.0) or 0.0), max(out["own work"] - moved, 0.0))
        out[k] += x
        moved += x
    out["own work"] -= moved
    return out
