"""The live view of a running ``%%eugo`` cell: counters, a progress bar and (in JupyterLab) the timeline.

It only draws: :class:`~eugo_lab.cellrun.live.LiveFeed` calls :meth:`LiveView.update` from
its single writer thread about 10 times a second with the events that arrived and a
counters snapshot. Each update costs at most three ``stream()`` calls (tasks, phases,
blocks, only when non-empty) and two widget changes.
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


def _timeline_figure(n_lanes: int) -> tuple[Any, dict[str, Any], Any]:
    from bokeh.models import ColumnDataSource, HoverTool, Range1d
    from bokeh.plotting import figure

    sources = {
        "tasks": ColumnDataSource(data=glyphs.empty(glyphs.TASK_COLUMNS), name=TASKS_SOURCE),
        "phases": ColumnDataSource(data=glyphs.empty(glyphs.PHASE_GLYPH_COLUMNS), name=PHASES_SOURCE),
        "blocks": ColumnDataSource(data=glyphs.empty(glyphs.BLOCK_GLYPH_COLUMNS), name=BLOCKS_SOURCE),
    }
    y_range = Range1d(n_lanes - 0.4, -0.6)  # driver lane on top
    p = figure(height=70 + 30 * n_lanes, sizing_mode="stretch_width", y_range=y_range, name="eugo-timeline",
               x_axis_label="seconds since the cell started", tools="xpan,xwheel_zoom,reset,save",
               toolbar_location="right")
    blocks = p.hbar(y="y", left="left", right="right", height=0.7, source=sources["blocks"],
                    fill_color=glyphs.BLOCK_COLOR, line_color=None, hatch_pattern="/", hatch_alpha=0.4)
    tasks = p.hbar(y="y", left="left", right="right", height=0.8, source=sources["tasks"], fill_color="color",
                   line_color="line_color", hatch_pattern="hatch", hatch_color="white", hatch_alpha=0.8)
    p.hbar(y="y", left="left", right="right", height=0.45, source=sources["phases"], fill_color="color",
           fill_alpha=0.35, line_color=None)
    p.add_tools(HoverTool(renderers=[tasks], tooltips=[
        ("function", "@function"), ("duration", "@duration"), ("phases", "@phases"), ("bytes", "@bytes"),
        ("status", "@status")]))
    p.add_tools(HoverTool(renderers=[blocks], tooltips=[("driver", "@label"), ("at", "@source")]))
    p.yaxis.ticker = list(range(n_lanes))
    p.yaxis.major_label_overrides = glyphs.lane_labels(n_lanes)
    p.ygrid.grid_line_color = None
    return p, sources, y_range


class LiveView:
    """Counters + progress bar (ipywidgets), and the Bokeh timeline when ``bokeh_url`` is given."""

    def __init__(self, workers: int, t0: float, bokeh_url: str | None = None):
        import ipywidgets as w

        self.t0 = t0
        self.n_lanes = workers + 1
        self.palette = glyphs.Palette()
        self.phase_palette = glyphs.Palette(glyphs.PHASE_COLORS)
        self.counters = w.HTML(value="<i>starting...</i>")
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="100%"))
        children: list[Any] = [self.counters, self.progress]
        self.sources: dict[str, Any] | None = None
        self.y_range: Any = None
        self.timeline_shown = False
        if bokeh_url is not None:
            from jupyter_bokeh import BokehModel

            display.load_bokehjs(bokeh_url)
            fig, self.sources, self.y_range = _timeline_figure(self.n_lanes)
            children.append(BokehModel(fig))
            self.timeline_shown = True
        self.box = w.VBox(children)

    def show(self) -> LiveView:
        """Put the view in the cell's output."""
        display.show_widget(self.box, LIVE_TEXT)
        return self

    def update(self, chunk: Any, snapshot: Any) -> None:
        """Draw newly recorded rows (a recorder ``Chunk``) and the counters (writer thread only)."""
        if self.sources is not None and (len(chunk) or len(chunk.blocks["kind"])):
            for key, cols in (("tasks", glyphs.task_columns(chunk, self.t0, self.palette)),
                              ("phases", glyphs.phase_columns(chunk, self.t0, self.phase_palette)),
                              ("blocks", glyphs.block_columns(chunk, self.t0))):
                if cols["left"]:
                    self.sources[key].stream(cols)
            lanes = glyphs.max_lane(chunk) + 1
            if lanes > self.n_lanes:  # a replacement worker got a new index
                self.n_lanes = lanes
                self.y_range.start = lanes - 0.4
        self.counters.value = counters_html(snapshot)
        self.progress.value = snapshot.progress
        if snapshot.finished:
            self.progress.bar_style = "danger" if snapshot.error else "success"
