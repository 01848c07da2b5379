"""The biggest-win line and each finding's saving in the %%eugo text and HTML, with user text escaped."""

from __future__ import annotations

import os
import sys

from eugo_lab.analysis import analyze
from eugo_lab.analysis.findings import Finding
from eugo_lab.analysis.report import Report
from eugo_lab.render import html, text

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "data"))
from make_golden import partial_blocking

EVIL = "<img src=x onerror=alert(1)>"


class _Summary:
    """The few fields of a CellSummary the renderers read."""

    backend, workers, n_tasks, functions, failed, retried, blocks, cancelled = "local", 2, 20, {EVIL: 20}, 0, 0, 7, 0
    error, runs, measured, simulated, saved_as, exported_to = None, [1], [], [], None, None
    options = {"gpu": "auto", "optimize": False}
    live_timeline_shown = True

    def __init__(self, report: Report):
        self.report = report


def _evil_report() -> Report:
    r = analyze(partial_blocking())
    evil = Finding("unbalanced-partitions", "Unbalanced partitions", "warning", f"{EVIL}() inputs differ",
                   f"split {EVIL}", saves=10.0, wall_after=0.5, fix=f"split {EVIL}()'s input into equal partitions")
    return Report(**{**r.__dict__, "findings": (evil, *r.findings)})


def test_text_shows_the_biggest_win_and_savings():
    out = text.summary_text(_Summary(analyze(partial_blocking())), precise=True)
    lines = out.splitlines()
    assert lines[1] == "  Biggest win: move the get() at cell line 4 out of the loop — predicted 3.1 s → 2.6 s"
    assert "speedup 1.5x (estimated from task time)" in out
    assert "    saves 498 ms: 3.1 s → 2.6 s predicted" in out
    assert "Biggest win" not in text.summary_text(_Summary(analyze(partial_blocking())))  # deterministic form


def test_html_escapes_the_headline_fix_and_findings():
    h = html.summary_html(_Summary(_evil_report()))
    assert "<img" not in h
    assert "Biggest win: split &lt;img src=x onerror=alert(1)&gt;()&#x27;s input into equal partitions" in h
    assert "<div class='eugo-saves'>saves 498 ms: 3.1 s → 2.6 s predicted</div>" in h
    assert "(estimated from task time)" in h
