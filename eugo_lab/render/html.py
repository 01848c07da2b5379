"""HTML renderers: the cell summary, a static SVG timeline, the speedup plot, counters, status.

Static HTML is what nbconvert, nbclient and a reopened notebook show (no JavaScript).
Every piece of user text (function names, phase names, sources, advice) goes through
``html.escape``: a function named ``<img src=x onerror=alert(1)>`` renders as text.
"""

from __future__ import annotations

from html import escape
from typing import Any

from eugo_lab.render import display, glyphs
from eugo_lab.render.text import arrays_only, driver_words, lead_line
from eugo_lab.units import capitalized, fmt_seconds

_STYLE = ("font-family: var(--jp-ui-font-family, sans-serif); font-size: 13px; line-height: 1.4; "
          "color: var(--jp-ui-font-color1, #222)")


PROGRESS_COLORS = {"running": "#1f77b4", "finished": "#2ca02c", "stopped": glyphs.FAILED_LINE}


def counters_html(snap: Any) -> str:
    """The live counters line and a progress bar (a :class:`~eugo_lab.cellrun.live_state.Snapshot`).

    One HTML string, so each update of the live view is one widget message (a separate
    progress widget doubled them, and every message wakes the kernel's IOPub thread and
    the front end while the cell's tasks run).
    """
    if snap.finished:
        state = f"stopped by {escape(snap.error)}" if snap.error else "finished"
    else:
        state = "running"
    parts = [f"<b>{state}</b>", f"done {snap.done}", f"running {snap.running}", f"pending {snap.pending}"]
    if snap.failed:
        parts.append(f"<span style='color:{glyphs.FAILED_LINE}'>failed {snap.failed}</span>")
    if snap.retried:
        parts.append(f"retried {snap.retried}")
    if snap.cancelled:
        parts.append(f"cancelled {snap.cancelled}")
    parts.append(f"elapsed {fmt_seconds(snap.elapsed)}")
    # A speedup so far only once tasks ran side by side long enough, by the summary's own rule:
    # before that (one task at a time, or the driver's own work) it would describe nothing.
    if snap.parallel:
        parts += [f"speedup so far {snap.speedup:.1f}x", f"efficiency {snap.efficiency:.0%}"]
    else:
        parts.append(f"task time so far {fmt_seconds(snap.busy)}")
    color = PROGRESS_COLORS["stopped" if snap.finished and snap.error else state]
    bar = (f"<div class='eugo-progress' style='height:6px;margin-top:3px;background:#e0e0e0'>"
           f"<div style='width:{snap.progress * 100:.1f}%;height:100%;background:{color}'></div></div>")
    return (f"<div class='eugo-live' style='{_STYLE}'><div class='eugo-counters'>" + " &middot; ".join(parts)
            + f"</div>{bar}</div>")


#: Past this many task bars the static SVG is drawn as a density band (see :func:`timeline_svg`).
SVG_MAX_BARS = 1000


def timeline_svg(trace: Any, n_lanes: int, width: int = 720, lane_h: int = 22) -> str:
    """A static SVG of the timeline (driver lane + one lane per worker), from the same glyph columns.

    The time axis spans the cell, from its first line to its last; every bar is at least
    ``MIN_BAR_PX`` wide, and a lane of more bars than ``DENSITY_MAX_BARS`` is a density band.
    Text and frame follow JupyterLab's theme (its CSS variables, light fallbacks).
    """
    t0 = trace.t0
    pal = glyphs.Palette()
    lanes = glyphs.Lanes(n_lanes - 1)
    lo, hi = 0.0, max(float(trace.wall_time), 0.0)
    tasks = glyphs.task_columns(trace, t0, pal, lanes=lanes)
    phases = glyphs.phase_columns(trace, t0, glyphs.Palette(glyphs.PHASE_COLORS), lanes=lanes)
    blocks = glyphs.block_columns(trace, t0, display.source_label)
    driver = glyphs.driver_columns(trace.driver) if hasattr(trace, "driver") else glyphs.empty(
        glyphs.DRIVER_GLYPH_COLUMNS)
    n_lanes = lanes.n_lanes
    if not (tasks["left"] or blocks["left"] or driver["left"]):
        return "<div><i>no tasks ran</i></div>"
    lefts, rights = tasks["left"] + blocks["left"], tasks["right"] + blocks["right"]
    if not hi > lo:  # a trace without its region's end: the drawn extent
        lo, hi = min(lefts + [0.0]), max(rights + [0.0])
    span = (hi - lo) or 1.0
    labels = lanes.labels({int(w): int(d) for w, d in getattr(trace, "meta", {}).get("gpu_workers", {}).items()})
    label_w = max(80, 6 * max(len(v) for v in labels.values()) + 8)  # "worker 0 (replacement, died)" fits
    plot_w = width - label_w - 10
    height = n_lanes * lane_h + 24
    # Static SVG bars carry their tooltip text: binned into columns as wide as the narrowest bar,
    # which loses nothing the picture shows and keeps 50,000 tasks to a few hundred kB.
    tasks = glyphs.density(tasks, lo, hi, max_bars=SVG_MAX_BARS, pixels=max(plot_w // glyphs.MIN_BAR_PX, 1))

    def x(v: float) -> float:
        return label_w + (min(max(v, lo), hi) - lo) / span * plot_w

    def rect(left: float, right: float, y: float, h: float, attrs: str, title: str) -> str:
        w = max(x(right) - x(left), glyphs.MIN_BAR_PX)
        at = min(x((left + right) / 2) - w / 2, label_w + plot_w - w) if w == glyphs.MIN_BAR_PX else x(left)
        return (f"<rect x='{max(at, label_w):.1f}' y='{y}' width='{w:.1f}' height='{h}' {attrs}>"
                f"<title>{escape(title)}</title></rect>")

    fg = "var(--jp-ui-font-color1, #222)"
    out = [f"<svg class='eugo-timeline' width='{width}' height='{height}' xmlns='http://www.w3.org/2000/svg' "
           f"style='font: 11px sans-serif; fill: {fg}' data-start='{lo:.6g}' data-end='{hi:.6g}'>",
           f"<rect x='{label_w}' y='0' width='{plot_w}' height='{n_lanes * lane_h}' fill='none' "
           "style='stroke: var(--jp-border-color2, #e0e0e0)'/>"]
    for y, label in labels.items():
        out.append(f"<text x='2' y='{y * lane_h + 15}'>{escape(label)}</text>")
    for i in range(len(driver["left"])):
        out.append(rect(driver["left"][i], driver["right"][i], 3, lane_h - 6,
                        f"fill='{driver['color'][i]}' class='eugo-driver' data-kind='{escape(driver['kind'][i])}'",
                        driver["label"][i]))
    for i in range(len(blocks["left"])):
        out.append(rect(blocks["left"][i], blocks["right"][i], 3, lane_h - 6,
                        f"fill='{glyphs.BLOCK_COLOR}' class='eugo-driver' data-kind='blocked'",
                        f"{blocks['label'][i]} at {blocks['source'][i]}"))
    for i in range(len(tasks["left"])):
        failed = tasks["hatch"][i] == "x"
        on_gpu = tasks["gpu"][i] != "-"
        title = (f"{tasks['function'][i]}: {tasks['duration'][i]}, {tasks['status'][i]}, phases {tasks['phases'][i]}, "
                 f"{tasks['bytes'][i]}" + (f", held {tasks['gpu'][i]}" if on_gpu else ""))
        out.append(rect(tasks["left"][i], tasks["right"][i], tasks["y"][i] * lane_h + 3, lane_h - 6,
                        f"fill='{tasks['color'][i]}' stroke='{tasks['line_color'][i]}' "
                        f"stroke-width='{2 if failed or on_gpu else 0.5}'", title))
    for i in range(len(phases["left"])):
        out.append(rect(phases["left"][i], phases["right"][i], phases["y"][i] * lane_h + 8, lane_h - 16,
                        f"fill='{phases['color'][i]}' fill-opacity='0.35'", phases["phase"][i]))
    out.append(f"<text x='{label_w}' y='{height - 4}'>{fmt_seconds(lo)}</text>")
    out.append(f"<text x='{width - 60}' y='{height - 4}'>{fmt_seconds(hi)}</text>")
    out.append("</svg>")
    legend = " ".join(f"<span style='color:{c}'>&#9632;</span> {escape(n)}" for n, c in pal.assigned.items())
    drawn = dict.fromkeys(driver["kind"])
    legend += "".join(f" <span style='color:{glyphs.DRIVER_COLORS[k]}'>&#9632;</span> driver {escape(k)}"
                      for k in drawn)
    if blocks["left"]:
        legend += f" <span style='color:{glyphs.BLOCK_COLOR}'>&#9632;</span> driver blocked"
    if any(g != "-" for g in tasks["gpu"]):
        legend += f" <span style='color:{glyphs.GPU_LINE}'>&#9633;</span> held a GPU"
    return "".join(out) + f"<div style='{_STYLE}'>{legend}</div>"


def speedup_svg(measured: list[tuple[int, float]], simulated: list[tuple[int, float]], width: int = 360,
                height: int = 240) -> str:
    """Speedup vs workers: measured (blue), ideal (dashed grey), simulated from the trace (orange)."""
    m = glyphs.speedup_points(measured)
    s = glyphs.speedup_points(simulated)
    ws = m["workers"] + s["workers"]
    if not ws:
        return ""
    top_w = max(ws)
    top = max([top_w] + m["speedup"] + s["speedup"]) * 1.05
    pad = 36

    def px(w: float, sp: float) -> tuple[float, float]:
        return (pad + w / top_w * (width - pad - 10), height - pad - sp / top * (height - pad - 10))

    def line(pts: dict, color: str, dash: str = "") -> str:
        xy = " ".join("{:.1f},{:.1f}".format(*px(w, sp)) for w, sp in zip(pts["workers"], pts["speedup"]))
        dots = "".join("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'/>".format(*px(w, sp), color)
                       for w, sp in zip(pts["workers"], pts["speedup"]))
        return f"<polyline points='{xy}' fill='none' stroke='{color}' stroke-width='2' {dash}/>" + dots

    ideal = {"workers": [0, top_w], "speedup": [0, top_w]}
    parts = [f"<svg class='eugo-speedup' width='{width}' height='{height}' xmlns='http://www.w3.org/2000/svg' "
             "style='font: 11px sans-serif'>",
             f"<line x1='{pad}' y1='{height - pad}' x2='{width - 10}' y2='{height - pad}' stroke='#444'/>",
             f"<line x1='{pad}' y1='10' x2='{pad}' y2='{height - pad}' stroke='#444'/>",
             line(ideal, "#999999", "stroke-dasharray='4 3'"), line(m, "#1f77b4")]
    if s["workers"]:
        parts.append(line(s, "#ff7f0e", "stroke-dasharray='2 2'"))
    for w in sorted(set(ws)):
        cx, _ = px(w, 0)
        parts.append(f"<text x='{cx - 3:.1f}' y='{height - pad + 14}'>{w}</text>")
    parts.append(f"<text x='{width / 2 - 20:.0f}' y='{height - 4}'>workers</text>")
    parts.append(f"<text x='2' y='12'>speedup (max {top / 1.05:.1f}x)</text></svg>")
    legend = ("<div><span style='color:#1f77b4'>&#9632; measured</span> <span style='color:#999'>&#9632; ideal</span>"
              + (" <span style='color:#ff7f0e'>&#9632; simulated from this trace</span>" if s["workers"] else "")
              + "</div>")
    return "".join(parts) + legend


def findings_html(findings: list) -> str:
    """Findings: verdict, next step, glossary term (all escaped); ``code`` is the finding's stable id."""
    if not findings:
        return ""
    items = []
    for f in findings:
        sev = escape(str(getattr(f, "severity", "")))
        code = escape(str(getattr(f, "code", "")))
        advice = getattr(f, "advice", None)
        saving = f.saving_text() if hasattr(f, "saving_text") else ""
        items.append(
            f"<li class='eugo-finding eugo-{sev}' data-code='{code}'><b>{escape(str(f.verdict))}</b>"
            + (f"<div>Next step: {escape(str(advice))}</div>" if advice else "")
            + (f"<div class='eugo-saves'>{escape(saving)}</div>" if saving else "")
            + f"<div><i>Glossary:</i> <code>%eugo glossary {escape(str(f.term))}</code></div></li>")
    return "<div><b>Findings</b><ul>" + "".join(items) + "</ul></div>"


def _arrays_html(s: Any) -> str:
    """A cell of array operations and no task: its offload report, led by one line of what ran."""
    from eugo_lab.render.offload import offload_view

    n = s.offload.n_ops()
    head = f"%%eugo &mdash; {n} array operation{'s' if n != 1 else ''}, no tasks"
    if s.error:
        head += f", <span style='color:{glyphs.FAILED_LINE}'>stopped by {escape(s.error)}</span>"
    return (f"<div class='eugo-summary' style='{_STYLE}'><div><b>{head}</b> "
            f"(wall time {fmt_seconds(s.report.wall_time)})</div>{offload_view(s.offload).to_html()}</div>")


def summary_html(s: Any) -> str:
    """The final summary of a ``%%eugo`` cell; includes the static timeline unless the live one was shown."""
    r = s.report
    if arrays_only(s):  # the offload report is the story: no task table, timeline, speedup or findings
        return _arrays_html(s)
    tasks, workers = ("task" if s.n_tasks == 1 else "tasks"), ("worker" if s.workers == 1 else "workers")
    head = f"%%eugo &mdash; {s.n_tasks} {tasks} on {s.workers} {workers} (backend {escape(s.backend)})"
    if s.error:
        head += f", <span style='color:{glyphs.FAILED_LINE}'>stopped by {escape(s.error)}</span>"
    measured = getattr(r, "measured_speedup", None)
    driver = getattr(s, "driver", None)
    if driver is not None and not driver.ran_in_parallel:  # a speedup here would measure the driver: say what ran
        speed = [("tasks side by side", f"{fmt_seconds(driver.side_by_side)} of {fmt_seconds(driver.wall_time)} "
                                        "(too little for a speedup to mean something)")]
    elif measured is not None:  # one speedup story: the measured one leads, the estimate is labelled
        speed = [("speedup", f"{measured:.1f}x (measured against 1 worker)"),
                 (f"speedup estimated from {getattr(r, 'estimate_basis', 'task time')}", f"{r.estimated_speedup:.1f}x"),
                 ("efficiency", f"{r.efficiency:.0%}")]
    elif hasattr(r, "estimated_speedup"):
        speed = [("speedup", f"{r.speedup:.1f}x (estimated from {getattr(r, 'estimate_basis', 'task time')})"),
                 ("efficiency", f"{r.efficiency:.0%}")]
    else:
        speed = [("speedup", f"{r.speedup:.1f}x"), ("efficiency", f"{r.efficiency:.0%}")]
    work = "task time" if getattr(r, "estimate_basis", "task time") == "task time" else "CPU time and waits"
    rows = [("wall time", fmt_seconds(r.wall_time)), (f"{work} (serial estimate)", fmt_seconds(r.serial_time)),
            *([("driver", escape(driver_words(driver)))] if driver is not None else []), *speed,
            ("functions", ", ".join(f"{n} &times;{c}" for n, c in ((escape(k), v) for k, v in s.functions.items()))),
            ("failed / retried", f"{s.failed} / {s.retried}" if getattr(s, "failures_reported", True)
             else f"not reported by {escape(s.backend)}")]
    unrecorded = s.not_recorded_words() if hasattr(s, "not_recorded_words") else None
    if unrecorded:
        label, _, what = unrecorded.partition(": ")
        rows.append((escape(label), escape(what)))
    if getattr(s, "gpu_tasks", None):
        from eugo_lab.render.text import gpu_words

        rows.append(("GPU tasks", escape(gpu_words(s.gpu_tasks, True, getattr(s, "gpus_detected", True)))))
    for w, sp in s.measured:
        rows.append((f"measured speedup, {w} worker{'s' if w != 1 else ''}", f"{sp:.1f}x"))
    table = "".join(f"<tr><td style='text-align:left'>{k}</td><td style='text-align:left'>{v}</td></tr>"
                    for k, v in rows)
    parts = [f"<div class='eugo-summary' style='{_STYLE}'><div><b>{head}</b></div>"]
    lead = lead_line(s)
    if lead:
        parts.append(f"<div class='eugo-driver-lead'><b>{escape(lead)}</b></div>")
    headline = getattr(r, "headline", None)
    if headline is not None:
        parts.append(f"<div class='eugo-biggest-win'><b>{escape(headline())}</b></div>")
    parts.append(f"<table>{table}</table>")
    unwaited = s.unwaited_text(True) if hasattr(s, "unwaited_text") else None
    if unwaited:
        parts.append(f"<div class='eugo-unwaited'>{escape(capitalized(unwaited))}</div>")
    if not s.live_timeline_shown:
        parts.append(timeline_svg(s.trace, s.workers + 1))
    if len(s.runs) > 1 and s.measured:
        parts.append(speedup_svg(s.measured, s.simulated))
    parts.append(findings_html(list(getattr(r, "findings", ()) or ())))
    if getattr(s, "offload", None) is not None and s.offload.rows:  # GPU offload: per-op report
        from eugo_lab.render.offload import offload_view

        parts.append(offload_view(s.offload).to_html())
    if getattr(s, "optimizations", None) is not None:  # --optimize: what the runtime did for you
        from eugo_lab.render.optimizations import optimizations_view

        parts.append(optimizations_view(s.optimizations).to_html())
    if s.saved_as:
        parts.append(f"<div>Trace saved in <code>{escape(s.saved_as)}</code>.</div>")
    if s.exported_to:
        parts.append(f"<div>Perfetto trace written to <code>{escape(s.exported_to)}</code> "
                     "(open it at ui.perfetto.dev).</div>")
    parts.append("</div>")
    return "".join(parts)


def hint_html(line: str) -> str:
    """A one-line note (such as how to get the live view), escaped, in the summary's font."""
    return f"<div class='eugo-hint' style='{_STYLE}; color: var(--jp-ui-font-color2, #666)'>{escape(line)}</div>"


def status_html(st: Any) -> str:
    """``%eugo status`` as a small table."""
    if not st.running_runtime:
        return f"<div style='{_STYLE}'>No runtime is running.</div>"
    workers = f"{st.workers} worker{'' if st.workers == 1 else 's'}"
    rows = [("backend", escape(st.backend)), ("workers", workers), ("tasks running", st.running),
            ("tasks queued", st.queued), ("tasks submitted", st.submitted), ("up", fmt_seconds(st.elapsed)),
            ("idle", fmt_seconds(st.idle)), ("cost", escape(st.cost_words()))]
    return (f"<table class='eugo-status' style='{_STYLE}'>"
            + "".join(f"<tr><td style='text-align:left'>{k}</td><td style='text-align:left'>{v}</td></tr>"
                      for k, v in rows) + "</table>")
