r"""Exercise ``partition-pandas`` (Course 1, lesson 8): a mean per site, combined across row partitions.

The lesson makes ``readings`` (a DataFrame of meter readings, meters named
``site-NN/meter-M``) and shows ``map_partitions`` with ``by=`` and with a ``combine=`` of sums
and maxima. The exercise asks for a statistic that does not add up: the mean power per site.
The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.readings``, in the
lesson the very readings its first cell makes (400,000 of 60 meters at 20 sites, from the same
NumPy seed); a passing cell is run again on a hidden case of 120,000-160,000 other readings from
12-18 other sites of 2-4 meters each. Starter cell (graded ``not yet``: the whole DataFrame goes
to one task, so one worker does everything)::

    %%eugo --exercise partition-pandas
    from eugo_lab import exercises

    p = exercises.problem("partition-pandas")   # this exercise's inputs: p.readings, the same readings as above

    def site_power(frame):
        ok = frame[~frame["status"].str.startswith("err")]
        volts_amps = ok["payload"].str.extract(r"v=(?P<volts>[\d.]+);a=(?P<amps>[\d.]+)").astype(float)
        kw = volts_amps["volts"] * volts_amps["amps"] / 1000
        site = ok["meter"].str.split("/").str[0].rename("site")
        return kw.groupby(site).mean().rename("mean_kw")


    result = hpc.map_partitions(site_power, p.readings, partitions=1)

Reference solution: each partition returns its partial sums and counts per site, and a
``combine=`` adds them site by site before dividing (a mean of the partitions' means is wrong
when partitions hold different numbers of a site's readings)::

    def site_power(frame):
        ...  # the same lines, then
        return kw.groupby(site).agg(["sum", "count"])


    def mean_power(parts):
        added = pd.concat(parts).groupby(level=0).sum()
        return (added["sum"] / added["count"]).rename("mean_kw")


    result = hpc.map_partitions(site_power, p.readings, combine=mean_power)

Partitioning a frame that has a ``site`` column by it (``by="site"``), so that every site's
rows are in one partition, passes too.

Criteria, on the readings the run was handed, in the order checked: ``result`` equals the mean
power per site of ``p.readings`` (the checker's own copy, never a ``readings`` of the notebook),
computed here in the notebook by :func:`site_means` (the same labels once each, the same
values; rows compared after sorting by label; a Series or a one-column DataFrame); the work
ran as more than one task; no task was too small to pay its fixed cost (more tasks than
``partitions="auto"`` makes, each under its ``MIN_PARTITION_ROWS`` floor); no task held more
than ``DOMINANT_SHARE`` times its fair share of the input bytes; the partitions were all
submitted before the cell waited (the order of the driver's own calls, not overlap in time);
their input bytes, packed on 2 workers (this run's workers when it had more) in submission
order, keep them busy for at least ``MIN_REPLAYED_SPEEDUP``; and ``result`` came from the
tasks' results: it is their results joined in task order (the default combine), or the tasks
returned exactly the cell's partition function applied to the partitions ``map_partitions``
makes of ``p.readings`` (by rows, by meter, or by site), every row once. Every criterion is a
count, bytes or a digest: the verdict is the same on a busy machine. Then the same on the hidden
case: the lesson's own ``readings`` in place of ``p.readings``, or site names or a
partition count fitted to the lesson's readings, do not carry over (the hidden case's rows
still make at least 10,000 rows a partition for up to 12 partitions, so a count that suits
both passes both).

When ``result`` is wrong and the cell's ``map_partitions`` call was given other rows than
``p.readings`` has (a sample, a slice), the verdict says so: the partitions missed readings,
whatever the combine did. Before ``result`` is traced to the tasks, the checker reads the
``map_partitions`` call off the trace (``Trace.partition_runs``: the partial results as get()
returned them and the combine the cell gave): ``result`` must not be what every task returned
(each returned the whole answer), nor one task's result alone (the others dropped), and, where
the combine applied again here to those partial results gives ``result``, it must give
something else with any one of them left out (a combine that ignores its parts returns an
answer made elsewhere). A cell that combines the partial results itself after
``map_partitions`` (``combine=list``, then its own function) is left to the criteria above.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.analysis.findings import Code
from eugo_lab.analysis.report import fmt_x
from eugo_lab.exercises import derivation, measure, problems
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, Verdict, exercise
from eugo_lab.hpc.partitions import MIN_PARTITION_ROWS, auto_partitions, split
from eugo_lab.units import fmt_bytes

# The input as the verdict names it (the problem's field), and the name the cell keeps its answer in.
DATA, RESULT = "p.readings", "result"
#: What the exercise asks for, named as the verdict names it.
WANTED = "the mean power per site"
# A partition holding more than 1.5x its fair share of the input: with 2 partitions, a 75/25
# split; with 8, one partition of 19% or more. Equal splits (by rows, or whole meters or sites
# balanced by map_partitions(by=...)) stay within a few percent of their share.
DOMINANT_SHARE = 1.5
# Packed by their input bytes on 2 workers, 8 equal partitions give 2.0x, two unequal ones (75/25)
# 1.33x, three equal ones 1.5x. Unequal splits are caught by DOMINANT_SHARE first, so this bar
# only has to tell "kept both workers busy" from "one task" (1.0x).
MIN_REPLAYED_SPEEDUP = 1.3
# The keys map_partitions(by=...) may have grouped the readings by, tried when the partial
# results were combined by a custom combine (the trace keeps the partials, not the combine).
KEYS = ("meter", "site")
# The lesson's readings: its first cell's NumPy seed, row count and meters (3 at each of 20 sites).
LESSON_NUMPY_SEED, LESSON_ROWS, LESSON_SITES, LESSON_METERS_PER_SITE = 7, 400_000, range(20), 3
# The hidden case: 30-40% of the lesson's rows, so a pass costs about 1.4x, and still at least 10,000 rows a
# partition for up to 12 partitions (a count that suits both cases passes both; "auto" makes 8 on 2 workers);
# other sites (numbers 20-99, never the lesson's 00-19) with another number of meters each, so neither the
# lesson's answer nor its site names carry over.
HIDDEN_ROWS = range(120_000, 160_001, 1_000)
HIDDEN_SITES, HIDDEN_SITE_NUMBERS, HIDDEN_METERS_PER_SITE = range(12, 19), range(20, 100), (2, 3, 4)


def make_readings(seed: int, rows: int, sites: list[int], meters_per_site: int) -> Any:
    """Meter readings as the lesson's first cell makes them: a month of them, a text payload each.

    The same draws from the same NumPy generator in the same order, so the lesson's seed, rows and
    meters give the very readings that cell makes (before its Parquet round trip, which keeps them).
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    n = rows
    meters = [f"site-{s:02d}/meter-{m}" for s in sites for m in range(meters_per_site)]
    volts, amps = rng.normal(230, 4, n).round(1), rng.gamma(2.0, 3.0, n).round(2)
    return pd.DataFrame({
        "time": pd.Timestamp("2026-11-01") + pd.to_timedelta(np.sort(rng.integers(0, 30 * 86_400, n)), unit="s"),
        "meter": pd.Categorical(rng.choice(meters, n)),
        # Python floats print as the cell's NumPy floats do (the same shortest digits), twice as fast.
        "payload": [f"v={v};a={a}" for v, a in zip(volts.tolist(), amps.tolist())],
        "status": rng.choice(["ok"] * 5 + ["warn:drift", "err:timeout"], n),
    })


@problems.declare("partition-pandas")
@dataclass(frozen=True, repr=False, eq=False)  # a DataFrame field: compared by identity, never element by element
class PartitionPandasProblem(problems.Problem):
    """The readings to summarise: the lesson's 400,000 in the lesson, 120,000-160,000 of other sites when hidden.

    A DataFrame cannot be made read-only as an array can: a cell that changes ``p.readings`` in
    place changes only its own copy, since the checker grades against a copy of its own.
    """

    readings: Any  # a pandas DataFrame (pandas is imported only where it is used)

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> PartitionPandasProblem:
        """The lesson's readings; hidden: a NumPy seed, row count, sites and meters per site drawn from ``rng``."""
        if not hidden:
            return cls(make_readings(LESSON_NUMPY_SEED, LESSON_ROWS, list(LESSON_SITES), LESSON_METERS_PER_SITE))
        seed, rows = rng.randrange(2**32), rng.choice(HIDDEN_ROWS)
        sites = sorted(rng.sample(HIDDEN_SITE_NUMBERS, rng.choice(HIDDEN_SITES)))
        return cls(make_readings(seed, rows, sites, rng.choice(HIDDEN_METERS_PER_SITE)))

    def fields(self) -> list[tuple[str, str]]:
        """``readings`` summarised (rows, meters, columns, size): a DataFrame's own repr is long."""
        r = self.readings
        size = fmt_bytes(int(r.memory_usage(index=True, deep=True).sum()), ".3g")
        return [("readings", f"DataFrame of {len(r):,} rows from {r['meter'].nunique()} meters "
                             f"(columns {', '.join(map(str, r.columns))}; {size})")]


def site_means(readings: Any) -> Any:
    """The answer, computed here: mean power (kW) per site over the readings that did not fail.

    The same steps as the lesson's starter cell: a site is the part of the meter's name before
    the slash, and power is volts times amps over 1000, parsed from the text payload.
    """
    ok = readings[~readings["status"].str.startswith("err")]
    volts_amps = ok["payload"].str.extract(r"v=(?P<volts>[\d.]+);a=(?P<amps>[\d.]+)").astype(float)
    kw = volts_amps["volts"] * volts_amps["amps"] / 1000
    site = ok["meter"].str.split("/").str[0].rename("site")
    return kw.groupby(site).mean().rename("mean_kw")


_SOLUTION = """def site_power(frame):
    ...  # the same lines as before, then each site's partial sum and count, which add up
    return kw.groupby(site).agg(["sum", "count"])


def mean_power(parts):
    added = pd.concat(parts).groupby(level=0).sum()  # add the partial sums and counts site by site
    return (added["sum"] / added["count"]).rename("mean_kw")  # then divide: the mean of every reading


result = hpc.map_partitions(site_power, p.readings, combine=mean_power)"""
HINTS = {
    DEFAULT: Hint("Split the readings into several partitions, let each partition return what adds up across "
                  "partitions (each site's sum of power and number of readings), and combine them: add the sums "
                  "and the counts site by site, then divide.", _SOLUTION),
    "result": Hint("A mean does not add up across partitions, and the mean of the partitions' means is wrong when "
                   "they hold different numbers of a site's readings. Have each partition return every site's sum "
                   "and count instead, and give map_partitions a combine that adds those up site by site and "
                   "divides at the end.", _SOLUTION),
    "rows": Hint("Give map_partitions the whole of p.readings, every row (no sample, no slice): its partitions "
                 "then hold every reading once, and the combined means are over all of them.", _SOLUTION),
    "no-partitions": Hint("Let map_partitions cut the readings into several partitions (leave the count to it) and "
                          "combine the partial results, so more than one worker has work.", _SOLUTION),
    "tiny": Hint("Use fewer, larger partitions: let map_partitions choose (automatic partitions give a few per "
                 "worker).", _SOLUTION),
    "dominant": Hint("Make the partitions equal in size: map_partitions splits by rows evenly, and by a key it "
                     "balances whole groups across partitions.", _SOLUTION),
    "not-from-tasks": Hint("Make `result` what map_partitions returns: it runs your function on every partition of "
                           "readings and combines the partial results; an answer computed here in the notebook, "
                           "or tasks that compute something else, do not count.", _SOLUTION),
    "serial": Hint("Submit every partition before waiting for any: map_partitions does, and returns the "
                   "combined result once all are done.", _SOLUTION),
    problems.CARRY_OVER: Hint("Give map_partitions p.readings, the exercise's inputs (not the lesson's `readings`), "
                              "and let the combine work out the sites from the partial results and the partition "
                              "count from the data (or leave it to map_partitions), instead of writing site names, "
                              "counts or answers into the cell.",
                              "p = exercises.problem(\"partition-pandas\")\n" + _SOLUTION),
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


def compare(result: Any, expected: Any, wanted: str = "summarize(readings)") -> str | None:
    """Why ``result`` is not pandas' ``expected`` (a DataFrame or Series), or None when they agree.

    ``wanted`` names ``expected`` in the messages. Rows are matched by label after sorting: the
    order partitions come back in is not part of the result. A Series (or a one-column
    DataFrame) is compared with a Series ``expected`` by its values, whatever its name.
    Duplicated labels (a result stacked once per partition), missing or extra labels and
    columns, and differing values each get their own message.
    """
    import pandas as pd

    if isinstance(result, list):
        return (f"`result` is a list of {len(result)} partial results, not one {type(expected).__name__}: they "
                "were never combined into one (map_partitions does that by default).")
    if not isinstance(result, (pd.DataFrame, pd.Series)):
        return (f"`result` is a {type(result).__name__}; {wanted} is a {type(expected).__name__}: "
                "`result` must hold the combined result.")
    if isinstance(expected, pd.Series):
        if isinstance(result, pd.DataFrame) and result.shape[1] == 1:
            result = result.iloc[:, 0]
        if isinstance(result, pd.Series):
            result = result.rename(expected.name)
        expected = expected.to_frame()
    if isinstance(result, pd.Series):
        result = result.to_frame()
    thing = str(expected.index.name or "row")
    counts = result.index.value_counts()
    if (counts > 1).any():
        label, times = counts.index[0], int(counts.iloc[0])
        return (f"`result` has {_rows_word(len(result))} for {len(counts)} {thing}s: {label!r} appears {times} "
                f"times, once per partition that held some of its rows, so the partial results were stacked, "
                f"not combined (pandas has one row per {thing}).")
    missing = expected.index.difference(result.index)
    if len(missing):
        return (f"`result` lacks {len(missing)} of the {len(expected)} {thing}s pandas has (e.g. {missing[0]!r}): "
                "rows were lost on the way: not every partition's result was combined.")
    extra = result.index.difference(expected.index)
    if len(extra):
        return (f"`result` has {len(extra)} {thing}(s) that pandas does not (e.g. {extra[0]!r}): the function ran "
                "on something other than the partitions of readings.")
    lost = [c for c in expected.columns if c not in result.columns]
    if lost:
        has = ", ".join(f"`{c}`" for c in result.columns)
        return (f"`result` has no column {', '.join(f'`{c}`' for c in lost)} (its columns: {has}); {wanted} has: "
                "the partial results were combined, but not turned into the final value.")
    return _values_differ(result.loc[expected.index, list(expected.columns)], expected, thing)


@exercise("partition-pandas", lesson="01-distributed-python/08-parallel-pandas-in-practice.ipynb",
          title="A mean per site, combined across partitions", hints=HINTS)
def partition_pandas(a: Attempt) -> Verdict:
    """Grade a partitioned pandas run: the mean per site pandas gives, from several balanced tasks."""
    readings = problems.given(a).readings  # the checker's own copy of the readings the run was handed
    result = a.require(RESULT)
    expected = site_means(readings)  # the analysis on one machine: the answer
    wrong = compare(result, expected, WANTED)
    if wrong is not None:
        run = _run_of(a.trace, _main_function(a.trace))
        if run is not None and run.rows != len(readings):  # what the partitions held, before how they were combined
            return a.not_yet(f"`result` is not {WANTED} of `{DATA}`: the partitions map_partitions made held "
                             f"{_rows_word(run.rows)} in all, and `{DATA}` has {_rows_word(len(readings))}, so the "
                             "tasks worked on other rows than every reading once and each site's mean misses "
                             "readings (however the partial results were combined).", mistake="rows")
        return a.not_yet(wrong, mistake="result")
    rows = len(readings)
    n = measure.tasks(a.trace)
    if n == 0:
        return a.not_yet("no task ran on a worker, so the means came from the notebook, not from partitions "
                         "that tasks worked on.", mistake="no-partitions")
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
    run = _run_of(a.trace, fn)
    faulty = _combine_fault(result, run, fn) if run is not None else None
    if faulty is not None:
        return a.not_yet(faulty, mistake="not-from-tasks", details=details)
    source = _derived(result, a.trace, fn, readings, _functions_named(a.namespace, fn))
    if source is None:
        carried = " (the Captured object finding: the task function carried a large object of the notebook)" \
            if captured is not None else ""
        return a.not_yet(f"`result` was not computed from the tasks' results: the {n} {fn} tasks returned values "
                         f"that are neither `result` joined in task order nor {fn} of {n} partitions holding "
                         f"every row of `{DATA}` once{carried}.", mistake="not-from-tasks", details=details)
    return a.passed(f"result equals {WANTED} computed by pandas in the notebook: {len(expected)} sites, the same "
                    f"values; {source}",
                    f"{n} tasks, none under the row floor, the largest with {share:.0%} of the input bytes (at most "
                    f"{DOMINANT_SHARE}x its share of {1 / n:.0%}); {together} of them submitted with no wait between "
                    "them, "
                    f"and packed {on} by their bytes they keep them busy for {fmt_x(packed)} one worker's work",
                    details=details)


def _run_of(trace: Any, fn: str) -> Any:
    """The cell's last ``hpc.map_partitions`` call whose tasks ran ``fn`` (a ``PartitionsRun``), or None."""
    runs = [r for r in getattr(trace, "partition_runs", ()) if r.function == fn]
    return runs[-1] if runs else None


def _same(value: Any, result: Any) -> bool:
    """``value`` is ``result``, or holds the same labels and values (a Series or DataFrame, compared as graded)."""
    if value is result:
        return True
    try:
        return compare(value, result) is None
    except Exception:  # noqa: BLE001 - a value pandas cannot compare is not the same
        return False


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def _ordinal(i: int) -> str:
    return _ORDINALS[i] if i < len(_ORDINALS) else f"{i + 1}th"


def _combine_fault(result: Any, run: Any, fn: str) -> str | None:
    """Why ``result`` did not come from combining the partial results ``run`` records; None when it did or can't tell.

    Read off the very results get() returned and the combine the cell gave map_partitions (the
    checker applies that combine again, here): a task that returned ``result`` itself did no
    partial work; ``result`` that is one task's result dropped the others; a combine that gives
    ``result`` again from the tasks' results but also with any one of them left out did not use
    them. A combine that does not give ``result`` again (the cell combined the results itself
    after map_partitions) is left to the later checks.
    """
    parts = list(run.results)
    n = len(parts)
    if n < 2:
        return None
    equal = [i for i, part in enumerate(parts) if _same(part, result)]
    if len(equal) == n:
        return (f"`result` was not computed from partial results: each of the {n} {fn} tasks returned the same "
                "value, `result` itself, so every task returned the whole answer instead of its own partition's "
                f"part of it, and the answer was made elsewhere than in the partitions of `{DATA}`.")
    if equal:
        i = equal[0]
        what = "is" if any(parts[j] is result for j in equal) else "equals"
        return (f"`result` {what} the {_ordinal(i)} {fn} task's own result alone (partition {i + 1} of {n}): the "
                f"combine kept one partial result and dropped the other {n - 1}, so `result` is not made from "
                "every partition's part.")

    def combined(values: list[Any]) -> Any:
        try:
            return run.combine(values)
        except Exception as exc:  # noqa: BLE001 - a combine that fails on other parts gives no answer there
            return exc

    if not _same(combined(list(parts)), result):
        return None
    kept = [i for i in range(n) if _same(combined(parts[:i] + parts[i + 1:]), result)]
    if not kept:
        return None
    name = getattr(run.combine, "__name__", "the combine")
    which = (f"with any one of the {n} partial results left out" if len(kept) == n else
             f"with the partial result of partition {kept[0] + 1} of {n} left out")
    return (f"`result` was not computed from the tasks' results: the combine ({name}), applied here again to "
            f"what the {n} {fn} tasks returned, gives `result`, and gives it too {which}, so it does not use "
            "them: the answer it returns was made elsewhere, not combined from the partitions.")


def _main_function(trace: Any) -> str:
    """The function with the most tasks in the cell (what map_partitions ran on the partitions)."""
    counts = trace.task_counts()
    return max(counts, key=lambda f: counts[f]) if counts else ""


def _functions_named(namespace: dict[str, Any], name: str) -> list[Any]:
    """The callables of the notebook named ``name`` (a def, or a lambda the trace calls ``<lambda>``)."""
    found: list[Any] = []
    for value in list(namespace.values()):
        plain = getattr(value, "__wrapped__", value)
        if callable(plain) and getattr(plain, "__name__", None) == name and all(plain is not f for f in found):
            found.append(plain)
    return found


def _partials(f: Any, parts: list[Any], readings: Any) -> list[Any]:
    """``f`` of each partition; none (so nothing matches) when ``f`` gives every partition what it gives the whole.

    A function that ignores its partition (it reads the notebook's ``readings`` instead) returns
    the whole answer from every task: its results are not partial results of the partitions.
    """
    out = [f(p) for p in parts]
    whole = f(readings)
    try:
        ignores = all(measure.same_within_tolerance(o, whole) if not hasattr(o, "equals") else o.equals(whole)
                      for o in out)
    except (TypeError, ValueError):
        ignores = False
    return [] if ignores else out


def _derived(result: Any, trace: Any, fn: str, readings: Any, functions: list[Any]) -> str | None:
    """How ``result`` came from the ``fn`` tasks' results, said for the verdict; None when it did not.

    Joined in task order (the default combine), or the tasks returned one of ``functions``
    (the notebook's callables named ``fn``) of a split of ``readings`` that map_partitions
    makes, each row in one partition: the partial results a combine was given. Splits by
    :data:`KEYS` are tried where the key is a column.
    """
    n = len(trace.results(fn))
    if derivation.concatenated(result, trace, fn, name=RESULT):
        return f"`result` is the {n} tasks' results joined in task order"
    candidates: dict[str, Any] = {}
    for i, f in enumerate(functions):
        candidates[f"rows/{i}"] = lambda f=f: _partials(f, split(readings, n), readings)
        for key in KEYS:
            if key in readings.columns:
                candidates[f"`{key}`/{i}"] = lambda f=f, key=key: _partials(f, split(readings, n, by=key), readings)
    found = derivation.partials(trace, fn, candidates)
    if found is None:
        return None
    by = found.split("/")[0]
    return f"the {n} tasks returned {fn} of {n} partitions (by {by}) holding every row of `{DATA}` once"
