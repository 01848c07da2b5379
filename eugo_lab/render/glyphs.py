"""Pure data-to-glyph transforms for the timeline (no Bokeh: tested on plain lists).

Input is a :class:`~eugo_lab.tracing.Trace` or a recorder ``Chunk`` (new rows read while
the cell runs): both have the same columns and name tables.
Lanes (:class:`Lanes`): y = 0 is the driver (what it did, from the cell's first line to its
last: serializing arguments, submitting, blocked in ``get()``/``wait()``, its own work), y = w + 1
is worker ``w``; a worker process that died gets its replacement a lane of its own.
Times are seconds since the cell started. The Bokeh view and the static SVG draw the
same columns, so what the page shows live and what the saved notebook shows agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from eugo_lab.contract.row import CRASHED, OK, STATUS_NAMES
from eugo_lab.units import fmt_bytes, fmt_seconds

# Category10 (colour-blind friendly enough, and the palette Bokeh users know).
FUNCTION_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                   "#17becf", "#aec7e8")
PHASE_COLORS = ("#000000", "#ffffff", "#555555", "#dddddd")
FAILED_LINE = "#d62728"
GPU_LINE = "#76b900"  # the outline of a task that held a GPU (NVIDIA's green: the colour people know it by)
BLOCK_COLOR = "#9e9e9e"
# The driver's other segments (light Category20 tones: told apart from the tasks' Category10 colours).
DRIVER_COLORS = {"serializing": "#ff9896", "submitting": "#c5b0d5", "own work": "#dbdb8d"}
TASK_COLUMNS = ("left", "right", "mid", "busy", "y", "color", "line_color", "hatch", "function", "name", "duration",
                "phases", "bytes", "status", "attempt", "task_id", "tasks", "gpu")
DRIVER_GLYPH_COLUMNS = ("left", "right", "y", "kind", "color", "label")
# Every bar is drawn at least this many pixels wide (a 70 us task in a one-second cell is a
# twentieth of a pixel): a bar stands for a task that ran, however short.
MIN_BAR_PX = 3
# Past this many bars a lane is drawn as a density band: bars sharing one of DENSITY_PIXELS
# columns of the cell's time become one bar that says how many tasks it holds. 400 columns
# of a timeline ~1,200 pixels wide are as wide as MIN_BAR_PX, so the unzoomed picture loses
# nothing, and 50,000 tasks cost the browser 400 bars a lane (measured: benchmarks/timeline.py).
DENSITY_MAX_BARS = 4000
DENSITY_PIXELS = 400
# Tiny tasks: a successful first attempt shorter than MERGE_MAX_TASK that starts within
# MERGE_MAX_GAP of the previous one of the same function on the same lane shares its bar
# (the bar's tooltip sums their phases).
# 10,000 tasks of 70 us then draw as a few dozen bars instead of 10,000 (a bar that thin is
# invisible at any zoom that shows the whole run), which keeps the live view's cost and the
# saved notebook small; tasks of 5 ms or more always get their own bar.
MERGE_MAX_TASK = 0.005
MERGE_MAX_GAP = 0.002
PHASE_GLYPH_COLUMNS = ("left", "right", "y", "color", "phase", "function")
BLOCK_GLYPH_COLUMNS = ("left", "right", "y", "label", "source")


class Palette:
    """Stable name -> colour: the first function seen gets the first colour (cycled past 10)."""

    def __init__(self, colors: tuple[str, ...] = FUNCTION_COLORS):
        self.colors = colors
        self.assigned: dict[str, str] = {}

    def color(self, name: str) -> str:
        """The colour of ``name`` (assigned on first use)."""
        c = self.assigned.get(name)
        if c is None:
            c = self.assigned[name] = self.colors[len(self.assigned) % len(self.colors)]
        return c


def lane_labels(n_lanes: int) -> dict[int, str]:
    """``{0: "driver", 1: "worker 0", ...}`` for ``n_lanes`` lanes including the driver."""
    return {0: "driver", **{i: f"worker {i - 1}" for i in range(1, n_lanes)}}


class Lanes:
    """Which lane each task row is drawn on, and what the lanes are called (state kept across chunks).

    A worker index names a slot, not a process: when a worker dies mid-task the local pool
    starts a replacement under the same index. Drawing both on one lane would hide the
    crash, so each process gets its own lane: a crashed attempt on worker ``w`` (status
    ``crashed``, noticed by the driver at its ``received`` time) ends that lane, labelled
    ``worker w (died)``, and rows of ``w`` that start after it go to a new lane at the
    bottom, ``worker w (replacement)``. Lanes are made when a row first needs them, so a
    backend that gives new workers new indices gets no empty replacement lanes.
    """

    def __init__(self, workers: int | None = None):
        # workers: how many the cell started with (their lanes exist from the start); None:
        # take it from the first rows drawn (a whole Trace drawn at once).
        self.initial = -1
        self.n_lanes = 1
        self._lane: dict[tuple[int, int], int] = {}
        if workers is not None:
            self._set_initial(workers)
        self._crashes: dict[int, list[float]] = {}  # worker -> sorted times its processes were seen dead
        self._died: set[int] = set()  # lanes whose process died
        self._last_end: dict[int, float] = {}  # lane -> latest task end drawn on it (places crashed bars)
        self.changed = False  # set when lanes or labels changed; the live view redraws the axis and clears it

    def _set_initial(self, workers: int) -> None:
        self.initial = max(int(workers), 0)
        self.n_lanes = max(self.n_lanes, self.initial + 1)  # the driver and one lane per worker the cell started with
        self._lane.update({(w, 0): w + 1 for w in range(self.initial)})

    def labels(self, gpus: dict[int, int] | None = None) -> dict[int, str]:
        """``{y: label}`` for every lane made so far; ``gpus``: ``{worker: GPU it holds}`` (``worker 0 (GPU 0)``)."""
        out = {0: "driver"}
        for (w, gen), y in self._lane.items():
            label = f"worker {w}" if gen == 0 else f"worker {w} (replacement{'' if gen == 1 else f' {gen}'})"
            if gpus and w in gpus:  # a replacement holds its slot's device too
                label = label[:-1] + f", GPU {gpus[w]})" if label.endswith(")") else label + f" (GPU {gpus[w]})"
            if y in self._died:
                label = label[:-1] + ", died)" if label.endswith(")") else label + " (died)"
            out[y] = label
        return dict(sorted(out.items()))

    def _y(self, worker: int, gen: int) -> int:
        y = self._lane.get((worker, gen))
        if y is None:
            y = self._lane[(worker, gen)] = self.n_lanes if (gen or worker >= self.initial) else worker + 1
            self.n_lanes = max(self.n_lanes, y + 1)
            self.changed = True
        return y

    def assign(self, worker: np.ndarray, start: np.ndarray, status: np.ndarray, received: np.ndarray) -> np.ndarray:
        """The lane of every row (vectorised; a Python step only per crash and per worker that crashed)."""
        if self.initial < 0:
            self._set_initial(int(worker.max()) + 1 if worker.size else 0)
        ys = np.where(worker >= 0, worker + 1, 0)
        crashed_rows = (status == CRASHED) & (worker >= 0)
        if not self._crashes and not crashed_rows.any() and (not worker.size or worker.max() < self.initial):
            return ys  # the common case: no worker died, no worker joined
        crashed = np.flatnonzero(crashed_rows & np.isfinite(received))
        for i in crashed[np.argsort(received[crashed], kind="stable")].tolist():
            times = self._crashes.setdefault(int(worker[i]), [])
            if float(received[i]) not in times:  # the same trace can be drawn twice (SVG, tests)
                times.append(float(received[i]))
                times.sort()
        # (np.bincount, not np.unique: np.unique imports numpy.ma, 13 ms, on first use)
        seen = np.flatnonzero(np.bincount(worker[worker >= 0])).tolist() if (worker >= 0).any() else []
        for w in seen:
            if w < self.initial and w not in self._crashes:
                continue  # lane w + 1, as set above
            mask = worker == w
            times = np.asarray(self._crashes.get(w, ()), dtype="float64")
            # A row belongs to the process that was alive when it started; a crashed row (no
            # start) to the process whose death it reports.
            when = np.where(np.isfinite(start[mask]), start[mask], received[mask])
            gen = np.where(status[mask] == CRASHED, np.searchsorted(times, when, side="left"),
                           np.searchsorted(times, when, side="right"))
            lut = np.zeros(int(gen.max()) + 1, dtype="int64")
            for g in np.flatnonzero(np.bincount(gen)).tolist():
                lut[g] = self._y(int(w), g)
            ys[mask] = lut[gen]
        for i in crashed.tolist():
            if ys[i] not in self._died:
                self._died.add(int(ys[i]))
                self.changed = True
        return ys

    def crashed_left(self, y: int, ready: float, received: float, ys: np.ndarray, ends: np.ndarray) -> float:
        """Where a crashed attempt's bar starts: when it was sent, or when its lane's previous task ended.

        A crashed attempt has no measured start (the worker died before reporting): it ran
        at most from ``ready`` (or the end of the task before it on that process) to
        ``received``, when the driver noticed the death.
        """
        prev = ends[(ys == y) & (ends <= received)]
        left = max([ready, self._last_end.get(y, -math.inf)] + ([float(np.nanmax(prev))] if prev.size else []))
        return min(left, received)

    def note_ends(self, ys: np.ndarray, ends: np.ndarray) -> None:
        """Remember the latest end per lane (only where something ended)."""
        if not ys.size:
            return
        for y in np.flatnonzero(np.bincount(ys)).tolist():
            e = ends[ys == y]
            e = e[np.isfinite(e)]
            if e.size:
                self._last_end[y] = max(self._last_end.get(y, -math.inf), float(e.max()))


def empty(columns: tuple[str, ...]) -> dict[str, list]:
    """A column dict with no rows."""
    return {c: [] for c in columns}


def _arr(col: object, dtype: str) -> np.ndarray:
    return np.asarray(col, dtype=dtype)


def _tiny(data: object, merge: bool = True) -> np.ndarray:
    """Rows drawn merged (see :data:`MERGE_MAX_TASK`): successful first attempts shorter than it."""
    t = data.tasks  # type: ignore[attr-defined]
    start, end = _arr(t["start"], "float64"), _arr(t["end"], "float64")
    with np.errstate(invalid="ignore"):
        tiny = np.isfinite(start) & np.isfinite(end) & (end - start < MERGE_MAX_TASK)
    tiny &= (_arr(t["attempt"], "int64") == 1) & (_arr(t["status"], "int64") == OK)
    return tiny if merge else tiny & False


def _phases_by_row(data: object, skip: np.ndarray | None = None) -> dict[int, list[tuple[str, float, float]]]:
    """``{row: [(phase, start, end), ...]}`` for the phase spans of the rows not in ``skip``.

    A Python loop per span: only for rows drawn one bar each, which are few per second.
    """
    p = data.phases  # type: ignore[attr-defined]
    names = data.phase_names  # type: ignore[attr-defined]
    rows = _arr(p["row"], "int64")
    keep = np.flatnonzero(~skip[rows]) if skip is not None and rows.size else np.arange(rows.size)
    out: dict[int, list[tuple[str, float, float]]] = {}
    if not keep.size:
        return out
    starts, ends, codes = _arr(p["start"], "float64")[keep], _arr(p["end"], "float64")[keep], _arr(p["name"], "int64")
    for r, nm, s, e in zip(rows[keep].tolist(), codes[keep].tolist(), starts.tolist(), ends.tolist()):
        out.setdefault(r, []).append((names[nm], s, e))
    return out


def _merged_phases(data: object, bar_of_row: np.ndarray, n_bars: int) -> list[str]:
    """Per merged bar: its tasks' phase time summed by phase name (``"read 1.2 ms, compute 30 ms"``), or ``"-"``."""
    p = data.phases  # type: ignore[attr-defined]
    out = ["-"] * n_bars
    rows = _arr(p["row"], "int64")
    if not rows.size or not n_bars:
        return out
    bars = bar_of_row[rows]
    keep = bars >= 0
    if not keep.any():
        return out
    names = data.phase_names  # type: ignore[attr-defined]
    codes = _arr(p["name"], "int64")[keep]
    dur = (_arr(p["end"], "float64") - _arr(p["start"], "float64"))[keep]
    k = len(names)
    totals = np.bincount(bars[keep] * k + codes, weights=dur, minlength=n_bars * k).reshape(n_bars, k)
    for b in np.flatnonzero(totals.any(axis=1)).tolist():
        out[b] = ", ".join(f"{names[c]} {fmt_seconds(float(totals[b, c]))}" for c in np.flatnonzero(totals[b]).tolist())
    return out


def task_columns(data: object, t0: float, palette: Palette, merge: bool = True,
                 lanes: Lanes | None = None) -> dict[str, list]:
    """One bar per task attempt, coloured by function.

    ``data`` is a :class:`~eugo_lab.tracing.Trace` or a recorder ``Chunk`` (same columns);
    ``lanes`` places rows on lanes across calls (a new one per call when not given).
    Failed attempts are outlined red and cross-hatched; a crashed attempt (its worker died,
    so it has no measured start) is drawn from when it was sent, or when its process's
    previous task ended, to when the driver saw the worker die. Retried attempts
    (attempt > 1) are striped. With ``merge``, runs of tiny tasks share one bar (see
    :data:`MERGE_MAX_TASK`; done with NumPy, so 10,000 tiny tasks cost about as little as
    ten); the ``tasks`` column says how many tasks a bar stands for, ``name`` is the bare
    function name (the legend groups by it).
    """
    cols = empty(TASK_COLUMNS)
    t = data.tasks  # type: ignore[attr-defined]
    if not len(t["task_id"]):
        return cols
    lanes = lanes if lanes is not None else Lanes()
    names = data.functions  # type: ignore[attr-defined]
    start, end = _arr(t["start"], "float64"), _arr(t["end"], "float64")
    ready, received = _arr(t["ready"], "float64"), _arr(t["received"], "float64")
    worker, fcode = _arr(t["worker"], "int64"), _arr(t["function"], "int64")
    status, attempt = _arr(t["status"], "int64"), _arr(t["attempt"], "int64")
    b_in, b_out, tid = _arr(t["bytes_in"], "int64"), _arr(t["bytes_out"], "int64"), _arr(t["task_id"], "int64")
    ys = lanes.assign(worker, start, status, received)
    # The GPU each row held (a Trace knows it; the live view's chunks do not, and show none).
    held = getattr(data, "gpu", None)
    gpu = np.asarray(held, dtype="int64") if held is not None else np.full(len(start), -1, dtype="int64")
    tiny = _tiny(data, merge)
    phases = _phases_by_row(data, skip=tiny)
    for code in dict.fromkeys(fcode.tolist()):  # colours follow the order functions first appear
        palette.color(names[code])
    valid = np.isfinite(start) & np.isfinite(end)
    crashed = ~valid & (status == CRASHED) & (worker >= 0) & np.isfinite(ready) & np.isfinite(received)

    def add(i: int, left: float, right: float, n: int, busy: float, bi: int, bo: int, merged: str = "-") -> None:
        name = names[fcode[i]]
        failed = status[i] != 0
        st = STATUS_NAMES[status[i]]
        cols["left"].append(left - t0)
        cols["right"].append(right - t0)
        cols["mid"].append((left + right) / 2 - t0)
        cols["busy"].append(busy)
        cols["y"].append(int(ys[i]))
        cols["color"].append(palette.color(name))
        # white edges separate adjacent bars; a task that held a GPU is outlined green
        cols["line_color"].append(FAILED_LINE if failed else (GPU_LINE if gpu[i] >= 0 else "#ffffff"))
        cols["gpu"].append(f"GPU {gpu[i]}" if gpu[i] >= 0 else "-")
        cols["hatch"].append("x" if failed else ("/" if attempt[i] > 1 else " "))
        cols["attempt"].append(int(attempt[i]))
        cols["task_id"].append(int(tid[i]))
        cols["tasks"].append(n)
        cols["name"].append(name)
        cols["status"].append(st if attempt[i] == 1 else f"{st} (attempt {attempt[i]})")
        cols["bytes"].append(f"in {fmt_bytes(bi)}, out {fmt_bytes(bo)}")
        if n == 1:
            cols["function"].append(name)
            cols["duration"].append(fmt_seconds(right - left) if valid[i] else
                                    f"at most {fmt_seconds(right - left)} (its worker died)")
            cols["phases"].append(", ".join(f"{pn} {fmt_seconds(e - s)}" for pn, s, e in phases.get(i, ())) or merged)
        else:
            cols["function"].append(f"{name} (x{n} tiny tasks)")
            cols["duration"].append(f"{fmt_seconds(busy)} busy in {fmt_seconds(right - left)}")
            cols["phases"].append(merged)

    rows = np.flatnonzero(valid & ~tiny)
    parents = getattr(data, "parents", None)
    if parents is not None and len(parents["parent"]):
        # A task that submitted tasks spans the children it ran on its own lane while it waited:
        # drawn first (the longest, outermost first), it lies under them instead of hiding them.
        spans = np.isin(tid[rows], parents["parent"])
        outer = rows[spans][np.argsort(-(end - start)[rows[spans]], kind="stable")]
        rows = np.concatenate([outer, rows[~spans]])
    for i in rows.tolist():
        add(i, float(start[i]), float(end[i]), 1, float(end[i] - start[i]), int(b_in[i]), int(b_out[i]))
    for i in np.flatnonzero(crashed).tolist():
        left = lanes.crashed_left(int(ys[i]), float(ready[i]), float(received[i]), ys, end)
        add(i, left, float(received[i]), 1, 0.0, int(b_in[i]), int(b_out[i]))
    idx = np.flatnonzero(tiny)
    if idx.size:
        order = idx[np.lexsort((start[idx], fcode[idx], ys[idx]))]
        w, f, s, e = ys[order], fcode[order], start[order], end[order]
        new = np.ones(order.size, dtype=bool)
        new[1:] = (w[1:] != w[:-1]) | (f[1:] != f[:-1]) | (s[1:] - e[:-1] >= MERGE_MAX_GAP)
        firsts = np.flatnonzero(new)
        rights = np.maximum.reduceat(e, firsts)
        busys = np.add.reduceat(e - s, firsts)
        counts = np.diff(np.append(firsts, order.size))
        bis, bos = np.add.reduceat(b_in[order], firsts), np.add.reduceat(b_out[order], firsts)
        bar_of_row = np.full(len(start), -1, dtype="int64")
        bar_of_row[order] = np.cumsum(new) - 1
        merged_phases = _merged_phases(data, bar_of_row, firsts.size)
        for k, j in enumerate(firsts.tolist()):
            i = int(order[j])
            add(i, float(start[i]), float(rights[k]), int(counts[k]), float(busys[k]), int(bis[k]), int(bos[k]),
                merged_phases[k])
    lanes.note_ends(ys, end)
    return cols


def phase_columns(data: object, t0: float, palette: Palette, lanes: Lanes | None = None) -> dict[str, list]:
    """One thinner, translucent bar per ``hpc.phase`` span of a task drawn with a bar of its own.

    Pass the ``lanes`` that :func:`task_columns` used for the same rows (phases follow their task).
    """
    cols = empty(PHASE_GLYPH_COLUMNS)
    t = data.tasks  # type: ignore[attr-defined]
    # Tiny tasks share bars (their phase time is summed in the bar's tooltip): no phase bars
    # for them, which would be thousands of invisible slivers.
    by_row = _phases_by_row(data, skip=_tiny(data))
    if not by_row:
        return cols
    ys = (lanes if lanes is not None else Lanes()).assign(
        _arr(t["worker"], "int64"), _arr(t["start"], "float64"), _arr(t["status"], "int64"),
        _arr(t["received"], "float64"))
    for row, spans in by_row.items():
        lane = int(ys[row])
        fn = data.functions[int(t["function"][row])]  # type: ignore[attr-defined]
        for name, s, e in spans:
            cols["left"].append(s - t0)
            cols["right"].append(e - t0)
            cols["y"].append(lane)
            cols["color"].append(palette.color(name))
            cols["phase"].append(name)
            cols["function"].append(fn)
    return cols


def block_columns(data: object, t0: float, source_label: Callable[[str], str] | None = None) -> dict[str, list]:
    """One bar on the driver lane per ``get()``/``wait()`` that blocked; ``source_label`` rewrites ``file:line``."""
    cols = empty(BLOCK_GLYPH_COLUMNS)
    b = data.blocks  # type: ignore[attr-defined]
    kinds, sources = data.block_kinds, data.sources  # type: ignore[attr-defined]
    for k, s, e, n, src in zip(b["kind"], b["start"], b["end"], b["futures"], b["source"]):
        n = int(n)
        cols["left"].append(float(s) - t0)
        cols["right"].append(float(e) - t0)
        cols["y"].append(0)
        cols["label"].append(f"{kinds[int(k)]}() blocked on {n} future{'s' if n != 1 else ''}")
        cols["source"].append(source_label(sources[int(src)]) if source_label else sources[int(src)])
    return cols




def driver_columns(segments: dict, kinds: Iterable[str] = tuple(DRIVER_COLORS)) -> dict[str, list]:
    """The driver lane's segments of ``kinds`` (``Trace.driver`` or :func:`driver_span_segments`) as bars on y = 0.

    Blocked segments are drawn by :func:`block_columns` (their own glyph and tooltip), so the
    default leaves them out; together the two cover the lane from the cell's start to its end.
    """
    cols = empty(DRIVER_GLYPH_COLUMNS)
    keep = set(kinds)
    for k, s, e, label in zip(segments["kind"], segments["start"], segments["end"], segments["label"]):
        if k in keep and e > s:
            cols["left"].append(float(s))
            cols["right"].append(float(e))
            cols["y"].append(0)
            cols["kind"].append(str(k))
            cols["color"].append(DRIVER_COLORS.get(str(k), BLOCK_COLOR))
            cols["label"].append(str(label))
    return cols


def driver_span_segments(spans: dict, t0: float) -> dict[str, list]:
    """Recorded submission spans (``Recorder.driver_spans_since``) as segments, for the live view."""
    from eugo_lab.tracing.driver import SPAN_KINDS

    out: dict[str, list] = {"kind": [], "start": [], "end": [], "label": []}
    for k, s, e, b in zip(spans["kind"], spans["start"], spans["end"], spans["bytes"]):
        kind = SPAN_KINDS[int(k)]
        out["kind"].append(kind)
        out["start"].append(float(s) - t0)
        out["end"].append(float(e) - t0)
        what = f"serializing arguments ({fmt_bytes(int(b), '.3g')})" if kind == "serializing" else "submitting a task"
        out["label"].append(f"{what}: {fmt_seconds(float(e) - float(s))}")
    return out


def hatched(cols: dict[str, list]) -> dict[str, list]:
    """The rows of task columns drawn hatched (failed or retried attempts): the live view hatches only those."""
    keep = [i for i, h in enumerate(cols["hatch"]) if h != " "]
    return {c: [cols[c][i] for i in keep] for c in TASK_COLUMNS}


def density(cols: dict[str, list], lo: float, hi: float, max_bars: int = DENSITY_MAX_BARS,
            pixels: int = DENSITY_PIXELS) -> dict[str, list]:
    """``cols`` (from :func:`task_columns`) with bars binned per lane where there are more than ``max_bars``.

    Bars of a lane whose middles fall in the same of ``pixels`` columns of ``[lo, hi]``
    become one bar from the first's left to the last's right, coloured as the first, whose
    tooltip says how many tasks and which functions it holds and how busy it was.
    """
    n = len(cols["left"])
    if n <= max_bars or not hi > lo:
        return cols
    mid, y = np.asarray(cols["mid"], dtype="float64"), np.asarray(cols["y"], dtype="int64")
    col = np.clip(((mid - lo) / (hi - lo) * pixels).astype("int64"), 0, pixels - 1)
    key = y * pixels + col
    order = np.argsort(key, kind="stable")
    k = key[order]
    firsts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    counts = np.diff(np.append(firsts, n))
    left = np.minimum.reduceat(np.asarray(cols["left"], dtype="float64")[order], firsts)
    right = np.maximum.reduceat(np.asarray(cols["right"], dtype="float64")[order], firsts)
    busy = np.add.reduceat(np.asarray(cols["busy"], dtype="float64")[order], firsts)
    tasks = np.add.reduceat(np.asarray(cols["tasks"], dtype="int64")[order], firsts)
    names = np.asarray(cols["name"], dtype=object)[order]
    out = {c: [cols[c][int(order[j])] for j in firsts.tolist()] for c in TASK_COLUMNS}
    for g, j in enumerate(firsts.tolist()):
        if counts[g] == 1:
            continue
        fns = sorted(set(names[j:j + counts[g]].tolist()))
        out["left"][g], out["right"][g] = float(left[g]), float(right[g])
        out["mid"][g], out["busy"][g], out["tasks"][g] = float(left[g] + right[g]) / 2, float(busy[g]), int(tasks[g])
        out["function"][g] = f"{int(tasks[g])} tasks of {', '.join(fns)} (they share a pixel)"
        out["duration"][g] = f"{fmt_seconds(float(busy[g]))} busy in {fmt_seconds(float(right[g] - left[g]))}"
        out["phases"][g] = out["bytes"][g] = out["status"][g] = "-"
    return out


def speedup_points(rows: Iterable[tuple[int, float]]) -> dict[str, list]:
    """``[(workers, speedup), ...]`` -> columns ``workers``, ``speedup`` sorted by workers (for plots)."""
    pts = sorted((int(w), float(s)) for w, s in rows)
    return {"workers": [w for w, _ in pts], "speedup": [s for _, s in pts]}
