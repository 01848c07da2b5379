"""The Attempt's reading of the learner's namespace: a value left by an earlier cell is not this cell's answer."""

from __future__ import annotations

import pytest
from _exercise_cells import run_exercise

from eugo_lab.exercises.base import Attempt, NotYet, bound_names


def _attempt(before: dict, after: dict, assigned: frozenset[str] = frozenset()) -> Attempt:
    return Attempt("sizing", trace=None, namespace=after, before=before, assigned=assigned)


def test_a_value_left_by_an_earlier_cell_is_not_the_answer():
    with pytest.raises(NotYet, match="did not define `workers`"):
        _attempt({"workers": 12}, {"workers": 12}).require("workers")


def test_a_rerun_that_assigns_the_same_small_int_counts():
    # CPython shares small ints: a re-run cell computing the same worker count binds the very same object.
    a = _attempt({"workers": 12}, {"workers": 12}, bound_names("workers = 6 * 2\n"))
    assert a.require("workers") == 12


def test_bound_names():
    src = "import numpy as np\nfrom os import path\nfor i, (a, b) in enumerate([]): pass\ndef f(): y = 1\nz += 1\n"
    assert {"np", "path", "i", "a", "b", "f", "y", "z"} <= bound_names(src)
    assert bound_names("this is not python") == frozenset()


def test_compare_cell_summary_and_verdict_read_one_report(monkeypatch):
    # %%eugo --exercise --compare: the cell analyses its main trace once, with the 1-worker run as
    # baseline, and the checker grades that very Report (it used to analyse again, without the baseline).
    import eugo_lab.analysis
    from eugo_lab.cellrun import report as cell_report
    from eugo_lab.exercises import base


    seen: dict[str, object] = {}

    def check(a: Attempt):
        seen["verdict"] = a.report
        return a.passed("read the report")

    monkeypatch.setitem(base._REGISTRY, "one-report", base.Exercise("one-report", "none.ipynb", "one report", check))
    calls = []
    real_analyze, real_summarize = eugo_lab.analysis.analyze, cell_report.summarize

    def analyze(*a, **k):
        calls.append(k)
        return real_analyze(*a, **k)

    monkeypatch.setattr(eugo_lab.analysis, "analyze", analyze)

    def summarize(*a, **k):
        s = real_summarize(*a, **k)
        seen["summary"] = s.report
        return s

    monkeypatch.setattr(cell_report, "summarize", summarize)
    verdict = run_exercise("one-report", "_ = hpc.get([tiny.remote(i) for i in range(8)])",
                           setup="from eugo_lab import hpc\n@hpc.remote\ndef tiny(x):\n    return x + 1",
                           line="-w 2 --compare --no-live")
    assert verdict.passed
    assert seen["verdict"] is seen["summary"]
    assert seen["summary"].baseline_wall is not None  # the measured speedup story, in both
    assert len(calls) == 1, calls
