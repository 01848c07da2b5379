"""The four checklists measured on real runs (a real 2-worker local pool), both ways, plus bad input,
the interactive view's widgets and text, and ticks that survive a new process.

Behaviour, not wall-clock windows: each case is built so its verdict is clear by a wide margin
(a 0.2 s call against a sub-millisecond overhead, 8 MB against 1 MB, a sleep against a spin).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from _exercise_cells import shell
from tasks import spin
from trace_builder import TraceBuilder

from benchmarks.whatif import lookup, nap, tiny
from eugo_lab import checklists, hpc
from eugo_lab.analysis.findings import REGISTRY, Code
from eugo_lab.checklists import store
from eugo_lab.checklists.catalog.tuning import CODES
from eugo_lab.checklists.model import ChecklistError
from eugo_lab.contract import cellrecord
from eugo_lab.hardware.gpus import Detection, detect_gpus
from eugo_lab.offload import cell

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "data"))
from make_golden import partial_blocking

REPO = Path(__file__).resolve().parents[2]


@hpc.remote
def step(x: float) -> float:
    time.sleep(0.02)
    return x + 1


def busy(seconds: float) -> int:
    spin(seconds)
    return 1


def sleepy(seconds: float) -> int:
    time.sleep(seconds)
    return 1


def traced(body) -> object:
    with hpc.trace() as t:
        body()
    return t.trace


@pytest.fixture
def pool():
    hpc.init(backend="local", workers=2)
    yield
    hpc.shutdown()


@pytest.fixture
def progress_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_PROGRESS_DIR", str(tmp_path / "progress"))
    return tmp_path / "progress"


@pytest.fixture
def gpu_shell(monkeypatch):
    """The test shell with the magics loaded, text display, and no ``--gpu`` cell run yet in this test."""
    cellrecord.contribute(cell.LEDGER, None)  # the latest record holds no --gpu cell's ledger
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    return shell()


def _ml_item_after_a_fake_h100_cell(ip, body: str, item: str):
    """Run ``body`` as ``%%eugo --gpu on -w 1`` on a fake H100, then measure the ML guide's ``item``."""
    from eugo_lab.offload.devices import FakeDevice
    from eugo_lab.offload.profiles import published

    with cell.use_device(FakeDevice(published("h100"))):
        ip.run_cell_magic("eugo", "--gpu on -w 1", body)
    return checklists.measure("ml")[item]


# -- readiness ---------------------------------------------------------------------------------------
def test_a_long_call_is_worth_distributing_and_a_tiny_one_is_not(pool):
    worth = checklists.measure("readiness", fn=busy, args=(0.2,))["task-size"]
    assert worth.ok is True
    assert "one call of busy(0.2) takes" in worth.evidence and "of scheduling overhead" in worth.evidence
    assert worth.evidence.endswith("worth distributing")
    small = checklists.measure("readiness", fn=lambda x: x + 1, args=(1,))["task-size"]
    assert small.ok is False and small.evidence.endswith("batch it or keep it local")


def test_large_arguments_say_use_put_and_small_ones_pass_by_value(pool):
    big = np.zeros(1_000_000)  # 8 MB, sized without a copy (out of band)
    r = checklists.measure("readiness", fn=np.sum, args=(big,))
    assert r["argument-size"].ok is False
    assert r["argument-size"].evidence.startswith("arguments are 8") and "use put" in r["argument-size"].evidence
    assert r["result-size"].ok is True  # a float comes back
    r = checklists.measure("readiness", fn=np.ones, args=(2_000_000,))
    assert r["argument-size"].ok is True and "small enough to pass by value" in r["argument-size"].evidence
    assert r["result-size"].ok is False and "the result is 16" in r["result-size"].evidence


def test_waiting_calls_are_told_apart_from_computing_ones(pool):
    assert checklists.measure("readiness", fn=sleepy, args=(0.1,))["bound"].ok is False
    r = checklists.measure("readiness", fn=busy, args=(0.1,))["bound"]
    assert r.ok is True and "more cores help" in r.evidence


def test_independent_pieces_are_counted_from_the_trace(pool):
    fan = traced(lambda: hpc.get([nap.remote(0.01) for _ in range(8)]))
    r = checklists.measure("readiness", trace=fan)["pieces"]
    assert r.ok is True and r.evidence.startswith("the work splits into 8 independent pieces")

    def chain() -> None:
        f = step.remote(0.0)
        for _ in range(4):
            f = step.remote(f)
        hpc.get(f)

    r = checklists.measure("readiness", trace=traced(chain))["pieces"]
    assert r.ok is False
    assert "the work splits into 1 independent pieces (4 more waited on other tasks)" in r.evidence


def test_manual_items_and_missing_inputs_are_not_measured():
    r = checklists.measure("readiness")
    assert r["side-effects"].ok is None and r["side-effects"].evidence == ""
    assert r["task-size"].ok is None and "give fn=" in r["task-size"].evidence


# -- bad input ---------------------------------------------------------------------------------------
def test_an_unknown_name_suggests_the_closest():
    with pytest.raises(ChecklistError, match=r"no checklist called 'readines'; did you mean 'readiness'\?"):
        checklists.measure("readines")
    with pytest.raises(ChecklistError, match="the checklists are: workload-readiness"):
        checklists.measure("zzz")


def test_a_function_that_raises_is_named_in_the_evidence(pool):
    def broken(x):
        raise ValueError(f"no such tile {x}")

    r = checklists.measure("readiness", fn=broken, args=(7,))
    for item in ("task-size", "result-size", "bound"):
        assert r[item].ok is None
        assert "calling broken(7) raised ValueError: no such tile 7" in r[item].evidence


@pytest.mark.parametrize("kwargs, needle", [
    ({"fn": 3}, "fn= must be the function to measure"),
    ({"fn": busy, "args": 5}, "args= is the tuple of positional arguments"),
    ({"fn": busy, "kwargs": [1]}, "kwargs= is a dict"),
    ({"trace": "last"}, "trace= takes a Trace"),
    ({"deadline": -1}, "deadline= is a positive number"),
])
def test_bad_inputs_get_a_clear_message(kwargs, needle):
    with pytest.raises(ChecklistError, match=needle):
        checklists.measure("readiness" if "deadline" not in kwargs else "cost", **kwargs)


# -- tuning: each finding to its item ----------------------------------------------------------------
def test_every_finding_the_analysis_can_raise_has_an_item():
    # The codes analyze()'s detectors produce (the registry names them; its test checks the detectors' source).
    codes = {c for d in REGISTRY for c in d.codes}
    mapped = {c for cs in CODES.values() for c in cs} | {Code.SPEEDUP}
    assert codes and codes <= mapped, codes - mapped


def _tuning(trace) -> dict:
    return {r.id: r for r in checklists.measure("tuning", trace=trace)}


def test_blocking_is_found_and_its_fix_clears_the_item(pool):
    def mistake() -> None:
        for _ in range(6):
            hpc.get(nap.remote(0.1))

    r = _tuning(traced(mistake))
    assert r["no-blocking"].ok is False and "right after submitting it" in r["no-blocking"].evidence
    assert "Fixing it saves" in r["no-blocking"].evidence
    assert r["speedup"].ok is False
    r = _tuning(traced(lambda: hpc.get([nap.remote(0.1) for _ in range(6)])))
    assert r["no-blocking"].ok is True and "average concurrency" in r["no-blocking"].evidence


def test_tiny_tasks_map_to_task_size(pool):
    r = _tuning(traced(lambda: hpc.get([tiny.remote(i) for i in range(400)])))
    assert r["task-size"].ok is False and "Batching" in r["task-size"].evidence


def test_the_same_large_argument_maps_to_data_once(pool):
    table = list(range(400_000))  # ~2 MB pickled in full (a list is not an out-of-band buffer)
    r = _tuning(traced(lambda: hpc.get([lookup.remote(table, 0.03) for _ in range(6)])))
    assert r["data-once"].ok is False and "hpc.put" in r["data-once"].evidence
    ref = hpc.put(table)
    # Longer tasks, so that reading the shared table is not a fifth of their time (the Serialization finding).
    r = _tuning(traced(lambda: hpc.get([lookup.remote(ref, 0.3) for _ in range(6)])))
    assert r["data-once"].ok is True, r["data-once"].evidence


def test_a_straggler_maps_to_even_tasks(pool):
    r = _tuning(traced(lambda: hpc.get([nap.remote(0.6)] + [nap.remote(0.05) for _ in range(7)])))
    assert r["even-tasks"].ok is False


def test_waiting_tasks_map_to_io_bound(pool):
    r = _tuning(traced(lambda: hpc.get([nap.remote(0.1) for _ in range(12)])))
    assert r["io-bound"].ok is False and "more workers than cores" in r["io-bound"].evidence


def test_results_in_submission_order_map_to_as_completed(pool):
    def mistake() -> None:
        futures = [nap.remote(0.5)] + [nap.remote(0.05) for _ in range(7)]
        for f in futures:
            hpc.get(f)
            time.sleep(0.05)

    r = _tuning(traced(mistake))
    assert r["as-completed"].ok is False and "hpc.as_completed" in r["as-completed"].evidence


def test_inputs_built_in_the_loop_map_to_fast_submission(pool):
    def mistake() -> None:
        futures = []
        for i in range(8):
            time.sleep(0.1)  # building the input on the driver
            futures.append(step.remote(i))
        hpc.get(futures)

    r = _tuning(traced(mistake))
    assert r["fast-submission"].ok is False and "build its own input" in r["fast-submission"].evidence


def _partition() -> object:
    b = TraceBuilder(workers=4)
    b.task("big", worker=0, ready=0.0, start=0.0, end=3.0)
    for w in (1, 2, 3):
        b.task("small", worker=w, ready=0.0, start=0.0, end=0.1)
    return b.build()


def _unbalanced() -> object:
    b = TraceBuilder(workers=2)
    free = [0.0, 0.0]
    for size, d in zip([8, 1, 1, 1, 1, 1], [0.8, 0.1, 0.1, 0.1, 0.1, 0.1]):
        w = 0 if free[0] <= free[1] else 1
        b.task("summarize", worker=w, ready=0.0, start=free[w], end=free[w] + d, bytes_in=size * 1_000_000)
        free[w] += d
    return b.build()


@pytest.mark.parametrize("build, item", [
    (partial_blocking, "contention"),
    (_partition, "parallel-chain"),
    (_unbalanced, "even-tasks"),
])
def test_findings_hard_to_provoke_on_two_cores_map_too(build, item):
    # Synthetic traces (a fake clock): contention, a dominant task and unequal partitions.
    assert _tuning(build())[item].ok is False


# -- cost --------------------------------------------------------------------------------------------
def test_an_idle_runtime_is_flagged_and_a_busy_one_is_not(pool):
    hpc.get(nap.remote(0.01))
    assert checklists.measure("cost")["idle-now"].ok is True
    time.sleep(1.5)
    r = checklists.measure("cost")["idle-now"]
    assert r.ok is False and "has been idle" in r.evidence and "hpc.shutdown()" in r.evidence
    hpc.shutdown()
    assert checklists.measure("cost")["idle-now"].evidence == "no runtime is running: nothing is billing"


def test_the_local_pool_has_no_idle_timeout(pool):
    r = checklists.measure("cost")["idle-timeout"]
    assert r.ok is False and "no idle timeout" in r.evidence and "idle_timeout='10m'" in r.evidence


def test_a_dask_cluster_with_an_idle_timeout_is_ok():
    pytest.importorskip("distributed")
    hpc.init(backend="dask", workers=1, idle_timeout="10m", dashboard=False)
    try:
        r = checklists.measure("cost")["idle-timeout"]
    finally:
        hpc.shutdown()
    assert r.ok is True and "shuts itself down after 10 min" in r.evidence


def test_idle_workers_in_the_run_and_the_cheapest_count(pool):
    def serial() -> None:
        for _ in range(4):
            hpc.get(nap.remote(0.1))

    r = {x.id: x for x in checklists.measure("cost", trace=traced(serial))}
    assert r["waste-in-run"].ok is False and "paid for workers with nothing to do" in r["waste-in-run"].evidence
    assert r["right-size"].ok is False and "1 worker is cheapest" in r["right-size"].evidence
    fan = traced(lambda: hpc.get([nap.remote(0.1) for _ in range(8)]))
    r = {x.id: x for x in checklists.measure("cost", trace=fan, price=2.0)}
    assert r["waste-in-run"].ok is True
    assert r["right-size"].ok is True and "2 workers is the cheapest count" in r["right-size"].evidence


# -- ML engineer -------------------------------------------------------------------------------------
def test_gpu_present_follows_detection():
    r = checklists.measure("ml")["gpu-present"]
    assert r.ok is detect_gpus().usable
    if not r.ok:
        assert "GPU numbers are predictions" in r.evidence or "CuPy is not installed" in r.evidence


def test_work_on_gpu_reads_the_last_gpu_cell(gpu_shell, monkeypatch):
    assert checklists.measure("ml")["work-on-gpu"].ok is None
    monkeypatch.setattr(cell, "detect_gpus", lambda: Detection((), "NVML could not start: no NVIDIA driver"))
    body = "import numpy as np\nx = np.linspace(0, 1, 2_000_000)\ny = np.exp(x) * 3 + x\n"
    gpu_shell.run_cell_magic("eugo", "--gpu auto -w 1", body)
    r = checklists.measure("ml")["work-on-gpu"]
    assert r.ok is False and "there is no GPU here" in r.evidence
    r = _ml_item_after_a_fake_h100_cell(gpu_shell, body, "work-on-gpu")
    assert r.ok is True and "operations of the last --gpu cell ran on fake device" in r.evidence


def test_gpu_requests(pool):
    assert checklists.measure("ml", fn=nap)["gpu-requests"].ok is False  # gpus=0
    r = checklists.measure("ml", fn=nap.options(gpus=1))["gpu-requests"]
    assert r.ok is False and "workers have no GPU" in r.evidence
    assert checklists.measure("ml", fn=busy)["gpu-requests"].ok is None  # a plain function


def test_threads_guarded_asks_the_workers(pool):
    r = checklists.measure("ml")["threads-guarded"]
    cores = hpc.cluster().cores
    assert r.ok is True and f"threads on {cores} cores" in r.evidence
    if cores > 2:
        pytest.skip("2 threads per worker oversubscribe only 2 cores or fewer")
    hpc.init(backend="local", workers=2, threads_per_worker=2)  # oversubscribed on purpose
    r = checklists.measure("ml")["threads-guarded"]
    assert r.ok is False and "each worker's BLAS runs 2 threads" in r.evidence and "fight for the cores" in r.evidence


# -- the interactive view ----------------------------------------------------------------------------
def test_the_button_measures_ticks_and_saves_with_evidence(pool, progress_dir):
    pytest.importorskip("ipywidgets")
    view = checklists.show("readiness", fn=busy, args=(0.2,))
    row = view.row("task-size")
    assert row["checkbox"].value is False and row["button"] is not None
    assert view.row("side-effects")["button"] is None
    row["button"].click()
    assert row["checkbox"].value is True and "worth distributing" in row["evidence"].value
    saved = store.ticks("workload-readiness")["task-size"]
    assert saved["ticked"] is True and saved["how"] == "measured" and "worth distributing" in saved["evidence"]
    view.row("side-effects")["checkbox"].value = True  # a manual tick
    assert store.ticks("workload-readiness")["side-effects"]["how"] == "manual"
    assert view.to_text().splitlines()[2:4] == [
        "  [x] task-size: One call does much more work than it costs to schedule (measurable)",
        "  [ ] argument-size: The arguments are small, or shared once with hpc.put (measurable)",
    ]


def test_a_failing_measurement_unticks_and_user_text_is_escaped(pool, progress_dir):
    pytest.importorskip("ipywidgets")

    def take(tag):
        return tag

    view = checklists.show("readiness", fn=take, args=("<script>" * 200_000,))  # 1.6 MB of user text
    view.set_tick("argument-size", True)
    view.measure("argument-size")
    ev = view.row("argument-size")["evidence"].value
    assert view.row("argument-size")["checkbox"].value is False and "use put" in ev
    assert "<script>" not in view.to_html() and "<script>" not in ev


def test_the_text_form_is_deterministic(progress_dir):
    a, b = checklists.show("cost").to_text(), checklists.show("cost").to_text()
    assert a == b and a.splitlines()[0] == "Cost optimization checklist"
    assert a.splitlines()[-1].startswith("0 of 6 ticked.")
    bundle = checklists.show("cost")._repr_mimebundle_()
    assert bundle["text/plain"] == a


def test_ticks_survive_a_new_process(progress_dir):
    code = textwrap.dedent("""
        import sys
        from eugo_lab import checklists
        view = checklists.show("tuning")
        if sys.argv[1] == "tick":
            view.set_tick("no-blocking", True)
        print(view.to_text().splitlines()[3])
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "EUGO_LAB_PROGRESS_DIR": str(progress_dir)}
    for step_, expected in (("tick", "[x]"), ("read", "[x]")):
        out = subprocess.run([sys.executable, "-c", code, step_], capture_output=True, text=True, env=env,
                             timeout=120, check=True).stdout
        assert out.strip().startswith(f"{expected} no-blocking"), out
    data = json.loads((progress_dir / "progress.json").read_text())
    assert data["checklists"]["performance-tuning"]["no-blocking"]["ticked"] is True


MEASURED_AFTER_A_RESTART = textwrap.dedent("""
    from pathlib import Path
    from IPython.testing.globalipapp import start_ipython
    from eugo_lab.server.courses import listing

    ip = start_ipython()
    ip.run_line_magic("load_ext", "eugo_lab")
    ip.run_line_magic("eugo", "checklist readiness")
    panel = next(c for c in listing(Path("courses"))["checklists"] if c["id"] == "workload-readiness")
    print("panel:", [(i["id"], i["ticked"], i["how"]) for i in panel["items"][:2]])
""")


def test_measure_saves_its_ticks_and_a_restarted_kernel_and_the_panel_show_them(pool, progress_dir):
    r = checklists.measure("readiness", fn=busy, args=(0.2,))
    assert r["task-size"].ok is True and r["argument-size"].ok is True and r["side-effects"].ok is None
    saved = store.ticks("workload-readiness")
    assert saved["task-size"] == {"ticked": True, "how": "measured", "evidence": r["task-size"].evidence,
                                  "when": saved["task-size"]["when"]}
    assert "side-effects" not in saved  # yours to tick: a measurement never ticks it for you
    assert checklists.measure("readiness", fn=lambda x: x + 1, args=(1,))["task-size"].ok is False
    assert store.ticks("workload-readiness")["task-size"]["ticked"] is False  # a measurement unticks, as the button
    checklists.measure("readiness", fn=busy, args=(0.2,))
    env = {**os.environ, "PYTHONPATH": str(REPO), "EUGO_LAB_PROGRESS_DIR": str(progress_dir),
           "EUGO_LAB_DISPLAY": "text"}
    out = subprocess.run([sys.executable, "-c", MEASURED_AFTER_A_RESTART], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=120, check=True).stdout
    assert "[x] task-size: One call does much more work than it costs to schedule" in out, out
    assert "worth distributing" in out, out  # a terminal shows the saved evidence
    assert "panel: [('task-size', True, 'measured'), ('argument-size', True, 'measured')]" in out, out


def test_a_store_that_cannot_be_written_costs_measure_a_warning_not_its_results(progress_dir):
    progress_dir.mkdir(parents=True)
    (progress_dir / "progress.json").write_text('{"schema_version": 99}')
    with pytest.warns(UserWarning, match="ticks were not saved to .*newer eugo-lab"):
        r = checklists.measure("cost", trace=traced(lambda: hpc.get([nap.remote(0.01) for _ in range(4)])))
    assert r["waste-in-run"].ok is not None
    hpc.shutdown()


def test_the_line_magic_shows_the_view_and_rejects_bad_input(pool, progress_dir, monkeypatch, capsys):
    from IPython.core.error import UsageError

    ip = shell()
    ip.user_ns.update(work=busy, work_args=(0.2,))
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    view = ip.run_line_magic("eugo", "checklist readiness --fn work --args work_args")
    assert view.measure("task-size").ok is True
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")  # a terminal: the text with the evidence is printed
    assert ip.run_line_magic("eugo", "checklist readiness --fn work --args work_args") is None
    out = capsys.readouterr().out
    assert "[x] task-size" in out and "worth distributing" in out
    with pytest.raises(UsageError, match="did you mean 'tuning'"):
        ip.run_line_magic("eugo", "checklist tunning")
    with pytest.raises(UsageError, match="no variable called 'nothing'"):
        ip.run_line_magic("eugo", "checklist readiness --fn nothing")
    with pytest.raises(UsageError, match="unknown option '--fun'"):
        ip.run_line_magic("eugo", "checklist readiness --fun work")


def test_a_raising_function_behind_a_button_leaves_the_tick_and_says_why(pool, progress_dir):
    pytest.importorskip("ipywidgets")

    def broken():
        raise KeyError("tile")

    view = checklists.show("readiness", fn=broken)
    view.set_tick("task-size", True)
    r = view.measure("task-size")
    assert r.ok is None and view.row("task-size")["checkbox"].value is True
    assert "raised KeyError: &#x27;tile&#x27;" in view.row("task-size")["evidence"].value
    with pytest.raises(ChecklistError, match="has no item 'nope'; its items are: task-size, "):
        view.measure("nope")


def test_the_line_magic_without_a_name_lists_the_checklists():
    from IPython.core.error import UsageError

    ip = shell()
    with pytest.raises(UsageError, match="which checklist\\? .*workload-readiness, performance-tuning, "
                                         "cost-optimization, quick-guide-ml-engineer"):
        ip.run_line_magic("eugo", "checklist")


def tiny_call(x: int = 1) -> int:
    return x + 1


def test_a_call_of_microseconds_is_not_called_compute_bound():
    r = checklists.measure("readiness", fn=tiny_call, args=(1,))["bound"]
    assert r.ok is False
    assert "more cores help" not in r.evidence.split(";")[0] and "less than a task costs" in r.evidence


def test_sleeping_tasks_never_tick_not_waiting_on_io_even_when_the_finding_is_only_a_note(pool):
    from eugo_lab.checklists.catalog import tuning

    trace = traced(lambda: hpc.get([nap.remote(0.02) for _ in range(2)]))  # short: a finding would be a note
    assert re.match(r"tasks used the CPU \d+% of their run time: they mostly wait", tuning._waiting(trace))
    r = _tuning(trace)
    assert r["io-bound"].ok is False


def test_data_on_device_is_measured_from_the_ledger(gpu_shell):
    assert checklists.measure("ml")["data-on-device"].ok is None
    chained = ("import numpy as np\nx = np.linspace(0, 1, 2_000_000)\ny = x * 2\nfor _ in range(6):\n"
               "    y = np.exp(y) * 0.5 + y\ntotal = float(y.sum())\n")
    r = _ml_item_after_a_fake_h100_cell(gpu_shell, chained, "data-on-device")
    assert r.ok is True and "crossed between host and GPU" in r.evidence
    round_trips = ("import numpy as np\nx = np.linspace(0, 1, 2_000_000)\nfor _ in range(4):\n"
                   "    x = np.asarray(np.exp(x) * 0.5).tolist()\n    x = np.array(x)\n")
    r = _ml_item_after_a_fake_h100_cell(gpu_shell, round_trips, "data-on-device")
    assert r.ok is False and "went back and forth" in r.evidence
