"""Pure data-to-glyph transforms for the timeline (no Bokeh: tested on plain lists).

Input is a :class:`~eugo_lab.tracing.Trace` or a recorder ``Chunk`` (new rows read while
the cell runs): both have the same columns and name tables.
Lanes: y = 0 is the driver (where ``get()``/``wait()`` blocked), y = w + 1 is worker ``w``.
Times are seconds since the cell started. The Bokeh view and the static SVG draw the
same columns, so what the page shows live and what the saved notebook shows agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from eugo_lab.tracing.recorder import STATUS_NAMES
from eugo_lab.units import fmt_bytes

# Category10 (colour-blind friendly enough, and the palette Bokeh users know).
FUNCTION_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                   "#17becf", "#aec7e8")
PHASE_COLORS = ("#000000", "#ffffff", "#555555", "#dddddd")
FAILED_LINE = "#d62728"
BLOCK_COLOR = "#9e9e9e"
TASK_COLUMNS = ("left", "right", "y", "color", "line_color", "hatch", "function", "duration", "phases", "bytes",
                "status", "attempt", "task_id", "tasks")
# Tiny tasks: a successful first attempt without phases shorter than MERGE_MAX_TASK that starts
# within MERGE_MAX_GAP of the previous one of the same function on the same lane shares its bar.
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


def fmt_seconds(s: float) -> str:
    """``0.0123`` -> ``12.3 ms``; for hover text and the HTML view (not for deterministic text)."""
    if s is None or math.isnan(s):
        return "?"
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def lane_of(worker: int) -> int:
    """The y of a worker's lane (tasks run on the driver, worker -1, share the driver lane)."""
    return worker + 1 if worker >= 0 else 0


def lane_labels(n_lanes: int) -> dict[int, str]:
    """``{0: "driver", 1: "worker 0", ...}`` for ``n_lanes`` lanes including the driver."""
    return {0: "driver", **{i: f"worker {i - 1}" for i in range(1, n_lanes)}}


def empty(columns: tuple[str, ...]) -> dict[str, list]:
    """A column dict with no rows."""
    return {c: [] for c in columns}


def _arr(col: object, dtype: str) -> np.ndarray:
    return np.asarray(col, dtype=dtype)


def _phases_by_row(data: object) -> dict[int, list[tuple[str, float, float]]]:
    p = data.phases  # type: ignore[attr-defined]
    names = data.phase_names  # type: ignore[attr-defined]
    out: dict[int, list[tuple[str, float, float]]] = {}
    for r, nm, s, e in zip(p["row"], p["name"], p["start"], p["end"]):
        out.setdefault(int(r), []).append((names[int(nm)], float(s), float(e)))
    return out


def task_columns(data: object, t0: float, palette: Palette, merge: bool = True) -> dict[str, list]:
    """One bar per finished task attempt, coloured by function.

    ``data`` is a :class:`~eugo_lab.tracing.Trace` or a recorder ``Chunk`` (same columns).
    Failed attempts are outlined red and cross-hatched; retried ones (attempt > 1) are
    striped. With ``merge``, runs of tiny tasks share one bar (see :data:`MERGE_MAX_TASK`;
    done with NumPy, so 10,000 tiny tasks cost about as little as ten); the ``tasks``
    column says how many tasks a bar stands for.
    """
    cols = empty(TASK_COLUMNS)
    t = data.tasks  # type: ignore[attr-defined]
    if not len(t["task_id"]):
        return cols
    names = data.functions  # type: ignore[attr-defined]
    start, end = _arr(t["start"], "float64"), _arr(t["end"], "float64")
    worker, fcode = _arr(t["worker"], "int64"), _arr(t["function"], "int64")
    status, attempt = _arr(t["status"], "int64"), _arr(t["attempt"], "int64")
    b_in, b_out, tid = _arr(t["bytes_in"], "int64"), _arr(t["bytes_out"], "int64"), _arr(t["task_id"], "int64")
    phases = _phases_by_row(data)
    for code in dict.fromkeys(fcode.tolist()):  # colours follow the order functions first appear
        palette.color(names[code])
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(start) & np.isfinite(end)
        tiny = valid & (end - start < MERGE_MAX_TASK) & (attempt == 1) & (status == 0) if merge else valid & False
    if phases:
        tiny[list(phases)] = False

    def add(i: int, right: float, n: int, busy: float, bi: int, bo: int) -> None:
        name = names[fcode[i]]
        failed = status[i] != 0
        st = STATUS_NAMES[status[i]]
        cols["left"].append(float(start[i]) - t0)
        cols["right"].append(right - t0)
        cols["y"].append(lane_of(int(worker[i])))
        cols["color"].append(palette.color(name))
        cols["line_color"].append(FAILED_LINE if failed else "#ffffff")  # white edges separate adjacent bars
        cols["hatch"].append("x" if failed else ("/" if attempt[i] > 1 else " "))
        cols["attempt"].append(int(attempt[i]))
        cols["task_id"].append(int(tid[i]))
        cols["tasks"].append(n)
        cols["status"].append(st if attempt[i] == 1 else f"{st} (attempt {attempt[i]})")
        cols["bytes"].append(f"in {fmt_bytes(bi)}, out {fmt_bytes(bo)}")
        if n == 1:
            cols["function"].append(name)
            cols["duration"].append(fmt_seconds(right - float(start[i])))
            cols["phases"].append(", ".join(f"{pn} {fmt_seconds(e - s)}" for pn, s, e in phases.get(i, ())) or "-")
        else:
            cols["function"].append(f"{name} (x{n} tiny tasks)")
            cols["duration"].append(f"{fmt_seconds(busy)} busy in {fmt_seconds(right - float(start[i]))}")
            cols["phases"].append("-")

    for i in np.flatnonzero(valid & ~tiny).tolist():
        add(i, float(end[i]), 1, float(end[i] - start[i]), int(b_in[i]), int(b_out[i]))
    idx = np.flatnonzero(tiny)
    if idx.size:
        order = idx[np.lexsort((start[idx], fcode[idx], worker[idx]))]
        w, f, s, e = worker[order], fcode[order], start[order], end[order]
        new = np.ones(order.size, dtype=bool)
        new[1:] = (w[1:] != w[:-1]) | (f[1:] != f[:-1]) | (s[1:] - e[:-1] >= MERGE_MAX_GAP)
        firsts = np.flatnonzero(new)
        rights = np.maximum.reduceat(e, firsts)
        busys = np.add.reduceat(e - s, firsts)
        counts = np.diff(np.append(firsts, order.size))
        bis, bos = np.add.reduceat(b_in[order], firsts), np.add.reduceat(b_out[order], firsts)
        for k, j in enumerate(firsts.tolist()):
            add(int(order[j]), float(rights[k]), int(counts[k]), float(busys[k]), int(bis[k]), int(bos[k]))
    return cols


def phase_columns(data: object, t0: float, palette: Palette) -> dict[str, list]:
    """One thinner, translucent bar per ``hpc.phase`` span, drawn inside its task's bar."""
    cols = empty(PHASE_GLYPH_COLUMNS)
    t = data.tasks  # type: ignore[attr-defined]
    for row, spans in _phases_by_row(data).items():
        lane = lane_of(int(t["worker"][row]))
        fn = data.functions[int(t["function"][row])]  # type: ignore[attr-defined]
        for name, s, e in spans:
            cols["left"].append(s - t0)
            cols["right"].append(e - t0)
            cols["y"].append(lane)
            cols["color"].append(palette.color(name))
            cols["phase"].append(name)
            cols["function"].append(fn)
    return cols


def block_columns(data: object, t0: float) -> dict[str, list]:
    """One bar on the driver lane per ``get()``/``wait()`` that blocked."""
    cols = empty(BLOCK_GLYPH_COLUMNS)
    b = data.blocks  # type: ignore[attr-defined]
    kinds, sources = data.block_kinds, data.sources  # type: ignore[attr-defined]
    for k, s, e, n, src in zip(b["kind"], b["start"], b["end"], b["futures"], b["source"]):
        n = int(n)
        cols["left"].append(float(s) - t0)
        cols["right"].append(float(e) - t0)
        cols["y"].append(0)
        cols["label"].append(f"{kinds[int(k)]}() blocked on {n} future{'s' if n != 1 else ''}")
        cols["source"].append(sources[int(src)])
    return cols


def max_lane(data: object) -> int:
    """The highest lane any task row uses (0 if none)."""
    w = data.tasks["worker"]  # type: ignore[attr-defined]
    return lane_of(int(max(w))) if len(w) else 0


def speedup_points(rows: Iterable[tuple[int, float]]) -> dict[str, list]:
    """``[(workers, speedup), ...]`` -> columns ``workers``, ``speedup`` sorted by workers (for plots)."""
    pts = sorted((int(w), float(s)) for w, s in rows)
    return {"workers": [w for w, _ in pts], "speedup": [s for _, s in pts]}
