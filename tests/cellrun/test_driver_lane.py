"""The driver lane: serializing, submitting, blocked and own work add up to the cell's wall time.

Golden traces built by hand (tests/trace_builder.py) with exact numbers, the summary's
first line and speedup rows, the findings that tell the driver's causes apart, and the
glyph columns (minimum width, density band, axis over the cell).
"""

from __future__ import annotations

import json

import pytest
from pytest import approx

from eugo_lab.analysis import analyze
from eugo_lab.analysis.breakdown import driver_time
from eugo_lab.cellrun.report import Run, summarize
from eugo_lab.render import glyphs
from eugo_lab.render.html import timeline_svg
from eugo_lab.tracing import Trace
from eugo_lab.tracing.driver import SPAN_MIN_S
from tests.trace_builder import TraceBuilder

MB32 = 32_000_000


def by_value_trace() -> Trace:
    """The 32 MB by-value cell: 6 submissions pickling 50 ms each, a get(), then 200 ms of the driver's own work."""
    b = TraceBuilder(workers=2)
    for i in range(6):
        s = 0.06 * i
        tid = b.task(worker=i % 2, start=s + 0.055, end=s + 0.05501, submit=s + 0.05, ready=s + 0.05,
                     received=s + 0.056, bytes_in=MB32) + 1
        b.submission(tid, s, s + 0.05, s + 0.052, MB32)
    b.block(0.36, 0.40, futures=6)
    return b.build(end=0.60)


def test_driver_breakdown_of_the_by_value_cell_is_exact():
    t = by_value_trace()
    d = t.driver_breakdown()
    assert d == approx({"serializing": 0.30, "submitting": 0.012, "blocked": 0.04, "own work": 0.248})
    assert sum(d.values()) == approx(t.wall_time)
    seg = t.driver
    assert seg["start"][0] == 0.0 and seg["end"][-1] == approx(0.60)  # from the cell's first line to its last
    assert list(seg["kind"][:3]) == ["serializing", "submitting", "own work"]
    assert seg["kind"][-1] == "own work" and seg["end"][-1] - seg["start"][-1] == approx(0.20)
    assert seg["label"][0] == "serializing the arguments of f() task 1 (32 MB): 50 ms"
    assert "blocked in get() on 6 futures at /home/student/loop.py:7" in seg["label"][seg["kind"] == "blocked"][0]
    df = t.driver_dataframe()
    assert df.groupby("kind")["duration"].sum().to_dict() == approx(
        {"serializing": 0.30, "submitting": 0.012, "blocked": 0.04, "own work": 0.248})
    # Saved and loaded, the lane is the same.
    again = Trace.from_dict(json.loads(json.dumps(t.to_dict())))
    assert again.driver_breakdown() == approx(d)


def test_a_cell_of_driver_work_only():
    b = TraceBuilder(workers=2)
    b.short_submissions(0.0, 0.0, 0)
    t = b.build(end=1.5)
    assert t.driver_breakdown() == {"serializing": 0.0, "submitting": 0.0, "blocked": 0.0, "own work": 1.5}
    assert list(t.driver["kind"]) == ["own work"]
    dt = driver_time(t)
    assert dt.driver_led and not dt.ran_in_parallel
    assert dt.sentence() == "100% of this cell ran in the driver: 100% its own work"


def test_a_cell_of_pure_tasks():
    b = TraceBuilder(workers=2)
    for w in range(2):
        b.task(worker=w, start=0.0, end=1.0)
    b.block(0.0, 1.0, futures=2)
    b.short_submissions(0.0002, 0.0001, 2)  # two submissions of 150 us: summed, no spans
    t = b.build(end=1.0)
    d = t.driver_breakdown()
    assert d == approx({"serializing": 0.0, "submitting": 0.0, "blocked": 1.0, "own work": 0.0})
    dt = driver_time(t)
    assert dt.side_by_side == approx(1.0) and dt.ran_in_parallel and not dt.driver_led
    assert dt.blocked_single == approx(0.0)


def test_short_submissions_move_from_own_work_to_their_kinds():
    b = TraceBuilder(workers=2)
    for i in range(10):
        b.task(worker=i % 2, start=0.1 + i * 0.01, end=0.1 + i * 0.01 + 0.005, submit=0.01 * i)
    b.short_submissions(0.003, 0.002, 10)
    t = b.build(end=0.3)
    assert t.driver_breakdown() == approx({"serializing": 0.003, "submitting": 0.002, "blocked": 0.0,
                                           "own work": 0.295})
    seg = t.driver
    assert list(seg["kind"]) == ["own work"] and int(seg["submits"][0]) == 10
    assert f"with 10 submissions of under {glyphs.fmt_seconds(SPAN_MIN_S)} each" in seg["label"][0]


def test_summary_leads_with_the_driver_and_shows_no_speedup():
    s = summarize([Run(2, by_value_trace())], error=None, options={})
    text = s.to_text(precise=True)
    # The get() waited while no two tasks ran: waiting on a single task is the driver's time too.
    assert text.splitlines()[1] == ("  100% of this cell ran in the driver: 50% serializing arguments, "
                                    "41% its own work, 7% waiting while at most one task ran, 2% submitting")
    assert "0.0x" not in text and "efficiency" not in text
    assert "tasks side by side 0 s (too little for a speedup to mean something)" in text
    assert "driver: serializing 300 ms, submitting 12 ms, blocked 40 ms, own work 248 ms" in text
    html = s.to_html()
    assert "eugo-driver-lead" in html and "0.0x" not in html and "efficiency" not in html
    assert s.report.finding("speedup") is None
    # The deterministic form has no timings, so it is unchanged.
    assert "driver" not in s.to_text(precise=False)


def test_the_automatic_optimizations_section_does_not_take_the_drivers_lead():
    # Every cell carries the automatic optimizations' report; only --optimize (or array operations) lead instead.
    from eugo_lab.render.text import lead_line

    s = summarize([Run(2, by_value_trace())], error=None, options={})
    s.optimizations = object()  # what the cell runner always sets
    assert lead_line(s).startswith("100% of this cell ran in the driver")
    s.options = {"optimize": True}
    assert lead_line(s) is None


def test_summary_of_parallel_tasks_keeps_its_speedup():
    b = TraceBuilder(workers=2)
    for w in range(2):
        b.task(worker=w, start=0.0, end=1.0)
    b.block(0.0, 1.0, futures=2)
    s = summarize([Run(2, b.build(end=1.0))], error=None, options={})
    assert "eugo-driver-lead" not in s.to_html()
    assert "speedup 2.0x" in s.to_text(precise=True) and "efficiency 100%" in s.to_text(precise=True)


def test_slow_submission_tells_pickling_from_building():
    # Pickling the 32 MB argument made the submissions slow: the repeated argument is the one cause, and its
    # finding says the slow loop is explained (one cause, one piece of advice: put it once).
    rep = analyze(by_value_trace())
    assert rep.finding("slow-submission") is None
    f = rep.finding("repeated-argument")
    assert f is not None and "slow-submission" in f.evidence["explains"] and "hpc.put" in f.advice
    # The same gaps without pickling: the driver was building the inputs.
    b = TraceBuilder(workers=2)
    for i in range(6):
        s = 0.06 * i
        tid = b.task(worker=i % 2, start=s + 0.055, end=s + 0.05501, submit=s + 0.05, ready=s + 0.05,
                     received=s + 0.056) + 1
        b.submission(tid, s + 0.0499, s + 0.05, s + 0.052)
    b.block(0.36, 0.40, futures=6)
    g = analyze(b.build(end=0.60)).finding("slow-submission")
    assert g is not None and g.evidence["cause"] == "building" and "building each input in the loop" in g.verdict


def test_glyphs_min_width_density_and_axis():
    t = by_value_trace()
    cols = glyphs.task_columns(t, t.t0, glyphs.Palette())
    assert all(m == approx((a + b) / 2) for m, a, b in zip(cols["mid"], cols["left"], cols["right"]))
    svg = timeline_svg(t, 3)
    assert "data-start='0' data-end='0.6'" in svg
    assert f"width='{float(glyphs.MIN_BAR_PX):.1f}'" in svg  # the 10 us tasks are drawn 3 px wide
    assert svg.count("class='eugo-driver'") == len(t.driver["kind"])
    # 50,000 tasks of 6 ms on 8 workers: a density band of at most DENSITY_PIXELS bars per lane.
    b = TraceBuilder(workers=8)
    for i in range(50_000):
        w, k = i % 8, i // 8
        b.task(worker=w, start=k * 0.007, end=k * 0.007 + 0.006)
    big = b.build()
    many = glyphs.task_columns(big, big.t0, glyphs.Palette())
    assert len(many["left"]) == 50_000  # too long to merge: one bar each
    band = glyphs.density(many, 0.0, big.wall_time)
    assert len(band["left"]) <= 8 * glyphs.DENSITY_PIXELS and sum(band["tasks"]) == 50_000
    assert any("tasks of f (they share a pixel)" in f for f in band["function"])
    assert len(timeline_svg(big, 9)) < 1_500_000


@pytest.mark.parametrize("tracing", [False, True])
def test_runtime_records_the_pickling_of_a_large_argument(tracing):
    import numpy as np

    from eugo_lab import hpc

    hpc.init(backend="threads", workers=2)
    try:
        f = hpc.remote(len)
        arr = np.ones(2_000_000)
        if not tracing:
            hpc.get([f.remote(arr) for _ in range(3)])
            rec = hpc.session.current().recorder
            assert not len(rec.driver.spans["kind"])  # nothing recorded outside a region
            return
        with hpc.trace() as region:
            hpc.get([f.remote(arr) for _ in range(3)])
        t = region.trace
        d = t.driver_breakdown()
        assert sum(d.values()) == approx(t.wall_time)
        ser = t.driver_spans["kind"] == 0
        assert int(ser.sum()) + t.meta["driver_short"]["submits"] == 3
    finally:
        hpc.shutdown()
