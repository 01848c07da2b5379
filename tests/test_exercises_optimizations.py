"""Course 3's exercises: each reference passes; typical mistakes are ``not yet`` with their own message."""

from __future__ import annotations

import pytest
from _exercise_cells import hint_code, hint_words, run_exercise

from eugo_lab import hpc


@pytest.fixture(scope="module", autouse=True)
def _workers():
    yield
    hpc.shutdown()


# -- profile-first -----------------------------------------------------------------------------------
PROFILE_SETUP = '''
import numpy as np
from eugo_lab import hpc

def load_readings(seed):
    return np.random.default_rng(seed).normal(20.0, 5.0, 200_000)

def sort_readings(values):
    return np.sort(values)

def count_spikes(values):
    spikes = 0
    for i in range(1, len(values) - 1):
        if values[i] - values[i - 1] > 3.0 and values[i] - values[i + 1] > 3.0:
            spikes += 1
    return spikes

@hpc.remote
def station_report(seed):
    values = load_readings(seed)
    return float(sort_readings(values)[100_000]), count_spikes(values)
'''
PROFILE_RUN = "reports = hpc.get([station_report.remote(s) for s in range(6)])\n"


def _profile_first(answer: str, line: str = "-w 2 --no-live --profile"):
    return run_exercise("profile-first", PROFILE_RUN + f"hot = {answer}\n", setup=PROFILE_SETUP, line=line)


def test_profile_first_reference_passes():
    v = _profile_first('"count_spikes"')
    assert v.passed, v.to_text(precise=True)
    assert v.to_text() == ("exercise profile-first: passed\n"
                           "  `hot` = count_spikes: the function of your code with the most self time in the merged "
                           "profile of 6 tasks on 2 workers")


def test_profile_first_the_function_that_only_looks_slow():
    v = _profile_first('"sort_readings"')
    assert not v.passed
    assert "sort_readings is not where the time goes" in v.to_text(), v.to_text()


def test_profile_first_the_remote_wrapper():
    v = _profile_first('"station_report"')
    assert not v.passed
    assert "station_report is the remote function you submitted" in v.to_text(), v.to_text()


def test_profile_first_a_name_not_in_the_profile_and_no_profile():
    v = _profile_first('"spikes"')
    assert not v.passed and "no function named spikes ran" in v.to_text()
    assert "count_spikes" in v.to_text()
    v = _profile_first('"count_spikes"', line="-w 2 --no-live")
    assert not v.passed and "this run has no profile" in v.to_text(), v.to_text()


# -- vectorize -------------------------------------------------------------------------------------------
VEC_SETUP = '''
import numpy as np
from eugo_lab import hpc

@hpc.remote
def norm_loop(x, y):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = (x[i] * x[i] + y[i] * y[i]) ** 0.5
    return out

rng = np.random.default_rng(5)
x, y = rng.normal(0.0, 1.0, 300_000), rng.normal(0.0, 1.0, 300_000)
'''
VEC_RUN = '''
loop_results = hpc.get([norm_loop.remote(x, y) for _ in range(3)])
results = hpc.get([norm.remote(x, y) for _ in range(3)])
'''


def _vectorize(body: str):
    # As the lesson runs it: --no-optimize, so the loops are measured as Python runs them (no automatic JIT)
    return run_exercise("vectorize", "@hpc.remote\ndef norm(x, y):\n" + body + VEC_RUN, setup=VEC_SETUP,
                        line="-w 2 --no-live --profile --no-optimize")


def test_vectorize_reference_passes():
    v = _vectorize("    return np.sqrt(x * x + y * y)\n")
    assert v.passed, v.to_text(precise=True)
    assert "norm returns the same array as norm_loop" in v.to_text()


def test_vectorize_the_loop_is_still_there():
    v = _vectorize("    out = np.empty_like(x)\n    for i in range(len(x)):\n"
                   "        out[i] = (x[i] * x[i] + y[i] * y[i]) ** 0.5\n    return out\n")
    assert not v.passed
    assert "the `for` loop is still there" in v.to_text(), v.to_text(precise=True)


def test_vectorize_np_vectorize_is_still_a_python_loop():
    v = _vectorize("    f = np.vectorize(lambda a, b: (a * a + b * b) ** 0.5)\n    return f(x, y)\n")
    assert not v.passed
    text = v.to_text()
    assert "the `for` loop is still there" in text or "np.vectorize, map() and list comprehensions" in text, text


def test_vectorize_a_different_result():
    v = _vectorize("    return np.sqrt(x * x + y)\n")
    assert not v.passed and "`results` is not the square root of x squared plus y squared" in v.to_text()


# -- jit --------------------------------------------------------------------------------------------------
JIT_CELL = '''
import numpy as np
from eugo_lab import hpc

@hpc.remote
def histogram(values, bins):
{body}

values = {values}
hists = hpc.get([histogram.remote(values, 20) for _ in range(6)])
'''
LOOP = '''    counts = np.zeros(bins, dtype=np.int64)
    for i in range(len(values)):
        counts[int(values[i] * bins)] += 1
    return counts'''
ARRAY = "np.random.default_rng(4).random(300_000)"


def _jit(body: str = LOOP, values: str = ARRAY, line: str = "-w 2 --no-live --optimize"):
    return run_exercise("jit", JIT_CELL.format(body=body, values=values), line=line)


def test_jit_reference_passes():
    v = _jit()
    assert v.passed, v.to_text(precise=True)
    assert v.to_text() == ("exercise jit: passed\n"
                           "  histogram compiled on 2 workers; the trial checked that its result is unchanged\n"
                           "  the report's before/after numbers show it at least 10x faster")


def test_jit_a_list_is_declined():
    v = _jit(values=ARRAY + ".tolist()")
    assert not v.passed
    assert "did not compile histogram: it was called with Python lists" in v.to_text(), v.to_text()
    assert "NumPy's asarray" in hint_words(v) and "random(300_000)" in hint_code(v)


def test_jit_a_python_object_in_the_loop_is_declined():
    body = ('    class Counts:\n        pass\n    c = Counts()\n    c.n = np.zeros(bins, dtype=np.int64)\n'
            '    for i in range(len(values)):\n        c.n[int(values[i] * bins)] += 1\n    return c.n')
    v = _jit(body=body)
    assert not v.passed
    assert "did not compile histogram" in v.to_text() and "lists" not in v.to_text(), v.to_text()


def test_jit_already_numpy_is_not_the_exercise_and_optimize_is_needed():
    v = _jit(body="    return np.bincount((values * bins).astype(np.int64), minlength=bins)")
    assert not v.passed
    assert "this exercise is about the loop" in v.to_text(), v.to_text()
    v = _jit(line="-w 2 --no-live")
    assert not v.passed and "this run was not optimized" in v.to_text()


# -- threads ----------------------------------------------------------------------------------------------
THREADS_CELL = '''
import os
import numpy as np
import threadpoolctl
from eugo_lab import hpc

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

before = hpc.get([oversubscribed.remote() for _ in range(4)])
after = hpc.get([tuned.remote() for _ in range(4)])
'''


def _threads(body: str):
    return run_exercise("threads", THREADS_CELL.format(body=body))


def test_threads_reference_passes():
    v = _threads("    return blas_work()")
    assert v.passed, v.to_text(precise=True)
    assert "no oversubscription" in v.to_text() or "too small to oversubscribe" in v.to_text()


def test_threads_the_override_defeats_the_guard():
    v = _threads("    with threadpoolctl.threadpool_limits(limits=os.cpu_count()):\n        return blas_work()")
    assert not v.passed
    assert "overrides the guard" in v.to_text(), v.to_text()


def test_threads_the_tuned_tasks_must_return_their_thread_counts():
    v = _threads("    blas_work()\n    return 'done'")
    assert not v.passed and "not lists of BLAS thread counts, the numbers the tasks" in v.to_text(), v.to_text()


# -- runtime-report -----------------------------------------------------------------------------------------
REPORT_CELL = '''
import numpy as np
from eugo_lab import hpc

@hpc.remote{batch}
def parse(line):
    return float(line.split(",")[1])

@hpc.remote
def running_max(values):
    out = np.empty(len(values))
    top = -np.inf
    for i in range(len(values)):
        if values[i] > top:
            top = values[i]
        out[i] = top
    return out

lines = [f"{{i}},{{(i * 7919) % 1000 / 10}}" for i in range(2000)]
values = hpc.get([parse.remote(s) for s in lines])
signal = np.random.default_rng(6).normal(0.0, 1.0, 200_000).cumsum()
peaks = hpc.get([running_max.remote({arg}) for _ in range(4)])
'''


def _report(batch: str = '(batch="auto")', arg: str = "signal"):
    return run_exercise("runtime-report", REPORT_CELL.format(batch=batch, arg=arg),
                        line="-w 2 --no-live --optimize")


def test_runtime_report_reference_passes():
    v = _report()
    assert v.passed, v.to_text(precise=True)
    assert "the report shows parse batched (batch=\"auto\") and running_max compiled" in v.to_text()


def test_runtime_report_tiny_calls_not_batched():
    v = _report(batch="")
    assert not v.passed
    assert "the report shows no batching for parse" in v.to_text(), v.to_text()


def test_runtime_report_a_list_is_not_compiled():
    v = _report(arg="signal.tolist()")
    assert not v.passed
    assert "running_max was not compiled: it was called with Python lists" in v.to_text(), v.to_text()
