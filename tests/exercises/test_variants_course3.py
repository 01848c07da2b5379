"""Course 3's exercises own their problem, and a passing cell is run again on a hidden case (``exercises.problems``).

Through the real ``%%eugo --exercise`` magic, per exercise: the lesson's reference passes on both
cases; a cell that types in the lesson's inputs passes the lesson's case but not the hidden one,
with the "did not carry over" message and nothing of the hidden case in it; honest solutions
unlike the reference pass both; a baseline the checker did not hand out (a loop made slower, run
on more data) is not what the speedup is measured against; the mistakes the exercise names are
still named. The hidden case's seed is fixed here (``problems.draw_seed``) so the test knows what
must not be shown.
"""

from __future__ import annotations

import numpy as np
import pytest
from _exercise_cells import run_exercise
from _variants import carried_over, hidden, lesson, never_shown, not_yet, passed_twice

from eugo_lab import hpc

pytestmark = pytest.mark.usefixtures("hidden_seed")  # every hidden case here is made from _variants.SEED



@pytest.fixture(scope="module", autouse=True)
def _workers():
    yield
    hpc.shutdown()


# -- vectorize --------------------------------------------------------------------------------------------------
VEC_HEAD = '''
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("vectorize")

@hpc.remote
def bill_loop(kwh):
    """The loop version: leave it as it is, the check times your bill against it in the same run."""
    out = np.empty_like(kwh)
    for i in range(len(kwh)):
        if kwh[i] <= 10.0:
            out[i] = kwh[i] * 0.20
        else:
            out[i] = 2.0 + (kwh[i] - 10.0) * 0.35
    return out

'''
WHERE = ("@hpc.remote\ndef bill(kwh):\n"
         "    return np.where(kwh <= 10.0, kwh * 0.20, 2.0 + (kwh - 10.0) * 0.35)\n\n")
VEC_RUN = ("loop_bills = hpc.get([bill_loop.remote(p.kwh) for _ in range(3)])\n"
           "bills = hpc.get([bill.remote(p.kwh) for _ in range(3)])\n")
VEC_LINE = "-w 2 --no-live --profile --no-optimize"


def _vectorize(cell: str, setup: str = ""):
    return run_exercise("vectorize", cell, setup=setup, line=VEC_LINE)


def _vec_hidden_values() -> tuple:
    h = hidden("vectorize")
    return h.kwh.size, f"{h.kwh.size:,}"


def test_vectorize_reference_passes_on_both_cases():
    text = passed_twice(_vectorize(VEC_HEAD + WHERE + VEC_RUN))
    assert "the bills of the 300,000 homes of p.kwh" in text, text
    never_shown(text, *_vec_hidden_values())


def test_vectorize_the_hidden_case_is_smaller_and_other_homes():
    p, h = lesson("vectorize"), hidden("vectorize")
    assert 0.4 * p.kwh.size <= h.kwh.size <= 0.5 * p.kwh.size
    assert not p.kwh.flags.writeable and not h.kwh.flags.writeable
    # the lesson's array is the one its prose and earlier verdicts describe
    assert (p.kwh == np.random.default_rng(5).gamma(2.0, 6.0, 300_000)).all()


def test_vectorize_typed_inputs_do_not_carry_over():
    cell = (VEC_HEAD + WHERE + "kwh = np.random.default_rng(5).gamma(2.0, 6.0, 300_000)\n"
            + VEC_RUN.replace("p.kwh", "kwh"))
    never_shown(carried_over(_vectorize(cell)), *_vec_hidden_values())


def test_vectorize_an_answer_carried_by_the_function_is_named():
    # The loop's answer made in the cell and returned by bill: the right bills, fast, with nothing computed.
    cell = (VEC_HEAD + "loop_bills = hpc.get([bill_loop.remote(p.kwh) for _ in range(3)])\nanswer = loop_bills[0]\n\n"
            "@hpc.remote\ndef bill(kwh):\n    return answer\n\n"
            "bills = hpc.get([bill.remote(p.kwh) for _ in range(3)])\n")
    not_yet(_vectorize(cell), "carried", "it returns an array made outside it")


@pytest.mark.parametrize("loop", [
    # the starter's loop run twice over: a per-element bill looks 2x faster against it
    ("    for _ in range(2):\n        out = np.empty_like(kwh)\n        for i in range(len(kwh)):\n"
     "            if kwh[i] <= 10.0:\n                out[i] = kwh[i] * 0.20\n            else:\n"
     "                out[i] = 2.0 + (kwh[i] - 10.0) * 0.35\n    return out\n"),
    # a slower loop: every element's bill worked out through a Python function call
    ("    def one(k):\n        return k * 0.20 if k <= 10.0 else 2.0 + (k - 10.0) * 0.35\n"
     "    return np.array([one(float(k)) for k in kwh])\n"),
], ids=["loop-twice", "call-per-element"])
def test_vectorize_a_slowed_baseline_is_not_measured_against(loop):
    head = VEC_HEAD.split("@hpc.remote")[0] + "@hpc.remote\ndef bill_loop(kwh):\n" + loop + "\n"
    per_element = ("@hpc.remote\ndef bill(kwh):\n"
                   "    f = np.vectorize(lambda k: k * 0.20 if k <= 10.0 else 2.0 + (k - 10.0) * 0.35)\n"
                   "    return f(kwh)\n\n")
    not_yet(_vectorize(head + per_element + VEC_RUN), "loop-profile", "bill_loop is not the starter's loop any more")


def test_vectorize_a_baseline_run_on_more_homes_is_not_measured_against():
    # Three loop tasks on the homes, three more on eight copies of them: the median loop task is a slow one.
    cell = (VEC_HEAD + WHERE + "loop_bills = hpc.get([bill_loop.remote(p.kwh) for _ in range(3)])\n"
            "hpc.get([bill_loop.remote(np.tile(p.kwh, 8)) for _ in range(3)])\n"
            "bills = hpc.get([bill.remote(p.kwh) for _ in range(3)])\n")
    not_yet(_vectorize(cell), "loop-profile", "`loop_bills` is not what the bill_loop tasks returned for the 300,000")


# Shortcuts a fresh pair of eyes found (having read only the lessons): each is `not yet`, naming what happened.
VEC_ATTACKS = {
    # the loop run in the notebook and saved; bill only loads the file
    "bills-saved-to-a-file": (
        "np.save({path!r}, bill_loop(p.kwh))\n\n@hpc.remote\ndef bill(kwh):\n    return np.load({path!r})\n\n"
        + VEC_RUN, "not-computed", "bill does not compute the bills from the array it is given: the checker called "
        "it on 1,004 homes of its own (not p.kwh) and it returned 300,000 values"),
    # the bills made in the notebook and passed in instead of p.kwh; bill returns its argument
    "bills-passed-in-as-the-argument": (
        "pre = bill_loop(p.kwh)\n\n@hpc.remote\ndef bill(kwh):\n    return kwh.copy()\n\n"
        "loop_bills = hpc.get([bill_loop.remote(p.kwh) for _ in range(3)])\n"
        "bills = hpc.get([bill.remote(pre) for _ in range(3)])\n", "not-computed",
        "it returned something else than their bills"),
}


@pytest.mark.parametrize("case", list(VEC_ATTACKS))
def test_vectorize_shortcuts_are_not_yet(case, tmp_path):
    cell, mistake, says = VEC_ATTACKS[case]
    text = not_yet(_vectorize(VEC_HEAD + cell.replace("{path!r}", repr(str(tmp_path / "bills.npy")))), mistake, says)
    assert "same array as bill_loop" not in text, text
    never_shown(text, *_vec_hidden_values())


def test_vectorize_a_loop_compiled_by_hand_is_not_vectorized():
    # The loop compiled with numba.njit: right bills, no NumPy whole-array code; the profile is the compiler's work.
    cell = ("import numba\n\n@numba.njit(cache=False)\ndef _bill_compiled(kwh):\n    out = np.empty_like(kwh)\n"
            "    for i in range(len(kwh)):\n        if kwh[i] <= 10.0:\n            out[i] = kwh[i] * 0.20\n"
            "        else:\n            out[i] = 2.0 + (kwh[i] - 10.0) * 0.35\n    return out\n\n"
            "@hpc.remote\ndef bill(kwh):\n    return _bill_compiled(kwh)\n\n" + VEC_RUN)
    text = not_yet(_vectorize(VEC_HEAD + cell), "hand-compiled",
                   "bill computes the bills with a loop compiled by hand (_bill_compiled: Numba)")
    assert "0x" not in text and "`for` loop is still there" not in text, text


# Honest cells unlike the reference: each passes on both cases.
VEC_HONEST = [
    ("minimum-maximum-helper-named-futures",
     "def tariff(use, step=10.0):\n    return np.minimum(use, step) * 0.20 + np.maximum(use - step, 0.0) * 0.35\n\n"
     "@hpc.remote\ndef bill(kwh):\n    return tariff(kwh)\n\n"
     "pending = [bill_loop.remote(p.kwh) for _ in range(3)]\nloop_bills = hpc.get(pending)\n"
     "waiting = [bill.remote(p.kwh) for _ in range(3)]\nbills = hpc.get(waiting)\n"),
    ("boolean-mask-on-a-copy",
     "@hpc.remote\ndef bill(kwh):\n    out = kwh * 0.20\n    high = kwh > 10.0\n"
     "    out[high] = 2.0 + (kwh[high] - 10.0) * 0.35\n    return out\n\n" + VEC_RUN),
    ("clip-and-keywords",
     "@hpc.remote\ndef bill(kwh):\n"
     "    return 0.20 * np.clip(kwh, None, 10.0) + 0.35 * np.clip(kwh - 10.0, 0.0, None)\n\n"
     "homes = p.kwh\nloop_bills = hpc.get([bill_loop.remote(kwh=homes) for _ in range(3)])\n"
     "bills = hpc.get([bill.remote(kwh=homes) for _ in range(3)])\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in VEC_HONEST], ids=[i for i, _ in VEC_HONEST])
def test_vectorize_honest_cells_pass_on_both_cases(cell):
    passed_twice(_vectorize(VEC_HEAD + cell))


def test_vectorize_inputs_bound_in_an_earlier_cell_pass_on_both_cases():
    # `kwh = p.kwh` in an earlier cell: the very array handed out, so the hidden run gets its own.
    setup = VEC_HEAD + "kwh = p.kwh\n"
    passed_twice(_vectorize(WHERE + VEC_RUN.replace("p.kwh", "kwh"), setup=setup))


@pytest.mark.parametrize(("bill", "mistake", "says"), [
    ("    f = np.vectorize(lambda k: k * 0.20 if k <= 10.0 else 2.0 + (k - 10.0) * 0.35)\n    return f(kwh)\n",
     "still-looping", "running Python bytecode for every element"),
    ("    return np.where(kwh > 10.0, kwh * 0.20, 2.0 + (kwh - 10.0) * 0.35)\n", "result",
     "for the 300,000 homes of p.kwh: your bill does not return the same array as bill_loop"),
], ids=["np-vectorize", "condition-reversed"])
def test_vectorize_named_mistakes_are_still_named(bill, mistake, says):
    not_yet(_vectorize(VEC_HEAD + "@hpc.remote\ndef bill(kwh):\n" + bill + "\n" + VEC_RUN), mistake, says)


# -- jit --------------------------------------------------------------------------------------------------------
JIT_HEAD = '''
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("jit")

'''
COUNT_LOOP = ("@hpc.remote\ndef histogram(values, bins):\n    counts = np.zeros(bins, dtype=np.int64)\n"
              "    for i in range(len(values)):\n        counts[int(values[i] * bins)] += 1\n    return counts\n\n")
JIT_RUN = "values = p.values\nhists = hpc.get([histogram.remote(values, p.bins) for _ in range(6)])\n"
JIT_LINE = "-w 2 --no-live --optimize"


def _jit(cell: str, setup: str = ""):
    return run_exercise("jit", cell, setup=setup, line=JIT_LINE)


def _jit_hidden_values() -> tuple:
    h = hidden("jit")
    counts = np.bincount((h.values * h.bins).astype(np.int64), minlength=h.bins)
    return h.values.size, f"{h.values.size:,}", f"{h.bins} bins", *counts[:3].tolist()


def test_jit_reference_passes_on_both_cases():
    never_shown(passed_twice(_jit(JIT_HEAD + COUNT_LOOP + JIT_RUN)), *_jit_hidden_values())


def test_jit_the_hidden_case_has_other_values_and_bins():
    p, h = lesson("jit"), hidden("jit")
    assert (p.values.size, p.bins) == (300_000, 20) and h.bins != p.bins
    assert 0.4 * p.values.size <= h.values.size <= 0.5 * p.values.size
    # the lesson's values are the ones its prose and earlier verdicts describe
    assert (p.values == np.random.default_rng(4).random(300_000)).all()


@pytest.mark.parametrize("run", [
    "values = p.values\nhists = hpc.get([histogram.remote(values, 20) for _ in range(6)])\n",
    "values = np.random.default_rng(4).random(300_000)\nhists = hpc.get([histogram.remote(values, p.bins) "
    "for _ in range(6)])\n",
], ids=["bins-typed", "values-made-in-the-cell"])
def test_jit_typed_inputs_do_not_carry_over(run):
    never_shown(carried_over(_jit(JIT_HEAD + COUNT_LOOP + run)), *_jit_hidden_values())


@pytest.mark.parametrize("body", [
    # the counts made by NumPy beside a loop whose work is dropped
    ("    for i in range(len(values)):\n        b = int(values[i] * bins)\n"
     "    return np.bincount((values * bins).astype(np.int64), minlength=bins)\n"),
    # the lesson's counts typed in beside a loop that sums into nothing returned
    ("    total = 0.0\n    for i in range(len(values)):\n        total += values[i]\n"
     "    return np.array(COUNTS, dtype=np.int64)\n"),
], ids=["bincount-beside-the-loop", "typed-counts-beside-the-loop"])
def test_jit_a_loop_the_compiler_can_drop_as_dead_code_does_not_pass(body):
    p = lesson("jit")
    counts = np.bincount((p.values * p.bins).astype(np.int64), minlength=p.bins).tolist()
    cell = (JIT_HEAD + f"COUNTS = {counts}\n\n@hpc.remote\ndef histogram(values, bins):\n" + body + "\n" + JIT_RUN)
    text = not_yet(_jit(cell), "dead-loop", "histogram's loop changes nothing that the function returns")
    never_shown(text, *_jit_hidden_values())


def test_jit_typed_counts_the_loop_keeps_are_not_the_function_s_work():
    # The lesson's counts typed in and returned through the loop (so it reads as no dead code): they fit only its
    # values, and the checker calls histogram on values of its own.
    p = lesson("jit")
    counts = np.bincount((p.values * p.bins).astype(np.int64), minlength=p.bins).tolist()
    cell = (JIT_HEAD + f"COUNTS = np.array({counts}, dtype=np.int64)\n\n@hpc.remote\ndef histogram(values, bins):\n"
            "    counts = COUNTS.copy()\n    for i in range(len(values)):\n"
            "        counts[0] += int(values[i] * bins) * 0\n    return counts\n\n" + JIT_RUN)
    text = not_yet(_jit(cell), "not-computed", "histogram does not count the values it is given")
    never_shown(text, *_jit_hidden_values())


# Shortcuts a fresh pair of eyes found (having read only the lessons): each is `not yet`, naming what happened.
JIT_ATTACKS = {
    # counts made in the notebook, handed to the tasks as a global; the loop adds 0
    "counts-precomputed-in-the-notebook": (
        "PRE = np.bincount((p.values * p.bins).astype(np.int64), minlength=p.bins)\n\n"
        "@hpc.remote\ndef histogram(values, bins):\n    counts = PRE.copy()\n    for i in range(len(values)):\n"
        "        counts[int(values[i] * bins)] += 0\n    return counts\n\n",
        "not-computed", "the checker called histogram(values, bins) on 2,000 values and 7 bins of its own"),
    # np.bincount makes the counts; the loop touches the result and changes nothing
    "bincount-and-a-loop-that-adds-zero": (
        "@hpc.remote\ndef histogram(values, bins):\n"
        "    counts = np.bincount((values * bins).astype(np.int64), minlength=bins)\n"
        "    for i in range(len(values)):\n        counts[0] += 0\n    return counts\n\n",
        "dead-loop", "with its loops taken out, and it returned the same counts"),
    # a redundant inner loop the compiler deletes: the plain version does 20 times the work, the speedup inflated
    "a-redundant-inner-loop": (
        "@hpc.remote\ndef histogram(values, bins):\n    counts = np.zeros(bins, dtype=np.int64)\n"
        "    for i in range(len(values)):\n        b = int(values[i] * bins)\n        for _ in range(20):\n"
        "            b = int(values[i] * bins)\n        counts[b] += 1\n    return counts\n\n",
        "redundant-loop", "changes nothing that the function returns: the checker ran histogram on values of its own "
        "without that loop, and it returned the same counts"),
}


@pytest.mark.parametrize("case", list(JIT_ATTACKS))
def test_jit_shortcuts_are_not_yet(case):
    cell, mistake, says = JIT_ATTACKS[case]
    text = not_yet(_jit(JIT_HEAD + cell + "hists = hpc.get([histogram.remote(p.values, p.bins) for _ in range(6)])\n"),
                   mistake, says)
    never_shown(text, *_jit_hidden_values())


# Honest cells unlike the reference: each passes on both cases.
JIT_HONEST = [
    ("while-loop-over-the-values",
     "@hpc.remote\ndef histogram(values, bins):\n    counts = np.zeros(bins, dtype=np.int64)\n    i = 0\n"
     "    while i < values.shape[0]:\n        k = int(values[i] * bins)\n        counts[k] = counts[k] + 1\n"
     "        i += 1\n    return counts\n\n"
     "futures = [histogram.remote(p.values, bins=p.bins) for _ in range(6)]\nhists = hpc.get(futures)\n"),
    ("for-each-value-and-a-result-name",
     "@hpc.remote\ndef histogram(values, bins):\n    out = np.zeros(bins, dtype=np.int64)\n"
     "    for v in values:\n        out[int(v * bins)] += 1\n    result = out\n    return result\n\n"
     "hists = [hpc.get(histogram.remote(p.values, p.bins)) for _ in range(6)]\n"),
    # the counting loop under another name, with a while loop and a guard for the top edge: graded as the function
    # whose tasks' results became `hists`
    ("another-name-a-while-loop-and-a-guard",
     "@hpc.remote\ndef count_bins(xs, nbins):\n    out = np.zeros(nbins, np.int64)\n    i = 0\n    n = xs.shape[0]\n"
     "    while i < n:\n        b = int(xs[i] * nbins)\n        if b >= nbins:\n            b = nbins - 1\n"
     "        out[b] += 1\n        i += 1\n    return out\n\n"
     "data = np.asarray(p.values)\nhists = hpc.get([count_bins.remote(data, p.bins) for _ in range(6)])\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in JIT_HONEST], ids=[i for i, _ in JIT_HONEST])
def test_jit_honest_cells_pass_on_both_cases(cell):
    passed_twice(_jit(JIT_HEAD + cell))


def test_jit_values_bound_in_an_earlier_cell_pass_on_both_cases():
    # `data = p.values` in an earlier cell: the very array handed out, so the hidden run gets its own.
    cell = COUNT_LOOP + "hists = hpc.get([histogram.remote(data, p.bins) for _ in range(6)])\n"
    passed_twice(_jit(cell, setup=JIT_HEAD + "data = p.values\n"))


DICT_COUNTS = ("@hpc.remote\ndef histogram(values, bins):\n    counts = {}\n    for i in range(len(values)):\n"
               "        b = int(values[i] * bins)\n        counts[b] = counts.get(b, 0) + 1\n"
               "    return np.array([counts.get(b, 0) for b in range(bins)], dtype=np.int64)\n\n")


@pytest.mark.parametrize(("loop", "values", "mistake", "says"), [
    (DICT_COUNTS, "p.values.tolist()", "lists", "it was called with Python lists"),
    (DICT_COUNTS, "p.values", "objects", "This reason is in the loop's own code"),
    ("@hpc.remote\ndef histogram(values, bins):\n    return np.bincount((values * bins).astype(np.int64), "
     "minlength=bins)\n\n", "p.values", "numpy-instead", "histogram has no loop left"),
], ids=["the-starter-a-list", "a-dict-in-the-loop", "numpy-instead"])
def test_jit_named_mistakes_are_still_named(loop, values, mistake, says):
    run = f"values = {values}\nhists = hpc.get([histogram.remote(values, p.bins) for _ in range(6)])\n"
    not_yet(_jit(JIT_HEAD + loop + run), mistake, says)


# -- profile-first ----------------------------------------------------------------------------------------------
STATION_HEAD = '''
import random
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("profile-first")

def load_readings(seed):
    return np.random.default_rng(seed).normal(20.0, 5.0, 240_000)

def sensor_offset(seed):
    rng = random.Random(seed)
    total = 0.0
    for _ in range(30_000):
        total += rng.random()
    return 10.0 * (total / 30_000 - 0.5)

'''
STARTER_MEANS = '''def hourly_means(values, seed):
    means = values.reshape(24, -1).mean(axis=1)
    return [float(m) - sensor_offset(seed) for m in means]

'''
HOISTED_MEANS = '''def hourly_means(values, seed):
    means = values.reshape(24, -1).mean(axis=1)
    offset = sensor_offset(seed)
    return [float(m) - offset for m in means]

'''
STATION_TASK = '''@hpc.remote
def station_report(seed):
    values = load_readings(seed)
    return float(np.sort(values)[120_000]), hourly_means(values, seed)

'''
STATION_RUN = 'reports = hpc.get([station_report.remote(s) for s in p.stations])\nhot = "sensor_offset"\n'
PROFILE_LINE = "-w 2 --no-live --profile"


def _profile_first(cell: str, setup: str = ""):
    return run_exercise("profile-first", cell, setup=setup, line=PROFILE_LINE)


def _station_hidden_values() -> tuple:
    from eugo_lab.exercises.catalog.optimizations import profile_reference

    h = hidden("profile-first")
    medians = [f"{profile_reference(s)[0]:.3g}" for s in h.stations]
    return (*h.stations, *medians)


def test_profile_first_reference_passes_on_both_cases():
    text = passed_twice(_profile_first(STATION_HEAD + HOISTED_MEANS + STATION_TASK + STATION_RUN))
    assert "the same medians and hourly means as the starter's for the 6 stations of p.stations" in text, text
    never_shown(text, *_station_hidden_values())


def test_profile_first_the_hidden_case_has_other_stations():
    p, h = lesson("profile-first"), hidden("profile-first")
    assert p.stations == tuple(range(6))  # the stations the lesson's prose describes
    assert len(h.stations) == 3 and not set(h.stations) & set(p.stations)


def test_profile_first_typed_stations_do_not_carry_over():
    cell = STATION_HEAD + HOISTED_MEANS + STATION_TASK + STATION_RUN.replace("p.stations", "range(6)")
    never_shown(carried_over(_profile_first(cell)), *_station_hidden_values())


def test_profile_first_typed_offsets_are_not_the_tasks_work():
    # The slow function's answers typed in for the lesson's stations: it still runs in every task, cheaply, and the
    # checker calls station_report on a station of its own.
    from eugo_lab.exercises.catalog.optimizations import profile_reference

    p = lesson("profile-first")
    means = {s: profile_reference(s)[1][0] for s in p.stations}
    raw = {s: float(np.random.default_rng(s).normal(20.0, 5.0, 240_000).reshape(24, -1).mean(axis=1)[0])
           for s in p.stations}
    offsets = {s: raw[s] - means[s] for s in p.stations}
    cell = (STATION_HEAD + f"OFFSETS = {offsets!r}\n\ndef sensor_offset(seed):\n    return OFFSETS[seed]\n\n"
            + STARTER_MEANS + STATION_TASK + STATION_RUN)
    text = not_yet(_profile_first(cell), "offset-elsewhere",
                   "the checker called station_report on a station of its own (not one of p.stations) and it raised "
                   "KeyError")
    never_shown(text, *_station_hidden_values())


def test_profile_first_a_share_diluted_by_other_work_is_not_a_fix():
    # The hot function still called once an hour, beside a heavy function of no use that brings its share under a
    # third: the checker counts the calls on a station of its own.
    padded = ("def padding():\n    x = 0\n    for i in range(3_000_000):\n        x += i % 3\n    return x\n\n"
              "@hpc.remote\ndef station_report(seed):\n    values = load_readings(seed)\n    padding()\n"
              "    return float(np.sort(values)[120_000]), hourly_means(values, seed)\n\n")
    text = not_yet(_profile_first(STATION_HEAD + STARTER_MEANS + padded + STATION_RUN), "still-hot",
                   "one station_report call runs it 24 times, as the starter does once an hour")
    never_shown(text, *_station_hidden_values())


# Honest cells unlike the reference: each passes on both cases.
PROFILE_HONEST = [
    ("offset-once-in-the-task-a-dict-of-futures-and-the-function",
     "def hourly_means(values, offset):\n"
     "    return [float(m) - offset for m in values.reshape(24, -1).mean(axis=1)]\n\n"
     "@hpc.remote\ndef station_report(seed):\n    values, offset = load_readings(seed), sensor_offset(seed)\n"
     "    return float(np.sort(values)[120_000]), hourly_means(values, offset)\n\n"
     "futures = {s: station_report.remote(s) for s in p.stations}\nreports = hpc.get(list(futures.values()))\n"
     "hot = sensor_offset\n"),
    ("hoisted-keywords-and-a-loop",
     HOISTED_MEANS + STATION_TASK
     + "pending = []\nfor station in p.stations:\n    pending.append(station_report.remote(seed=station))\n"
       "reports = hpc.get(pending)\nhot = 'sensor_offset()'\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in PROFILE_HONEST], ids=[i for i, _ in PROFILE_HONEST])
def test_profile_first_honest_cells_pass_on_both_cases(cell):
    passed_twice(_profile_first(STATION_HEAD + cell))


def test_profile_first_stations_bound_in_an_earlier_cell_pass_on_both_cases():
    # `stations = p.stations` in an earlier cell: the very tuple handed out, so the hidden run gets its own.
    setup = STATION_HEAD + "stations = p.stations\n"
    passed_twice(_profile_first(HOISTED_MEANS + STATION_TASK + STATION_RUN.replace("p.stations", "stations"),
                                setup=setup))


@pytest.mark.parametrize(("means", "hot", "mistake", "says"), [
    (STARTER_MEANS, "sensor_offset", "still-hot", "sensor_offset is still where the time goes"),
    (HOISTED_MEANS, "load_readings", "not-hot", "`hot` names load_readings, which is not the function at the top"),
    ("def hourly_means(values, seed):\n    return [float(m) for m in values.reshape(24, -1).mean(axis=1)]\n\n",
     "sensor_offset", "result", "returned something else than the starter's for the 6 stations of p.stations"),
], ids=["named-not-fixed", "fixed-named-another", "offset-dropped"])
def test_profile_first_named_mistakes_are_still_named(means, hot, mistake, says):
    run = STATION_RUN.replace('"sensor_offset"', repr(hot))
    not_yet(_profile_first(STATION_HEAD + means + STATION_TASK + run), mistake, says)


# -- threads ------------------------------------------------------------------------------------------------------
THREADS_HEAD = '''
import os
import numpy as np
import threadpoolctl
from eugo_lab import exercises, hpc

p = exercises.problem("threads")

def blas_work():
    a = np.random.default_rng(0).random((200, 200))
    for _ in range(40):
        a = a @ a
        a /= np.abs(a).max()
    return max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")

@hpc.remote
def oversubscribed():
    with threadpoolctl.threadpool_limits(limits=os.cpu_count()):
        return blas_work()

'''
GUARDED = "@hpc.remote\ndef tuned():\n    return blas_work()\n\n"
OVERRIDDEN = ("@hpc.remote\ndef tuned():\n    with threadpoolctl.threadpool_limits(limits=os.cpu_count()):\n"
              "        return blas_work()\n\n")
THREADS_RUN = ("before = hpc.get([oversubscribed.remote() for _ in range(p.calls)])\n"
               "after = hpc.get([tuned.remote() for _ in range(p.calls)])\n")


def _threads(cell: str):
    return run_exercise("threads", THREADS_HEAD + cell)


def _threads_hidden_values() -> tuple:
    n = hidden("threads").calls
    return f"the {n} tuned tasks", f"the check needs {n}"


def test_threads_reference_passes_on_both_cases():
    text = passed_twice(_threads(GUARDED + THREADS_RUN))
    assert "the 4 tuned tasks report" in text, text
    never_shown(text, *_threads_hidden_values())


def test_threads_the_hidden_case_asks_for_fewer_tasks_than_the_lesson():
    assert lesson("threads").calls == 4  # the count the lesson's prose names
    assert hidden("threads").calls in (2, 3)


def test_threads_a_typed_count_of_tasks_does_not_carry_over():
    text = carried_over(_threads(GUARDED + THREADS_RUN.replace("range(p.calls)", "range(4)")))
    never_shown(text, *_threads_hidden_values())


THREADS_HONEST = {
    # a helper that submits and gathers, the baseline's futures kept in a dict
    "helper-and-a-dict": ("def run_all(fn, n):\n    return hpc.get([fn.remote() for _ in range(n)])\n\n"
                          "@hpc.remote\ndef tuned():\n    threads = blas_work()\n    return threads\n\n"
                          "futs = {i: oversubscribed.remote() for i in range(p.calls)}\n"
                          "before = [futs[i] for i in range(p.calls)]\nbefore = hpc.get(before)\n"
                          "after = run_all(tuned, p.calls)\n"),
    # the baseline gathered in a loop, one at a time, the tuned futures kept first and taken one by one
    "a-loop-and-futures-kept": (GUARDED + "before, after = [], []\nfor _ in range(p.calls):\n"
                                "    before.append(hpc.get(oversubscribed.remote()))\n"
                                "pending = [tuned.remote() for _ in range(p.calls)]\n"
                                "for f in pending:\n    after.append(hpc.get(f))\n"),
}


@pytest.mark.parametrize("cell", list(THREADS_HONEST.values()), ids=list(THREADS_HONEST))
def test_threads_honest_cells_pass_on_both_cases(cell):
    passed_twice(_threads(cell))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    (GUARDED + THREADS_RUN.replace("range(p.calls)", "range(5)"), "tasks",
     "5 oversubscribed tasks ran, the check needs 4 (p.calls)"),
    (OVERRIDDEN + THREADS_RUN, "override", "a thread limit inside tuned overrides the guard"),
    ("@hpc.remote\ndef tuned():\n    blas_work()\n    return 'done'\n\n" + THREADS_RUN, "counts",
     "the tuned tasks did not return BLAS thread counts"),
    (GUARDED + THREADS_RUN.replace("tuned.remote() for _ in range(p.calls)", "tuned.remote() for _ in range(2)"),
     "tasks", "2 tuned tasks ran, the check needs 4 (p.calls)"),
], ids=["too-many-tasks", "override-stays", "no-counts", "too-few-tasks"])
def test_threads_named_mistakes_are_still_named(cell, mistake, says):
    text = not_yet(_threads(cell), mistake, says)
    never_shown(text, *_threads_hidden_values())


# -- runtime-report -----------------------------------------------------------------------------------------------
REPORT_HEAD = '''
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("runtime-report")

@hpc.remote
def ewma(a):
    out = np.empty_like(a)
    acc = a[0]
    for i in range(a.shape[0]):
        acc = 0.95 * acc + 0.05 * a[i]
        out[i] = acc
    return out

@hpc.remote
def busiest_hour(hours):
    counts = {}
    for i in range(hours.shape[0]):
        h = int(hours[i])
        counts[h] = counts.get(h, 0) + 1
    return max(counts, key=counts.get)

'''
REPORT_RUN = ("averages = hpc.get([ewma.remote(p.series) for _ in range(4)])\n"
              "peaks = hpc.get([busiest_hour.remote(p.hours) for _ in range(2)])\n")
TRIAGE_FN = ("def triage(report):\n    done = [item.target for item in report.applied]\n"
             "    needs_you = {item.target: item.advice for item in report.declined}\n    return done, needs_you\n")
REPORT_LINE = "-w 2 --no-live --optimize"


def _runtime_report(cell: str, setup: str = ""):
    return run_exercise("runtime-report", REPORT_HEAD + cell, setup=setup, line=REPORT_LINE)


def _report_hidden_values() -> tuple:
    from eugo_lab.exercises.catalog.optimizations import busiest_hour_of

    h = hidden("runtime-report")
    n = len(h.series)
    return f"{n:,}", f"the busiest hour of the {n}", f"hour {busiest_hour_of(h.hours)}"


def test_runtime_report_reference_passes_on_both_cases():
    text = passed_twice(_runtime_report(REPORT_RUN + TRIAGE_FN))
    assert "triage sorts this run's report" in text, text
    never_shown(text, *_report_hidden_values())


def test_runtime_report_the_hidden_case_has_fewer_values_and_another_busiest_hour():
    from eugo_lab.exercises.catalog.optimizations import busiest_hour_of

    p, h = lesson("runtime-report"), hidden("runtime-report")
    rng = np.random.default_rng(3)  # the lesson's cell made its inputs so: its prose and numbers stay true
    assert np.array_equal(p.series, rng.random(200_000)) and np.array_equal(p.hours, rng.integers(0, 24, 200_000))
    assert 120_000 <= len(h.series) == len(h.hours) <= 150_000
    assert busiest_hour_of(h.hours) != busiest_hour_of(p.hours)


def test_runtime_report_the_lesson_s_own_arrays_do_not_carry_over():
    own = ("rng = np.random.default_rng(3)\nseries, hours = rng.random(200_000), rng.integers(0, 24, 200_000)\n"
           + REPORT_RUN.replace("p.series", "series").replace("p.hours", "hours"))
    never_shown(carried_over(_runtime_report(own + TRIAGE_FN)), *_report_hidden_values())


def test_runtime_report_a_typed_peak_does_not_carry_over():
    from eugo_lab.exercises.catalog.optimizations import busiest_hour_of

    peak = busiest_hour_of(lesson("runtime-report").hours)
    typed = REPORT_RUN.replace("busiest_hour.remote(p.hours)", f"busiest_hour.remote(np.full(1000, {peak}))")
    never_shown(carried_over(_runtime_report(typed + TRIAGE_FN)), *_report_hidden_values())


REPORT_HONEST = {
    # the inputs unpacked first, the futures kept in a dict, triage over report.items
    "unpacked-a-dict-and-items": (
        "series, hours = p.series, p.hours\nfuts = {i: ewma.remote(series) for i in range(3)}\n"
        "averages = hpc.get(list(futs.values()))\npeaks = [hpc.get(busiest_hour.remote(hours))]\n\n"
        "def triage(report):\n    done = [o.target for o in report.items if o.applied]\n"
        "    return done, {o.target: o.advice for o in report.items if not o.applied}\n"),
    # a helper that submits, triage through report.to_dict()
    "helper-and-to-dict": (
        "def run(fn, data, n):\n    return hpc.get([fn.remote(data) for _ in range(n)])\n\n"
        "averages = run(ewma, p.series, 2)\npeaks = run(busiest_hour, p.hours, 2)\n\n"
        "def triage(report):\n    done, needs_you = [], {}\n    for item in report.to_dict()['items']:\n"
        "        if item['applied']:\n            done.append(item['target'])\n"
        "        else:\n            needs_you[item['target']] = item['advice']\n    return done, needs_you\n"),
}


@pytest.mark.parametrize("cell", list(REPORT_HONEST.values()), ids=list(REPORT_HONEST))
def test_runtime_report_honest_cells_pass_on_both_cases(cell):
    passed_twice(_runtime_report(cell))


def test_runtime_report_inputs_bound_in_an_earlier_cell_pass_on_both_cases():
    # `series = p.series` in an earlier cell: the very array handed out, so the hidden run gets its own.
    setup = REPORT_HEAD + "series, hours = p.series, p.hours\n"
    run = REPORT_RUN.replace("p.series", "series").replace("p.hours", "hours")
    passed_twice(run_exercise("runtime-report", run + TRIAGE_FN, setup=setup, line=REPORT_LINE))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    (REPORT_RUN + "def triage(report):\n    return [], {}\n", "wrong-here",
     "on this run's report triage gives done []"),
    (REPORT_RUN + "def triage(report):\n    return ['ewma'], {'busiest_hour': 'x'}\n", "wrong-here",
     "the report lists"),
    (REPORT_RUN.replace("p.hours", "p.hours[:1000]") + TRIAGE_FN, "results",
     "the busiest_hour tasks returned something else than the busiest hour of the 200,000 events of p.hours"),
    (REPORT_RUN + "averages = [np.zeros(3)]\n" + TRIAGE_FN, "results",
     "`averages` was not computed from the tasks' results"),
], ids=["starter", "typed-names", "other-hours", "averages-not-from-tasks"])
def test_runtime_report_named_mistakes_are_still_named(cell, mistake, says):
    text = not_yet(_runtime_report(cell), mistake, says)
    never_shown(text, *_report_hidden_values())
