"""The optimization report as data: built from hand-made traces, hot functions and counters."""

from __future__ import annotations

from dataclasses import dataclass

from eugo_lab.hpc.coalesce import CoalesceStats
from eugo_lab.jit import checked as jit
from eugo_lab.jit.verdicts import explain, verdicts_from_trace
from eugo_lab.optimizations import report as opt_report
from eugo_lab.threadguard.limits import plan
from eugo_lab.tracing.trace import Trace


@dataclass(frozen=True)
class Hot:
    """What the profiler's HotFunction offers (function, self_share, python_share)."""

    function: str
    self_share: float
    python_share: float



class FakeTrace:
    """The few Trace attributes the report reads: tasks, phases, names."""

    def __init__(self, rows, phases):
        # rows: (function index, worker, start, end, batch); phases: (row, name, start, end)
        self.functions = ["smooth", "boxed", "inc"]
        names = sorted({p[1] for p in phases})
        self.phase_names = names
        self.tasks = {"function": [r[0] for r in rows], "worker": [r[1] for r in rows],
                      "cpu": [r[3] - r[2] for r in rows],
                      "start": [r[2] for r in rows], "end": [r[3] for r in rows],
                      "batch": [r[4] for r in rows], "attempt": [1] * len(rows)}
        self.workers = {}  # worker -> (host, pid): none known (no earlier verdicts to recall)
        self.phases = {"row": [p[0] for p in phases], "name": [names.index(p[1]) for p in phases],
                       "start": [p[2] for p in phases], "end": [p[3] for p in phases], "cpu": [0.0] * len(phases)}

    first_attempts = Trace.first_attempts  # what "a task" is, as the real trace says it


def _trace():
    ok = jit.Verdict("compiled").phase_name()
    declined = jit.Verdict("declined", "unknown-call", "Tag").phase_name()
    rows = [(0, 0, 0.0, 1.0, -1), (0, 1, 0.0, 1.0, -1), (0, 0, 1.0, 1.0004, -1), (1, 1, 1.0, 1.2, -1)]
    phases = [(0, "jit: plain run", 0.0, 0.3), (0, "jit: compile", 0.3, 0.55), (0, "jit: compiled run", 0.55, 0.5503),
              (0, ok, 0.6, 0.6),
              (1, "jit: plain run", 0.0, 0.3), (1, "jit: compile", 0.3, 0.55), (1, "jit: compiled run", 0.55, 0.5503),
              (1, ok, 0.6, 0.6), (3, "jit: plain run", 0.0, 0.2), (3, declined, 0.2, 0.2)]
    return FakeTrace(rows, phases)


def test_verdicts_are_merged_per_function():
    vs = {v.function: v for v in verdicts_from_trace(_trace())}
    assert vs["smooth"].status == "compiled" and vs["smooth"].workers == 2 and vs["smooth"].compiles == 2
    assert abs(vs["smooth"].speedup - 750) < 1  # plain 0.3 s over the later compiled call's 0.4 ms
    assert vs["smooth"].later_calls == 1 and abs(vs["smooth"].later_s - 0.0004) < 1e-9
    assert vs["boxed"].status == "declined" and (vs["boxed"].code, vs["boxed"].detail) == ("unknown-call", "Tag")


def test_report_lines_precise_and_bucketed():
    rep = opt_report.build(_trace(), plan(2, 2, env={}))
    smooth = rep.find("smooth", "jit")
    proven = "exact for every input (proven from its compiled code); result checked"
    assert smooth.bucketed == f"smooth: compiled in 200 ms; 200 ms -> 500 us per call (~1000x), {proven}"
    assert smooth.precise == (f"smooth: compiled in 250 ms; 300 ms -> 400 us per call (750x), {proven} "
                              "(2 workers, one compile each); after: median of 1 later call (trial's compiled run "
                              "300 us)")
    boxed = rep.find("boxed")
    assert not boxed.applied and "(Tag)" in boxed.reason and "NumPy and math functions" in boxed.advice
    threads = rep.find("workers", "threads")
    assert threads.applied and threads.bucketed == "BLAS threads per worker: 1 (2 cores / 2 workers); was 2"
    assert [o.kind for o in rep.items] == ["jit", "jit", "threads"]
    assert [i["target"] for i in rep.to_dict()["items"]] == ["boxed", "smooth", "workers"]


def test_cached_verdicts_carry_the_earlier_numbers():
    v = jit.Verdict("compiled", plain_s=0.3, compile_s=0.25, compiled_s=0.0003)
    name = v.phase_name(cached=True)
    assert jit.parse_phase(name) == ("compiled", "", "")
    assert jit.cached_times(name)[1:] == ({"plain": 0.3, "compile": 0.25, "compiled": 0.0003}, True)
    assert jit.parse_phase(jit.Verdict("declined", "differs", plain_s=0.1).phase_name()) == ("declined", "differs", "")
    t = FakeTrace([(0, 0, 0.0, 0.3, -1)], [(0, name, 0.0, 0.0)])
    (fv,) = verdicts_from_trace(t)
    assert fv.cached and fv.compiles == 0 and abs(fv.speedup - 1000) < 1e-6
    line = opt_report.build(t, None).find("smooth").bucketed
    assert line.startswith("smooth: compiled earlier on these workers, reused; 200 ms -> 200 us per call")


def test_profile_hot_functions_pick_the_jit_candidates():
    hot = [Hot("smooth", 0.8, 0.76), Hot("vectorized", 0.15, 0.01), Hot("idle", 0.0, 0.0)]
    assert opt_report.jit_candidates(hot) == {"smooth": 0.95}
    rep = opt_report.build(_trace(), None, hot=hot)
    assert "profile" not in rep.find("smooth").bucketed  # sampled or not depends on the run: precise text only
    assert rep.find("smooth").precise.endswith("profile: 95% of its own time in Python bytecode (what a JIT speeds up)")


def test_batching_items():
    tiny = CoalesceStats("inc", 2000, 4, 6, 1996, 900, 2e-6, "tiny")
    slow = CoalesceStats("nap", 10, 10, 0, 0, 0, 0.02, "slow")
    rep = opt_report.build(FakeTrace([], []), None, [tiny, slow])
    assert rep.find("inc").applied and "10 backend tasks" in rep.find("inc").precise
    assert "fewer backend tasks" in rep.find("inc").bucketed and "2 us" in rep.find("inc").precise
    assert not rep.find("nap").applied and "20 ms" in rep.find("nap").precise


def test_map_batches_from_the_batch_column():
    rows = [(2, 0, 0.0, 0.1, 7)] * 3 + [(2, 1, 0.0, 0.1, 9)] * 2 + [(2, 0, 0.0, 0.1, 11)]
    (m,) = opt_report.map_batches(FakeTrace(rows, []))
    assert m.numbers == {"items": 6, "batches": 3, "largest_batch": 3} and m.applied


def test_bucket_ratio():
    assert opt_report.bucket_ratio(937) == "~1000x" and opt_report.bucket_ratio(3.1) == "~2x"
    assert opt_report.bucket_ratio(0) == "?"


def test_the_text_and_the_numbers_use_one_median():
    # Before: the text/plain ratio came from the trial's fastest compiled run (0.3 ms: ~1000x) while the numbers
    # held the median of the later calls; now both say the later calls' median.
    rows = [(0, 0, 0.0, 1.0, -1), (0, 0, 1.0, 1.002, -1), (0, 0, 2.0, 2.002, -1), (0, 0, 3.0, 3.002, -1)]
    ok = jit.Verdict("compiled").phase_name()
    phases = [(0, "jit: plain run", 0.0, 0.4), (0, "jit: compile", 0.4, 0.6), (0, "jit: compiled run", 0.6, 0.6002),
              (0, ok, 0.7, 0.7)]
    item = opt_report.build(FakeTrace(rows, phases), None).find("smooth", "jit")
    assert abs(item.numbers["speedup"] - 200) < 1e-6  # 0.4 s over the later calls' 2 ms
    assert "(~200x)" in item.bucketed and "(200x)" in item.precise, item


def test_code_compiled_by_request_but_not_proven_says_how_many_calls_were_checked():
    # optimize=True compiles code the automatic JIT declines; before, its line said "result checked" for calls
    # nobody checked.
    why = "line 4: `s` is a Python int that can outgrow 64 bits: Numba's int64 would wrap"
    ok = jit.Verdict("compiled", detail=jit.compiled_detail("the return value", "", why)).phase_name()
    rows = [(0, 0, 0.0, 1.0, -1), (0, 1, 0.0, 1.0, -1)]
    phases = [(0, "jit: plain run", 0.0, 0.3), (0, ok, 0.6, 0.6), (1, "jit: plain run", 0.0, 0.3), (1, ok, 0.6, 0.6)]
    item = opt_report.build(FakeTrace(rows, phases), None).find("smooth", "jit")
    assert item.applied and "result checked" not in item.precise + item.bucketed
    assert f"checked on 2 calls (the return value), not proven for all inputs: {why}" in item.precise
    assert f"checked on its trial calls, not proven for all inputs: {why}" in item.bucketed
    assert item.numbers["proven"] is False


def test_a_function_never_sampled_is_not_said_to_lack_cpu():
    # 0.7 s of CPU in one worker and no verdict: the sampler never caught a call (before: "too little CPU").
    rows = [(2, 0, float(i), float(i) + 0.07, -1) for i in range(10)]
    items = opt_report.unjudged(FakeTrace(rows, []), [])
    assert len(items) == 1 and items[0].bucketed == "inc: not tried: " + explain("never-sampled")[0]
    assert explain("never-sampled")[0].startswith("never sampled")
    few = opt_report.unjudged(FakeTrace(rows[:2], []), [])
    assert "not yet spent enough CPU" in few[0].bucketed


def test_a_function_compiled_for_some_arguments_says_the_others_ran_plain():
    """Each argument signature has its own verdict: a small int compiled, a huge one declined, on one worker."""
    ok = jit.Verdict("compiled", plain_s=0.3, compile_s=0.25, compiled_s=0.0003).phase_name()
    huge = "jit: declined: not-proven: line 12: a product is a Python int that can outgrow 64 bits [trial compile=0]"
    t = FakeTrace([(0, 0, 0.0, 0.3, -1), (0, 0, 1.0, 1.3, -1)], [(0, ok, 0.0, 0.0), (1, huge, 1.0, 1.0)])
    (fv,) = verdicts_from_trace(t)
    assert fv.status == "compiled" and fv.partial == ("not-proven", "line 12: a product is a Python int that can "
                                                                    "outgrow 64 bits")
    item = opt_report.build(t, None).find("smooth")
    assert item.applied and "compiled for some calls only: calls with other argument types or integer sizes ran " \
                             "plain" in item.precise and "line 12" in item.bucketed
    # Declined first (the huge int), compiled after (the small one): the same.
    t = FakeTrace([(0, 0, 0.0, 0.3, -1), (0, 0, 1.0, 1.3, -1)], [(0, huge, 0.0, 0.0), (1, ok, 1.0, 1.0)])
    assert verdicts_from_trace(t)[0].partial[0] == "not-proven"
    # A re-check that found a difference sends every call back to plain: declined, no partial.
    back = "jit: declined: differs-later: 1 != 2, on compiled call 64 [trial plain=0.3]"
    t = FakeTrace([(0, 0, 0.0, 0.3, -1), (0, 0, 1.0, 1.3, -1), (0, 0, 2.0, 2.3, -1)],
                  [(0, huge, 0.0, 0.0), (1, ok, 1.0, 1.0), (2, back, 2.0, 2.0)])
    (fv,) = verdicts_from_trace(t)
    assert fv.status == "declined" and fv.code == "differs-later" and fv.partial is None


def test_a_decline_advises_about_its_own_reason():
    from eugo_lab.jit.verdicts import advice_for

    grows = "use float64 for values that grow"
    assert grows in advice_for("not-proven", "line 4: `s` is a Python int that can outgrow 64 bits (x)")
    for reason in ("line 3: math.sqrt raises ValueError for a negative number in Python; compiled, it returns nan",
                   "line 2: np.sum() is not one of the calls proven to match CPython",
                   "line 1: round() is not one of the calls proven to match CPython",
                   "line 5: `k` is a Python int combined with int8 values: NumPy 2 raises OverflowError when ..."):
        assert grows not in advice_for("not-proven", reason), reason
    assert "constant within the array dtype's range" in advice_for("not-proven", "line 5: `k` is a Python int "
                                                                   "combined with int8 values: NumPy 2 raises "
                                                                   "OverflowError")


def test_code_reused_for_another_integer_size_is_not_said_to_compile_in_no_time():
    ok = jit.Verdict("compiled", plain_s=0.3, compile_s=0.0, compiled_s=0.0003).phase_name()
    line = opt_report.build(FakeTrace([(0, 0, 0.0, 0.3, -1)], [(0, ok, 0.0, 0.0)]), None).find("smooth").precise
    assert "compiled in 0" not in line and "reused the code compiled for other integer sizes" in line


def test_a_result_whose_type_differs_by_path_is_declined_with_its_line_and_no_optimize_advice():
    why = ("line 7: `m` is a float64 NumPy scalar on some paths and a Python number on others: compiled code "
           "returns one type for all (start it as the type it returns, np.float64(0.0), or return float(...))")
    declined = f"jit: declined: result-type: {why} [trial plain=0.3 compile=0.2]"
    item = opt_report.build(FakeTrace([(0, 0, 0.0, 0.3, -1)], [(0, declined, 0.0, 0.0)]), None).find("smooth")
    assert not item.applied and "line 7" in item.precise and "np.float64(0.0)" in item.precise, item.precise
    assert "optimize=True to compile it anyway" not in item.precise + item.bucketed
    assert "even with optimize=True" in item.precise, item.precise
