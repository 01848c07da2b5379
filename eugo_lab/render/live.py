"""The live view of a running ``%%eugo`` cell: counters, a progress bar and (in JupyterLab) the timeline.

It only draws: :class:`~eugo_lab.cellrun.live.LiveFeed` calls :meth:`LiveView.update` from
its single writer thread about 10 times a second with the events that arrived and a
counters snapshot. Each update costs at most three ``stream()`` calls (tasks, phases,
blocks, only when non-empty) and one widget change (counters and progress bar are one
HTML string).
"""

from __future__ import annotations

from typing import Any

from eugo_lab.render import display, glyphs
from eugo_lab.render.html import counters_html

#: Model names the browser test (and curious users) read through ``Bokeh.documents``.
TASKS_SOURCE = "eugo-timeline-tasks"
PHASES_SOURCE = "eugo-timeline-phases"
BLOCKS_SOURCE = "eugo-timeline-blocks"
LIVE_TEXT = "eugo live view (counters and timeline; needs a running kernel)"


LANE_HEIGHT_PX = 30
FIXED_HEIGHT_PX = 100  # axis, legend and toolbar


def _timeline_figure(n_lanes: int) -> tuple[Any, dict[str, Any]]:
    from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem, Range1d
    from bokeh.plotting import figure

    sources = {
        "tasks": ColumnDataSource(data=glyphs.empty(glyphs.TASK_COLUMNS), name=TASKS_SOURCE),
        "phases": ColumnDataSource(data=glyphs.empty(glyphs.PHASE_GLYPH_COLUMNS), name=PHASES_SOURCE),
        "blocks": ColumnDataSource(data=glyphs.empty(glyphs.BLOCK_GLYPH_COLUMNS), name=BLOCKS_SOURCE),
    }
    y_range = Range1d(n_lanes - 0.4, -0.6)  # driver lane on top
    p = figure(height=FIXED_HEIGHT_PX + LANE_HEIGHT_PX * n_lanes, sizing_mode="stretch_width", y_range=y_range,
               name="eugo-timeline", x_axis_label="seconds since the cell started",
               tools="xpan,xwheel_zoom,reset,save", toolbar_location="right")
    blocks = p.hbar(y="y", left="left", right="right", height=0.7, source=sources["blocks"], name="eugo-blocks",
                    fill_color=glyphs.BLOCK_COLOR, line_color=None, hatch_pattern="/", hatch_alpha=0.4)
    tasks = p.hbar(y="y", left="left", right="right", height=0.8, source=sources["tasks"], fill_color="color",
                   line_color="line_color", hatch_pattern="hatch", hatch_color="white", hatch_alpha=0.8,
                   name="eugo-tasks")
    phases = p.hbar(y="y", left="left", right="right", height=0.45, source=sources["phases"], fill_color="color",
                    fill_alpha=0.35, line_color=None)
    for r in (blocks, tasks, phases):
        # Nothing is ever selected or muted here: without those glyph copies the figure has 6
        # models fewer to serialize when the cell starts (BokehModel's cost grows with them).
        r.nonselection_glyph = None
        r.muted_glyph = None
    # Tooltip values are inserted as text by BokehJS (no "{safe}" format): a function named
    # "<img src=x onerror=...>" shows as those characters (tests/test_browser.py checks it).
    p.add_tools(HoverTool(renderers=[tasks], tooltips=[
        ("function", "@function"), ("duration", "@duration"), ("phases", "@phases"), ("bytes", "@bytes"),
        ("status", "@status")]))
    p.add_tools(HoverTool(renderers=[blocks], tooltips=[("driver", "@label"), ("at", "@source")]))
    # One legend entry per function, grouped in the browser from the "name" column, so it
    # grows as new functions stream in; drawn on the canvas (user text is never HTML there).
    p.add_layout(Legend(items=[LegendItem(label={"field": "name"}, renderers=[tasks])], location="top_left",
                        orientation="horizontal", name="eugo-legend"), "above")
    p.yaxis.ticker = list(range(n_lanes))
    p.yaxis.major_label_overrides = glyphs.lane_labels(n_lanes)
    p.ygrid.grid_line_color = None
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

    def update(self, chunk: Any, snapshot: Any) -> None:
        """Draw newly recorded rows (a recorder ``Chunk``) and the counters (writer thread only)."""
        if self.sources is not None and (len(chunk) or len(chunk.blocks["kind"])):
            for key, cols in (("tasks", glyphs.task_columns(chunk, self.t0, self.palette, lanes=self.lanes)),
                              ("phases", glyphs.phase_columns(chunk, self.t0, self.phase_palette, lanes=self.lanes)),
                              ("blocks", glyphs.block_columns(chunk, self.t0, display.source_label))):
                if cols["left"]:
                    self.sources[key].stream(cols)
            if self.lanes.changed:
                self._relabel()
        self.counters.value = counters_html(snapshot)  # one message (traitlets sends none if unchanged)
