"""``%%eugo`` on cells written with Ray's own API: the trace built from Ray's profile events and the driver's calls.

Ray's records are stood in for by the exact shape ``ray.timeline()`` returns (one event per
``task:deserialize_arguments``/``task:execute``/``task:store_outputs`` span, its task id in
``args``) on a fake clock, so the durations and findings are exact; the driver's calls are
noted as the wrappers note them. A live run needs a local Ray that starts in time on the
machine: ``test_a_live_ray_cell`` below.
"""

from __future__ import annotations

import math
import time

import pytest

from eugo_lab.analysis import analyze
from eugo_lab.analysis.findings import Code
from eugo_lab.native import ray_recording
from eugo_lab.native.ray_recording import RayRecording

ray = pytest.importorskip("ray")

T0 = 1_000_000.0


def _events(tasks: list[tuple[str, str, float, float]]) -> list[dict]:
    """``ray.timeline()`` events for ``(task id, worker, start, end)`` as Ray 2.60 sends them: the whole task
    (``task::nap``, its id in ``args``) holding its parts (no id): 1 ms to deserialize, the body, 1 ms to store."""
    out = []
    for tid, worker, start, end in tasks:
        out.append({"cat": "task::nap", "name": "__main__.nap", "pid": "127.0.0.1", "tid": f"worker:{worker}",
                    "ts": (start - 0.002) * 1e6, "dur": (end - start + 0.004) * 1e6, "ph": "X",
                    "args": {"name": "__main__.nap", "task_id": tid}})
        for cat, (s, e) in (("task:deserialize_arguments", (start - 0.001, start)), ("task:execute", (start, end)),
                            ("task:store_outputs", (end, end + 0.001))):
            out.append({"cat": cat, "name": cat, "pid": "127.0.0.1", "tid": f"worker:{worker}",
                        "ts": s * 1e6, "dur": (e - s) * 1e6, "ph": "X", "args": {}})
    return out


@pytest.fixture
def fake_ray(monkeypatch):
    """Ray's read-outs the recording calls at its end, without a running Ray."""
    got: dict[str, list] = {"events": []}
    monkeypatch.setattr(ray, "timeline", lambda *a, **k: got["events"])
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(ray_recording, "_local_ip", lambda: "127.0.0.1")
    return got


def _recording() -> RayRecording:
    rec = RayRecording()
    rec._mark = rec.recorder.open_region()  # start() without wrapping a live Ray
    return rec


def _write(rec: RayRecording, events: list[dict], end: float):
    """The trace as stop() writes it, its region on the fake clock (the recorder stamps the real one)."""
    trace = rec._write(ray_recording._spans(events, set(rec.driver.submitted)), 2, {})
    trace.meta.update(region_start=T0, region_end=end)
    return trace


def test_ray_get_in_a_loop_is_blocking_in_rays_words(fake_ray):
    rec = _recording()
    d = rec.driver
    tasks = []
    for i in range(6):  # submit, run 50 ms, ray.get, then the next: one at a time
        tid, sub = f"t{i}", T0 + i * 0.06
        d.submitted[tid], d.names[tid], d.bytes_in[tid], d.deps[tid] = sub, "nap", 30, []
        tasks.append((tid, "a" if i % 2 == 0 else "b", sub + 0.003, sub + 0.053))
        d.blocks.append(("get", sub + 0.001, sub + 0.056, 1, "/tmp/ipykernel_1/2.py:4"))
        d.received[tid] = sub + 0.056
    fake_ray["events"] = _events(tasks)
    trace = _write(rec, fake_ray["events"], T0 + 0.36)
    assert trace.meta["api"] == "ray" and trace.n_workers == 2 and len(trace) == 6
    t = trace.tasks
    assert [round(x, 6) for x in t["end"] - t["start"]] == [0.05] * 6
    assert all(math.isclose(x, 0.001, abs_tol=1e-6) for x in [*t["deser"], *t["ser"]])
    assert all(math.isnan(x) for x in t["cpu"])  # Ray does not measure it: not a guess
    assert any("CPU time" in s for s in trace.meta["not_recorded"])
    found = {f.code: f for f in analyze(trace).findings}
    assert Code.BLOCKING in found, [f.to_text() for f in found.values()]
    assert "ray.get" in found[Code.BLOCKING].advice and "hpc." not in found[Code.BLOCKING].advice
    assert "called ray.get on each task" in found[Code.BLOCKING].verdict
    assert Code.IO_BOUND not in found and Code.COMPUTE_BOUND not in found  # no CPU time: no verdict on it


def test_the_summary_says_what_ray_does_not_report_instead_of_a_zero(fake_ray):
    """Ray's timeline carries no CPU time, result size, transfer or failure: the summary names them, and its
    failed / retried row says "not reported" rather than a count of 0 it never measured."""
    from eugo_lab.cellrun.report import Run, summarize

    rec = _recording()
    d = rec.driver
    for i in range(2):
        d.submitted[f"t{i}"], d.names[f"t{i}"], d.bytes_in[f"t{i}"], d.deps[f"t{i}"] = T0, "nap", 30, []
    trace = _write(rec, _events([("t0", "a", T0 + 0.01, T0 + 0.05), ("t1", "b", T0 + 0.01, T0 + 0.05)]), T0 + 0.1)
    s = summarize([Run(2, trace)], error=None, options={})
    text, page = s.to_text(), s.to_html()
    line = ("not recorded by ray: CPU time per task; result sizes (bytes out); transfers between workers; "
            "whether a task failed")
    assert f"  {line}" in text.splitlines(), text
    assert "failed / retried: not reported by ray" in text and "failed: 0" not in text
    assert "  gpu offload and automatic JIT: not applied (the cell's tasks are Ray's own)" in text.splitlines()
    assert "gpu: None" not in text
    assert "not recorded by ray</td>" in page and "not reported by ray</td>" in page


def test_a_large_array_by_value_is_a_repeated_argument_with_ray_put(fake_ray):
    rec = _recording()
    d = rec.driver
    tasks = []
    for i in range(6):  # all submitted together, each carrying the same 4 MB array
        tid = f"t{i}"
        d.submitted[tid], d.names[tid], d.bytes_in[tid], d.arg_key[tid], d.deps[tid] = T0 + i * 0.02, "nap", \
            4_000_000, 0, []
        start = T0 + 0.03 + (i // 2) * 0.06
        tasks.append((tid, "a" if i % 2 == 0 else "b", start, start + 0.05))
    fake_ray["events"] = _events(tasks)
    d.blocks.append(("get", T0 + 0.12, T0 + 0.22, 6, "/tmp/ipykernel_1/3.py:2"))
    trace = _write(rec, fake_ray["events"], T0 + 0.23)
    found = {f.code: f for f in analyze(trace).findings}
    assert Code.REPEATED_ARGUMENT in found, [f.to_text() for f in found.values()]
    assert "ray.put(data)" in found[Code.REPEATED_ARGUMENT].advice


def test_the_time_remote_spends_storing_large_arguments_is_the_drivers_serializing(fake_ray):
    """Ray puts an argument over 100 KiB into the object store inside .remote(): the driver's breakdown counts
    that call's time as serializing (it read as the driver's own work); a .remote() of a small argument is
    submitting."""
    rec = _recording()
    d = rec.driver
    tasks = []
    for i in range(4):  # .remote() of a 4 MB array took 40 ms each, one after another
        tid, sub = f"t{i}", T0 + i * 0.04
        d.submitted[tid], d.names[tid], d.bytes_in[tid], d.deps[tid] = sub, "nap", 4_000_000, []
        d.calls[tid] = (sub, sub + 0.04)
        tasks.append((tid, "a" if i % 2 == 0 else "b", sub + 0.045, sub + 0.05))
    d.submitted["s"], d.names["s"], d.bytes_in["s"], d.deps["s"] = T0 + 0.16, "nap", 30, []
    d.calls["s"] = (T0 + 0.16, T0 + 0.162)  # a small argument travels inside the task: handing it on
    tasks.append(("s", "a", T0 + 0.165, T0 + 0.17))
    d.blocks.append(("get", T0 + 0.162, T0 + 0.2, 5, "/tmp/ipykernel_1/4.py:3"))
    fake_ray["events"] = _events(tasks)
    trace = _write(rec, fake_ray["events"], T0 + 0.2)
    b = trace.driver_breakdown()
    assert b["serializing"] == pytest.approx(0.16, abs=1e-6)
    assert b["submitting"] == pytest.approx(0.002, abs=1e-6)
    assert b["own work"] == pytest.approx(0.0, abs=1e-6)
    seg = trace.driver
    assert "serializing the arguments of nap() task 0 (4 MB)" in str(seg["label"][0])


def test_rays_own_remote_functions_are_named_as_the_engines():
    assert ray_recording.is_engine_function("ray.data._internal.planner.plan_read_op._read")
    assert not ray_recording.is_engine_function("__main__.nap") and not ray_recording.is_engine_function("rays.x")


def test_tasks_of_rays_own_functions_are_marked_in_the_trace(fake_ray):
    rec = _recording()
    d = rec.driver
    for i, (name, own) in enumerate([("nap", False), ("_read", True), ("_read", True)]):
        tid = f"t{i}"
        d.submitted[tid], d.names[tid], d.bytes_in[tid], d.deps[tid], d.engine[tid] = T0, name, 30, [], own
    fake_ray["events"] = _events([(f"t{i}", "a", T0 + 0.01 * (i + 1), T0 + 0.01 * (i + 1) + 0.005)
                                  for i in range(3)])
    trace = _write(rec, fake_ray["events"], T0 + 0.05)
    assert trace.meta["engine_functions"] == ["_read"]


def test_a_task_without_profile_events_is_said_missing(fake_ray):
    rec = _recording()
    d = rec.driver
    d.submitted.update({"t0": T0, "t1": T0})
    d.names.update({"t0": "nap", "t1": "nap"})
    fake_ray["events"] = _events([("t0", "a", T0 + 0.01, T0 + 0.02)])
    trace = _write(rec, fake_ray["events"], T0 + 0.03)
    assert len(trace) == 1
    assert any("1 submitted task(s) sent no profile events" in s for s in trace.meta["not_recorded"])


def test_the_wrappers_are_put_back():
    from ray.remote_function import RemoteFunction

    before = (RemoteFunction._remote, ray.get, ray.wait, ray.put)
    calls = ray_recording.RayDriverCalls()
    calls.install()
    assert (RemoteFunction._remote, ray.get, ray.wait, ray.put) != before
    calls.uninstall()
    assert (RemoteFunction._remote, ray.get, ray.wait, ray.put) == before


# -- a live local Ray, through the magic ------------------------------------------------------------------
LIVE_SETUP = """
import time
import numpy as np
import ray

@ray.remote
def nap(x):
    time.sleep(0.05)
    return x

@ray.remote
def inc(x):
    return x + 1

@ray.remote
def total(data, i):
    return float(data[i])

data = np.ones(300_000)  # 2.4 MB
"""

# (mistake, the Ray cell, the finding, words its advice must use)
LIVE_CASES = [
    ("ray.get in a loop", "out = [ray.get(nap.remote(i)) for i in range(6)]\n", Code.BLOCKING, "ray.get(refs)"),
    ("a task per tiny item", "out = ray.get([inc.remote(i) for i in range(200)])\n", Code.TASKS_TOO_SMALL,
     "_chunk.remote(items[i:i + "),
    ("a large array to every task", "out = ray.get([total.remote(data, i) for i in range(6)])\n",
     Code.REPEATED_ARGUMENT, "ray.put(data)"),
]


@pytest.fixture(scope="module")
def live_ray():
    """A local Ray of 2 CPUs on loopback, started the way the runtime's Ray engine starts one."""
    import os

    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    from eugo_lab.backends.ray import _single_node_mode

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "60")  # a busy machine's metrics agent is slow
    with _single_node_mode():
        ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
                 logging_level="ERROR", log_to_driver=False)
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "eugo_lab")
    shell.run_cell(LIVE_SETUP)
    shell.run_cell("ray.get([nap.remote(i) for i in range(2)])")  # both workers started before any measurement
    yield shell
    ray.shutdown()


@pytest.mark.parametrize("case", LIVE_CASES, ids=[c[0] for c in LIVE_CASES])
def test_a_live_ray_cell_raises_its_finding_in_rays_words(live_ray, capsys, case):
    _, cell, code, idiom = case
    live_ray.run_cell_magic("eugo", "--save t", cell)
    trace = live_ray.user_ns["t"]
    assert trace.meta["api"] == "ray" and len(trace) > 0
    found = {f.code: f for f in analyze(trace).findings}
    assert code in found, [f.to_text() for f in found.values()]
    assert idiom in found[code].advice and "hpc." not in found[code].advice
    assert idiom in capsys.readouterr().out


def test_a_live_ray_cells_remote_of_a_large_array_is_serializing_in_the_drivers_breakdown(live_ray):
    """Ray stores an 8 MB argument in the object store inside .remote(): that time is the driver's serializing."""
    live_ray.run_cell_magic("eugo", "--save t", "big = np.ones(1_000_000)\n"
                                                "out = ray.get([total.remote(big, i) for i in range(3)])\n")
    trace = live_ray.user_ns["t"]
    assert len(trace) == 3
    assert trace.driver_breakdown()["serializing"] > 0
    spans = trace.driver_spans
    assert all(n >= 8_000_000 for n in spans["bytes"][spans["kind"] == 0].tolist())


def test_a_live_ray_cell_of_sleeping_tasks_gets_no_verdict_on_cpu_it_never_measured(live_ray):
    live_ray.run_cell_magic("eugo", "--save t", "out = ray.get([nap.remote(i) for i in range(8)])\n")
    trace = live_ray.user_ns["t"]
    assert len(trace) == 8 and all(math.isnan(x) for x in trace.tasks["cpu"])
    codes = {f.code for f in analyze(trace).findings}
    assert not codes & {Code.IO_BOUND, Code.COMPUTE_BOUND, Code.BLOCKING, Code.TASKS_TOO_SMALL}
    assert any("CPU time" in s for s in trace.meta["not_recorded"])
    from eugo_lab.cellrun.report import latest

    assert "not recorded by ray: CPU time per task" in latest().to_text()


def test_a_run_held_to_fewer_cpus_is_drawn_in_that_many_lanes():
    # Ray ran 3 tasks one after another on 3 worker processes, held to 1 CPU: one lane; a hair of overlap
    # between one task's recorded end and the next one's start stays in the same lane.
    assert ray_recording._pack([(0.0, 1.0), (0.9999, 2.0), (2.0, 3.0)], 1) == [0, 0, 0]
    assert ray_recording._pack([(0.0, 1.0), (0.5, 2.0), (1.0, 3.0)], 2) == [0, 1, 0]


def _groups_left() -> list[str]:
    """Placement groups (the comparison's set-aside CPUs) not removed."""
    from ray.util import placement_group_table

    return [g for g, info in placement_group_table().items() if info.get("state") != "REMOVED"]


def test_compare_reruns_on_one_of_rays_cpus_and_measures_the_speedup(live_ray, capsys):
    from eugo_lab.cellrun.report import latest

    live_ray.run_cell_magic("eugo", "--compare --save t", "out = ray.get([nap.remote(i) for i in range(4)])\n")
    summary = latest()
    assert summary is not None and summary.trace is live_ray.user_ns["t"]
    base, main = (r.trace for r in summary.runs)
    assert [r.workers for r in summary.runs] == [1, 2] and len(base) == len(main) == 4
    assert set(base.tasks["worker"]) == {0}  # held to one CPU: one task at a time, one lane
    assert math.isclose(summary.report.measured_speedup, base.wall_time / main.wall_time)
    assert "runs at workers: 1, 2" in capsys.readouterr().out
    assert live_ray.user_ns["out"] == list(range(4))
    assert _groups_left() == []  # the CPUs set aside for the comparison were handed back


def test_comparisons_ray_cannot_hold_to_its_cpus_are_refused(live_ray):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="your Ray has 2 CPUs, so the cell cannot be run on 4"):
        live_ray.run_cell_magic("eugo", "--scaling 1,4", "out = ray.get([nap.remote(i) for i in range(2)])\n")
    with pytest.raises(UsageError, match="nap asks for 0.5 CPUs"):
        live_ray.run_cell_magic("eugo", "--compare",
                                "out = ray.get([nap.options(num_cpus=0.5).remote(i) for i in range(2)])\n")
    assert _groups_left() == []


def test_rays_notice_about_its_timeline_never_reaches_the_cells_output(monkeypatch):
    """Ray logs a notice on each ``ray.timeline()`` call; the call is Eugo's own, so the learner must not see it."""
    import logging

    state_log = logging.getLogger("ray._private.state")
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    def timeline(*a, **k):
        state_log.warning("In the near future, ray.timeline() will read task profiling events from the dashboard")
        return []

    monkeypatch.setattr(ray, "timeline", timeline)
    handler = Keep()
    state_log.addHandler(handler)
    level, disabled = state_log.level, state_log.disabled
    state_log.setLevel(logging.INFO)  # as a notebook's logging set-up may leave it (a Ray start can change it)
    state_log.disabled = False
    try:
        assert ray_recording._timeline() == []
        assert seen == []
        assert state_log.level == logging.INFO  # the notebook's own level is given back
        timeline()  # the same notice, logged outside the recording's call, still goes through
        assert len(seen) == 1
    finally:
        state_log.removeHandler(handler)
        state_log.setLevel(level)
        state_log.disabled = disabled



def test_the_live_rows_are_the_traces_first_rows_in_the_order_and_lanes_the_view_drew(fake_ray):
    """Ray's events arrive out of submission order; the view's rows and the Trace's agree row for row."""
    rec = RayRecording()
    assert rec.with_live_view() == 2  # the CPUs Ray offers (fake_ray: 2)
    rec._mark, rec._live_mark = rec.recorder.open_region(), rec.live.open_region()
    d = rec.driver
    for i in range(4):
        d.submitted[f"t{i}"], d.names[f"t{i}"], d.bytes_in[f"t{i}"], d.deps[f"t{i}"] = T0 + i * 0.001, "nap", 30, []
    d.deps["t3"] = ["t2"]
    runs = {"t0": ("a", T0 + 0.01, T0 + 0.05), "t1": ("b", T0 + 0.01, T0 + 0.2),
            "t2": ("b", T0 + 0.21, T0 + 0.25), "t3": ("a", T0 + 0.26, T0 + 0.3)}
    fake_ray["events"] = _events([("t2", *runs["t2"]), ("t0", *runs["t0"])])  # t1 still running at the first poll
    rec.poll()
    assert rec.unfinished() == 2
    fake_ray["events"] = _events([(t, *runs[t]) for t in ("t0", "t1", "t2", "t3")])
    rec.poll()
    rec.poll()  # nothing new: each task filed once
    assert rec.unfinished() == 0
    live = rec.live.close_region(rec._live_mark, {})
    trace = _write(rec, fake_ray["events"], T0 + 0.4)
    drawn = list(zip(live.tasks["task_id"].tolist(), live.tasks["worker"].tolist(), live.tasks["start"].tolist()))
    assert [t for t, _, _ in drawn] == [0, 1, 2, 3]
    assert drawn == list(zip(trace.tasks["task_id"].tolist(), trace.tasks["worker"].tolist(),
                             trace.tasks["start"].tolist()))
    starts = [round(x - T0, 3) for _, _, x in drawn]
    assert starts == [0.01, 0.21, 0.01, 0.26]  # t0 and t2 as the first poll filed them, then t1, t3
    assert list(zip(trace.deps["task"].tolist(), trace.deps["on"].tolist())) == [(3, 1)]  # t3 waited on t2


def test_a_live_ray_cell_is_drawn_live_each_task_once(live_ray, monkeypatch):
    from IPython.utils.capture import capture_output

    from eugo_lab.render import live

    monkeypatch.setenv("EUGO_LAB_DISPLAY", "lab")  # the Bokeh timeline built and streamed, no browser
    monkeypatch.setenv("EUGO_LAB_BOKEH_URL", "/eugo/bokeh/")
    snaps, views, original = [], [], live.LiveView.update

    def update(self, chunk, snapshot):
        views.append(self)
        snaps.append(snapshot)
        original(self, chunk, snapshot)

    monkeypatch.setattr(live.LiveView, "update", update)
    from eugo_lab.cellrun import native

    stopped, stop = [], native._Poller.stop

    def stop_noted(self):
        stopped.append(time.time())
        stop(self)

    monkeypatch.setattr(native._Poller, "stop", stop_noted)
    n = 6
    with capture_output():  # the cell outlasts its tasks by 3 s: Ray's events reach a poll while it runs
        live_ray.run_cell_magic("eugo", "--save t", f"out = ray.get([nap.remote(i) for i in range({n})])\n"
                                "time.sleep(3)\n")
    assert any(not s.finished and s.done for s in snaps), [(s.done, s.running, s.pending) for s in snaps]
    last = snaps[-1]
    assert last.finished and last.done == n
    assert sum(views[-1].sources["tasks"].data["tasks"]) == n  # each task drawn once, live or at the end
    assert len(live_ray.user_ns["t"]) == n
    # the cell ended before the poller was stopped (its last read of Ray's events is not the cell's time)
    assert live_ray.user_ns["t"].meta["region_end"] <= stopped[0]
