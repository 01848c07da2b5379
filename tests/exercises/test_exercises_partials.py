"""``derivation.partials`` and ``measure.submitted_together`` on real traced runs of the local pool."""

from __future__ import annotations

import pandas as pd
import pytest

from eugo_lab import hpc
from eugo_lab.exercises import derivation, measure


def count_keys(frame):
    return frame.groupby("key", observed=True).size().to_frame("n")


counts = hpc.remote(count_keys)  # its tasks are traced as count_keys; the plain function makes the candidates


FRAME = pd.DataFrame({"key": pd.Categorical(list("abcabcabca")), "v": range(10)})


@pytest.fixture(scope="module", autouse=True)
def pool():
    hpc.init(workers=2)
    yield
    hpc.shutdown()


def traced(cell):
    with hpc.trace() as t:
        cell()
    return t.trace


def test_partials_names_the_candidate_the_tasks_returned():
    parts = [FRAME.iloc[:5], FRAME.iloc[5:]]
    trace = traced(lambda: hpc.get([counts.remote(p) for p in parts]))
    summarize = count_keys
    made = []
    candidates = {
        "thirds": lambda: made.append("thirds") or [summarize(FRAME.iloc[i:i + 4]) for i in (0, 4, 8)],
        "halves": lambda: made.append("halves") or [summarize(p) for p in parts],
        "never": lambda: made.append("never") or [],
    }
    assert derivation.partials(trace, "count_keys", candidates) == "halves"
    assert made == ["thirds", "halves"]  # made lazily, in order, and no further once one matched
    assert derivation.partials(trace, "count_keys", {"whole": lambda: [summarize(FRAME)] * 2}) is None
    assert derivation.partials(trace, "nothing", {"halves": lambda: [summarize(p) for p in parts]}) is None


def test_submitted_together_counts_submits_between_waits():
    def one_at_a_time():
        for i in range(4):
            hpc.get(counts.remote(FRAME.iloc[i:i + 3]))

    assert measure.submitted_together(traced(one_at_a_time), "count_keys") == 1
    trace = traced(lambda: hpc.get([counts.remote(FRAME.iloc[i:i + 3]) for i in range(4)]))
    assert measure.submitted_together(trace, "count_keys") == 4
    assert measure.submitted_together(trace, "nothing") == 0
