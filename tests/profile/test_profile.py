"""Profiling on the local pool: the hot function and line of a known workload, merged shares,
deterministic text, escaped HTML, and nothing extra when profiling is off."""

from __future__ import annotations

import dis
import inspect
import json
import math
import pickle
import sys
import time
import types

import numpy as np
import pytest

from eugo_lab import hpc
from eugo_lab.backends._worker import execute, execute_batch
from eugo_lab.contract.row import TaskProfile, TaskStats
from eugo_lab.contract.serialization import dumps_args
from eugo_lab.profile import collect
from eugo_lab.profile.collect import Profiled
from eugo_lab.profile.model import Profile
from eugo_lab.profile.renderers import HTMLRenderer, TextRenderer
from eugo_lab.tracing.trace import Trace

profile_text, profile_html = TextRenderer().render, HTMLRenderer().render

N = 400_000  # ~60-100 ms of pure Python per task on this VM: a few dozen samples each


def spin(n):
    total = 0
    for i in range(n):
        total += abs(i % 7 - 3)  # the hot line
    return total


def outer(n):
    return spin(n) + 1


def napper(seconds):
    time.sleep(seconds)
    return seconds


HOT_LINE = next(i for i, s in enumerate(inspect.getsource(spin).splitlines()) if "the hot line" in s) \
    + spin.__code__.co_firstlineno


def check_known_workload(p: Profile, workers: int = 2) -> None:
    """What every engine must find in ``outer`` -> ``spin``: spin is hot, its loop line hottest."""
    assert p.tasks == 8 and p.workers == workers, p
    top = p.hot_functions()
    assert top[0].function == "spin" and top[0].file.endswith("test_profile.py"), top
    assert top[0].line == spin.__code__.co_firstlineno and top[0].where == "app"
    # Thresholds leave room for one task in eight whose sampler was starved of a core (a
    # loaded 2-core VM): its single sample, weighted with the whole task, may land outside spin.
    assert top[0].self_share > 0.75, top
    by_name = {h.function: h for h in p.hot_functions(None)}
    # Same room for outer: one starved task's sample, taken as the task returned, is 1/8 of the time.
    assert by_name["outer"].total_share > 0.85 and by_name["outer"].self_share < 0.25, by_name
    line = p.hot_lines()[0]
    assert (line.function, line.line) == ("spin", HOT_LINE) and line.share > 0.7, p.hot_lines()
    assert "abs(i % 7 - 3)" in line.source
    roots = [c.function for c in p.tree().children]
    assert roots == ["outer"], roots  # stacks start at the task's function: no engine or shim frames


@pytest.fixture(scope="module")
def known(request):
    """One profiled run of the known workload on a fresh 2-worker local pool (the Profile, the region)."""
    hpc.init(backend="local", workers=2)
    try:
        f = hpc.remote(outer)
        hpc.get([f.remote(1000) for _ in range(4)])  # both workers up and warm
        with hpc.profile() as region:
            assert hpc.get([f.remote(N) for _ in range(8)]) == [spin(N) + 1] * 8
        return region
    finally:
        hpc.shutdown()


def test_names_the_hot_function_and_line_on_two_local_workers(known):
    check_known_workload(known.report)
    assert len(known.trace.profiles) == 8 and known.trace.meta["profile"] == "thread"


def test_shares_add_up(known):
    p = known.report
    fns = p.hot_functions(None)
    # every sample has one innermost function; tasks no sample covered count in no function's self time
    assert sum(h.self_share for h in fns) == pytest.approx(1.0 - p.unsampled_share)
    assert p.unsampled_share < 0.2
    assert sum(x.share for x in p.hot_lines(None)) <= 1.0 + 1e-9
    assert all(0 <= h.native_share <= h.self_share <= h.total_share <= 1.0 + 1e-9 for h in fns)
    tree = p.tree()
    assert tree.time == pytest.approx(p.total) and tree.children[0].function == "outer"
    assert sum(c.time for c in tree.children) == pytest.approx(tree.time)
    t = known.trace.tasks
    body = float((t["end"] - t["start"]).sum())
    assert 0.5 * body < p.total <= body  # the samples cover most of the tasks' time (not the end after the last)


def test_text_is_deterministic_for_the_same_trace(known, tmp_path):
    p = known.report
    text = profile_text(p)
    assert "spin" in text and f"test_profile.py:{HOT_LINE}" in text and "0x" not in text
    assert "Profile: 8 tasks on 2 workers" in text
    again = Profile.from_dict(json.loads(json.dumps(p.to_dict())))
    assert profile_text(again) == text and profile_html(again) == profile_html(p)
    path = tmp_path / "trace.json"
    known.trace.save(str(path))  # the per-task profiles travel with a saved trace
    assert profile_text(Profile.from_trace(Trace.load(str(path)))) == text
    p.save(str(tmp_path / "p.json"))
    assert profile_text(Profile.load(str(tmp_path / "p.json"))) == text
    bundle = known._repr_mimebundle_()  # `p` as a cell's last line: the same text, and the icicle
    assert bundle["text/plain"] == text and "eugo-icicle" in bundle["text/html"]
    assert repr(known) == f"<Profile of 8 tasks on 2 workers, hottest spin ({p.hot_functions()[0].self_share:.0%})>"


def test_methods_are_named_with_their_class():
    p = _synthetic({("run\x00/w/app.py\x001\x01cModel\x01l2",): 1.0})
    assert p.hot_functions()[0].function == "Model.run" and p.hot_lines()[0].function == "Model.run"


EVIL = "<img src=x onerror=alert(1)>"


def _synthetic(records: dict[tuple[str, ...], float], tasks: int = 1) -> Profile:
    blobs = [TaskProfile(i, 1, EVIL, i % 2, collect.dumps(records, "x\x00/w/x.py\x001", 0.0, 1.0, 1.0, 0.001))
             for i in range(tasks)]
    return Profile.from_tasks(blobs)


def test_html_escapes_user_text():
    evil = f"{EVIL}\x00/tmp/<script>alert(2)</script>.py\x003\x01l5"
    p = _synthetic({("outer\x00/w/app.py\x001\x01l2", evil): 0.75, ("outer\x00/w/app.py\x001\x01l3",): 0.25})
    html = profile_html(p)
    assert "<img" not in html and "<script>alert" not in html, html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert p.hot_functions()[0].function == EVIL and profile_text(p).count(EVIL[:20]) >= 1
    assert "data-x=" in html and "eugo-icicle" in html  # the icicle is drawn


def test_synthetic_shares_are_exact():
    # 3 s in spin's line 5 (1 s of it in a C call), 1 s in outer's own line 2, over two tasks
    rec = {("outer\x00/w/app.py\x001\x01l3", "spin\x00/w/app.py\x004\x01l5"): 1.0,
           ("outer\x00/w/app.py\x001\x01l3", "spin\x00/w/app.py\x004\x01l5", "sqrt\x00<built-in>\x000"): 0.5,
           ("outer\x00/w/app.py\x001\x01l2",): 0.5}
    p = _synthetic(rec, tasks=2)
    assert p.total == pytest.approx(4.0) and p.tasks == 2 and p.workers == 2
    spin_row, outer_row = p.hot_functions()
    assert (spin_row.function, spin_row.file, spin_row.line) == ("spin", "app.py", 4)
    assert spin_row.self_share == pytest.approx(0.75) and spin_row.native_share == pytest.approx(0.25)
    assert spin_row.python_share == pytest.approx(0.5)
    assert outer_row.self_share == pytest.approx(0.25) and outer_row.total_share == pytest.approx(1.0)
    assert [(x.function, x.line, round(x.share, 3)) for x in p.hot_lines()] == [("spin", 5, 0.75), ("outer", 2, 0.25)]
    assert profile_text(p).splitlines()[3].split()[:3] == ["75%", "25%", "75%"]


def test_unsampled_tasks_are_estimated_from_sampled_tasks_of_their_function():
    def blob(tid: int, body: str, records: dict, duration: float) -> TaskProfile:
        return TaskProfile(tid, 1, "f", tid % 2, collect.dumps(records, body, 0.0, duration, duration, 0.005))

    outer, lone = "outer\x00/w/app.py\x001", "lone\x00/w/app.py\x0010"
    p = Profile.from_tasks([
        blob(1, outer, {}, 0.5),  # unsampled: shared out like task 2's samples (3:1 between lines 2 and 3)
        blob(2, outer, {(outer + "\x01l2",): 1.5, (outer + "\x01l3",): 0.5}, 2.0),
        blob(3, lone, {}, 0.5),  # no sampled task of its function: stays unattributed
    ])
    assert p.total == pytest.approx(3.0)
    assert p.estimated_share == pytest.approx(1.0 / 3) and p.unsampled_share == pytest.approx(0.5 / 3)
    by = {h.function: h for h in p.hot_functions(None)}
    assert by["outer"].self_share == pytest.approx(2.5 / 3) and by["outer"].total_share == pytest.approx(2.5 / 3)
    assert by["lone"].self_share == 0 and by["lone"].total_share == pytest.approx(0.5 / 3)
    assert [(x.line, round(x.share, 6)) for x in p.hot_lines()] == [(2, round(1.875 / 3, 6)), (3, round(0.625 / 3, 6))]
    assert "33% of it in tasks too short to be sampled" in profile_html(p)
    assert profile_text(p).splitlines()[0] == "Profile: 3 tasks on 2 workers; shares of the tasks' time"
    assert [c.kind for c in p.tree().children[1].children] == ["unsampled"]
    assert profile_text(Profile.from_dict(p.to_dict())) == profile_text(p)  # raw samples kept, estimate redone


def test_an_empty_or_damaged_profile_renders_as_no_samples():
    empty = Profile.from_tasks([])
    assert empty.total == 0 and empty.hot_functions() == [] and empty.tasks == 0
    assert profile_text(empty).startswith("Profile: no samples") and "no samples" in profile_html(empty)
    damaged = Profile.from_tasks([TaskProfile(1, 1, "f", 0, b"not zlib")])
    assert damaged.tasks == 1 and damaged.total == 0  # skipped, never raised


def test_threads_backend_samples_a_task_thread():
    # One task thread: with two CPU-bound Python threads in one process the GIL passes
    # between them and the sampler rarely gets it (see README, Profiling).
    hpc.init(backend="threads", workers=1)
    f = hpc.remote(outer)
    with hpc.profile() as region:
        hpc.get([f.remote(N // 2) for _ in range(4)])
    p = region.report
    assert p.tasks == 4 and p.hot_functions()[0].function == "spin" and p.hot_lines()[0].line == HOT_LINE


def test_sleep_counts_as_gil_released_time():
    hpc.init(backend="local", workers=2)
    f = hpc.remote(napper)
    hpc.get([f.remote(0.0) for _ in range(2)])
    with hpc.profile() as region:
        hpc.get([f.remote(0.2) for _ in range(2)])
    top = region.report.hot_functions()[0]
    assert top.function == "napper" and top.native_share > 0.8, top


def test_pyinstrument_sampler_names_c_functions(local2):
    f = hpc.remote(outer)
    with hpc.profile(sampler="pyinstrument") as region:
        hpc.get([f.remote(N // 4) for _ in range(2)])
    p = region.report
    assert p.hot_functions()[0].function == "spin"
    natives = [n.function for n in p.tree().children[0].children[0].children if n.kind == "native"]
    assert "abs" in natives, p.tree()


def test_map_batches_are_profiled(local2):
    with hpc.profile() as region:
        assert hpc.get(hpc.map(hpc.remote(spin), [N // 8] * 8, batch=4)) == [spin(N // 8)] * 8
    assert len(region.trace.profiles) == 2  # one per batch
    assert region.report.hot_functions()[0].function == "spin"


def test_profiling_off_sends_no_profile_and_the_stats_round_trip():
    args, _, _ = dumps_args((1000,), {}, function="spin", token_of=lambda o: None)
    status, _, _, off = execute(spin, "spin", args)
    assert status == 0 and off.profile is None and off.tail is not None  # the recorder's fast path
    status, _, _, on = execute(Profiled(spin), "spin", args)
    assert status == 0 and isinstance(on.profile, bytes) and on.tail is None  # the slow path keeps it
    for stats in (off, on):
        wire = pickle.loads(pickle.dumps(tuple(stats), 5))  # what the local pool's pipe carries
        back = TaskStats.from_wire(wire)
        same = back._replace(runq=0.0) == stats._replace(runq=0.0)  # runq may be NaN (not measured): NaN != NaN
        assert same and back.profile == stats.profile and type(back) is TaskStats
        assert back.runq == stats.runq or (math.isnan(back.runq) and math.isnan(stats.runq))
    batch_args, _, _ = dumps_args(([10, 20],), {}, function="spin", token_of=lambda o: None)
    assert execute_batch(spin, "spin", batch_args)[3].profile is None
    assert isinstance(execute_batch(Profiled(spin), "spin", batch_args)[3].profile, bytes)
    assert TaskStats(0.0, 0, 0, 0, 0, 0, 0, None, None, None).profile is None  # old constructors still work


def test_tasks_outside_the_region_are_not_profiled(local2):
    f = hpc.remote(outer)
    with hpc.profile():
        hpc.get(f.remote(10))
    with hpc.trace() as t:
        hpc.get([f.remote(10) for _ in range(3)])
    assert t.trace.profiles == () and len(t.trace) == 3
    from eugo_lab.hpc import session

    assert session.current().profiling is None


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="sampler must be one of thread, pyinstrument"):
        hpc.profile(sampler="perf")
    with pytest.raises(ValueError, match="interval"):
        hpc.profile(interval=0)


def test_the_model_never_imports_a_renderer():
    from test_layering import PKG, imports_of

    for name in ("collect.py", "model.py"):
        mods = [m for _, m in imports_of(PKG / "profile" / name)]
        assert not [m for m in mods if m.startswith(("eugo_lab.profile.renderers",
                                                     "eugo_lab.render", "IPython"))], (name, mods)


def count_if(values):
    hits = 0
    for i in range(len(values)):  # the loop line: where its backward jump lands
        if values[i] > 2:
            hits += 1
    return hits


def test_a_loop_stopped_at_its_lineless_jump_gets_the_loops_line():
    # CPython gives the jump back after an `if` without `else` no line: such samples used to carry none,
    # and the hottest line of a loop like count_if went missing from the profile.
    import sys
    import threading

    first = count_if.__code__.co_firstlineno
    stop = threading.Event()
    values = list(range(5)) * 1000

    def run():
        while not stop.is_set():
            count_if(values)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    seen = set()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(seen) < 50:
            time.sleep(0.001)
            f = sys._current_frames().get(t.ident)
            while f is not None and f.f_code is not count_if.__code__:
                f = f.f_back
            if f is None:
                continue
            info = collect.frame_info(f)
            fixed = collect._with_line(info, f) if "\x01l" not in info else info
            line = int(fixed.rsplit("\x01l", 1)[1].split("\x01")[0])
            seen.add((line, "\x01l" in info))
    finally:
        stop.set()
        t.join(5)
    assert any(not had for _, had in seen), f"no sample stopped at the lineless jump: {seen}"
    assert all(first <= line <= first + 5 for line, _ in seen), seen  # first: the call's own start (RESUME)
    assert all(line == first + 2 for line, had in seen if not had), seen  # lineless samples: the `for` line


def hypot_arrays(x, y):
    return np.sqrt(x * x + y * y)  # all C: three ufuncs over the whole arrays


def _frame_at(fn, opname: str, *args):
    """A stand-in for a sampled frame of ``fn`` stopped at its first ``opname`` instruction."""
    code = fn.__code__
    at = next(i.offset for i in dis.get_instructions(code) if i.opname == opname)
    return types.SimpleNamespace(f_code=code, f_lasti=at)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.11+ hands the GIL over only at jumps, starts and calls")
def test_a_thread_inside_c_code_is_native_even_when_the_sampler_woke_late(monkeypatch):
    # A busy machine wakes the sampler late with the GIL free: lateness alone called NumPy arithmetic on
    # 2e6 floats 64-79% "Python bytecode" and named it a JIT candidate.
    monkeypatch.setattr(collect, "_YIELD_OPS", collect._yield_ops())
    watch = types.SimpleNamespace(clock=None, cpu=0.0, native_id=0)
    late = False  # the sampler did not get the GIL at once
    assert collect._in_native(watch, _frame_at(hypot_arrays, "BINARY_OP"), 0.005, late)
    assert not collect._in_native(watch, _frame_at(spin, "JUMP_BACKWARD"), 0.005, True)
    # At a call the thread may be back from it and handing the GIL over: the sampler's timing decides.
    assert not collect._in_native(watch, _frame_at(spin, "PRECALL"), 0.005, late)
    assert collect._in_native(watch, _frame_at(spin, "PRECALL"), 0.005, True)


def test_numpy_arithmetic_over_large_arrays_is_native_and_no_jit_candidate(local2):
    from eugo_lab.optimizations.report import jit_candidates

    x = np.linspace(0.0, 1.0, 2_000_000)
    f = hpc.remote(hypot_arrays)
    hpc.get(f.remote(x[:10], x[:10]))
    with hpc.profile() as region:
        hpc.get([f.remote(x, x) for _ in range(4)])
    top = region.report.hot_functions()[0]
    assert top.function == "hypot_arrays", region.report.hot_functions()
    assert top.native_share > 0.6 * top.self_share, top
    assert "hypot_arrays" not in jit_candidates(region.report.hot_functions(None))


class _Spy:
    """A local named ``self`` in a plain function: pyinstrument's get_frame_info names the frame's class from it."""


class _Owner:
    def info(self):
        return collect.frame_info(sys._getframe())


def _not_a_method(self):
    return collect.frame_info(sys._getframe())


def test_the_sampler_reads_a_frame_from_its_code_never_from_its_locals():
    # Before: the thread sampler called pyinstrument's get_frame_info on the task thread's frames, which reads
    # their locals (PyFrame_GetLocals, for `self`): not safe on another running thread's frame in Python 3.11, and
    # a worker sampling an --optimize task while Numba compiled in it died of a segmentation fault there.
    assert collect._Sampler(0.005)._get_frame_info is collect.frame_info
    plain = _not_a_method(_Spy())
    assert plain.startswith("_not_a_method\x00") and "\x01c" not in plain, plain  # no class read from a local
    method = _Owner().info()
    assert "\x01c_Owner" in method and method.startswith("info\x00"), method  # the class the code is defined in
    assert "\x01l" in method
