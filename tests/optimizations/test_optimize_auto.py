"""The JIT without annotation: qualifies on measured bytecode time, compiles in the background, stays exact later.

Also one test per defect of the checked trial: keyword arguments (no compile inside the timed
run), defaults, and None-returning functions that write into an argument (the written array is
what is compared).
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from eugo_lab.jit import auto
from eugo_lab.jit import checked as jit
from eugo_lab.jit.verdicts import explain


def smooth(a, k=3):
    out = np.empty_like(a)
    n = a.shape[0]
    for i in range(n):
        lo, hi = max(0, i - k), min(n, i + k + 1)
        s = 0.0
        for j in range(lo, hi):
            s += a[j]
        # (s / (hi - lo) is not proven exact: s is a NumPy float once the inner loop ran, and NumPy divides by
        # zero without raising; Python's 1.0 / 0 raises as compiled code does)
        out[i] = s * (1.0 / (hi - lo))
    return out


def fill(a, out):
    """Returns None; its result is what it writes into ``out``."""
    for i in range(a.shape[0]):
        out[i] = a[i] * a[i] + 1.0


def sum_of_cubes(n):
    """A Python int loop: exact in Python, 64-bit (overflowing past ~2**63) compiled."""
    s = 0
    for i in range(n):
        s += i * i * i
    return s


def vectorized(a):
    return float(np.sqrt(a * a + 1.0).sum())


class Phases:
    """Collects the verdict phases a wrapper announces (as hpc.phase would record them)."""

    def __init__(self):
        self.names = []

    def __call__(self, name):
        if name not in ("jit: plain run", "jit: compiled run", "jit: compile"):
            self.names.append(name)
        return jit._NoPhase(name)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    jit.reset()
    auto.reset()
    # Small thresholds: the tests' functions qualify after a few calls (the real ones are in auto's docstring).
    monkeypatch.setattr(auto, "MIN_CPU_S", 0.05)
    monkeypatch.setattr(auto, "MIN_SAMPLES", 4)
    yield
    auto.reset()
    jit.reset()


def _until(w, status, *args, limit=60, **kwargs):
    out = None
    for _ in range(limit):
        out = w(*args, **kwargs)
        auto.wait_for_compiles()
        st = auto.state_of(w.key)
        if st is not None and (st.status == status or any(s.status == status for s in st.sigs.values())):
            return out
    raise AssertionError(f"never reached {status}: {auto.state_of(w.key)}")


# -- the three defects of the checked trial ---------------------------------------------------------
def test_keyword_arguments_compile_outside_the_timed_run():
    a = np.random.default_rng(0).random(20_000)
    value, verdict, compiled = jit.trial(smooth, (), {"a": a, "k": 3})
    # Before: the compile (0.1-1 s) ran inside the timed compiled run, so it read "not faster".
    assert verdict.compiled, verdict
    assert verdict.compiled_s < verdict.plain_s < verdict.compile_s + verdict.plain_s
    np.testing.assert_array_equal(value, smooth(a))


def test_not_faster_no_longer_says_the_time_is_in_numpy():
    what, helps = explain("not-faster")
    assert "already in NumPy" not in what + helps and "1.5x" in what


def test_defaults_are_bound_so_later_calls_run_the_checked_version():
    a = np.random.default_rng(1).random(20_000)
    opt = jit.Optimized(smooth, "smooth-defaults")
    np.testing.assert_array_equal(opt(a), smooth(a))  # the trial, k from its default
    entry = jit._verdicts["smooth-defaults"]
    assert entry[0].compiled and entry[0].arity == 2
    n = len(entry[1].signatures)
    np.testing.assert_allclose(opt(a), smooth(a))
    np.testing.assert_allclose(opt(a, k=3), smooth(a))
    assert len(entry[1].signatures) == n  # no new, unchecked compile for the one-argument call


def test_a_none_returning_writer_is_checked_on_what_it_writes():
    a = np.random.default_rng(2).random(5_000)
    out = np.zeros_like(a)
    pos = jit.positional(fill, (a, out), {})
    run = jit.PlainRun(fill, (a, out), {}, pos)

    def wrong(a, out):  # a "compiled" version that writes something else and also returns None
        out[:] = 0.0

    c = run.against(wrong)
    # Before: None == None was "result checked", whatever it wrote.
    assert not c.same and c.differs == "`out`, which it writes into (5,000 of 5,000 values)"
    np.testing.assert_allclose(out, a * a + 1.0)  # the caller's array holds the plain run's result
    value, verdict, _ = jit.trial(fill, (np.random.default_rng(3).random(200_000), np.zeros(200_000)), {})
    assert value is None and verdict.compiled, verdict
    checked, simd_line = jit.split_compiled_detail(verdict.detail)
    assert checked == "`out` (written in place; it returns None)" and simd_line


def test_a_function_with_no_result_at_all_is_declined():
    def nothing(a):
        t = 0.0
        for i in range(a.shape[0]):
            t += a[i]

    _, verdict, compiled = jit.trial(nothing, (np.ones(300_000),), {})
    assert compiled is None and verdict.code == "no-result", verdict


# -- automatic ----------------------------------------------------------------------------------------
def test_a_loop_heavy_function_is_compiled_without_annotation_and_checked():
    a = np.random.default_rng(4).random(20_000)
    ph = Phases()
    w = auto.AutoJit(smooth, "auto-smooth", ph)
    _until(w, auto.COMPILED, a)
    st = auto.state_of("auto-smooth")
    assert st.python > st.native  # its samples were in bytecode
    for _ in range(5):
        np.testing.assert_allclose(w(a), smooth(a), rtol=1e-12)
    compiled = [n for n in ph.names if n.startswith("jit: compiled")]
    assert len(compiled) == 1 and "the return value" in compiled[0] and "[trial plain=" in compiled[0]
    # A new signature (float32) is compiled and trialled again, not run through the float64 version.
    b = a.astype(np.float32)
    for _ in range(40):
        out = w(b)
        auto.wait_for_compiles()
        assert out.dtype == np.float32
    assert sum(1 for n in ph.names if n.startswith("jit: compiled")) + \
        sum(1 for n in ph.names if n.startswith("jit: declined")) == 2


def test_numpy_vectorized_code_is_not_tried_and_says_why():
    ph = Phases()
    w = auto.AutoJit(vectorized, "auto-vec", ph)
    a = np.random.default_rng(5).random(1_000_000)
    _until(w, auto.SKIPPED_STATE, a)
    assert ph.names and ph.names[-1].startswith("jit: not tried: in-c")
    assert jit.compile_count() == 0


def test_functions_with_effects_are_never_tried():
    def shout(a):
        print("hi")
        return a

    def gen(a):
        yield a

    assert auto.static_reason(shout)[0] == "effects"
    assert auto.static_reason(gen)[0] == "not-plain"
    assert auto.static_reason(smooth) is None
    ph = Phases()
    w = auto.AutoJit(gen, "auto-gen", ph)
    list(w(1))
    assert ph.names == ["jit: not tried: not-plain: a generator or coroutine"]


def test_a_python_int_accumulator_is_never_compiled_automatically_and_the_verdict_says_which_line(monkeypatch):
    # Before: compiled after a trial on small n (where int64 and Python's ints agree), then wrong on larger n
    # until a re-check caught it. Now its compiled code is read before any compiled call and declined.
    ph = Phases()
    w = auto.AutoJit(sum_of_cubes, "auto-cubes", ph)
    auto._state(w.key, sum_of_cubes).status = auto.QUALIFIED
    for n in (30_000, 30_000, 30_000, 300_000, 300_000):
        assert w(n) == sum_of_cubes(n)
        auto.wait_for_compiles()
    said = [n for n in ph.names if n.startswith("jit: declined")]
    assert said and all("not-proven" in n for n in said), ph.names
    line = sum_of_cubes.__code__.co_firstlineno + 4  # s += i * i * i
    assert f"line {line}: `s` is a Python int that can outgrow 64 bits" in said[0], said
    assert "Numba's int64 would wrap" in said[0]
    assert not any(s.status == auto.COMPILED for s in auto.state_of("auto-cubes").sigs.values())


def test_sampled_later_calls_are_rechecked_and_a_difference_switches_back(monkeypatch):
    """The re-checks stay as a second line of defence: here the proof is switched off to let a wrong version in."""
    from _optimize_tasks import big_product

    monkeypatch.setattr(jit, "reasons_line", lambda *a: "")
    monkeypatch.setattr(auto, "RECHECK_FIRST", (2,))
    monkeypatch.setattr(auto, "SHORT_CALL_S", 0.0)  # its checked calls are short: 30 elements fit in 64 bits
    monkeypatch.setattr(auto, "MIN_CPU_S", 0.01)
    # The trial on 30 elements times microseconds, where one stall of a loaded machine can make the compiled
    # run the slower one and decline it; this test is about what happens after the swap, so any gain will do.
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    ph = Phases()
    w = auto.AutoJit(big_product, "auto-big", ph)
    # Qualified from the start: this test is about the re-check, not about the sampler's share of 18 us calls.
    auto._state(w.key, big_product).status = auto.QUALIFIED
    small = np.random.default_rng(6).random(30)  # 3**30: fits in 64 bits
    long = np.random.default_rng(7).random(60_000)
    _until(w, auto.COMPILED, small, limit=20000)
    w(long)  # compiled call 1: not re-checked (the documented sample)
    assert w(long) == big_product(long)  # call 2 is re-checked: the exact result, and back to plain
    assert any(n.startswith("jit: declined: differs-later") for n in ph.names)
    assert w(long) == big_product(long)


def test_a_function_that_never_qualifies_costs_a_lookup_and_a_clock():
    w = auto.AutoJit(lambda x: x + 1, "auto-tiny", Phases())
    for i in range(auto.SHORT_CALLS + 1):
        assert w(i) == i + 1
    assert auto.state_of("auto-tiny").status == auto.SKIPPED_STATE
    assert jit.compile_count() == 0


def _countdown(n):
    return 0 if n <= 0 else _countdown(n - 1)


def _with_loop(x):
    for _ in range(1):
        x += 1
    return x


@pytest.mark.parametrize("fn, loop", [(lambda x: x + 1, False), (_with_loop, True), (_countdown, True)],
                         ids=["no loop", "a loop", "calls itself"])
def test_short_calls_of_a_function_with_no_loop_are_judged_sooner(fn, loop):
    key = f"auto-short-{loop}-{fn.__name__}"
    w = auto.AutoJit(fn, key, Phases())
    # Arguments 0-3: every call stays a few microseconds (a countdown from i up to 271 averaged near the 20 us
    # line on a busy machine, and was then rightly still watched).
    for i in range(auto.SHORT_CALLS_NO_LOOP):
        w(i % 4)
    # No loop to compile: decided after a few calls. A loop (or a call of itself) is watched for longer.
    assert (auto.state_of(key).status == auto.SKIPPED_STATE) is not loop
    for i in range(auto.SHORT_CALLS):
        w(i % 4)
    assert auto.state_of(key).status == auto.SKIPPED_STATE
    assert jit.compile_count() == 0


def test_a_batch_calls_the_plain_function_once_the_jit_ruled_it_out():
    plain = lambda x: x * 2  # noqa: E731 - a function with no loop, as hpc.map's tiny items are
    w = auto.AutoJit(plain, "auto-batch", Phases())
    assert w.eugo_settled() is w  # still watched: a batch's items go through the wrapper
    for i in range(auto.SHORT_CALLS + 1):
        w(i)
    assert auto.state_of("auto-batch").status == auto.SKIPPED_STATE
    w(0)  # announces its verdict (the phase) once
    assert w.eugo_settled() is plain  # ruled out: the items call the function itself


# -- which calls the sampler looks at: a function's once it has spent SAMPLE_AFTER_S, and a loop's first ------

def _in_watch(x):
    return threading.get_ident() in auto._watch  # whether the sampler would look at this call now


def _in_watch_after_a_loop(x):
    for _ in range(x):
        pass
    return threading.get_ident() in auto._watch


def _while(n):
    while n > 0:
        n -= 1
    return n


def _comprehension(a):
    return sum([x * x for x in a])


def test_a_functions_calls_are_sampled_once_it_has_spent_sample_after_s_and_a_loops_first_call_at_once(monkeypatch):
    monkeypatch.setattr(auto, "SHORT_CALL_S", 0.0)  # by their length alone, every call would be sampled
    plain = auto.AutoJit(_in_watch, "auto-no-loop")
    assert not plain(1) and not plain(1)  # no loop and no CPU spent yet: only timed, the sampler is not woken
    auto.state_of("auto-no-loop").cpu = auto.SAMPLE_AFTER_S  # as if its calls had spent that much
    assert plain(1)
    looped = auto.AutoJit(_in_watch_after_a_loop, "auto-loop")
    assert looped(1)  # its first call: one long call of a loop (one task) is decided when it ends
    assert not looped(1)  # then, like any function, not before SAMPLE_AFTER_S
    assert auto.state_of("auto-loop").calls == 2


def test_a_loop_is_read_from_the_code_a_for_a_while_or_a_comprehension():
    for fn in (smooth, fill, _while, _comprehension, _in_watch_after_a_loop):
        assert auto._read_code(fn) == (None, True), fn.__name__
    for fn in (vectorized, _in_watch):
        assert auto._read_code(fn) == (None, False), fn.__name__


# -- what a function that cannot qualify costs: decided once, from its code or its first verdict -------------

def _frame_sum(x):
    return float(pd.Series(x).sum())  # noqa: F821 - the test binds pd, as a notebook's `import pandas as pd` does


def _dumps(x):
    return json.dumps(x)


def test_a_function_that_calls_pandas_is_not_tried_from_its_code(monkeypatch):
    monkeypatch.setitem(globals(), "pd", pytest.importorskip("pandas"))
    frame_sum, dumps = _frame_sum, _dumps
    assert auto.static_reason(frame_sum) == ("library", "it calls pandas")
    assert auto.static_reason(dumps) == ("library", "it calls json")
    assert auto.static_reason(vectorized) is None  # NumPy is what Numba compiles: still measured
    ph = Phases()
    w = auto.AutoJit(frame_sum, "auto-pandas", ph)
    assert w([1.0, 2.0]) == 3.0
    assert ph.names == ["jit: not tried: library: it calls pandas"]
    assert auto.state_of("auto-pandas").calls == 0  # never watched: no clock, no sampler
    what, helps = explain("library")
    assert "pandas" in what and "to_numpy" in helps


def _calls_plain_helper(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += _plain_helper(a[i])
    return s


def _plain_helper(x):
    return x * 2.0


def test_a_compile_error_about_the_function_itself_rules_it_out_for_every_later_call(monkeypatch):
    pytest.importorskip("numba")
    ph = Phases()
    w = auto.AutoJit(_calls_plain_helper, "auto-helper", ph)
    a = np.random.default_rng(8).random(20_000)
    for _ in range(400):
        w(a)
        auto.wait_for_compiles()
        if any(n.startswith("jit: declined") for n in ph.names):
            break
    assert ph.names[-1].startswith("jit: declined: unknown-call: _plain_helper"), ph.names
    assert auto.state_of("auto-helper").status == auto.SKIPPED_STATE

    def no_signature_work(*_):
        raise AssertionError("a ruled-out function's call looked at its arguments")

    monkeypatch.setattr(jit, "arg_signature", no_signature_work)
    assert w(a) == _calls_plain_helper(a)
    assert w(a[:10].astype(np.float32)) == _calls_plain_helper(a[:10].astype(np.float32))  # new types: not retried
    assert ph.names[-1].startswith("jit: declined: unknown-call"), ph.names


def test_a_worker_imports_the_automatic_jit_without_the_trial_machinery():
    import subprocess
    import sys

    code = ("import sys, eugo_lab.backends.local_worker, eugo_lab.backends._worker, eugo_lab.contract.serialization\n"
            "before = set(sys.modules)\n"
            "import eugo_lab.jit.auto\n"
            "print(sorted(m for m in set(sys.modules) - before if not m.startswith('eugo_lab.jit')))\n"
            "print('eugo_lab.jit.checked' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "False", out


def test_the_wrapper_record_reuses_the_function_pickle_the_key_was_made_from():
    import pickle

    from eugo_lab.contract.task import FunctionRecord
    from eugo_lab.hpc import optimized

    g = {"__name__": "__main__"}
    exec("def bump(x):\n    return x + 41\n", g)  # a notebook function: pickled by value
    rec = FunctionRecord(g["bump"], "bump")
    wrapped = optimized.auto_record(rec, 0)
    assert rec.payload in wrapped.payload  # the same bytes, not a second pickle of the function
    assert wrapped.captured == rec.captured
    got = pickle.loads(wrapped.payload)
    assert isinstance(got, auto.AutoJit) and got.key == jit.code_key(rec.payload) and got(1) == 42
    assert optimized.auto_record(rec, 0) is wrapped  # made once per record and cell generation


def test_a_plain_script_gets_the_automatic_jit_without_the_magic():
    # No %%eugo, no explicit import of the feature: the runtime the first .remote() starts hooks it in.
    import subprocess
    import sys

    code = (
        "from eugo_lab import hpc\n"
        "@hpc.remote\n"
        "def loop(n):\n"
        "    s = 0.0\n"
        "    for i in range(n):\n"
        "        s += i * 0.5\n"
        "    return s\n"
        "with hpc.trace():\n"
        "    hpc.get([loop.remote(1000) for _ in range(4)])\n"
        "r = hpc.last_optimizations()\n"
        "print(r is not None and r.mode, [i.target for i in r.items] if r else None)\n"
        "hpc.shutdown()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "automatic ['loop']", out.stdout + out.stderr


_SPIN_KEY = "auto-sampler-wakes"


def _spin_until_sampled(n):
    """Python bytecode until the sampler has looked at this call (or a safety stop 1.5 s on)."""
    import time

    st = auto.state_of(_SPIN_KEY)
    deadline = time.monotonic() + 1.5  # far below the test's 3 s interval
    i = 0
    while st.python + st.native == 0 and time.monotonic() < deadline:
        i += n
    return i


def test_the_sampler_looks_as_soon_as_a_watched_call_wakes_it(monkeypatch):
    # Before: woken by a call, the sampler slept a whole interval (and waited for the interpreter lock a second
    # time) before its first look, so calls of ~10 ms ended unsampled: 0 samples over 2.5 s of such calls. With a
    # long interval, only a look at waking can sample this call before it gives up.
    monkeypatch.setattr(auto, "SAMPLE_INTERVAL_S", 3.0)
    w = auto.AutoJit(_spin_until_sampled, _SPIN_KEY, Phases())
    w(1)
    st = auto.state_of(_SPIN_KEY)
    assert st.python + st.native >= 1, st


def test_a_function_with_long_calls_waits_for_its_compile_and_is_used_in_the_same_run(monkeypatch):
    # Before: a cell that called a 0.3 s loop five times ran every call plain beside the background compile
    # ("not tried: being compiled in the background; the run ended before a call could check"). A slow compile
    # (a busy machine) makes that certain; now the call after the one that qualified waits for it.
    import time

    real = auto._compile

    def slow_compile(fn, pos, sig):
        time.sleep(0.5)
        real(fn, pos, sig)

    monkeypatch.setattr(auto, "_compile", slow_compile)
    monkeypatch.setattr(auto, "WAIT_FOR_COMPILE_S", 0.0)  # every call is "long": the rule, not the machine's speed
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    ph = Phases()
    a = np.random.default_rng(3).random(2_000)
    w = auto.AutoJit(smooth, "auto-waits", ph)
    st = auto._state(w.key, smooth)
    st.status, st.calls, st.cpu = auto.QUALIFIED, 1, 0.3
    w(a)  # starts the compile for these types
    w(a)  # waits for it, then runs the trial
    assert any(s.status == auto.COMPILED for s in auto.state_of("auto-waits").sigs.values()), ph.names


def test_optimize_trials_a_cell_function_on_its_first_call_with_arrays(monkeypatch):
    # Before: with or without --optimize a cell's own function waited for 0.2 s of CPU and a background compile,
    # so a cell that called it a few times ended with "not tried: being compiled in the background".
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    a = np.random.default_rng(8).random(2_000)
    f = auto.CellFunction(smooth, "cell:eager-smooth", eager=True)
    np.testing.assert_array_equal(f(a), smooth(a))
    st = auto.state_of("cell:eager-smooth")
    assert any(s.status == auto.COMPILED for s in st.sigs.values()), f.verdicts
    assert f.verdicts and f.verdicts[-1].startswith("jit: compiled"), f.verdicts
    np.testing.assert_array_equal(f(a), smooth(a))  # compiled from now on, the same to the last bit


def _overloads(dispatcher):
    return len(getattr(dispatcher, "dispatcher", dispatcher).overloads)


@pytest.mark.parametrize("make", [
    pytest.param(lambda a: np.frombuffer(a.tobytes()), id="read-only (an hpc.put array on a worker)"),
    pytest.param(lambda a: np.concatenate([a, a])[::2], id="strided"),
])
def test_the_trial_runs_the_proven_version_on_copies_of_a_read_only_or_strided_array(monkeypatch, make):
    # Before: the trial ran the compiled code on writable, contiguous copies; Numba compiled a second, unproven
    # version for them on the spot, and the trial timed that compile as the compiled run: a task given hpc.put
    # references was declined "not faster" (0.19 s "compiled" against 0.04 s plain) under --optimize.
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    a = make(np.random.default_rng(5).random(3_000))
    w = auto.AutoJit(smooth, "auto-readonly", Phases())
    auto._state(w.key, smooth).status = auto.QUALIFIED
    for _ in range(3):
        np.testing.assert_array_equal(w(a), smooth(a))
        auto.wait_for_compiles()
    (s,) = auto.state_of("auto-readonly").sigs.values()
    assert s.status == auto.COMPILED and _overloads(s.dispatcher) == 1, w.phase.names


def test_a_read_only_array_is_its_own_signature_compiled_and_proven_for_it(monkeypatch):
    # Before: a read-only array had a writable one's signature, so its call ran the writable version's dispatcher,
    # and Numba compiled a read-only version there and then, which nobody proved or checked.
    monkeypatch.setattr(jit, "MIN_GAIN", 0.0)
    a = np.random.default_rng(6).random(3_000)
    ro = np.frombuffer(a.tobytes())
    w = auto.AutoJit(smooth, "auto-two-flags", Phases())
    auto._state(w.key, smooth).status = auto.QUALIFIED
    for x in (a, a, ro, ro, ro):
        np.testing.assert_array_equal(w(x), smooth(x))
        auto.wait_for_compiles()
    sigs = auto.state_of("auto-two-flags").sigs.values()
    assert len(sigs) == 2 and all(s.status == auto.COMPILED and _overloads(s.dispatcher) == 1 for s in sigs)
    opt = jit.Optimized(smooth, "opt-readonly")
    monkeypatch.setattr(jit, "MIN_PLAIN_SECONDS", 0.0)
    np.testing.assert_array_equal(opt(ro), smooth(ro))
    entry = jit._verdicts["opt-readonly"]
    assert entry[0].compiled and _overloads(entry[1]) == 1
    assert jit._chosen(entry, smooth, (a,), {}) is smooth  # a writable array: not the read-only version's types
