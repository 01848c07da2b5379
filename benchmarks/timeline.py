"""The timeline's cost: tracing on/off on tiny tasks, and 50,000 tasks drawn in headless Chromium.

- *Tracing overhead*: ``.remote()`` of tiny tasks with the trace open (which times each
  submission for the driver lane) against the same loop untraced, alternated in pairs on
  one runtime because this machine's speed drifts; the median of the per-pair ratios.
- *50,000 tasks*: a hand-built trace of 50,000 tasks of 6 ms on 8 workers (too long to merge,
  so one bar each before the density band). The saved notebook: one cell whose outputs are
  the cell summary (text/plain and the static HTML timeline), its file size. The browser:
  the final Bokeh timeline of that trace in a standalone page (BokehJS inline), the time
  from loading the page to its first painted frame, minus the same page with an empty
  timeline (BokehJS's own start-up, which a notebook pays once per page).

    python -m benchmarks.timeline [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: What the targets allow: tracing at most 5% slower, a second to draw, 1 MB of outputs.
MAX_TRACING_RATIO = 1.05
MAX_DRAW_S = 1.0
MAX_NOTEBOOK_BYTES = 1_000_000


def _noop() -> None:
    return None


def tracing_overhead(tasks: int, pairs: int) -> dict[str, Any]:
    """Median of traced/untraced wall-time ratios over ``pairs`` alternated pairs of ``tasks`` tiny tasks."""
    from eugo_lab import hpc

    hpc.init(backend="local", workers=2)
    try:
        f = hpc.remote(_noop)
        hpc.get([f.remote() for _ in range(200)])  # warm up the workers

        def once(traced: bool) -> float:
            t = time.perf_counter()
            if traced:
                with hpc.trace():
                    hpc.get([f.remote() for _ in range(tasks)])
            else:
                hpc.get([f.remote() for _ in range(tasks)])
            return time.perf_counter() - t

        ratios = []
        for i in range(pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {k: once(k) for k in order}
            ratios.append(got[True] / got[False])
        return {"tasks": tasks, "pairs": pairs, "ratio": statistics.median(ratios), "min": min(ratios),
                "max": max(ratios)}
    finally:
        hpc.shutdown()


def big_trace(n: int = 50_000, workers: int = 8) -> Any:
    """``n`` tasks of 6 ms, one after another on each of ``workers`` workers."""
    from eugo_lab.tracing import Trace

    t0 = 1_700_000_000.0
    cols: dict[str, list] = {c: [] for c in ("task_id", "attempt", "function", "worker", "status", "batch",
                                             "bytes_in", "bytes_out", "submit", "ready", "start", "end",
                                             "received", "cpu", "deser", "ser", "runq")}
    for i in range(n):
        w, k = i % workers, i // workers
        s = t0 + k * 0.007
        for c, v in (("task_id", i + 1), ("attempt", 1), ("function", 0), ("worker", w), ("status", 0),
                     ("batch", -1), ("bytes_in", 100), ("bytes_out", 100), ("submit", s), ("ready", s),
                     ("start", s), ("end", s + 0.006), ("received", s + 0.006), ("cpu", 0.006), ("deser", 0.0),
                     ("ser", 0.0), ("runq", float("nan"))):
            cols[c].append(v)
    end = t0 + (n // workers + 1) * 0.007
    return Trace.from_columns(tasks=cols, phases={"row": [], "name": [], "start": [], "end": [], "cpu": [],
                                                  "runq": []},
                              blocks={"kind": [0], "start": [t0], "end": [end], "futures": [n], "source": [0]},
                              functions=["work"], phase_names=[], sources=["cell:3"], block_kinds=["wait"],
                              workers={w: ("bench", 1000 + w) for w in range(workers)},
                              meta={"backend": "local", "workers": workers, "region_start": t0, "region_end": end,
                                    "driver_short": {"serializing": 0.0, "submitting": 0.0, "submits": 0}})


def notebook_bytes(trace: Any, folder: Path) -> int:
    """Size of a saved notebook whose one cell shows the summary of ``trace`` (static HTML timeline)."""
    import nbformat

    from eugo_lab.cellrun.report import Run, summarize

    s = summarize([Run(trace.n_workers, trace)], error=None, options={})
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%%eugo\n...")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": s.to_text(),
                                                                 "text/html": s.to_html()})]
    nb.cells = [cell]
    path = folder / "timeline.ipynb"
    nbformat.write(nb, str(path))
    return path.stat().st_size


def _page(trace: Any | None, path: Path) -> None:
    """A standalone page with the final Bokeh timeline of ``trace`` (None: an empty one)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    from eugo_lab.render import glyphs
    from eugo_lab.render.live import _timeline_figure

    n = trace.n_workers + 1 if trace is not None else 9
    fig, sources = _timeline_figure(n)
    if trace is not None:
        lanes = glyphs.Lanes(trace.n_workers)
        cols = glyphs.task_columns(trace, trace.t0, glyphs.Palette(), lanes=lanes)
        sources["tasks"].data = band = glyphs.density(cols, 0.0, trace.wall_time)
        sources["hatched"].data = glyphs.hatched(band)
        sources["blocks"].data = glyphs.block_columns(trace, trace.t0)
        sources["driver"].data = glyphs.driver_columns(trace.driver)
        fig.x_range.update(start=0.0, end=trace.wall_time)
    fig.sizing_mode = "fixed"
    fig.width = 1000
    path.write_text(file_html(fig, INLINE, "timeline"))


def draw_seconds(trace: Any, folder: Path, repeats: int) -> dict[str, Any]:
    """Median seconds from loading the page to its first painted frame, 50,000 tasks minus an empty timeline."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from jupyter_fixtures import chromium

    full, empty = folder / "full.html", folder / "empty.html"
    _page(trace, full)
    _page(None, empty)
    wait = ("() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.index && Object.keys(Bokeh.index).length > 0")
    painted = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"
    times: dict[str, list[float]] = {"full": [], "empty": []}
    bars = 0
    with chromium() as browser:
        for _ in range(repeats):
            for name, path in (("empty", empty), ("full", full)):
                page = browser.new_page()
                page.goto(path.as_uri())
                page.wait_for_function(wait, timeout=60_000)
                times[name].append(page.evaluate(painted) / 1000)
                if name == "full":
                    bars = page.evaluate("() => Bokeh.documents[0].get_model_by_name('eugo-timeline-tasks')"
                                         ".data.left.length")
                page.close()
    full_s, empty_s = statistics.median(times["full"]), statistics.median(times["empty"])
    return {"draw_s": max(full_s - empty_s, 0.0), "page_s": full_s, "empty_page_s": empty_s, "bars": bars,
            "html_bytes": full.stat().st_size}


def run(quick: bool = False) -> dict[str, Any]:
    """All three measurements and their targets."""
    out: dict[str, Any] = {"tracing": tracing_overhead(2_000 if quick else 10_000, 6 if quick else 20)}
    trace = big_trace()
    with tempfile.TemporaryDirectory() as tmp:
        out["notebook_bytes"] = notebook_bytes(trace, Path(tmp))
        out["browser"] = draw_seconds(trace, Path(tmp), 1 if quick else 3)
    out["targets"] = [
        {"target": "tracing on/off, tiny tasks", "measured": out["tracing"]["ratio"], "limit": MAX_TRACING_RATIO,
         "unit": "x", "pass": out["tracing"]["ratio"] <= MAX_TRACING_RATIO},
        {"target": "50,000-task timeline drawn in Chromium", "measured": out["browser"]["draw_s"],
         "limit": MAX_DRAW_S, "unit": "s", "pass": out["browser"]["draw_s"] <= MAX_DRAW_S},
        {"target": "50,000-task cell's saved notebook", "measured": out["notebook_bytes"],
         "limit": MAX_NOTEBOOK_BYTES, "unit": "bytes", "pass": out["notebook_bytes"] <= MAX_NOTEBOOK_BYTES},
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer pairs and one browser load")
    res = run(ap.parse_args().quick)
    print(json.dumps(res, indent=1, default=float))
    for t in res["targets"]:
        print(f"{'PASS' if t['pass'] else 'MISS'}  {t['target']}: {t['measured']:.4g} {t['unit']} "
              f"(limit {t['limit']:.4g})")


if __name__ == "__main__":
    main()
