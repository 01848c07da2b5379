"""Pure data-to-glyph transforms for the timeline (no Bokeh: tested on plain lists).

Lanes: y = 0 is the driver (where ``get()``/``wait()`` blocked), y = w + 1 is worker ``w``.
Times are seconds since the cell started. The Bokeh view and the static SVG draw the
same columns, so what the page shows live and what the saved notebook shows agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from eugo_lab.tracing.recorder import STATUS_NAMES, BlockEvent, TaskEvent

# Category10 (colour-blind friendly enough, and the palette Bokeh users know).
FUNCTION_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                   "#17becf", "#aec7e8")
PHASE_COLORS = ("#000000", "#ffffff", "#555555", "#dddddd")
FAILED_LINE = "#d62728"
BLOCK_COLOR = "#9e9e9e"
TASK_COLUMNS = ("left", "right", "y", "color", "line_color", "hatch", "function", "duration", "phases", "bytes",
                "status", "attempt", "task_id")
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


def fmt_bytes(n: int) -> str:
    """``1536`` -> ``1.5 kB``."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def lane_of(worker: int) -> int:
    """The y of a worker's lane (tasks run on the driver, worker -1, share the driver lane)."""
    return worker + 1 if worker >= 0 else 0


def lane_labels(n_lanes: int) -> dict[int, str]:
    """``{0: "driver", 1: "worker 0", ...}`` for ``n_lanes`` lanes including the driver."""
    return {0: "driver", **{i: f"worker {i - 1}" for i in range(1, n_lanes)}}


def empty(columns: tuple[str, ...]) -> dict[str, list]:
    """A column dict with no rows."""
    return {c: [] for c in columns}


def task_columns(events: Iterable, t0: float, palette: Palette) -> dict[str, list]:
    """One bar per finished task attempt, coloured by function.

    Failed attempts are outlined red and cross-hatched; retried ones (attempt > 1) are striped.
    """
    cols = empty(TASK_COLUMNS)
    for ev in events:
        if type(ev) is not TaskEvent or math.isnan(ev.start) or math.isnan(ev.end):
            continue
        color = palette.color(ev.function)
        failed = ev.status != "ok"
        cols["left"].append(ev.start - t0)
        cols["right"].append(ev.end - t0)
        cols["y"].append(lane_of(ev.worker))
        cols["color"].append(color)
        cols["line_color"].append(FAILED_LINE if failed else "#ffffff")  # white edges separate adjacent bars
        cols["hatch"].append("x" if failed else ("/" if ev.attempt > 1 else " "))
        cols["function"].append(ev.function)
        cols["duration"].append(fmt_seconds(ev.end - ev.start))
        cols["phases"].append(", ".join(f"{n} {fmt_seconds(e - s)}" for n, s, e in ev.phases) or "-")
        cols["bytes"].append(f"in {fmt_bytes(ev.bytes_in)}, out {fmt_bytes(ev.bytes_out)}")
        cols["status"].append(ev.status if ev.attempt == 1 else f"{ev.status} (attempt {ev.attempt})")
        cols["attempt"].append(ev.attempt)
        cols["task_id"].append(ev.task_id)
    return cols


def phase_columns(events: Iterable, t0: float, palette: Palette) -> dict[str, list]:
    """One thinner, translucent bar per ``hpc.phase`` span, drawn inside its task's bar."""
    cols = empty(PHASE_GLYPH_COLUMNS)
    for ev in events:
        if type(ev) is not TaskEvent:
            continue
        for name, s, e in ev.phases:
            cols["left"].append(s - t0)
            cols["right"].append(e - t0)
            cols["y"].append(lane_of(ev.worker))
            cols["color"].append(palette.color(name))
            cols["phase"].append(name)
            cols["function"].append(ev.function)
    return cols


def block_columns(events: Iterable, t0: float) -> dict[str, list]:
    """One bar on the driver lane per ``get()``/``wait()`` that blocked."""
    cols = empty(BLOCK_GLYPH_COLUMNS)
    for ev in events:
        if type(ev) is not BlockEvent:
            continue
        cols["left"].append(ev.start - t0)
        cols["right"].append(ev.end - t0)
        cols["y"].append(0)
        cols["label"].append(f"{ev.kind}() blocked on {ev.futures} future{'s' if ev.futures != 1 else ''}")
        cols["source"].append(ev.source)
    return cols


def max_lane(events: Iterable) -> int:
    """The highest lane any task event uses (0 if none)."""
    return max((lane_of(ev.worker) for ev in events if type(ev) is TaskEvent), default=0)


def events_from_trace(trace: object) -> list:
    """Rebuild TaskEvent/BlockEvent objects from a finished Trace, so static views reuse the transforms."""
    t = trace.tasks  # type: ignore[attr-defined]
    p = trace.phases  # type: ignore[attr-defined]
    phases: dict[int, list] = {}
    for j in range(len(p["row"])):
        phases.setdefault(int(p["row"][j]), []).append(
            (trace.phase_names[int(p["name"][j])], float(p["start"][j]), float(p["end"][j])))  # type: ignore[attr-defined]
    out: list = []
    for i in range(len(t["task_id"])):
        out.append(TaskEvent(
            task_id=int(t["task_id"][i]), function=trace.functions[int(t["function"][i])],  # type: ignore[attr-defined]
            worker=int(t["worker"][i]), start=float(t["start"][i]), end=float(t["end"][i]),
            status=STATUS_NAMES[int(t["status"][i])], attempt=int(t["attempt"][i]), batch=int(t["batch"][i]),
            phases=tuple(phases.get(i, ())), bytes_in=int(t["bytes_in"][i]), bytes_out=int(t["bytes_out"][i])))
    b = trace.blocks  # type: ignore[attr-defined]
    for j in range(len(b["kind"])):
        out.append(BlockEvent(kind=trace.block_kinds[int(b["kind"][j])], start=float(b["start"][j]),  # type: ignore[attr-defined]
                              end=float(b["end"][j]), futures=int(b["futures"][j]),
                              source=trace.sources[int(b["source"][j])]))  # type: ignore[attr-defined]
    return out


def speedup_points(rows: Iterable[tuple[int, float]]) -> dict[str, list]:
    """``[(workers, speedup), ...]`` -> columns ``workers``, ``speedup`` sorted by workers (for plots)."""
    pts = sorted((int(w), float(s)) for w, s in rows)
    return {"workers": [w for w, _ in pts], "speedup": [s for _, s in pts]}
