"""The ``partition-pandas`` exercise: the references pass; each typical mistake gets its own ``not yet``."""

from __future__ import annotations

import pandas as pd
import pytest
from _exercise_cells import code_in, run_exercise, tier_code, tier_words

from eugo_lab.exercises import catalog
from eugo_lab.exercises.catalog.pandas import compare

# The lesson's first cell, smaller: 100,000 readings of 60 meters (auto: 8 partitions on 2 workers).
SETUP = """
import numpy as np
import pandas as pd
from eugo_lab import hpc

rng = np.random.default_rng(7)
n = {rows}
meters = [f"site-{{s:02d}}/meter-{{m}}" for s in range(20) for m in range(3)]
volts, amps = rng.normal(230, 4, n).round(1), rng.gamma(2.0, 3.0, n).round(2)
readings = pd.DataFrame({{
    "time": pd.Timestamp("2026-11-01") + pd.to_timedelta(np.sort(rng.integers(0, 30 * 86_400, n)), unit="s"),
    "meter": pd.Categorical(rng.choice(meters, n)),
    "payload": [f"v={{v}};a={{a}}" for v, a in zip(volts, amps)],
    "status": rng.choice(["ok"] * 5 + ["warn:drift", "err:timeout"], n),
}})


def summarize(frame):
    ok = frame[~frame["status"].str.startswith("err")]
    parsed = ok["payload"].str.extract(r"v=(?P<volts>[\\d.]+);a=(?P<amps>[\\d.]+)").astype(float)
    kw = parsed["volts"] * parsed["amps"] / 1000
    hour = ok["time"].dt.hour
    per_row = pd.DataFrame({{"meter": ok["meter"], "kwh": kw / 60,
                            "evening_kw": kw.where((hour >= 17) & (hour < 21), 0.0),
                            "drift": ok["status"].eq("warn:drift")}})
    return per_row.groupby("meter", observed=True).agg(
        readings=("kwh", "size"), kwh=("kwh", "sum"),
        peak_evening_kw=("evening_kw", "max"), drift_warnings=("drift", "sum"))


def merge_summaries(parts):
    return pd.concat(parts).groupby(level=0, observed=True).agg(
        {{"readings": "sum", "kwh": "sum", "peak_evening_kw": "max", "drift_warnings": "sum"}})


hpc.init(workers={workers})
hpc.map_partitions(summarize, readings.iloc[:4_000], partitions=8)  # each worker imports pandas before the check
"""


def run(cell: str, rows: int = 100_000, workers: int = 2):
    return run_exercise("partition-pandas", cell, setup=SETUP.format(rows=rows, workers=workers),
                        line=f"-w {workers} --no-live")


def lines(v) -> str:
    text = v.to_text()
    assert text.splitlines()[0] == f"exercise partition-pandas: {'passed' if v.passed else 'not yet'}", text
    return text


@pytest.mark.parametrize("cell", [
    'result = hpc.map_partitions(summarize, readings, by="meter")\n',
    "result = hpc.map_partitions(summarize, readings, combine=merge_summaries)\n",
])
def test_references_pass(cell):
    v = run(cell)
    assert v.passed, v.to_text()
    text = lines(v)
    assert "result equals pandas' summarize(readings): 60 rows" in text
    assert "submitted with no wait between them, and packed on 2 workers by their bytes" in text
    assert " s " not in v.to_text(precise=False)  # no seconds in the compared text


def test_on_one_worker_the_reference_passes_on_the_replay_and_says_so():
    cell = 'result = hpc.map_partitions(summarize, readings, by="meter")\n'
    v = run(cell, workers=1)
    text = lines(v)
    assert v.passed, text
    assert "packed on 2 workers (this run had 1 worker, so the check counts 2) by their bytes" in text
    v = run("result = hpc.map_partitions(summarize, readings, partitions=1)\n", workers=1)
    assert "sent the whole DataFrame (100,000 rows) to one task" in lines(v)


def test_the_starter_sends_the_whole_frame_to_one_task():
    v = run("result = hpc.map_partitions(summarize, readings, partitions=1)\n")
    text = lines(v)
    assert "sent the whole DataFrame (100,000 rows) to one task" in text
    assert 'by="meter"' not in text and 'by=\"meter\"' in tier_code("partition-pandas", "no-partitions")
    assert code_in(text) == []


def test_row_partitions_without_a_combine_double_count():
    v = run('result = hpc.map_partitions(summarize, readings, partitions="auto")\n')
    text = lines(v)
    assert "`result` has 480 rows for 60 meters" in text and "appears 8 times" in text, text
    assert "not combined" in text and "combine by adding the partial counts" in tier_words("partition-pandas", "result")


def test_a_combine_that_counts_a_partition_twice_names_the_column():
    v = run("result = hpc.map_partitions(summarize, readings,\n"
            "                            combine=lambda parts: merge_summaries(parts + parts[:1]))\n")
    text = lines(v)
    assert "column `readings` differs from pandas for 60 of 60 meters" in text, text
    assert "yours add up to" in text and "pandas' to" in text


def test_a_combine_that_drops_partitions_names_the_missing_meters():
    v = run('result = hpc.map_partitions(summarize, readings, by="meter",\n'
            "                            combine=lambda parts: pd.concat(parts[:-1]))\n")
    text = lines(v)
    assert "`result` lacks" in text and "of the 60 meters pandas has" in text, text


def test_one_task_per_row_is_too_small():
    v = run("result = hpc.map_partitions(summarize, readings, partitions=len(readings), combine=merge_summaries)\n",
            rows=120)
    text = lines(v)
    assert "your run made 120 tasks of about 1 row each" in text, text
    assert "scheduling overhead" in text and "a partition needs at least 10,000 rows" in text


def test_hundreds_of_small_partitions_are_too_small():
    v = run("result = hpc.map_partitions(summarize, readings, partitions=200, combine=merge_summaries)\n")
    assert "your run made 200 tasks of about 500 rows each" in lines(v)


@pytest.mark.parametrize(("parts", "gather", "message"), [
    # one partition of 90% of the rows: it dominates however many workers there are
    ("[readings.iloc[:90_000], readings.iloc[90_000:]]", "hpc.get([task.remote(p) for p in parts])",
     "one task received 90% of the input bytes, 1.8x its fair share of 50%"),
    # equal partitions, but get() right after each submission: one at a time
    ("[readings.iloc[lo:lo + 12_500] for lo in range(0, len(readings), 12_500)]",
     "[hpc.get(task.remote(p)) for p in parts]", "the cell waited after each of the 8 tasks it submitted"),
])
def test_hand_made_partitions_that_do_not_share_the_work(parts, gather, message):
    cell = f"task = hpc.remote(summarize)\nparts = {parts}\nresult = merge_summaries({gather})\n"
    text = lines(run(cell))
    assert message in text, text


def test_pandas_in_the_notebook_ran_no_task():
    text = lines(run("result = summarize(readings)\n"))
    assert "no task ran on a worker" in text


def test_result_left_from_an_earlier_cell_is_not_this_cells_answer():
    text = lines(run("hpc.map_partitions(summarize, readings, by='meter')\n"))
    assert "did not define `result`" in text


def test_compare_messages():
    expected = pd.DataFrame({"n": [3, 4], "peak": [1.0, 2.0]}, index=pd.Index(["a", "b"], name="meter"))
    assert compare(expected.iloc[::-1], expected) is None  # order is not part of the result
    assert "list of 2 partial results" in compare([expected, expected], expected)
    assert "no column `peak`" in compare(expected[["n"]], expected)
    assert "has 1 meter(s) that pandas does not (e.g. 'c')" in compare(
        pd.concat([expected, expected.iloc[:1].rename(index={"a": "c"})]), expected)
    wrong = expected.assign(peak=[1.0, 5.0])
    assert "column `peak` differs from pandas for 1 of 2 meters, e.g. 'b'" in compare(wrong, expected)


def test_registered_with_its_lesson():
    ex = catalog.get("partition-pandas")
    assert ex.lesson == "01-distributed-python/07-parallel-pandas-in-practice.ipynb"
    assert ex.title == "Split a DataFrame across workers"


# A table of cells: honest variants pass; shortcuts (pandas' answer, not the tasks' results)
# fail and say what happened.
TABLE_PASS = {
    # partitions by meter, the summary sorted afterwards: the rows are the tasks' summaries in another order
    "honest-sorted-by-meter": ('result = hpc.map_partitions(summarize, readings, by="meter", partitions=4)'
                               ".sort_index()\n",
                               "the 4 tasks returned summarize of 4 partitions (by `meter`) holding every row"),
    "reference-joined": ('result = hpc.map_partitions(summarize, readings, by="meter")\n',
                         "`result` is the 8 tasks' summaries joined in task order"),
    "honest-rows-and-combine": ("result = hpc.map_partitions(summarize, readings, partitions=6, "
                                "combine=merge_summaries)\n",
                                "the 6 tasks returned summarize of 6 partitions (by rows) holding every row"),
}
TABLE_NOT_YET = {
    "shortcut-pandas-beside-a-decoy": ("hpc.map_partitions(summarize, readings.iloc[:20_000], partitions=2)\n"
                                       "result = summarize(readings)\n",
                                       "`result` was not computed from the tasks' results: the 2 summarize tasks"),
    "shortcut-tasks-summarize-the-global": ("def whole(part):\n    return summarize(readings)\n"
                                            "result = hpc.map_partitions(whole, readings, partitions=4,\n"
                                            "                            combine=lambda parts: parts[0])\n",
                                            "the 4 whole tasks returned values that are neither `result` joined"),
}


@pytest.mark.parametrize(("cell", "evidence"), list(TABLE_PASS.values()), ids=list(TABLE_PASS))
def test_table_passes(cell, evidence):
    v = run(cell)
    text = lines(v)
    assert v.passed and evidence in text, text


@pytest.mark.parametrize(("cell", "message"), list(TABLE_NOT_YET.values()), ids=list(TABLE_NOT_YET))
def test_table_not_yet(cell, message):
    v = run(cell)
    text = lines(v)
    assert not v.passed and message in text and v.mistake == "not-from-tasks", text
    assert code_in("\n".join(v.lines[:-1])) == []


def test_the_evidence_follows_the_partitions():
    # Another partition count, other numbers in the same sentences: computed from the trace.
    text = lines(run('result = hpc.map_partitions(summarize, readings, by="meter", partitions=3)\n'))
    assert "`result` is the 3 tasks' summaries joined in task order" in text, text
    assert "3 tasks, none under the row floor" in text and "3 of them submitted with no wait between them" in text
