"""Report text: exact against golden traces, deterministic, free of machine-specific details."""

from __future__ import annotations

import os

import pytest
from tasks import nap
from trace_builder import TraceBuilder

from eugo_lab import hpc
from eugo_lab.analysis import analyze, simulate
from eugo_lab.tracing.trace import Trace
from eugo_lab.units import fmt_seconds, fmt_source

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
GOLDEN = ["golden_mixed", "golden_real_map", "golden_real_blocking", "golden_partial_blocking"]


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_report_text(name):
    trace = Trace.load(os.path.join(DATA, f"{name}.json"))
    with open(os.path.join(DATA, f"{name}.txt"), encoding="utf-8") as f:
        expected = f.read().rstrip("\n")
    assert analyze(trace).to_text() == expected


def test_golden_mixed_codes_and_order():
    r = analyze(Trace.load(os.path.join(DATA, "golden_mixed.json")))
    # By time saved: splitting the tail's tasks first; the tiny tasks' batching saves little here (a note).
    assert r.codes() == ["long-tail", "critical-path", "straggler", "io-bound", "io-bound", "speedup",
                         "tasks-too-small"]
    assert [f.severity for f in r.findings][-1] == "note"
    saves = [f.saves for f in r.findings[:5]]
    assert saves == sorted(saves, reverse=True)


def test_golden_real_blocking_points_at_the_loop():
    r = analyze(Trace.load(os.path.join(DATA, "golden_real_blocking.json")))
    f = r.finding("blocking")
    assert f.evidence["source"].startswith("/src/make_golden.py:")
    assert f.evidence["serialized_tasks"] == 6


def test_text_is_deterministic_and_survives_save_load(tmp_path):
    t = Trace.load(os.path.join(DATA, "golden_mixed.json"))
    text = analyze(t).to_text()
    assert analyze(t).to_text() == text
    p = str(tmp_path / "t.json")
    t.save(p)
    assert analyze(Trace.load(p)).to_text() == text
    assert repr(analyze(t)) == text


def test_text_has_no_hosts_pids_or_directories():
    b = TraceBuilder(workers=2)
    b.workers = {0: ("node-17.cluster", 424242), 1: ("node-18.cluster", 434343)}
    for k in range(5):
        t = 0.13 * k
        b.task("g", worker=k % 2, submit=t, ready=t, start=t + 0.01, end=t + 0.11, received=t + 0.12)
        b.block(t + 0.001, t + 0.121, source="/tmp/ipykernel_98765/2718281828.py:4")
    text = analyze(b.build()).to_text()
    assert "cell line 4" in text
    for secret in ("node-17", "424242", "98765", "/tmp", "ipykernel"):
        assert secret not in text


def test_repr_pretty():
    r = analyze(Trace.load(os.path.join(DATA, "golden_real_map.json")))

    class P:
        out = ""

        def text(self, s):
            P.out += s

    r._repr_pretty_(P(), False)
    assert P.out == r.to_text()


def test_display_source_and_seconds_format():
    assert fmt_source("/home/a/b/run.py:12") == "run.py:12"
    assert fmt_source("C:\\work\\run.py:3") == "run.py:3"
    assert fmt_source("/tmp/ipykernel_123/456.py:9") == "cell line 9"
    assert fmt_source("?") == "?"
    assert [fmt_seconds(x) for x in (0, 0.0000123, 0.0123, 1.234, 75, 7200)] == [
        "0 s", "12.3 us", "12.3 ms", "1.23 s", "1.25 min", "2 h"]
    assert fmt_seconds(0.9997) == "1000 ms" and fmt_seconds(None) == fmt_seconds(float("nan")) == "n/a"
    assert [fmt_seconds(x, 2) for x in (0.0123, 0.00082, 1.5, 123e-6)] == ["12 ms", "820 us", "1.5 s", "123 us"]


def test_report_renders_text_and_escaped_html():
    from eugo_lab.renderable import Renderable

    r = analyze(TraceBuilder(workers=2).build(end=1.0))
    assert isinstance(r, Renderable)
    bundle = r._repr_mimebundle_()
    assert bundle["text/plain"] == r.to_text()
    assert bundle["text/html"].startswith("<pre class='eugo-report'>") and "<img" not in bundle["text/html"]


def test_empty_trace():
    r = analyze(TraceBuilder(workers=2).build(end=1.0))
    assert r.wall_time == pytest.approx(1.0) and r.serial_time == 0 and r.speedup == 0
    assert r.codes() == []  # no task ran side by side with another: no speedup to speak of
    assert simulate(TraceBuilder(workers=2).build(end=1.0), [1, 2])[1].wall_time == pytest.approx(1.0)


# -- real runs ------------------------------------------------------------------------------------
def test_real_blocking_loop_is_found():
    hpc.init(backend="local", workers=2)
    hpc.get([nap.remote(0.001) for _ in range(4)])
    with hpc.trace() as t:
        for _ in range(5):
            hpc.get(nap.remote(0.02))  # the line the finding must point at
    line = test_real_blocking_loop_is_found.__code__.co_firstlineno + 5
    r = analyze(t.trace)
    f = r.finding("blocking")
    assert f is not None, r.to_text()
    assert f.evidence["source"].endswith(f"test_analysis_report.py:{line}")
    assert f"test_analysis_report.py:{line}" in f.verdict
    assert r.critical_path.fraction > 0.8


def test_real_submit_all_then_get_is_not_blocking():
    hpc.init(backend="local", workers=2)
    hpc.get([nap.remote(0.001) for _ in range(4)])
    with hpc.trace() as t:
        futs = [nap.remote(0.02) for _ in range(6)]
        for f in futs:
            hpc.get(f)  # one future at a time, but all were submitted first: fine
    r = analyze(t.trace)
    assert "blocking" not in r.codes(), r.to_text()
    assert r.speedup > 1.2
