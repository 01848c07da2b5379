"""The live view of a running ``%%eugo`` cell: counters, a progress bar and (in JupyterLab) the timeline.

It only draws: :class:`~eugo_lab.cellrun.live.LiveFeed` calls :meth:`LiveView.update` from
its single writer thread about 10 times a second with the events that arrived and a
counters snapshot. Each update costs a few ``stream()`` calls (tasks, failed tasks' hatching,
phases, blocks, the driver's spans: only those with new rows) and one widget change
(counters and progress bar are one HTML string).

The widgets come from the ``lab`` extra (ipywidgets, Bokeh, jupyter_bokeh), which a plain
``pip install eugo-lab`` leaves out so that cluster workers stay small. :func:`choose` is
the one place that decides what can be shown live; without those packages the cell runs
traced all the same and only its final report is shown (see :mod:`eugo_lab.cellrun.runner`).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from dataclasses import dataclass
from typing import Any

from eugo_lab.render import display, glyphs
from eugo_lab.render.html import counters_html

#: Model names the browser test (and curious users) read through ``Bokeh.documents``.
TASKS_SOURCE = "eugo-timeline-tasks"
PHASES_SOURCE = "eugo-timeline-phases"
BLOCKS_SOURCE = "eugo-timeline-blocks"
DRIVER_SOURCE = "eugo-timeline-driver"
HATCHED_SOURCE = "eugo-timeline-hatched"
LIVE_TEXT = "eugo live view (counters and timeline; needs a running kernel)"


#: What each part of the live view imports: the counters need ipywidgets, the JupyterLab timeline Bokeh too.
COUNTER_MODULES = ("ipywidgets",)
TIMELINE_MODULES = ("bokeh.plotting", "jupyter_bokeh")
#: The packages of the ``lab`` extra the live view uses, in the order the hint names them.
LIVE_PACKAGES = ("ipywidgets", "bokeh", "jupyter_bokeh")
INSTALL_HINT = 'pip install "eugo-lab[lab]" and restart the kernel'


@dataclass(frozen=True)
class LiveChoice:
    """What the live view of the next cell can show, and the one-line hint to print (or ``None``)."""

    counters: bool
    timeline: bool
    hint: str | None = None


#: Whether this kernel has already been told how to get the live view (once is enough: the
#: packages do not appear in a running kernel, the fix is to install them and restart).
_hinted = False


def _importable(module: str) -> bool:
    """Import ``module`` now (before the cell's trace opens: importing Bokeh takes about a second)."""
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - missing or broken, the live view goes without it; the cell must run
        return False
    return True


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules[package] is None (an import blocker)
        return False


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def missing_hint(counters: bool) -> str:
    """The one line that says what is off, which packages are missing, and how to get them."""
    wanted = [p for p in LIVE_PACKAGES if not counters or p != "ipywidgets"]
    missing = [p for p in wanted if not _installed(p)]
    what = "live timeline off (counters only)" if counters else "live view off"
    if missing:
        why = f"{_names(missing)} {'is' if len(missing) == 1 else 'are'} not installed"
    else:  # installed but the import failed (a broken or half-upgraded environment)
        why = f"{_names(wanted)} could not be imported"
    return f"eugo: {what}: {why}; {INSTALL_HINT}"


def choose(out_mode: str) -> LiveChoice:
    """What to show live in display mode ``out_mode`` (``lab`` or ``kernel``) with the packages this kernel has.

    ``kernel`` mode shows live counters (ipywidgets); ``lab`` mode adds the Bokeh timeline
    (Bokeh, jupyter_bokeh). The hint is returned the first time per kernel that part of
    that is missing, and ``None`` afterwards.
    """
    global _hinted
    counters = all(_importable(m) for m in COUNTER_MODULES)
    timeline = counters and out_mode == "lab" and all(_importable(m) for m in TIMELINE_MODULES)
    hint = None
    if (not counters or (out_mode == "lab" and not timeline)) and not _hinted:
        _hinted = True
        hint = missing_hint(counters)
    return LiveChoice(counters=counters, timeline=timeline, hint=hint)


LANE_HEIGHT_PX = 30
FIXED_HEIGHT_PX = 100  # axis, legend and toolbar


# Restyles the figure from JupyterLab's theme (its CSS variables on <body>), now and whenever the
# theme changes: Bokeh draws on a canvas, which CSS cannot reach, so the colours are set on the
# models. Run by BokehJS when the figure is first laid out (its inner_width changes); one
# MutationObserver per page watches body's data-jp-theme-* attributes for every eugo figure.
THEME_JS = """
const T = window.__eugoTheme = window.__eugoTheme || {figures: new Set(), observer: null};
T.apply = (fig) => {
  const body = document.body;
  const light = body.dataset.jpThemeLight !== 'false';
  const css = getComputedStyle(body);
  const v = (name, fallback) => (css.getPropertyValue(name) || '').trim() || fallback;
  const bg = v('--jp-layout-color0', light ? '#ffffff' : '#111111');
  const fg = v('--jp-ui-font-color1', light ? '#222222' : '#e0e0e0');
  const line = v('--jp-border-color2', light ? '#e0e0e0' : '#444444');
  const tag = light ? 'eugo-theme-light' : 'eugo-theme-dark';
  // Every change repaints the figure: nothing to do when it already has these colours
  // (the light theme on a new figure: Bokeh's defaults).
  if (fig.background_fill_color === bg && (fig.tags.includes(tag) || (light && bg === '#ffffff'))) { return; }
  fig.background_fill_color = bg;
  fig.border_fill_color = bg;
  fig.outline_line_color = line;
  for (const ax of [...fig.left, ...fig.below]) {
    ax.axis_label_text_color = fg; ax.major_label_text_color = fg;
    ax.axis_line_color = fg; ax.major_tick_line_color = fg; ax.minor_tick_line_color = fg;
  }
  for (const g of fig.center) {
    if (g.grid_line_color != null) { g.grid_line_color = line; }
  }
  for (const l of fig.above) {
    if (l.label_text_color !== undefined) {
      l.label_text_color = fg; l.background_fill_color = bg; l.border_line_color = line;
    }
  }
  fig.tags = [tag];
};
T.figures.add(fig);
T.apply(fig);
if (T.observer === null) {
  // The theme's stylesheet may land just after the attribute: apply again a moment later.
  const all = () => { for (const f of T.figures) { T.apply(f); } };
  T.observer = new MutationObserver(() => { all(); setTimeout(all, 300); setTimeout(all, 1500); });
  T.observer.observe(document.body, {attributes: true, attributeFilter: ['data-jp-theme-light', 'data-jp-theme-name']});
}
"""


def _timeline_figure(n_lanes: int) -> tuple[Any, dict[str, Any]]:
    from bokeh.models import ColumnDataSource, CustomJS, HoverTool, Legend, LegendItem, Range1d
    from bokeh.plotting import figure

    sources = {
        "tasks": ColumnDataSource(data=glyphs.empty(glyphs.TASK_COLUMNS), name=TASKS_SOURCE),
        "phases": ColumnDataSource(data=glyphs.empty(glyphs.PHASE_GLYPH_COLUMNS), name=PHASES_SOURCE),
        "blocks": ColumnDataSource(data=glyphs.empty(glyphs.BLOCK_GLYPH_COLUMNS), name=BLOCKS_SOURCE),
        "driver": ColumnDataSource(data=glyphs.empty(glyphs.DRIVER_GLYPH_COLUMNS), name=DRIVER_SOURCE),
        "hatched": ColumnDataSource(data=glyphs.empty(glyphs.TASK_COLUMNS), name=HATCHED_SOURCE),
    }
    y_range = Range1d(n_lanes - 0.4, -0.6)  # driver lane on top
    # The time axis spans the cell from its first line: 0 to the time elapsed (updated as it runs).
    x_range = Range1d(0.0, 1.0, name="eugo-x-range")
    p = figure(height=FIXED_HEIGHT_PX + LANE_HEIGHT_PX * n_lanes, sizing_mode="stretch_width", y_range=y_range,
               x_range=x_range, name="eugo-timeline", x_axis_label="seconds since the cell started",
               tools="xpan,xwheel_zoom,reset,save", toolbar_location="right")
    driver = p.hbar(y="y", left="left", right="right", height=0.7, source=sources["driver"], name="eugo-driver",
                    fill_color="color", line_color=None)
    blocks = p.hbar(y="y", left="left", right="right", height=0.7, source=sources["blocks"], name="eugo-blocks",
                    fill_color=glyphs.BLOCK_COLOR, line_color=None, hatch_pattern="/", hatch_alpha=0.4)
    # Under every task bar, a vertical dash MIN_BAR_PX wide in screen pixels: a task of
    # microseconds stays visible. (A scatter marker: a screen-unit rect per bar cost the browser
    # two seconds on 8,000 bars, the marker nothing measurable.)
    floor = p.scatter(x="mid", y="y", marker="dash", angle=math.pi / 2, size=0.8 * LANE_HEIGHT_PX,
                      line_width=glyphs.MIN_BAR_PX, line_color="color", source=sources["tasks"],
                      name="eugo-task-floor")
    tasks = p.hbar(y="y", left="left", right="right", height=0.8, source=sources["tasks"], fill_color="color",
                   line_color="line_color", name="eugo-tasks")
    # Failed and retried attempts are hatched by a second glyph over only their rows: a hatch
    # pattern per bar on every task cost Chromium ~28 s for 8,000 bars, even where it was blank.
    hatched = p.hbar(y="y", left="left", right="right", height=0.8, source=sources["hatched"], fill_alpha=0,
                     line_color="line_color", hatch_pattern="hatch", hatch_color="white", hatch_alpha=0.8,
                     name="eugo-tasks-hatched")
    phases = p.hbar(y="y", left="left", right="right", height=0.45, source=sources["phases"], fill_color="color",
                    fill_alpha=0.35, line_color=None)
    for r in (driver, blocks, floor, tasks, hatched, phases):
        # Nothing is ever selected or muted here: without those glyph copies the figure has
        # models fewer to serialize when the cell starts (BokehModel's cost grows with them).
        r.nonselection_glyph = None
        r.muted_glyph = None
    # Tooltip values are inserted as text by BokehJS (no "{safe}" format): a function named
    # "<img src=x onerror=...>" shows as those characters (tests/server/test_browser.py checks it).
    p.add_tools(HoverTool(renderers=[tasks, floor, hatched], tooltips=[
        ("function", "@function"), ("tasks", "@tasks"), ("duration", "@duration"), ("phases", "@phases"),
        ("bytes", "@bytes"), ("status", "@status"), ("gpu", "@gpu")]))
    p.add_tools(HoverTool(renderers=[blocks], tooltips=[("driver", "@label"), ("at", "@source")]))
    p.add_tools(HoverTool(renderers=[driver], tooltips=[("driver", "@label")]))
    # One legend entry per function, grouped in the browser from the "name" column, so it
    # grows as new functions stream in; drawn on the canvas (user text is never HTML there).
    p.add_layout(Legend(items=[LegendItem(label={"field": "name"}, renderers=[tasks])], location="top_left",
                        orientation="horizontal", name="eugo-legend"), "above")
    p.yaxis.ticker = list(range(n_lanes))
    p.yaxis.major_label_overrides = glyphs.lane_labels(n_lanes)
    p.ygrid.grid_line_color = None
    p.js_on_change("inner_width", CustomJS(args={"fig": p}, code=THEME_JS))
    return p, sources


class LiveView:
    """Counters and progress bar (one ipywidgets HTML), and the Bokeh timeline when ``bokeh_url`` is given."""

    def __init__(self, workers: int, t0: float, bokeh_url: str | None = None):
        import ipywidgets as w

        self.t0 = t0
        self.lanes = glyphs.Lanes(workers)
        self.palette = glyphs.Palette()
        self.phase_palette = glyphs.Palette(glyphs.PHASE_COLORS)
        self.counters = w.HTML(value="<i>starting...</i>")
        self.sources: dict[str, Any] | None = None
        self.figure: Any = None
        self.timeline_shown = False
        self.box: Any = self.counters  # no timeline: the counters widget alone (fewer widget models to create)
        if bokeh_url is not None:
            from jupyter_bokeh import BokehModel

            display.load_bokehjs(bokeh_url)
            self.figure, self.sources = _timeline_figure(self.lanes.n_lanes)
            self.box = w.VBox([self.counters, BokehModel(self.figure)])
            self.timeline_shown = True

    @property
    def n_lanes(self) -> int:
        """Lanes drawn so far (the driver's included)."""
        return self.lanes.n_lanes

    def show(self) -> LiveView:
        """Put the view in the cell's output."""
        display.show_widget(self.box, LIVE_TEXT)
        return self

    def close(self) -> None:
        """Take the view out of the cell's output (a cell that ran no task has no timeline to show)."""
        self.box.close()
        self.timeline_shown = False

    def _relabel(self) -> None:
        """New lanes (a replacement worker) or new labels (a worker died): redraw the y axis."""
        labels = self.lanes.labels()
        n = self.lanes.n_lanes
        p = self.figure
        p.y_range.start = n - 0.4
        p.yaxis[0].ticker.ticks = sorted(labels)
        p.yaxis[0].major_label_overrides = labels
        p.height = FIXED_HEIGHT_PX + LANE_HEIGHT_PX * n
        self.lanes.changed = False

    def _span(self, end: float) -> None:
        """Stretch the time axis to ``[0, end]`` (and make that what the reset tool returns to)."""
        r = self.figure.x_range
        end = max(float(end), 1e-3)
        if r.end != end:
            r.update(start=0.0, end=end, reset_start=0.0, reset_end=end)

    def update_driver(self, spans: Any) -> None:
        """Draw the driver's new submission spans (``Recorder.driver_spans_since``; writer thread only)."""
        if self.sources is not None:
            cols = glyphs.driver_columns(glyphs.driver_span_segments(spans, self.t0))
            if cols["left"]:
                self.sources["driver"].stream(cols)

    def update(self, chunk: Any, snapshot: Any) -> None:
        """Draw newly recorded rows (a recorder ``Chunk``) and the counters (writer thread only)."""
        if self.sources is not None and not snapshot.finished:
            self._span(snapshot.elapsed)
        if self.sources is not None and (len(chunk) or len(chunk.blocks["kind"])):
            tasks = glyphs.task_columns(chunk, self.t0, self.palette, lanes=self.lanes)
            for key, cols in (("tasks", tasks), ("hatched", glyphs.hatched(tasks)),
                              ("phases", glyphs.phase_columns(chunk, self.t0, self.phase_palette, lanes=self.lanes)),
                              ("blocks", glyphs.block_columns(chunk, self.t0, display.source_label))):
                if cols["left"]:
                    self.sources[key].stream(cols)
            if self.lanes.changed:
                self._relabel()
        self.counters.value = counters_html(snapshot)  # one message (traitlets sends none if unchanged)

    def final(self, trace: Any) -> None:
        """Once the cell ended: redraw from its trace, with the whole driver lane and the axis over the cell.

        The driver's own work is only known once the cell ended (it is what is left of the
        wall time), and the trace's clock starts when its region opened, a moment before the
        live view's: every source is redrawn from the trace so that all bars share its origin
        (past ``DENSITY_MAX_BARS`` task bars, as a density band).
        """
        if self.sources is None:
            return
        self.t0 = trace.t0
        lanes = glyphs.Lanes(trace.n_workers)
        tasks = glyphs.density(glyphs.task_columns(trace, trace.t0, self.palette, lanes=lanes), 0.0,
                               max(trace.wall_time, 1e-3))
        self.sources["tasks"].data = tasks
        self.sources["hatched"].data = glyphs.hatched(tasks)
        self.sources["phases"].data = glyphs.phase_columns(trace, trace.t0, self.phase_palette, lanes=lanes)
        self.sources["blocks"].data = glyphs.block_columns(trace, trace.t0, display.source_label)
        self.sources["driver"].data = glyphs.driver_columns(trace.driver)
        self._span(trace.wall_time)
