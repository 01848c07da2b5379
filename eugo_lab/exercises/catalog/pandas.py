"""Exercise ``partition-pandas`` (Course 1, lesson 7): a pandas analysis split across workers, same result as pandas.

The lesson defines ``readings`` (a DataFrame of meter readings) and ``summarize(frame)``, a
per-meter summary written for one machine. Starter cell (graded ``not yet``: the whole
DataFrame goes to one task, so one worker does everything)::

    %%eugo --exercise partition-pandas
    result = hpc.map_partitions(summarize, readings, partitions=1)

Reference solution (every meter's rows in one partition, so the partial summaries need no
second aggregation; ``partitions="auto"`` with a ``combine=`` that adds the partial counts
and sums passes too)::

    %%eugo --exercise partition-pandas
    result = hpc.map_partitions(summarize, readings, by="meter")

Criteria, in the order checked: ``result`` equals ``summarize(readings)`` computed here in
the notebook (the same labels once each, the same columns, the same values; rows compared
after sorting by label); the work ran as more than one task; no task was too small to pay
its fixed cost (more tasks than ``partitions="auto"`` makes, each under its
``MIN_PARTITION_ROWS`` floor); no task held more than ``DOMINANT_SHARE`` times its fair share
of the input bytes; the partitions were all submitted before the cell waited (the order of
the driver's own calls, not overlap in time); their input bytes, packed on 2 workers (this
run's workers when it had more) in submission order, keep them busy for at least
``MIN_REPLAYED_SPEEDUP``; and ``result`` came from the tasks' results: it is their partial
summaries joined in task order (the default combine), or the tasks returned exactly
``summarize`` of the partitions ``map_partitions`` makes of ``readings`` (by rows, or by the
summary's key), every row once. Every criterion is a count, bytes or a digest: the verdict is
the same on a busy machine.

What a custom ``combine=`` does with the partial results runs in the notebook and is not
traced: a combine that ignores them and recomputes pandas' answer cannot be told apart by its
value, which is pandas' answer either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from eugo_lab.analysis.findings import Code
from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import derivation, measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.hpc.partitions import MIN_PARTITION_ROWS, auto_partitions, split

DATA, ANALYSIS, RESULT = "readings", "summarize", "result"
# A partition holding more than 1.5x its fair share of the input: with 2 partitions, a 75/25
# split; with 8, one partition of 19% or more. Equal splits (by rows, or whole meters
# balanced by map_partitions(by=...)) stay within a few percent of their share.
DOMINANT_SHARE = 1.5
# Packed by their input bytes on 2 workers, 8 equal partitions give 2.0x, two unequal ones (75/25)
# 1.33x, three equal ones 1.5x. Unequal splits are caught by DOMINANT_SHARE first, so this bar
# only has to tell "kept both workers busy" from "one task" (1.0x).
MIN_REPLAYED_SPEEDUP = 1.3
_SOLUTION = "result = hpc.map_partitions(summarize, readings, by=\"meter\")"
HINTS = {
    DEFAULT: Hint("Split the DataFrame into partitions with map_partitions, keeping each meter's rows in one "
                  "partition, so every partition's summary is whole and the summaries stack into pandas' result.",
                  _SOLUTION),
    "result": Hint("Combine the partial results into pandas' answer: either keep each meter's rows in one "
                   "partition (partition by meter), or combine by adding the partial counts and sums (a maximum is "
                   "the max of the maxima; an average is not the average of averages).", _SOLUTION),
    "no-partitions": Hint("Hand summarize and the DataFrame to map_partitions, which splits the rows into "
                          "partitions and runs one task per partition on the workers.", _SOLUTION),
    "tiny": Hint("Use fewer, larger partitions: let map_partitions choose (automatic partitions give a few per "
                 "worker), or partition by meter.", _SOLUTION),
    "dominant": Hint("Make the partitions equal in size: map_partitions splits by rows evenly, and by meter "
                     "balances whole meters across partitions.", _SOLUTION),
    "not-from-tasks": Hint("Make `result` what map_partitions returns: it runs summarize on every partition of "
                           "readings and combines the partial summaries; a summary computed here in the notebook, "
                           "or tasks that summarize something else, do not count.", _SOLUTION),
    "serial": Hint("Submit every partition before waiting for any: map_partitions does, and returns the "
                   "combined result once all are done.", _SOLUTION),
}


def _rows_word(n: int) -> str:
    return f"{n:,} row{'' if n == 1 else 's'}"


def _values_differ(result: Any, expected: Any, thing: str) -> str | None:
    """The first column whose values differ, said with how many rows and the totals; None if all agree."""
    for col in expected.columns:
        ours, theirs = result[col].to_numpy(), expected[col].to_numpy()
        if ours.dtype.kind in "biuf" and theirs.dtype.kind in "biuf":
            bad = ~np.isclose(ours.astype(float), theirs.astype(float), rtol=1e-9, atol=1e-12, equal_nan=True)
            totals = f" (yours add up to {np.nansum(ours.astype(float)):,.6g}, pandas' to " \
                     f"{np.nansum(theirs.astype(float)):,.6g})"
        else:
            bad = ours != theirs
            totals = ""
        n = int(np.count_nonzero(bad))
        if n:
            first = result.index[int(np.argmax(bad))]
            return (f"column `{col}` differs from pandas for {n} of {len(expected)} {thing}s, e.g. {first!r}"
                    f"{totals}: the combine did not add up every partial result exactly once. Counts and "
                    "sums add across partitions, a maximum is the max of the maxima, and an average is not the "
                    "average of averages.")
    return None


def compare(result: Any, expected: Any) -> str | None:
    """Why ``result`` is not pandas' ``expected`` (a DataFrame or Series), or None when they agree.

    Rows are matched by label after sorting: the order partitions come back in is not part of
    the result. Duplicated labels (a summary stacked once per partition), missing or extra
    labels and columns, and differing values each get their own message.
    """
    import pandas as pd

    if isinstance(result, list):
        return (f"`result` is a list of {len(result)} partial results, not one {type(expected).__name__}: they "
                "were never combined into one (map_partitions does that by default).")
    if not isinstance(result, (pd.DataFrame, pd.Series)):
        return (f"`result` is a {type(result).__name__}; summarize(readings) gives a {type(expected).__name__}: "
                "`result` must hold the combined DataFrame.")
    if isinstance(expected, pd.Series):
        expected = expected.to_frame()
    if isinstance(result, pd.Series):
        result = result.to_frame()
    thing = str(expected.index.name or "row")
    counts = result.index.value_counts()
    if (counts > 1).any():
        label, times = counts.index[0], int(counts.iloc[0])
        return (f"`result` has {_rows_word(len(result))} for {len(counts)} {thing}s: {label!r} appears {times} "
                f"times, once per partition that held some of its rows, so the partial summaries were stacked, "
                f"not combined (pandas has one row per {thing}).")
    missing = expected.index.difference(result.index)
    if len(missing):
        return (f"`result` lacks {len(missing)} of the {len(expected)} {thing}s pandas has (e.g. {missing[0]!r}): "
                "rows were lost on the way: not every partition's result was combined.")
    extra = result.index.difference(expected.index)
    if len(extra):
        return (f"`result` has {len(extra)} {thing}(s) that pandas does not (e.g. {extra[0]!r}): summarize ran "
                "on something other than the partitions of readings.")
    lost = [c for c in expected.columns if c not in result.columns]
    if lost:
        return f"`result` has no column {', '.join(f'`{c}`' for c in lost)}; summarize(readings) has them."
    return _values_differ(result.loc[expected.index, list(expected.columns)], expected, thing)


@exercise("partition-pandas", lesson="01-distributed-python/07-parallel-pandas-in-practice.ipynb",
          title="Split a DataFrame across workers", hints=HINTS)
def partition_pandas(a: Attempt) -> Verdict:
    """Grade a partitioned pandas run: pandas' result, from several balanced tasks that overlapped."""
    import pandas as pd

    readings, summarize = a.namespace.get(DATA), a.namespace.get(ANALYSIS)  # from the lesson's first cell
    if not isinstance(readings, pd.DataFrame) or not callable(summarize):
        missing = f"`{DATA}` (a DataFrame)" if not isinstance(readings, pd.DataFrame) else f"`{ANALYSIS}`"
        raise NotYet(f"this notebook has no {missing} from the lesson's first cell (the kernel may have restarted): "
                     "run that cell again, then this one.")
    result = a.require(RESULT)
    expected = summarize(readings)  # the analysis as written, on one machine: the reference
    wrong = compare(result, expected)
    if wrong is not None:
        return a.not_yet(wrong, mistake="result")
    rows = len(readings)
    n = measure.tasks(a.trace)
    if n == 0:
        return a.not_yet("no task ran on a worker: summarize ran here in the notebook, on all the rows at once.",
                         mistake="no-partitions")
    if n == 1:
        return a.not_yet(f"your run sent the whole DataFrame ({_rows_word(rows)}) to one task, so only one worker "
                         "can work on it, however many there are.", mistake="no-partitions")
    workers = max(2, a.workers)
    nbytes = int(readings.memory_usage(index=True, deep=True).sum())
    per_task = rows // n
    if per_task < MIN_PARTITION_ROWS and n > auto_partitions(rows, nbytes, workers):
        # The Scheduling overhead finding weighs measured times: a detail, never part of the verdict's text.
        found = a.report.finding(Code.TASKS_TOO_SMALL)
        return a.not_yet(f"your run made {n:,} tasks of about {_rows_word(per_task)} each: every task pays a "
                         "fixed cost (scheduling overhead, plus pandas' own cost per call) that so few rows do not "
                         f"cover; a partition needs at least {MIN_PARTITION_ROWS:,} rows.", mistake="tiny",
                         details=(f"Scheduling overhead finding: {'yes' if found is not None else 'no'}",))
    u = measure.dispatch_units(a.trace)
    sizes = np.asarray(u.bytes_in, dtype=float)
    share = float(sizes.max() / sizes.sum()) if sizes.sum() > 0 else 0.0
    if share * len(sizes) > DOMINANT_SHARE:
        return a.not_yet(f"one task received {share:.0%} of the input bytes, {share * len(sizes):.1f}x its fair share "
                         f"of {1 / len(sizes):.0%}: that partition dominates, and the run waits for it while the other "
                         "workers idle.", mistake="dominant")
    fn = _main_function(a.trace)
    together = measure.submitted_together(a.trace, fn)
    packed = measure.packed_speedup(sizes.tolist(), workers)
    captured = a.report.finding(Code.CAPTURED_OBJECT)
    details = (f"{n} tasks of about {per_task:,} rows", f"largest {share:.0%} of the input bytes",
               f"packed by input bytes {fmt_x(packed)} on {workers} workers",
               f"{a.workers} worker{'s' if a.workers != 1 else ''} in this run",
               f"Captured object finding: {'yes' if captured is not None else 'no'}")
    if together < 2:
        return a.not_yet(f"the cell waited after each of the {n} tasks it submitted, before submitting the next, so "
                         "they ran one at a time.", mistake="serial", details=details)
    on = f"on {workers} workers" + (" (this run had 1 worker, so the check counts 2)" if a.workers < 2 else "")
    if packed < MIN_REPLAYED_SPEEDUP:
        return a.not_yet(f"the {n} partitions, handed out in the order submitted {on}, keep them busy for only "
                         f"{fmt_x(packed)} one worker's work by their input bytes, under "
                         f"{fmt_x(MIN_REPLAYED_SPEEDUP)}: the tasks cannot keep the workers busy.", mistake="dominant",
                         details=details)
    source = _derived(result, a.trace, fn, readings, summarize, expected)
    if source is None:
        carried = " (the Captured object finding: the task function carried a large object of the notebook)" \
            if captured is not None else ""
        return a.not_yet(f"`result` was not computed from the tasks' results: the {n} {fn} tasks returned values "
                         f"that are neither `result` joined in task order nor summarize of {n} partitions holding "
                         f"every row of `{DATA}` once{carried}.", mistake="not-from-tasks", details=details)
    return a.passed(f"result equals pandas' summarize(readings): {len(expected)} rows, the same values; {source}",
                    f"{n} tasks, none under the row floor, the largest with {share:.0%} of the input bytes (at most "
                    f"{DOMINANT_SHARE}x its share of {1 / n:.0%}); {together} of them submitted with no wait between "
                    "them, "
                    f"and packed {on} by their bytes they keep them busy for {fmt_x(packed)} one worker's work",
                    details=details)


def _main_function(trace: Any) -> str:
    """The function with the most tasks in the cell (what map_partitions ran on the partitions)."""
    counts = trace.task_counts()
    return max(counts, key=lambda f: counts[f]) if counts else ANALYSIS


def _derived(result: Any, trace: Any, fn: str, readings: Any, summarize: Any, expected: Any) -> str | None:
    """How ``result`` came from the ``fn`` tasks' results, said for the verdict; None when it did not.

    Joined in task order (the default combine), or the tasks returned summarize of a split of
    ``readings`` that map_partitions makes (each row in one partition): the partial summaries a
    combine was given. A split by the summary's key is tried when that key is a column.
    """
    n = len(trace.results(fn))
    if derivation.concatenated(result, trace, fn, name=RESULT):
        return f"`result` is the {n} tasks' summaries joined in task order"
    candidates = {"rows": lambda: [summarize(p) for p in split(readings, n)]}
    key = getattr(expected.index, "name", None)
    if key is not None and key in readings.columns:
        candidates[f"`{key}`"] = lambda: [summarize(p) for p in split(readings, n, by=key)]
    found = derivation.partials(trace, fn, candidates)
    if found is None:
        return None
    return (f"the {n} tasks returned summarize of {n} partitions (by {found}) holding every row of `{DATA}` once")
