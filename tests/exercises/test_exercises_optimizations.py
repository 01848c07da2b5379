"""Course 3's exercises: each reference passes; typical mistakes are ``not yet`` with their own message."""

from __future__ import annotations

import os

import pytest
from _exercise_cells import hint_code, hint_words, run_exercise

from eugo_lab import hpc
from eugo_lab.exercises import problems


def _expect(v, passed: bool, says: str) -> None:
    """A table row's verdict: passed or not as the row says, and its text holds the row's sentence."""
    assert v.passed is passed, v.to_text(precise=True)
    assert says in v.to_text(), v.to_text(precise=True)


@pytest.fixture(scope="module", autouse=True)
def _workers():
    yield
    hpc.shutdown()


# -- profile-first -----------------------------------------------------------------------------------
PROFILE_SETUP = '''
import random
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("profile-first")   # the exercise's inputs, handed out by the checker

def load_readings(seed):
    """One station's day: 240,000 temperature readings, 10,000 an hour, drawn by NumPy in C."""
    return np.random.default_rng(seed).normal(20.0, 5.0, 240_000)

def sensor_offset(seed):
    """The station's calibration offset, worked out in Python from 30,000 test draws."""
    rng = random.Random(seed)
    total = 0.0
    for _ in range(30_000):
        total += rng.random()
    return 10.0 * (total / 30_000 - 0.5)

def hourly_means(values, seed):
    """The mean of each hour, corrected by the station's offset."""
    means = values.reshape(24, -1).mean(axis=1)
    return [float(m) - sensor_offset(seed) for m in means]

@hpc.remote
def station_report(seed):
    values = load_readings(seed)
    return float(np.sort(values)[120_000]), hourly_means(values, seed)
'''
PROFILE_RUN = "reports = hpc.get([station_report.remote(s) for s in p.stations])\n"
# The fix the profile asks for: the offset once a task, not once an hour
HOISTED = '''
def hourly_means(values, seed):
    means = values.reshape(24, -1).mean(axis=1)
    offset = sensor_offset(seed)
    return [float(m) - offset for m in means]
'''
IN_THE_TASK = '''
def hourly_means(values, offset):
    return [float(m) - offset for m in values.reshape(24, -1).mean(axis=1)]

@hpc.remote
def station_report(seed):
    values, offset = load_readings(seed), sensor_offset(seed)
    return float(np.sort(values)[120_000]), hourly_means(values, offset)
'''
NO_OFFSET = '''
def hourly_means(values, seed):
    return [float(m) for m in values.reshape(24, -1).mean(axis=1)]
'''
OFFSET_FROM_THE_NOTEBOOK = '''
offsets = {s: sensor_offset(s) for s in p.stations}

def hourly_means(values, offset):
    return [float(m) - offset for m in values.reshape(24, -1).mean(axis=1)]

@hpc.remote
def station_report(seed, offset):
    values = load_readings(seed)
    return float(np.sort(values)[120_000]), hourly_means(values, offset)

reports = hpc.get([station_report.remote(s, offsets[s]) for s in p.stations])
'''
PROBE = ("@hpc.remote\ndef probe(seed):\n    return hourly_means(load_readings(seed), seed)\n\n"
         "reports = hpc.get([probe.remote(s) for s in p.stations])\n")
DRIVER_REPORTS = ("hpc.get([station_report.remote(0)])\n"
                  "reports = [station_report(s) for s in p.stations]   # computed here, in the notebook\n")
HONEST_PROFILE = ("futures = {s: station_report.remote(s) for s in p.stations}\n"
                  "reports = hpc.get(list(futures.values()))\n")
PROFILE_TABLE = {
    # id: (cell, %%eugo line (None: profiled), passed, mistake, what the verdict must say)
    "reference": (HOISTED + PROFILE_RUN + 'hot = "sensor_offset"\n', None, True, None,
                  "`reports` holds the 6 results the station_report tasks returned"),
    "mistake-named-but-not-fixed": (PROFILE_RUN + 'hot = "sensor_offset"\n', None, False, "still-hot",
                                    "sensor_offset is still where the time goes"),
    "mistake-fixed-but-named-another": (HOISTED + PROFILE_RUN + 'hot = "load_readings"\n', None, False, "not-hot",
                                        "`hot` names load_readings, which is not the function at the top"),
    "mistake-the-wrapper": (HOISTED + PROFILE_RUN + 'hot = "station_report"\n', None, False, "caller",
                            "`hot` names station_report, the remote function you submitted"),
    "mistake-not-in-profile": (HOISTED + PROFILE_RUN + 'hot = "offset"\n', None, False, "not-hot",
                               "no function of that name ran"),
    "mistake-not-a-name": (HOISTED + PROFILE_RUN + "hot = 3\n", None, False, "not-a-name", "`hot` holds int 3"),
    "mistake-no-profile": (HOISTED + PROFILE_RUN + 'hot = "sensor_offset"\n', "-w 2 --no-live", False, "no-profile",
                           "this run has no profile"),
    "mistake-the-offset-dropped": (NO_OFFSET + PROFILE_RUN + 'hot = "sensor_offset"\n', None, False, "result",
                                   "the station_report tasks returned something else than the starter's"),
    "shortcut-offsets-worked-out-in-the-notebook": (OFFSET_FROM_THE_NOTEBOOK + 'hot = "sensor_offset"\n', None,
                                                    False, "offset-elsewhere",
                                                    "the station_report tasks no longer call sensor_offset"),
    "shortcut-profile-of-a-decoy": (HOISTED + PROBE + 'hot = "sensor_offset"\n', None, False, "no-tasks",
                                    "no station_report task ran in this cell (the profile is of probe)"),
    "shortcut-reports-in-the-driver": (HOISTED + DRIVER_REPORTS + 'hot = "sensor_offset"\n', None, False,
                                       "not-from-tasks", "`reports` was not computed from the tasks' results"),
    "honest-offset-in-the-task-a-dict-of-futures-and-the-function": (
        IN_THE_TASK + HONEST_PROFILE + "hot = sensor_offset\n", None, True, None, "`hot` = sensor_offset"),
    # The stations are the checker's: a report of 4 of its 6 is not the starter's reports.
    "mistake-four-of-the-stations": (HOISTED + PROFILE_RUN.replace("p.stations", "p.stations[:4]")
                                     + 'hot = "sensor_offset"\n', None, False, "result",
                                     "`reports` holds 4 results and p.stations hands out 6 stations"),
}


@pytest.mark.parametrize("case", ["mistake-fixed-but-named-another", "mistake-the-wrapper"])
def test_profile_first_a_wrong_name_is_not_told_the_right_one(case):
    cell, line, _, _, _ = PROFILE_TABLE[case]
    v = _profile_first_cell(cell, line)
    assert not v.passed and "sensor_offset" not in v.to_text(precise=True), v.to_text(precise=True)


def _profile_first_cell(cell: str, line: str | None = None):
    return run_exercise("profile-first", cell, setup=PROFILE_SETUP, line=line or "-w 2 --no-live --profile")


@pytest.mark.parametrize("case", list(PROFILE_TABLE))
def test_profile_first(case):
    cell, line, passed, mistake, says = PROFILE_TABLE[case]
    v = _profile_first_cell(cell, line)
    _expect(v, passed, says)
    assert v.mistake == mistake, v.to_text(precise=True)
    if not passed:
        assert hint_words(v) and hint_code(v)


def test_profile_first_the_starter_puts_the_hot_function_at_the_top_of_the_self_column():
    # The exercise's premise, measured: as the starter runs, sensor_offset tops the self column
    v = _profile_first_cell(PROFILE_RUN + 'hot = "sensor_offset"\n')
    assert not v.passed
    assert "top of the self column: sensor_offset" in "\n".join(v.details), v.to_text(precise=True)


# -- vectorize -------------------------------------------------------------------------------------------
VEC_SETUP = '''
import numpy as np
from eugo_lab import exercises, hpc

@hpc.remote
def bill_loop(kwh):
    out = np.empty_like(kwh)
    for i in range(len(kwh)):
        if kwh[i] <= 10.0:
            out[i] = kwh[i] * 0.20
        else:
            out[i] = 2.0 + (kwh[i] - 10.0) * 0.35
    return out

kwh = exercises.problem("vectorize").kwh   # the exercise's inputs, handed out by the checker
'''
VEC_RUN = '''
loop_bills = hpc.get([bill_loop.remote(kwh) for _ in range(3)])
bills = hpc.get([bill.remote(kwh) for _ in range(3)])
'''


LOOP_BILL = ("    out = np.empty_like(kwh)\n    for i in range(len(kwh)):\n        if kwh[i] <= 10.0:\n"
             "            out[i] = kwh[i] * 0.20\n        else:\n            out[i] = 2.0 + (kwh[i] - 10.0) * 0.35\n"
             "    return out\n")
WHERE = "    return np.where(kwh <= 10.0, kwh * 0.20, 2.0 + (kwh - 10.0) * 0.35)\n"
LOOP_RUN_ONLY = "loop_bills = hpc.get([bill_loop.remote(kwh) for _ in range(3)])\n"
VEC_LINE = "-w 2 --no-live --profile --no-optimize"
VEC_TABLE = {
    # id: (bill's body, what runs after it (None: the starter's lines), %%eugo line, passed, mistake, verdict says)
    "reference": (WHERE, None, None, True, None,
                  "bill returns the same array as bill_loop: `bills` holds the 3 arrays its tasks returned"),
    "mistake-the-loop-is-still-there": (LOOP_BILL, None, None, False, "still-looping", "the `for` loop is still there"),
    "mistake-a-conditional-list-comprehension": (
        "    return np.array([k * 0.20 if k <= 10.0 else 2.0 + (k - 10.0) * 0.35 for k in kwh])\n", None, None, False,
        "still-looping", "running Python bytecode for every element"),
    "mistake-np-vectorize": (
        "    f = np.vectorize(lambda k: k * 0.20 if k <= 10.0 else 2.0 + (k - 10.0) * 0.35)\n    return f(kwh)\n",
        None, None, False, "still-looping", "running Python bytecode for every element"),
    "mistake-one-formula-for-every-home": ("    return kwh * 0.20\n", None, None, False, "result",
                                           "`bills` is not each home's bill under the tariff"),
    "mistake-the-condition-reversed": ("    return np.where(kwh > 10.0, kwh * 0.20, 2.0 + (kwh - 10.0) * 0.35)\n",
                                       None, None, False, "result", "your bill does not return the same array"),
    "mistake-no-profile": (WHERE, None, "-w 2 --no-live --no-optimize", False, "no-profile",
                           "this run has no profile"),
    "mistake-the-loop-tasks-left-out": (WHERE, "bills = hpc.get([bill.remote(kwh) for _ in range(3)])\n", None, False,
                                        "tasks", "0 bill_loop tasks ran, the check needs 3"),
    "shortcut-bills-computed-in-the-notebook": (
        "    return np.zeros(1)\n",
        LOOP_RUN_ONLY + "hpc.get([bill.remote(kwh) for _ in range(3)])\n"
        "bills = [np.where(kwh <= 10.0, kwh * 0.20, 2.0 + (kwh - 10.0) * 0.35)] * 3\n", None, False,
        "not-from-tasks", "`bills` was not computed from the tasks' results"),
    "shortcut-the-loop-results-renamed": (
        "    return kwh[:10]\n", LOOP_RUN_ONLY + "hpc.get([bill.remote(kwh) for _ in range(3)])\nbills = loop_bills\n",
        None, False, "not-from-tasks", "`bills` was not computed from the tasks' results"),
    "honest-minimum-and-maximum-and-named-futures": (
        "    return np.minimum(kwh, 10.0) * 0.20 + np.maximum(kwh - 10.0, 0.0) * 0.35\n",
        LOOP_RUN_ONLY + "pending = [bill.remote(kwh) for _ in range(3)]\nbills = hpc.get(pending)\n", None, True,
        None, "`bills` holds the 3 arrays"),
    "honest-a-boolean-mask": (
        "    out = kwh * 0.20\n    high = kwh > 10.0\n"
        "    out[high] = 2.0 + (kwh[high] - 10.0) * 0.35\n    return out\n",
        None, None, True, None, "the profile shows its Python bytecode time under 1/5 of the loop's"),
    "fact-four-bill-tasks": (
        WHERE, LOOP_RUN_ONLY + "bills = hpc.get([bill.remote(kwh) for _ in range(4)])\n", None, True, None,
        "`bills` holds the 4 arrays its tasks returned"),
}


def _vectorize(body: str, run: str | None = None, line: str | None = None):
    # As the lesson runs it: --no-optimize, so the loops are measured as Python runs them (no automatic JIT)
    return run_exercise("vectorize", "@hpc.remote\ndef bill(kwh):\n" + body + (run or VEC_RUN), setup=VEC_SETUP,
                        line=line or VEC_LINE)


@pytest.mark.parametrize("case", list(VEC_TABLE))
def test_vectorize(case):
    body, run, line, passed, mistake, says = VEC_TABLE[case]
    v = _vectorize(body, run, line)
    _expect(v, passed, says)
    assert v.mistake == mistake, v.to_text(precise=True)
    if not passed:
        assert hint_words(v) and hint_code(v)


def test_vectorize_a_loop_the_automatic_jit_compiled_is_not_vectorized(monkeypatch):
    # The verdict of a run whose JIT compiled bill: built from the real run's attempt with one
    # compiled verdict added, since whether the automatic JIT compiles within 3 calls depends on timing.
    from eugo_lab.exercises.catalog import optimizations as opt
    from eugo_lab.jit import verdicts as jit

    real = jit.verdicts_from_trace
    fake = jit.FunctionVerdict("bill", jit.VERDICT_COMPILED, "", "", 2, 2, 0.1, 0.1, 0.001)
    monkeypatch.setattr(opt.jit, "verdicts_from_trace", lambda trace: [*real(trace), fake])
    v = _vectorize(LOOP_BILL)
    assert not v.passed
    assert "the optimizer compiled bill in this run" in v.to_text(), v.to_text()
    assert "--no-optimize" in hint_code(v)


# -- jit --------------------------------------------------------------------------------------------------
JIT_CELL = '''
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("jit")   # the exercise's inputs, handed out by the checker

@hpc.remote
def histogram(values, bins):
{body}

values = {values}
{run}
'''
# The starter's loop: counted in a dict, the second reason the optimizer declines it
DICT_LOOP = '''    counts = {}
    for i in range(len(values)):
        b = int(values[i] * bins)
        counts[b] = counts.get(b, 0) + 1
    return np.array([counts.get(b, 0) for b in range(bins)], dtype=np.int64)'''
LOOP = '''    counts = np.zeros(bins, dtype=np.int64)
    for i in range(len(values)):
        counts[int(values[i] * bins)] += 1
    return counts'''
ARRAY = "p.values"


JIT_RUN = "hists = hpc.get([histogram.remote(values, p.bins) for _ in range(6)])"


def _jit(body: str = LOOP, values: str = ARRAY, line: str = "-w 2 --no-live --optimize", run: str = JIT_RUN):
    return run_exercise("jit", JIT_CELL.format(body=body, values=values, run=run), line=line)


REF_HIST = "np.bincount((values * 20).astype(np.int64), minlength=20)"
JIT_TABLE = {
    # id: (keyword arguments of _jit, passed, mistake, what the verdict says)
    "mistake-the-starter-a-list-first": ({"body": DICT_LOOP, "values": ARRAY + ".tolist()"}, False, "lists",
                                         "did not compile histogram: it was called with Python lists"),
    "mistake-the-list-fixed-the-dict-left": ({"body": DICT_LOOP}, False, "objects",
                                             "This reason is in the loop's own code, not in its arguments"),
    "mistake-the-dict-fixed-the-list-left": ({"values": ARRAY + ".tolist()"}, False, "lists",
                                             "it was called with Python lists"),
    "mistake-no-optimize": ({"line": "-w 2 --no-live"}, False, "no-optimize", "this run was not optimized"),
    "mistake-numpy-instead-of-the-loop": (
        {"body": "    return np.bincount((values * bins).astype(np.int64), minlength=bins)"}, False, "numpy-instead",
        "this exercise is about the loop"),
    # np.histogram: the name histogram is an attribute the function loads, not a call of itself
    "mistake-np-histogram-instead-of-the-loop": (
        {"body": "    return np.histogram(values, bins=bins, range=(0.0, 1.0))[0]"}, False, "numpy-instead",
        "histogram has no loop left"),
    # A loop that also prints: Numba compiles print, so it passes (it has a loop, whatever the automatic JIT's
    # static reasons would say about printing)
    "honest-a-loop-that-also-prints": (
        {"body": LOOP.replace("    return counts", "    print(counts.sum())\n    return counts")}, True,
        None, "histogram compiled on 2 workers"),
    "shortcut-a-short-decoy-and-counts-made-here": (
        {"run": "hpc.get([histogram.remote(values[:1000], 20) for _ in range(6)])\n"
                f"hists = [{REF_HIST}] * 6"}, False, "not-from-tasks",
        "`hists` was not computed from the tasks' results"),
    "shortcut-a-decoy-on-other-data": (
        {"run": "hpc.get([histogram.remote(np.random.default_rng(0).random(300_000), 20) for _ in range(6)])\n"
                f"hists = [{REF_HIST} for _ in range(6)]"}, False, "not-from-tasks",
        "`hists` was not computed from the tasks' results"),
    "honest-asarray-a-list-of-counts-and-named-futures": (
        {"values": ARRAY + ".tolist()",
         "body": "    counts = [0] * bins\n    for i in range(len(values)):\n"
                 "        counts[int(values[i] * bins)] += 1\n    return np.array(counts)",
         "run": "data = np.asarray(values)\nwaiting = [histogram.remote(data, p.bins) for _ in range(6)]\n"
                "hists = hpc.get(waiting)"}, True, None, "`hists` holds the 6 counts the histogram tasks returned"),
    "fact-four-tasks": ({"run": "hists = hpc.get([histogram.remote(values, p.bins) for _ in range(4)])"}, True, None,
                        "`hists` holds the 4 counts the histogram tasks returned"),
}


@pytest.mark.parametrize("case", list(JIT_TABLE))
def test_jit(case):
    kwargs, passed, mistake, says = JIT_TABLE[case]
    v = _jit(**kwargs)
    _expect(v, passed, says)
    assert v.mistake == mistake, v.to_text(precise=True)
    if not passed:
        assert hint_words(v) and hint_code(v)


def test_jit_reference_passes():
    v = _jit()
    assert v.passed, v.to_text(precise=True)
    assert v.to_text() == ("exercise jit: passed\n"
                           "  histogram compiled on 2 workers; the trial checked that its result is unchanged\n"
                           "  `hists` holds the 6 counts the histogram tasks returned\n"
                           "  the report's before/after numbers show it at least 10x faster\n"
                           "  " + problems.SECOND_CASE)


def test_jit_a_list_is_declined_and_the_hint_names_the_second_reason():
    v = _jit(body=DICT_LOOP, values=ARRAY + ".tolist()")
    assert not v.passed
    assert "NumPy's asarray" in hint_words(v) and "second reason" in hint_words(v) and "p.values" in hint_code(v)


def test_jit_a_python_object_in_the_loop_is_declined():
    body = ('    class Counts:\n        pass\n    c = Counts()\n    c.n = np.zeros(bins, dtype=np.int64)\n'
            '    for i in range(len(values)):\n        c.n[int(values[i] * bins)] += 1\n    return c.n')
    v = _jit(body=body)
    assert not v.passed
    assert "did not compile histogram" in v.to_text() and "lists" not in v.to_text(), v.to_text()


# -- threads ----------------------------------------------------------------------------------------------
THREADS_CELL = '''
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

@hpc.remote
def tuned():
{body}

{run}
'''


# The guard's share on this machine for the tests' 2 workers (what the workers must report)
LIMIT = max(1, len(os.sched_getaffinity(0)) // 2)
LIMIT_TEXT = f"{LIMIT} BLAS thread" + ("" if LIMIT == 1 else "s")
THREADS_RUN = ("before = hpc.get([oversubscribed.remote() for _ in range(p.calls)])\n"
               "after = hpc.get([tuned.remote() for _ in range(p.calls)])")
OVERRIDE = "    with threadpoolctl.threadpool_limits(limits=os.cpu_count()):\n        return blas_work()"
THREADS_TABLE = {
    # id: (tuned's body, the lines that submit (None: the starter's), passed, what the verdict says)
    "reference": ("    return blas_work()", None, True, f"the 4 tuned tasks report {LIMIT_TEXT} each on 2 workers"),
    "mistake-the-override-stays": (OVERRIDE, None, False, f"but ran their work with {os.cpu_count()}, as they"),
    "mistake-no-thread-counts": ("    blas_work()\n    return 'done'", None, False,
                                 "the tuned tasks did not return BLAS thread counts"),
    "mistake-counts-left-out": ("    return blas_work()", THREADS_RUN.replace("after = hpc.get(", "after = ("),
                                False, "`after` was not computed from the tasks' results: 0 of its 4 values"),
    "shortcut-override-returning-a-typed-count": (
        "    with threadpoolctl.threadpool_limits(limits=os.cpu_count()):\n        blas_work()\n    return 1", None,
        False, "tuned sets its own thread limit (it calls threadpool_limits)"),
    "shortcut-counts-typed-by-hand": (
        OVERRIDE, "before = hpc.get([oversubscribed.remote() for _ in range(4)])\n"
                  "hpc.get([tuned.remote() for _ in range(4)])\nafter = [1, 1, 1, 1]", False,
        "but ran their work with 2, as they report"),
    "honest-a-helper-and-futures-kept-first": (
        "    return product_threads()",
        "def product_threads():\n    return blas_work()\n\n"
        "baseline = [oversubscribed.remote() for _ in range(p.calls)]\n"
        "guarded = [tuned.remote() for _ in range(p.calls)]\n"
        "before, after = hpc.get(baseline), hpc.get(guarded)", True,
        f"the 4 tuned tasks report {LIMIT_TEXT} each"),
    "mistake-a-task-more-than-asked": (
        "    return blas_work()", THREADS_RUN.replace("tuned.remote() for _ in range(p.calls)",
                                                  "tuned.remote() for _ in range(5)"),
        False, "5 tuned tasks ran, the check needs 4 (p.calls)"),
}


def _threads(body: str, run: str | None = None):
    return run_exercise("threads", THREADS_CELL.format(body=body, run=run or THREADS_RUN))


@pytest.mark.parametrize("case", list(THREADS_TABLE))
def test_threads(case):
    body, run, passed, says = THREADS_TABLE[case]
    _expect(_threads(body, run), passed, says)


# -- runtime-report -----------------------------------------------------------------------------------------
REPORT_CELL = '''
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("runtime-report")

@hpc.remote
def ewma(a):
    """An exponentially weighted average: each value leans on the average before it."""
    out = np.empty_like(a)
    acc = a[0]
    for i in range(a.shape[0]):
        acc = 0.95 * acc + 0.05 * a[i]
        out[i] = acc
    return out

@hpc.remote
def busiest_hour(hours):
    """The hour with the most events, counted in a dict."""
    counts = {}
    for i in range(hours.shape[0]):
        h = int(hours[i])
        counts[h] = counts.get(h, 0) + 1
    return max(counts, key=counts.get)

averages = hpc.get([ewma.remote(p.series) for _ in range(4)])
peaks = hpc.get([busiest_hour.remote(p.hours) for _ in range(2)])

def triage(report):
{body}
'''
TRIAGE = ("    done = [item.target for item in report.applied]\n"
          "    needs_you = {item.target: item.advice for item in report.declined}\n"
          "    return done, needs_you")


def _report(body: str = TRIAGE, line: str = "-w 2 --no-live --optimize", cell: str | None = None):
    return run_exercise("runtime-report", cell or REPORT_CELL.replace("{body}", body), line=line)


REPORT_TABLE = {
    # id: (triage's body, %%eugo line (None: --optimize), passed, mistake, what the verdict says)
    "reference": (TRIAGE, None, True, None, "triage sorts this run's report"),
    "mistake-the-starter-returns-nothing": ("    done = []\n    needs_you = {}\n    return done, needs_you", None,
                                            False, "wrong-here", "on this run's report triage gives done []"),
    "mistake-reasons-instead-of-advice": (
        "    return ([o.target for o in report.applied],\n"
        "            {o.target: o.reason for o in report.declined})", None, False, "wrong-here",
        "on this run's report triage gives done"),
    "mistake-every-item-is-done": ("    return [o.target for o in report.items], {}", None, False, "wrong-here",
                                   "the report lists"),
    "mistake-a-wrong-attribute": ("    return report.compiled, {}", None, False, "raises",
                                  "triage raised AttributeError on this run's report"),
    "mistake-no-optimize": (TRIAGE, "-w 2 --no-live", False, "no-optimize", "this run was not optimized"),
    "shortcut-names-typed-from-the-report": (
        "    real = hpc.last_optimizations()\n"
        "    return [o.target for o in real.applied], {o.target: o.advice for o in real.declined}", None, False,
        "typed", "but not a report unlike it"),
    "honest-to-dict-and-one-loop": (
        "    done, needs_you = [], {}\n    for item in report.to_dict()['items']:\n"
        "        if item['applied']:\n            done.append(item['target'])\n"
        "        else:\n            needs_you[item['target']] = item['advice']\n    return done, needs_you",
        None, True, None, "it also sorts 3 reports unlike this one"),
    "honest-items-and-a-tuple": (
        "    done = tuple(o.target for o in report.items if o.applied)\n"
        "    return done, dict((o.target, o.advice) for o in report.items if not o.applied)", None, True, None,
        "it also sorts 3 reports unlike this one"),
}


@pytest.mark.parametrize("case", list(REPORT_TABLE))
def test_runtime_report(case):
    body, line, passed, mistake, says = REPORT_TABLE[case]
    v = _report(body, line or "-w 2 --no-live --optimize")
    _expect(v, passed, says)
    assert v.mistake == mistake, v.to_text(precise=True)
    if not passed:
        assert hint_words(v) and hint_code(v)


def test_runtime_report_the_run_compiles_one_function_and_declines_the_other():
    # The exercise's premise, measured: the report the learner reads has one of each
    v = _report()
    assert v.passed, v.to_text(precise=True)
    report = hpc.last_optimizations()
    assert report.find("ewma", "jit").applied and not report.find("busiest_hour", "jit").applied
    # one line per function: a remote function of the cell is not also "not tried: decorated"
    jit_targets = [o.target for o in report.items if o.kind == "jit"]
    assert sorted(jit_targets) == ["busiest_hour", "ewma"], report.items
    assert "ewma" in v.to_text() and "busiest_hour" in v.to_text()


def test_runtime_report_a_hand_typed_answer_fails_on_the_other_reports():
    report_cell = REPORT_CELL.replace("{body}", "    return ['x'], {}")
    v = _report()  # the run whose names the shortcut types
    assert v.passed
    report = hpc.last_optimizations()
    done = [o.target for o in report.applied]
    needs = {o.target: o.advice for o in report.declined}
    typed = f"    return {done!r}, {needs!r}"
    v = _report(cell=report_cell.replace("    return ['x'], {}", typed))
    assert not v.passed and v.mistake == "typed", v.to_text(precise=True)


def test_runtime_report_the_tasks_must_run():
    run = "peaks = hpc.get([busiest_hour.remote(p.hours) for _ in range(2)])"
    cell = REPORT_CELL.replace("{body}", TRIAGE).replace(run, "peaks = []")
    v = _report(cell=cell)
    assert not v.passed and v.mistake == "no-tasks", v.to_text(precise=True)
    assert "no line for busiest_hour" in v.to_text()


# -- the checker's own inputs: pure helpers -------------------------------------------------------------------
def test_a_ratio_under_one_reads_slower_never_0x():
    from eugo_lab.exercises.catalog.optimizations import _times_faster

    assert _times_faster(12.4) == "12x faster" and _times_faster(1.4) == "1.4x faster"
    assert _times_faster(0.3) == "3.3x slower" and _times_faster(0.0).endswith("x slower")


HIST_SOURCES = '''
import numpy as np

def redundant(values, bins):
    counts = np.zeros(bins, dtype=np.int64)
    for i in range(len(values)):
        b = int(values[i] * bins)
        for _ in range(20):
            b = int(values[i] * bins)
        counts[b] += 1
    return counts

def guarded(values, bins):
    for v in values:
        if not 0.0 <= v < 1.0:
            raise ValueError(v)
    counts = np.zeros(bins, dtype=np.int64)
    for v in values:
        b = int(v * bins)
        while b >= bins:
            b -= 1
        counts[b] += 1
    return counts
'''


def test_a_redundant_loop_is_found_and_a_guard_or_a_check_of_the_input_is_not(tmp_path, monkeypatch):
    from eugo_lab.exercises.catalog import optimizations as opt

    (tmp_path / "hist_sources.py").write_text(HIST_SOURCES)
    monkeypatch.syspath_prepend(str(tmp_path))
    import hist_sources

    values, bins = opt.jit_own_values(1)
    want = opt.jit_reference(values, bins)
    assert opt._redundant_loop(hist_sources.redundant, (values, bins), want) == 8  # the inner loop's line in the file
    assert opt._redundant_loop(hist_sources.guarded, (values, bins), want) is None
    assert opt.without_loops(hist_sources.redundant)(values, bins).sum() == 0
