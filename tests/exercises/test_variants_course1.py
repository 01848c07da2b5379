"""The hidden second case of Course 1's lessons 06-08 (``straggler``, ``partitions``, ``partition-pandas``).

The same checks as ``test_exercise_variants.py`` makes of the exercises converted before these, kept in a
file of their own: through the real ``%%eugo --exercise`` magic, the reference passes on the lesson's inputs
and on the hidden case; a cell that types the lesson's inputs (or its answer) in passes the lesson's case but
not the hidden one, with nothing of the hidden case in what it is told; honest solutions unlike the reference
pass both; the mistakes the exercise names are still named. The hidden case's seed is fixed here
(``problems.draw_seed``), so a test knows what must not be shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _exercise_cells import code_in, not_yet_for, run_exercise
from _notebooks import cell_source, read_notebook
from _variants import carried_over, hidden, lesson, never_shown, passed_twice

from eugo_lab.exercises import problems
from eugo_lab.exercises.catalog import partitions as partitions_exercise
from eugo_lab.exercises.catalog.straggler import reference_total

pytestmark = pytest.mark.usefixtures("hidden_seed")  # every hidden case here is made from _variants.SEED

COURSES = Path(__file__).resolve().parents[2] / "courses"


# The helpers below are test_exercise_variants.py's (importing that module would collect its tests again).
def explained_there(v, mistake: str, said: str) -> str:
    """Check a ``not yet`` of the hidden case that names ``mistake`` in the exercise's own words; returns its text."""
    text = v.to_text()
    assert text.splitlines()[0] == f"exercise {v.exercise_id}: not yet", text
    assert "met the criteria on the lesson's inputs, but not on a second case the checker made with other inputs " \
           f"of the same kind (it ran your cell again on them, out of sight): there {said}" in text, text
    assert v.mistake == mistake, text
    assert "a value is written into the cell" not in text, text
    assert code_in("\n".join(v.lines[:-1])) == [], text
    return text


def shown_forms(n: int) -> tuple[str, ...]:
    """How a number of the hidden case could appear in a verdict: as Python writes it, with commas, to 3 digits."""
    return str(n), f"{n:,}", f"{int(float(f'{n:.3g}')):,}"


# -- straggler ---------------------------------------------------------------------------------------------------
WORK = """
from eugo_lab import exercises, hpc

p = exercises.problem("straggler")

@hpc.remote(optimize=False)
def work(start, stop):
    return sum(i * i % 7 for i in range(start, stop))
"""
# The lesson's reference cell, after its first lines.
STRAGGLER = ("size = min(e - s for s, e in p.ranges)   # an ordinary range's size\n"
             "pieces = [(a, min(a + size, e)) for s, e in p.ranges for a in range(s, e, size)]\n"
             "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n")


def straggler_hidden_values() -> list:
    """What of the hidden case a verdict must never show: its ranges, their bounds and sizes, and its total."""
    h = hidden("straggler")
    sizes = sorted({e - s for s, e in h.ranges})
    total = sum(reference_total(e, s) for s, e in h.ranges)
    bounds = [b for r in h.ranges for b in r if b]
    return [*(f for n in (*sizes, *bounds, total) for f in shown_forms(n)), h.ranges]


def test_straggler_lesson_case_is_the_lesson_s_ranges():
    # The notebook's prose and verdicts are about these: seven ranges of 200,000, then one twenty times that.
    assert lesson("straggler").ranges == (*((i * 200_000, (i + 1) * 200_000) for i in range(7)), (1_400_000, 5_400_000))
    h = hidden("straggler")
    sizes = [e - s for s, e in h.ranges]
    # The hidden giant is elsewhere than last, still the only straggler; its ranges follow one another.
    assert sizes.index(max(sizes)) < len(sizes) - 1 and sorted(sizes)[-2] * 3 < max(sizes)
    assert all(a[1] == b[0] for a, b in zip(h.ranges, h.ranges[1:]))
    assert sum(sizes) <= 0.55 * 5_400_000  # small: a pass costs at most about 1.5x the lesson's run


def test_straggler_reference_passes_on_both_cases():
    text = passed_twice(run_exercise("straggler", STRAGGLER, setup=WORK))
    assert "27 work tasks; their results show each covered about 200,000 numbers" in text, text


def test_straggler_typed_ranges_do_not_carry_over():
    # The ranges the starter used to type in, split as the reference does: the lesson's total, not the hidden one's.
    cell = ("ranges = [(i * 200_000, (i + 1) * 200_000) for i in range(7)] + [(1_400_000, 5_400_000)]\n"
            "pieces = [(a, min(a + 200_000, e)) for s, e in ranges for a in range(s, e, 200_000)]\n"
            "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n")
    never_shown(carried_over(run_exercise("straggler", cell, setup=WORK)), *straggler_hidden_values())


def test_straggler_typed_total_does_not_carry_over():
    # The lesson's total typed in beside the reference's tasks: equal to what they returned on the lesson's case,
    # not on the hidden one.
    cell = STRAGGLER.replace("total = sum(", "sum(") + f"total = {reference_total(5_400_000)}\n"
    never_shown(carried_over(run_exercise("straggler", cell, setup=WORK)), *straggler_hidden_values())


GIANT_THERE = "the pieces were not even: one task covered several times the numbers of the median task"


def test_straggler_split_of_only_the_last_range_is_named_on_the_hidden_case():
    """Only the lesson's giant (the last range) cut: even pieces there, the hidden giant (never last) left whole."""
    cell = ("*ordinary, (s, e) = p.ranges\nsize = ordinary[0][1] - ordinary[0][0]\n"
            "pieces = list(ordinary) + [(a, min(a + size, e)) for a in range(s, e, size)]\n"
            "total = sum(hpc.get([work.remote(a, b) for a, b in pieces]))\n")
    text = explained_there(run_exercise("straggler", cell, setup=WORK), "giant", GIANT_THERE)
    assert "where the oversized range is the last one, but not these" in text, text
    never_shown(text, *straggler_hidden_values())


STRAGGLER_HONEST = [
    # half an ordinary range per piece, the size from the median, keyword arguments, futures kept first
    ("half-median-pieces", "import statistics\nstep = int(statistics.median(b - a for a, b in p.ranges)) // 2\n"
                           "futs = [work.remote(start=x, stop=min(x + step, b)) for a, b in p.ranges\n"
                           "        for x in range(a, b, step)]\ntotal = sum(hpc.get(futs))\n"),
    # only the ranges over twice the shortest cut, each into as many equal parts as it holds ordinary ranges,
    # by a helper function of its own
    ("split-the-big-ones", "def parts(a, b, k):\n    edges = [a + (b - a) * j // k for j in range(k + 1)]\n"
                           "    return list(zip(edges, edges[1:]))\n\n"
                           "short = min(b - a for a, b in p.ranges)\n"
                           "jobs = [q for a, b in p.ranges for q in (parts(a, b, round((b - a) / short))\n"
                           "        if b - a > 2 * short else [(a, b)])]\n"
                           "total = 0\nfor v in hpc.get([work.remote(*q) for q in jobs]):\n    total += v\n"),
    # the lesson's ordinary size written in, as lesson 06's own fix did (PIECE = a normal day): at most twice an
    # ordinary range of the hidden case, so still even there
    ("lesson-piece-size", "PIECE = 200_000\n"
                          "pieces = [(a, min(a + PIECE, e)) for s, e in p.ranges for a in range(s, e, PIECE)]\n"
                          "futures = [work.remote(s, e) for s, e in pieces]\ntotal = sum(hpc.get(futures))\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in STRAGGLER_HONEST], ids=[i for i, _ in STRAGGLER_HONEST])
def test_straggler_honest_cells_pass_on_both_cases(cell):
    passed_twice(run_exercise("straggler", cell, setup=WORK))


def test_straggler_ranges_taken_in_an_earlier_cell_get_the_hidden_case_s():
    # `ranges = p.ranges` in an earlier cell: the very tuple of the handed-out problem, so the hidden run gets its own.
    passed_twice(run_exercise("straggler", STRAGGLER.replace("p.ranges", "ranges"), setup=WORK + "ranges = p.ranges\n"))


@pytest.mark.parametrize(("cell", "mistake", "message"), [
    ("total = sum(hpc.get([work.remote(s, e) for s, e in p.ranges]))\n", "giant",
     "one work task covered about 4,000,000 numbers, 20x the median task's 200,000"),
    ("total = sum(hpc.get([work.remote(s, e) for s, e in p.ranges[:-1]]))\n", "results",
     "`total` is not the sum over all of `p.ranges`"),
    ("pieces = [(a, min(a + 5_000, e)) for s, e in p.ranges for a in range(s, e, 5_000)]\n"
     "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n", "too-small", "1080 tasks"),
    ("size = min(e - s for s, e in p.ranges)\n"
     "pieces = [(a, min(a + size, e)) for s, e in p.ranges for a in range(s, e, size)]\n"
     "total = sum(hpc.get(work.remote(s, e)) for s, e in pieces)\n", "serial",
     "the cell waited after each work task it submitted"),
], ids=["starter", "misses-a-range", "crumbs", "waits-for-each"])
def test_straggler_mistakes_are_still_named_with_the_lesson_s_counts(cell, mistake, message):
    not_yet_for(run_exercise("straggler", cell, setup=WORK), mistake, message)


# -- partitions --------------------------------------------------------------------------------------------------
LOAD = """
from eugo_lab import exercises, hpc

p = exercises.problem("partitions")

@hpc.remote(optimize=False)
def load(start, stop):
    return sum(k * k % 7 for n in range(start, stop) for k in range(n))
"""
# The lesson's reference cell, after its first lines.
PARTITIONS = ("N = p.rows\nworkers = hpc.cluster().workers\n"
              "cuts = [N * i // (8 * workers) for i in range(8 * workers + 1)]  # eight ranges per worker\n"
              "pieces = sorted(zip(cuts, cuts[1:]), reverse=True)  # the costly last rows first\n"
              "total = sum(hpc.get([load.remote(a, b) for a, b in pieces]))\n")


def partitions_hidden_values() -> list[str]:
    """What of the hidden case a verdict must never show: its row count and its total."""
    h = hidden("partitions")
    return [*shown_forms(h.rows), *shown_forms(partitions_exercise.reference_total(h.rows))]


def test_partitions_lesson_case_is_the_lesson_s_rows():
    assert lesson("partitions").rows == 4_000  # the notebook says 4,000 rows, and its verdicts count them
    rows = {problems.make("partitions", seed, hidden=True).rows for seed in range(1, 60)}
    # Other counts every time, and small: the steps grow as the square of the rows.
    assert 4_000 not in rows and max(rows) ** 2 <= 0.5 * 4_000 ** 2 and len(rows) > 20


def test_partitions_reference_passes_on_both_cases():
    text = passed_twice(run_exercise("partitions", PARTITIONS, setup=LOAD))
    assert "16 load tasks, 8.0 per worker on 2 workers" in text and "over all 4,000 rows" in text, text


@pytest.mark.parametrize("typed", [
    PARTITIONS.replace("N = p.rows", "N = 4_000"),
    # the lesson's cuts written out: 16 ranges of 250 rows
    "cuts = " + repr([250 * i for i in range(17)]) + "\n" + PARTITIONS.split("\n", 3)[3],
    # the reference's tasks, and the lesson's total written in beside them
    PARTITIONS.replace("total = sum(", "sum(") + f"total = {partitions_exercise.reference_total(4_000)}\n",
    # pieces of 600 rows in row order: enough for the lesson's 4,000 rows (95% busy), not for fewer
    "futures = [load.remote(a, min(a + 600, p.rows)) for a in range(0, p.rows, 600)]\ntotal = sum(hpc.get(futures))\n",
], ids=["typed-rows", "typed-cuts", "typed-total", "piece-size-for-the-lesson-s-rows"])
def test_partitions_typed_inputs_do_not_carry_over(typed):
    never_shown(carried_over(run_exercise("partitions", typed, setup=LOAD)), *partitions_hidden_values())


PARTITIONS_HONEST = [
    # cuts of equal work (the steps up to row n grow as n squared), two per worker, other names
    ("equal-work-cuts", "k = 2 * hpc.cluster().workers\n"
                        "edges = [round(p.rows * (j / k) ** 0.5) for j in range(k + 1)]\n"
                        "futs = [load.remote(lo, hi) for lo, hi in zip(edges, edges[1:])]\n"
                        "total = sum(hpc.get(futs))\n"),
    # a twentieth of the rows per piece, the last (costly) rows submitted first, added up in a loop
    ("costly-first-loop", "step = max(1, p.rows // 20)\nstarts = list(range(0, p.rows, step))[::-1]\n"
                          "futures = {a: load.remote(a, min(a + step, p.rows)) for a in starts}\n"
                          "total = 0\nfor value in hpc.get(list(futures.values())):\n    total += value\n"),
    # a helper function of its own that cuts any row count into k ranges per worker, in row order
    ("helper-in-row-order", "def split(rows, per_worker):\n    k = per_worker * hpc.cluster().workers\n"
                            "    cuts = [rows * i // k for i in range(k + 1)]\n    return list(zip(cuts, cuts[1:]))\n\n"
                            "total = sum(hpc.get([load.remote(*r) for r in split(p.rows, 6)]))\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in PARTITIONS_HONEST], ids=[i for i, _ in PARTITIONS_HONEST])
def test_partitions_honest_cells_pass_on_both_cases(cell):
    passed_twice(run_exercise("partitions", cell, setup=LOAD))


@pytest.mark.parametrize(("cell", "mistake", "message"), [
    ("N = p.rows\nworkers = hpc.cluster().workers\ncuts = [N * i // workers for i in range(workers + 1)]\n"
     "total = sum(hpc.get([load.remote(a, b) for a, b in zip(cuts, cuts[1:])]))\n", "uneven",
     "keep them busy 67% of the run, under 85%: the largest piece holds 75% of the work"),
    ("cuts = [p.rows * i // 400 for i in range(401)]\n"
     "total = sum(hpc.get([load.remote(a, b) for a, b in zip(cuts, cuts[1:])]))\n", "too-small",
     "400 tasks for 4,000 rows: so many pieces"),
    ("total = sum(hpc.get([load.remote(a, a + 250) for a in range(0, p.rows - 250, 250)]))\n", "results",
     "`total` is not the sum over all 4,000 rows"),
], ids=["starter", "crumbs", "misses-the-last-rows"])
def test_partitions_mistakes_are_still_named_with_the_lesson_s_counts(cell, mistake, message):
    not_yet_for(run_exercise("partitions", cell, setup=LOAD), mistake, message)


# -- partition-pandas --------------------------------------------------------------------------------------------
LESSON_08 = COURSES / "01-distributed-python" / "08-parallel-pandas-in-practice.ipynb"
# The exercise cell's setting: the lesson's pandas and workers, p, and the lesson's own `readings` (a frame of its
# own, the same rows: the lesson's first cell read them back from Parquet).
READINGS = """
import pandas as pd
from eugo_lab import exercises, hpc

p = exercises.problem("partition-pandas")
readings = p.readings.copy()

hpc.init(workers=2)
hpc.map_partitions(len, p.readings.iloc[:4_000], partitions=8)  # each worker imports pandas before the check
"""
SITE_PARTS = '''
def site_power(frame):
    ok = frame[~frame["status"].str.startswith("err")]
    volts_amps = ok["payload"].str.extract(r"v=(?P<volts>[\\d.]+);a=(?P<amps>[\\d.]+)").astype(float)
    kw = volts_amps["volts"] * volts_amps["amps"] / 1000
    site = ok["meter"].str.split("/").str[0].rename("site")
    return kw.groupby(site).agg(["sum", "count"])


def mean_power(parts):
    added = pd.concat(parts).groupby(level=0).sum()
    return (added["sum"] / added["count"]).rename("mean_kw")


'''
# The lesson's reference cell, after its first lines.
PANDAS = SITE_PARTS + "result = hpc.map_partitions(site_power, p.readings, combine=mean_power)\n"


def pandas_hidden_values() -> list[str]:
    """What of the hidden case a verdict must never show: its row and site counts and its sites' names."""
    from eugo_lab.exercises.catalog.pandas import site_means

    h = hidden("partition-pandas").readings
    means = site_means(h)
    return [*shown_forms(len(h)), *map(str, means.index), f"{len(means)} sites", *(f"{v:.6g}" for v in means)]


def test_partition_pandas_lesson_case_is_the_lesson_s_readings():
    # The readings the lesson's first cell makes, run from the notebook itself: the exercise asks "the same readings".
    source = cell_source(read_notebook(LESSON_08)["cells"][1])
    making = source[source.index("rng = np.random.default_rng"):source.index("raw.to_parquet")]
    ns: dict = {}
    exec("import numpy as np\nimport pandas as pd\n" + making, ns)  # the lesson's own code, as its first cell runs it
    assert lesson("partition-pandas").readings.equals(ns["raw"])
    h = hidden("partition-pandas").readings
    lesson_sites = set(ns["raw"]["meter"].str.split("/").str[0])
    # Other sites, fewer rows (a pass costs at most about 1.4x), and still 10,000 rows a partition for 12 of them.
    assert not set(h["meter"].str.split("/").str[0]) & lesson_sites
    assert 12 * 10_000 <= len(h) <= 0.4 * len(ns["raw"])


def test_partition_pandas_reference_passes_on_both_cases():
    text = passed_twice(run_exercise("partition-pandas", PANDAS, setup=READINGS))
    assert "result equals the mean power per site computed by pandas in the notebook: 20 sites" in text, text
    assert "the 8 tasks returned site_power of 8 partitions (by rows) holding every row of `p.readings` once" in text


@pytest.mark.parametrize("typed", [
    # the lesson's own readings in place of p.readings: the same rows in the lesson's case, not in the hidden one
    PANDAS.replace("p.readings", "readings"),
    # the lesson's sites written into the combine
    PANDAS.replace('.rename("mean_kw")', '.rename("mean_kw").reindex([f"site-{s:02d}" for s in range(20)])'),
    # the lesson's answer written in beside honest tasks (the combine runs in the notebook, so only its value tells)
    SITE_PARTS + "hpc.map_partitions(site_power, p.readings, combine=mean_power)\n"
                 "result = pd.Series({typed}, name='mean_kw').rename_axis('site')\n",
], ids=["lesson-readings", "typed-sites", "typed-answer"])
def test_partition_pandas_typed_inputs_do_not_carry_over(typed):
    from eugo_lab.exercises.catalog.pandas import site_means

    cell = typed.replace("{typed}", repr(site_means(lesson("partition-pandas").readings).to_dict()))
    never_shown(carried_over(run_exercise("partition-pandas", cell, setup=READINGS)), *pandas_hidden_values())


PANDAS_HONEST = [
    # whole meters per partition, each returning its sites' partial sums and counts, added up as the reference does
    ("by-meter-sums-and-counts", SITE_PARTS + 'result = hpc.map_partitions(site_power, p.readings, by="meter", '
                                              "combine=mean_power)\n"),
    # a partition count from the data, a combine that adds the partials pairwise with Series.add
    ("count-from-the-rows", SITE_PARTS.replace('agg(["sum", "count"])', 'agg(total="sum", n="count")')
     + "import functools\n\n"
       "def add_up(parts):\n"
       "    both = functools.reduce(lambda x, y: x.add(y, fill_value=0), parts)\n"
       "    return both['total'] / both['n']\n\n"
       "k = max(2, len(p.readings) // 50_000)\n"
       "result = hpc.map_partitions(site_power, p.readings, partitions=k, combine=add_up)\n"),
    # every site's rows in one partition: a site column added first, the mean is then exact, the results stack
    ("by-site-stacked", SITE_PARTS + 'def site_mean(frame):\n    kw, n = site_power(frame).T.values\n'
                        '    return pd.Series(kw / n, index=site_power(frame).index, name="mean_kw")\n\n'
                        'with_site = p.readings.assign(site=p.readings["meter"].str.split("/").str[0])\n'
                        'result = hpc.map_partitions(site_mean, with_site, by="site")\n'),
]


@pytest.mark.parametrize("cell", [c for _, c in PANDAS_HONEST], ids=[i for i, _ in PANDAS_HONEST])
def test_partition_pandas_honest_cells_pass_on_both_cases(cell):
    passed_twice(run_exercise("partition-pandas", cell, setup=READINGS))


@pytest.mark.parametrize(("cell", "mistake", "message"), [
    (SITE_PARTS + "result = hpc.map_partitions(site_power, p.readings, partitions=1, combine=mean_power)\n",
     "no-partitions", "sent the whole DataFrame (400,000 rows) to one task"),
    (SITE_PARTS + "result = hpc.map_partitions(site_power, p.readings)\n", "result",
     "`result` has 160 rows for 20 sites"),
    (SITE_PARTS + "result = hpc.map_partitions(site_power, p.readings, partitions=200, combine=mean_power)\n",
     "tiny", "your run made 200 tasks of about 2,000 rows each"),
], ids=["one-task", "stacked", "tiny"])
def test_partition_pandas_mistakes_are_still_named_with_the_lesson_s_counts(cell, mistake, message):
    not_yet_for(run_exercise("partition-pandas", cell, setup=READINGS), mistake, message)
