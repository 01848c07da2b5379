"""The ``partition-pandas`` exercise: a mean per site, combined across partitions.

The references and honest variants pass; each typical mistake and shortcut gets its own
``not yet``, naming what happened, with hint tiers of its own.
"""

from __future__ import annotations

import pandas as pd
import pytest
from _exercise_cells import code_in, not_yet_for, run_exercise, tier_code, tier_words

from eugo_lab.exercises import catalog
from eugo_lab.exercises.catalog.pandas import compare, site_means

# The lesson's readings, handed out by the checker (p.readings: 400,000 readings of 60 meters at 20 sites; auto: 8
# partitions on 2 workers), and its functions. Every cell takes the readings from p: a passing cell is run again on a
# hidden case (tests/exercises/test_variants_course1.py), where only p is rebound.
SETUP = """
import pandas as pd
from eugo_lab import exercises, hpc

p = exercises.problem("partition-pandas")


def kw_and_site(frame):
    ok = frame[~frame["status"].str.startswith("err")]
    volts_amps = ok["payload"].str.extract(r"v=(?P<volts>[\\d.]+);a=(?P<amps>[\\d.]+)").astype(float)
    return volts_amps["volts"] * volts_amps["amps"] / 1000, ok["meter"].str.split("/").str[0].rename("site")


def site_power(frame):
    kw, site = kw_and_site(frame)
    return kw.groupby(site).mean().rename("mean_kw")


hpc.init(workers={workers})
hpc.map_partitions(site_power, p.readings.iloc[:4_000], partitions=8)  # each worker imports pandas before the check
"""
# The reference: partial sums and counts per site, added up site by site, then divided.
PARTS = """
def site_parts(frame):
    kw, site = kw_and_site(frame)
    return kw.groupby(site).agg(["sum", "count"])


def mean_power(parts):
    added = pd.concat(parts).groupby(level=0).sum()
    return (added["sum"] / added["count"]).rename("mean_kw")


"""
REFERENCE = PARTS + "result = hpc.map_partitions(site_parts, p.readings, combine=mean_power)\n"
STARTER = "result = hpc.map_partitions(site_power, p.readings, partitions=1)\n"


def run(cell: str, workers: int = 2, extra: str = ""):
    return run_exercise("partition-pandas", cell, setup=SETUP.format(workers=workers) + extra,
                        line=f"-w {workers} --no-live")


def lines(v) -> str:
    text = v.to_text()
    assert text.splitlines()[0] == f"exercise partition-pandas: {'passed' if v.passed else 'not yet'}", text
    return text


PASS = {
    "reference": (REFERENCE, "the 8 tasks returned site_parts of 8 partitions (by rows) holding every row"),
    # every site's rows in one partition: the starter's mean is then exact, and the results stack
    "honest-by-site": ('with_site = p.readings.assign(site=p.readings["meter"].str.split("/").str[0])\n'
                       'result = hpc.map_partitions(site_power, with_site, by="site")\n',
                       "`result` is the 8 tasks' results joined in task order"),
    # other names, another partition count, a combine written as a weighted mean of the partial means
    "honest-weighted-means": ("def means_and_counts(frame):\n"
                              "    kw, site = kw_and_site(frame)\n"
                              "    return kw.groupby(site).agg(['mean', 'size'])\n\n"
                              "def weighted(parts):\n"
                              "    both = pd.concat(parts)\n"
                              "    both['kw'] = both['mean'] * both['size']\n"
                              "    added = both.groupby(level=0)[['kw', 'size']].sum()\n"
                              "    return added['kw'] / added['size']\n\n"
                              "result = hpc.map_partitions(means_and_counts, p.readings, partitions=6, "
                              "combine=weighted)\n",
                              "the 6 tasks returned means_and_counts of 6 partitions (by rows)"),
    # the partial results taken back as a list, combined here by the cell's own function after map_partitions
    "honest-combined-after": (PARTS + "parts = hpc.map_partitions(site_parts, p.readings, combine=list)\n"
                              "result = mean_power(parts)\n",
                              "the 8 tasks returned site_parts of 8 partitions (by rows) holding every row"),
}
NOT_YET = {
    "starter-one-task": (STARTER, "no-partitions", "sent the whole DataFrame (400,000 rows) to one task"),
    "means-stacked": ('result = hpc.map_partitions(site_power, p.readings, partitions="auto")\n', "result",
                      "`result` has 160 rows for 20 sites: 'site-"),
    "means-by-meter-stacked": ('result = hpc.map_partitions(site_power, p.readings, by="meter")\n', "result",
                               "so the partial results were stacked, not combined"),
    "mean-of-means": ("result = hpc.map_partitions(site_power, p.readings,\n"
                      "                            combine=lambda parts: pd.concat(parts).groupby(level=0).mean())\n",
                      "result", "column `mean_kw` differs from pandas for"),
    "sums-never-divided": (PARTS + "result = hpc.map_partitions(site_parts, p.readings,\n"
                           "    combine=lambda parts: pd.concat(parts).groupby(level=0).sum())\n",
                           "result", "`result` has no column `mean_kw` (its columns: `sum`, `count`)"),
    "tiny-partitions": (PARTS + "result = hpc.map_partitions(site_parts, p.readings, partitions=200, "
                        "combine=mean_power)\n", "tiny", "your run made 200 tasks of about 2,000 rows each"),
    "one-dominant-partition": (PARTS + "task = hpc.remote(site_parts)\n"
                               "parts = [p.readings.iloc[:360_000], p.readings.iloc[360_000:]]\n"
                               "result = mean_power(hpc.get([task.remote(p) for p in parts]))\n", "dominant",
                               "one task received 90% of the input bytes, 1.8x its fair share of 50%"),
    "waits-for-each-partition": (PARTS + "task = hpc.remote(site_parts)\n"
                                 "parts = [p.readings.iloc[lo:lo + 50_000]\n"
                                 "         for lo in range(0, len(p.readings), 50_000)]\n"
                                 "result = mean_power([hpc.get(task.remote(p)) for p in parts])\n", "serial",
                                 "the cell waited after each of the 8 tasks it submitted"),
    "pandas-in-the-notebook": ("result = site_power(p.readings)\n", "no-partitions", "no task ran on a worker"),
    # shortcuts: the right answer, not made of this cell's tasks' results
    "shortcut-pandas-beside-a-decoy": ("hpc.map_partitions(site_power, p.readings.iloc[:20_000], partitions=2)\n"
                                       "result = site_power(p.readings)\n", "not-from-tasks",
                                       "`result` was not computed from the tasks' results: the 2 site_power tasks"),
    "shortcut-tasks-read-the-global": ("def whole(part):\n    return site_power(p.readings)\n"
                                       "result = hpc.map_partitions(whole, p.readings, partitions=4,\n"
                                       "                            combine=lambda parts: parts[0])\n",
                                       "not-from-tasks", "each of the 4 whole tasks returned the same value, "
                                       "`result` itself, so every task returned the whole answer"),
    # the same with an answer computed here in the notebook, under the lesson's name and as a lambda
    "shortcut-site-power-returns-the-notebook-s-answer": (
        "answer = site_power(p.readings)\n\ndef site_power(frame):\n    return answer\n\n"
        "result = hpc.map_partitions(site_power, p.readings, partitions=8, combine=lambda parts: parts[0])\n",
        "not-from-tasks", "each of the 8 site_power tasks returned the same value, `result` itself"),
    "shortcut-lambda-returns-the-notebook-s-answer": (
        "answer = site_power(p.readings)\n"
        "result = hpc.map_partitions(lambda f: answer, p.readings, partitions=8, combine=lambda parts: parts[0])\n",
        "not-from-tasks", "each of the 8 <lambda> tasks returned the same value, `result` itself"),
    # one task's own result kept, the others dropped: the first partition's means (wrong values, so first the
    # result check) are not the answer; here the tasks return the answer only from the first partition
    "shortcut-combine-keeps-one-task-s-result": (
        PARTS + "answer = site_power(p.readings)\n\ndef first_or_parts(frame):\n"
        "    return answer if frame.index[0] == 0 else site_parts(frame)\n\n"
        "result = hpc.map_partitions(first_or_parts, p.readings, partitions=8, combine=lambda parts: parts[0])\n",
        "not-from-tasks", "`result` is the first first_or_parts task's own result alone (partition 1 of 8): the "
        "combine kept one partial result and dropped the other 7"),
    # real partial results, thrown away by a combine that returns an answer computed here
    "shortcut-combine-ignores-the-parts": (
        "answer = site_power(p.readings)\n"
        "result = hpc.map_partitions(site_power, p.readings, partitions=8, combine=lambda parts: answer)\n",
        "not-from-tasks", "the combine (<lambda>), applied here again to what the 8 site_power tasks returned, "
        "gives `result`, and gives it too with any one of the 8 partial results left out, so it does not use them"),
    # sums and counts added once each, but of every tenth reading only: the partitions missed readings
    "sample-of-the-rows": (PARTS + "result = hpc.map_partitions(site_parts, p.readings.iloc[::10], partitions=8, "
                           "combine=mean_power)\n", "rows",
                           "the partitions map_partitions made held 40,000 rows in all, and `p.readings` has "
                           "400,000 rows, so the tasks worked on other rows than every reading once"),
    "shortcut-copied-from-an-earlier-cell": ("hpc.map_partitions(site_power, p.readings.iloc[:30_000],\n"
                                             "                   partitions=3)\nresult = earlier\n", "not-from-tasks",
                                             "the 3 site_power tasks returned values that are neither"),
}
# An earlier cell that computed the answer honestly, for the row that copies it.
EARLIER = PARTS + "earlier = hpc.map_partitions(site_parts, p.readings, combine=mean_power)\n"


@pytest.mark.parametrize(("cell", "evidence"), list(PASS.values()), ids=list(PASS))
def test_passes(cell, evidence):
    v = run(cell)
    text = lines(v)
    assert v.passed, text
    assert "result equals the mean power per site computed by pandas in the notebook: 20 sites" in text
    assert evidence in text, text
    assert "submitted with no wait between them, and packed on 2 workers by their bytes" in text
    assert " s " not in text  # no seconds in the compared text


@pytest.mark.parametrize(("cell", "mistake", "message"), list(NOT_YET.values()), ids=list(NOT_YET))
def test_not_yet(cell, mistake, message):
    v = run(cell, extra=EARLIER if "earlier" in cell else "")
    not_yet_for(v, mistake, message)


def test_on_one_worker_the_reference_passes_on_the_replay_and_says_so():
    v = run(REFERENCE, workers=1)
    text = lines(v)
    assert v.passed, text
    assert "packed on 2 workers (this run had 1 worker, so the check counts 2) by their bytes" in text
    assert "sent the whole DataFrame (400,000 rows) to one task" in lines(run(STARTER, workers=1))


def test_the_hints_teach_sums_and_counts_without_handing_over_the_code_first():
    words = tier_words("partition-pandas", "result")
    assert "sum and count" in words and code_in(words) == []
    assert 'agg(["sum", "count"])' in tier_code("partition-pandas", "result")


def test_result_left_from_an_earlier_cell_is_not_this_cells_answer():
    text = lines(run("hpc.map_partitions(site_power, p.readings, partitions=1)\n", extra=EARLIER.replace("earlier",
                                                                                                       "result")))
    assert "did not define `result`" in text


def test_the_evidence_follows_the_partitions():
    # Another partition count, other numbers in the same sentences: computed from the trace.
    text = lines(run(PARTS + "result = hpc.map_partitions(site_parts, p.readings, partitions=3, combine=mean_power)\n"))
    assert "the 3 tasks returned site_parts of 3 partitions (by rows)" in text, text
    assert "3 tasks, none under the row floor" in text and "3 of them submitted with no wait between them" in text


def test_site_means_is_the_starters_analysis():
    frame = pd.DataFrame({"meter": pd.Categorical(["site-01/meter-0", "site-01/meter-1", "site-02/meter-0"] * 2),
                          "payload": ["v=200;a=5", "v=100;a=10", "v=250;a=4", "v=1;a=1", "v=300;a=10", "v=0;a=0"],
                          "status": ["ok", "warn:drift", "ok", "err:timeout", "ok", "ok"]})
    got = site_means(frame)
    assert got.name == "mean_kw" and got.index.name == "site"
    assert got.to_dict() == pytest.approx({"site-01": (1.0 + 1.0 + 3.0) / 3, "site-02": (1.0 + 0.0) / 2})


def test_compare_messages():
    expected = pd.DataFrame({"n": [3, 4], "peak": [1.0, 2.0]}, index=pd.Index(["a", "b"], name="meter"))
    assert compare(expected.iloc[::-1], expected) is None  # order is not part of the result
    assert "list of 2 partial results" in compare([expected, expected], expected)
    assert "no column `peak` (its columns: `n`)" in compare(expected[["n"]], expected)
    assert "has 1 meter(s) that pandas does not (e.g. 'c')" in compare(
        pd.concat([expected, expected.iloc[:1].rename(index={"a": "c"})]), expected)
    wrong = expected.assign(peak=[1.0, 5.0])
    assert "column `peak` differs from pandas for 1 of 2 meters, e.g. 'b'" in compare(wrong, expected)
    # a Series is compared by its values, whatever its name; so is a one-column DataFrame
    means = pd.Series([1.5, 2.5], index=pd.Index(["x", "y"], name="site"), name="mean_kw")
    assert compare(means.rename(None), means) is None
    assert compare(means.to_frame("kw"), means) is None


def test_registered_with_its_lesson():
    ex = catalog.get("partition-pandas")
    assert ex.lesson == "01-distributed-python/08-parallel-pandas-in-practice.ipynb"
    assert ex.title == "A mean per site, combined across partitions"
