"""``%%eugo`` and ``%eugo`` at the IPython level (no kernel, no browser)."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from eugo_lab import glossary, hpc
from eugo_lab.cellrun import options as opt
from eugo_lab.cellrun.live import LiveFeed
from eugo_lab.cellrun.live_state import LiveState
from eugo_lab.contract.row import TASK_FLOAT_COLUMNS, TASK_INT_COLUMNS, TaskStats
from eugo_lab.render import glyphs, live, text
from eugo_lab.tracing.recorder import Chunk, Recorder

SETUP = """
import time
from eugo_lab import hpc

@hpc.remote
def nap(x):
    time.sleep(0.02)
    return x * 2
"""


@pytest.fixture
def kernel_mode(monkeypatch):
    """Rich displays (widgets + HTML bundles) as in a kernel without our server."""
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    monkeypatch.delenv("EUGO_LAB_BOKEH_URL", raising=False)


def bundles(cap) -> list[dict]:
    return [o.data for o in cap.outputs]


def summary_bundle(cap) -> dict:
    found = [b for b in bundles(cap) if "text/html" in b and "eugo-summary" in b["text/html"]]
    assert len(found) == 1, bundles(cap)
    return found[0]


# -- options ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("line, needle", [
    ("-w 0", "-w/--workers"),
    ("-w two", "-w/--workers"),
    ("--workers -3", "-w/--workers"),
    ("-b spark", "local, dask, ray, threads"),
    ("--bogus", "valid options"),
    ("--address nonsense", "--address"),
    ("--address tcp://host:99999", "--address"),
    ("-b local --address tcp://10.0.0.1:8786", "--address"),
    ("--gpu maybe", "auto, on, off"),
    ("--scaling 1,x", "--scaling"),
    ("--scaling 1,2 --compare", "--compare"),
    ("--save 1abc", "--save"),
    ("--export /no/such/folder/t.json", "--export"),
    ("-w {1/0}", "-w/--workers"),  # never evaluated
    ("-w $HOME", "-w/--workers"),
])
def test_bad_options_raise_usage_error_before_starting(ip, line, needle):
    hpc.shutdown()
    with pytest.raises(UsageError) as err:
        ip.run_cell_magic("eugo", line, "raise AssertionError('the cell must not run')")
    msg = str(err.value)
    assert needle in msg
    assert "\n" not in msg
    assert not hpc.is_initialized()


def test_backend_not_installed_is_named(ip):
    with pytest.raises(opt.OptionError, match="available: local, threads"):
        opt.build(backend="ray", available=["local", "threads"])


def test_worker_counts():
    assert opt.CellOptions(workers=2).worker_counts(4) == [2]
    assert opt.CellOptions(compare=True).worker_counts(4) == [1, 4]
    assert opt.CellOptions(compare=True, workers=1).worker_counts(4) == [1]
    assert opt.CellOptions(scaling=(1, 2, 4)).worker_counts(2) == [1, 2, 4]
    assert opt.CellOptions(scaling=(1, 2, 4), workers=2).worker_counts(8) == [1, 4, 2]
    assert opt.CellOptions().worker_counts(None) == [None]


def test_help_has_example_and_options(ip):
    doc = ip.find_cell_magic("eugo").__doc__
    for needle in ("Example", "%%eugo -w 4 --compare", "--workers", "--backend", "--scaling", "--no-live",
                   "--save", "--export", "--gpu", "--optimize", "--address"):
        assert needle in doc


# -- running cells -----------------------------------------------------------------------------------
def test_cell_outputs_value_and_deterministic_text(ip, kernel_mode):
    ip.run_cell(SETUP)
    cell = "futs = [nap.remote(i) for i in range(6)]\nhpc.get(futs)"
    texts = []
    for _ in range(2):
        with capture_output() as cap:
            value = ip.run_cell_magic("eugo", "-w 2", cell)
        assert value == [0, 2, 4, 6, 8, 10]
        widget = [b for b in bundles(cap) if "application/vnd.jupyter.widget-view+json" in b]
        assert widget and widget[0]["text/plain"] == live.LIVE_TEXT
        b = summary_bundle(cap)
        texts.append(b["text/plain"])
        assert "speedup" in b["text/html"] and "<svg class='eugo-timeline'" in b["text/html"]
    assert texts[0] == texts[1] == (
        "%%eugo: 6 tasks on 2 workers (backend local)\n"
        "  functions: nap x6\n"
        "  failed: 0, retried: 0, blocking waits: 1\n"
        f"  gpu: {_default_gpu_line()}, optimize: automatic\n"
        "  Optimizations (automatic): 0 applied, 0 declined, 1 not tried\n"
        "    [not tried] JIT (Numba): nap: not tried: it has not yet spent enough CPU in plain Python for a compile "
        "to pay back\n"
        "  (timings, speedup and findings: see the rich view, or hpc.last_trace())")
    tr = hpc.last_trace()
    assert len(tr) == 6 and tr.meta["workers"] == 2


def _default_gpu_line() -> str:
    """What the summary says of --gpu when it is not given: auto on a GPU machine, off (with why) elsewhere."""
    from eugo_lab.offload import cell

    mode, note = cell.default_mode(None)
    return f"{mode} ({note})" if note else mode


def test_save_export_and_meta(ip, kernel_mode, tmp_path):
    ip.run_cell(SETUP)
    path = tmp_path / "cell.json"
    with capture_output() as cap:
        ip.run_cell_magic("eugo", f"-w 2 --no-live --gpu off --optimize --save my_trace --export {path}",
                          "hpc.get([nap.remote(i) for i in range(4)])")
    tr = ip.user_ns["my_trace"]
    assert tr is hpc.last_trace()
    assert len(tr) == 4
    assert tr.meta["gpu"] == "off" and tr.meta["optimize"] is True
    doc = json.loads(path.read_text())
    assert sum(1 for e in doc["traceEvents"] if e.get("name") == "nap") == 4
    assert not [b for b in bundles(cap) if "application/vnd.jupyter.widget-view+json" in b]  # --no-live
    plain = summary_bundle(cap)["text/plain"]
    assert "trace saved as: my_trace" in plain and "gpu: off, optimize: on" in plain


@pytest.mark.parametrize("line, n, html", [
    ("-w 2 --compare --no-live", 6, ("measured speedup, 2 workers",)),
    ("--scaling 1,2 --no-live", 4, ("ideal",)),
], ids=["compare", "scaling"])
def test_compare_and_scaling_run_on_one_worker_too(ip, kernel_mode, line, n, html):
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", line, f"hpc.get([nap.remote(i) for i in range({n})])")
    b = summary_bundle(cap)
    assert "runs at workers: 1, 2" in b["text/plain"]
    assert "<svg class='eugo-speedup'" in b["text/html"]
    for phrase in html:
        assert phrase in b["text/html"]
    assert hpc.last_trace().meta["workers"] == 2  # the cell's last run is on the workers it asked for
    assert hpc.cluster().workers == 2


def test_error_in_cell_shows_partial_summary_then_error_once(ip, kernel_mode, capsys):
    ip.run_cell(SETUP)
    cell = ("%%eugo -w 2\n"
            "futs = [nap.remote(i) for i in range(3)]\n"
            "hpc.get(futs)\n"
            "def broken():\n"
            "    return 1 / 0\n"
            "broken()\n")
    with capture_output() as cap:
        result = ip.run_cell(cell)
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    b = summary_bundle(cap)
    assert "stopped by ZeroDivisionError" in b["text/plain"]
    assert b["text/plain"].startswith("%%eugo: 3 tasks")
    tb = cap.stdout + capsys.readouterr().out
    assert tb.count("ZeroDivisionError: division by zero") == 1
    assert "----> 6 broken()" in tb  # the notebook's own line numbers (line 1 is %%eugo)
    assert "----> 5     return 1 / 0" in tb
    assert "runner.py" not in tb and "execute.py" not in tb
    assert len(hpc.last_trace()) == 3


def test_syntax_error_starts_nothing(ip):
    hpc.shutdown()
    with pytest.raises(SyntaxError):
        ip.run_cell_magic("eugo", "-w 2", "def (:\n")
    assert not hpc.is_initialized()


def test_top_level_await_is_refused_with_what_to_do_and_starts_nothing(ip):
    hpc.shutdown()
    cell = "import asyncio\nasync def ok():\n    await asyncio.sleep(0)\nx = [1]\nfor i in x:\n    await ok()\n"
    with pytest.raises(SyntaxError) as err:
        ip.run_cell_magic("eugo", "-w 2", cell)
    assert "cannot use top-level await" in str(err.value) and "hpc.get(futures)" in str(err.value)
    assert err.value.lineno == 7  # the notebook's line: line 1 is the %%eugo line
    assert not hpc.is_initialized()
    ip.run_cell_magic("eugo", "-w 2", "import asyncio\nasync def ok():\n    return [i async for i in agen()]\n")


def _define_evil(ip, name: str) -> None:
    """Define ``name`` and ``name_r`` (its remote) in the shell: a function whose name is HTML."""
    ip.run_cell(f"""
from eugo_lab import hpc
def {name}(x):
    return x
{name}.__name__ = {name}.__qualname__ = "<img src=x onerror=alert(1)>"
{name}_r = hpc.remote({name})
""")


def test_user_text_is_escaped(ip, kernel_mode):
    _define_evil(ip, "evil")
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live", "hpc.get([evil_r.remote(i) for i in range(2)])")
    h = summary_bundle(cap)["text/html"]
    assert "<img" not in h
    assert "&lt;img src=x onerror=alert(1)&gt;" in h


@pytest.fixture
def lab_views(monkeypatch):
    """Lab mode (Bokeh timeline built and streamed, no browser); records every LiveView and its snapshots."""
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "lab")
    monkeypatch.setenv("EUGO_LAB_BOKEH_URL", "/eugo/bokeh/")
    views, original = [], live.LiveView.update

    def update(self, chunk, snapshot):
        if not views or views[-1][0] is not self:
            views.append((self, []))
        views[-1][1].append(snapshot)
        original(self, chunk, snapshot)

    monkeypatch.setattr(live.LiveView, "update", update)
    return views


def test_map_counters_count_items_not_batches(ip, lab_views):
    ip.run_cell("""
import time
from eugo_lab import hpc

@hpc.remote
def pause(x):
    time.sleep(0.004)
    return x
""")
    n = 300
    with capture_output() as cap:
        value = ip.run_cell_magic("eugo", "-w 2", f"len(hpc.get(hpc.map(pause, range({n}))))")
    assert value == n
    view, snaps = lab_views[-1]
    running = [s for s in snaps if not s.finished]
    assert running, "no live update while the map ran"
    totals = [s.done + s.running + s.pending for s in running]
    # Items, not batches: a map of 300 keeps at most 2 batches per worker in flight, so a count of
    # batches would show pending <= 4. A batch coming back can make one snapshot a batch short.
    assert max(totals) == n and sum(t == n for t in totals) >= len(totals) / 2, totals
    assert max(s.pending for s in running) > 4 * 2, [(s.done, s.running, s.pending) for s in running]
    assert all(s.running <= 2 for s in running)
    last = snaps[-1]
    assert last.finished and (last.done, last.running, last.pending) == (n, 0, 0)
    assert sum(view.sources["tasks"].data["tasks"]) == n  # every item drawn once (tiny ones share bars)
    assert "functions: pause x300" in summary_bundle(cap)["text/plain"]


def crash_setup(flag) -> str:
    """A task that kills its worker process on its first attempt at i == 2, and returns its pid."""
    return f"""
import os, time
from eugo_lab import hpc
from eugo_lab.hpc import session

@hpc.remote
def fragile(i):
    time.sleep(0.02)
    if i == 2 and not os.path.exists({str(flag)!r}):
        open({str(flag)!r}, "w").close()
        os._exit(1)  # the worker process dies mid-task, on the first attempt only
    return os.getpid()
"""


# 8 tasks, one of which crashes its worker once; then more tasks until one ran on the
# replacement process (it takes a moment to start; until then the other worker takes all).
CRASH_CELL = """started_with = {w.pid for w in session.current().backend.workers()}
hpc.get([fragile.remote(i) for i in range(8)])
n = 8
while not set(hpc.get([fragile.remote(-1), fragile.remote(-1)])) - started_with:
    n += 2
n + 2"""


def test_crash_mid_cell_retried_on_a_replacement_lane(ip, lab_views, tmp_path):
    ip.run_cell(crash_setup(tmp_path / "crashed-once"))
    hpc.init(workers=2)
    with capture_output() as cap:
        n = ip.run_cell_magic("eugo", "-w 2", CRASH_CELL)
    tr = hpc.last_trace()
    assert sorted(tr.tasks["status"].tolist()) == [0] * n + [2] and tr.tasks["attempt"].max() == 2
    view, snaps = lab_views[-1]
    data = view.sources["tasks"].data
    crashed = [i for i, st in enumerate(data["status"]) if st == "crashed"]
    retried = [i for i, st in enumerate(data["status"]) if st == "ok (attempt 2)"]
    assert len(crashed) == 1 and len(retried) == 1
    assert data["hatch"][crashed[0]] == "x" and data["hatch"][retried[0]] == "/"
    labels = view.figure.yaxis[0].major_label_overrides
    dead = data["y"][crashed[0]]
    assert labels[dead] in ("worker 0 (died)", "worker 1 (died)")
    w = labels[dead].split()[1]
    new_lane = next(y for y, lab in labels.items() if lab == f"worker {w} (replacement)")
    assert new_lane == 3 and view.figure.yaxis[0].ticker.ticks == [0, 1, 2, 3] and view.figure.y_range.start > 3
    assert any(y == new_lane for y in data["y"])  # the replacement ran something
    assert (snaps[-1].done, snaps[-1].failed, snaps[-1].retried) == (n, 1, 1)
    plain = summary_bundle(cap)["text/plain"]
    assert plain.startswith(f"%%eugo: {n} tasks on 2 workers")  # tasks, not attempts (n + 1 rows)
    assert f"functions: fragile x{n}\n  failed: 1, retried: 1" in plain


def test_crash_lanes_in_the_static_timeline(ip, kernel_mode, tmp_path):
    ip.run_cell(crash_setup(tmp_path / "crashed-once"))
    hpc.init(workers=2)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live", CRASH_CELL)
    h = summary_bundle(cap)["text/html"]
    assert re.search(r">worker \d \(died\)</text>", h) and re.search(r">worker \d \(replacement\)</text>", h), h
    assert "crashed" in h and "at most" in h  # the crashed attempt's bar and its title


def test_user_text_is_escaped_in_the_live_timeline_data(ip, lab_views):
    _define_evil(ip, "evil2")
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2", "hpc.get([evil2_r.remote(i) for i in range(3)])")
    blocks = lab_views[-1][0].sources["blocks"].data
    # the driver's wait names the notebook cell and line (line 1 is the %%eugo line), not a temp file
    assert blocks["label"] == ["get() blocked on 3 futures"]
    assert re.fullmatch(r"Cell In\[\d+\], line 2", blocks["source"][0]), blocks["source"]
    data = lab_views[-1][0].sources["tasks"].data
    # Bokeh gets the name as data (the browser test checks it shows as text); HTML outputs escape it.
    assert set(data["name"]) == {"<img src=x onerror=alert(1)>"}
    for b in bundles(cap):
        assert "<img" not in b.get("text/html", "")


def test_terminal_prints_precise_text(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell(SETUP)
    ip.run_cell_magic("eugo", "-w 2", "hpc.get([nap.remote(i) for i in range(2)])")
    out = capsys.readouterr().out
    assert "%%eugo: 2 tasks on 2 workers" in out and "speedup" in out and "wall time" in out


def test_a_task_never_waited_on_is_counted_and_named(ip, kernel_mode):
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2", "f = nap.remote(21)")  # no get: the cell ends while it runs
    b = summary_bundle(cap)
    # The trace waited (briefly) for it: the task is in the report, not "0 tasks".
    assert b["text/plain"].startswith("%%eugo: 1 task on 2 workers (backend local)\n  functions: nap x1\n")
    assert "  never waited on in the cell: 1 task; call hpc.get(f) to use its result\n" in b["text/plain"]
    assert "the trace waited for it to finish, so it is included: call hpc.get(f)" in b["text/html"]
    tr = hpc.last_trace()
    assert len(tr) == 1 and tr.meta["unwaited_tasks"] == 1 and tr.meta["running_at_end"] == {}
    assert ip.user_ns["f"].done() and hpc.get(ip.user_ns["f"]) == 42


def test_a_long_task_never_waited_on_keeps_running_and_is_reported(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell(SETUP + "\n@hpc.remote\ndef slow(x):\n    time.sleep(3)\n    return x\n")
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2", "futs = [slow.remote(i) for i in range(2)]")
    out = cap.stdout
    assert "%%eugo: 2 tasks on 2 workers" in out and "functions: slow x2" in out
    assert ("2 tasks still running when the cell ended (never waited on): call hpc.get(futs) to use their "
            "results") in out, out
    futs = ip.user_ns["futs"]
    assert not any(f.done() for f in futs)  # never cancelled: fire-and-forget keeps running
    assert hpc.get(futs) == [0, 1]


def test_an_unwaited_map_counts_its_items_and_names_its_result(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2", "r = hpc.map(nap, range(6), batch=1)")
    assert "%%eugo: 6 tasks on 2 workers" in cap.stdout
    assert "6 tasks never waited on in the cell; the trace waited for them to finish" in cap.stdout
    assert "call hpc.get(r) to use their results" in cap.stdout
    assert len(hpc.last_trace()) == 6


def test_a_cell_that_waits_says_nothing_about_unwaited_tasks(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2", "hpc.get(nap.remote(1))")
    assert "never waited on" not in cap.stdout and "still running" not in cap.stdout
    assert "unwaited_tasks" not in hpc.last_trace().meta


def test_trace_settle_must_be_seconds():
    with pytest.raises(ValueError, match="settle"):
        hpc.trace(settle=-1)


# -- %eugo line magic ---------------------------------------------------------------------------------
def test_status_stop_trace(ip, kernel_mode):
    hpc.init(backend="local", workers=2)
    with capture_output() as cap:
        ip.run_line_magic("eugo", "status --price 1.5")
    b = bundles(cap)[-1]
    assert b["text/plain"] == "eugo runtime: backend local, 2 workers (live numbers in the rich view)"
    assert "so far at $1.5 per worker-hour (--price)" in b["text/html"]
    with pytest.raises(UsageError, match="--price"):
        ip.run_line_magic("eugo", "status --price -1")
    with capture_output() as cap:
        ip.run_line_magic("eugo", "stop")
    assert not hpc.is_initialized()
    assert "stopped" in bundles(cap)[-1]["text/plain"]
    with pytest.raises(UsageError, match="status, stop, glossary, trace"):
        ip.run_line_magic("eugo", "launch")


def test_trace_subcommand(ip, kernel_mode):
    with hpc.trace():
        hpc.get([hpc.remote(abs).remote(-i) for i in range(3)])
    with capture_output() as cap:
        ip.run_line_magic("eugo", "trace")
    b = bundles(cap)[-1]
    assert b["text/plain"].startswith("%%eugo: 3 tasks on")


def test_trace_subcommand_after_a_compare_cell_shows_the_cells_own_summary(ip, kernel_mode):
    # Re-analysing the main run alone turned "2.0x measured" into "1.5x estimated" and lost the optimizations.
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --compare --no-live", "hpc.get([nap.remote(i) for i in range(6)])")
    cell = summary_bundle(cap)
    assert "runs at workers: 1, 2" in cell["text/plain"]
    with capture_output() as cap:
        ip.run_line_magic("eugo", "trace")
    again = summary_bundle(cap)
    assert again["text/plain"] == cell["text/plain"]
    assert "measured speedup, 2 workers" in again["text/html"] and "Optimizations" in again["text/html"]
    # A traced region after the cell is summarized on its own, with what the runtime did in it.
    with hpc.trace():
        hpc.get([ip.user_ns["nap"].remote(i) for i in range(2)])
    with capture_output() as cap:
        ip.run_line_magic("eugo", "trace")
    region = bundles(cap)[-1]["text/plain"]
    assert region.startswith("%%eugo: 2 tasks on") and "runs at workers" not in region


def test_glossary(ip, kernel_mode):
    assert glossary.lookup("straggler").term == "Straggler"
    assert glossary.lookup("I/O bound").term == "I/O-bound"
    assert glossary.lookup("get").term == "get()"
    assert len(glossary.terms()) >= 21
    with pytest.raises(glossary.UnknownTermError) as err:
        glossary.lookup("stragler")
    assert "Straggler" in err.value.suggestions
    with capture_output() as cap:
        ip.run_line_magic("eugo", "glossary scheduling overhead")
    assert bundles(cap)[-1]["text/plain"].startswith("Scheduling overhead: ")
    with pytest.raises(UsageError, match="Did you mean: .*Speedup"):
        ip.run_line_magic("eugo", "glossary speedupp")


def test_glossary_definitions_are_our_own_words():
    seed = open("/work/shared/seed-eugo-learning-page.txt", encoding="utf-8").read() if \
        __import__("os").path.exists("/work/shared/seed-eugo-learning-page.txt") else ""
    for term in glossary.terms():
        for sentence in glossary.lookup(term).definition.split(". "):
            assert len(sentence) < 40 or sentence.strip(".") not in seed, sentence


# -- pure parts: glyphs, counters, the writer thread ----------------------------------------------------
def _chunk(rows, phases=(), blocks=(), functions=("f", "g")):
    """A recorder Chunk from (task_id, worker, start, end[, status, attempt, function]) rows."""
    full = [r + (0, 1, 0)[len(r) - 4:] for r in rows]
    tasks = {c: [] for c in TASK_INT_COLUMNS + TASK_FLOAT_COLUMNS}
    for tid, worker, start, end, status, attempt, fn in full:
        for c, v in (("task_id", tid), ("worker", worker), ("start", start), ("end", end), ("status", status),
                     ("attempt", attempt), ("function", fn), ("batch", tid), ("bytes_in", 100),
                     ("bytes_out", 2000), ("submit", start), ("ready", start), ("received", end), ("cpu", 0.0),
                     ("deser", 0.0), ("ser", 0.0)):
            tasks[c].append(v)
    ph = {"row": [p[0] for p in phases], "name": [0] * len(phases), "start": [p[1] for p in phases],
          "end": [p[2] for p in phases], "cpu": [0.0] * len(phases)}
    bl = {"kind": [0] * len(blocks), "start": [b[0] for b in blocks], "end": [b[1] for b in blocks],
          "futures": [b[2] for b in blocks], "source": [0] * len(blocks)}
    return Chunk(tasks, ph, bl, functions, ("read",), ("get",), ("cell:3",))


def test_task_glyphs():
    pal = glyphs.Palette()
    data = _chunk([(1, 0, 10.0, 10.5), (2, 1, 10.1, 10.2, 1, 1, 1), (3, 1, 10.3, 10.4, 0, 2, 0)],
                  phases=[(0, 10.0, 10.2)], blocks=[(10.0, 10.5, 3)])
    cols = glyphs.task_columns(data, 10.0, pal)
    assert cols["left"] == [0.0, pytest.approx(0.1), pytest.approx(0.3)]
    assert cols["y"] == [1, 2, 2]
    assert cols["color"] == ["#1f77b4", "#ff7f0e", "#1f77b4"]
    assert cols["hatch"] == [" ", "x", "/"]
    assert cols["line_color"][1] == glyphs.FAILED_LINE
    assert cols["phases"][0] == "read 200 ms"
    assert cols["bytes"][0] == "in 100 B, out 2.0 kB"
    assert cols["status"][1:] == ["error", "ok (attempt 2)"]
    assert glyphs.block_columns(data, 10.0) == {"left": [0.0], "right": [0.5], "y": [0],
                                                "label": ["get() blocked on 3 futures"], "source": ["cell:3"]}
    ph = glyphs.phase_columns(data, 10.0, glyphs.Palette())
    assert ph["phase"] == ["read"] and ph["y"] == [1] and ph["function"] == ["f"]
    assert glyphs.lane_labels(3) == {0: "driver", 1: "worker 0", 2: "worker 1"}
    lanes = glyphs.Lanes(2)
    assert glyphs.task_columns(data, 10.0, pal, lanes=lanes)["y"] == [1, 2, 2] and lanes.n_lanes == 3


def test_tiny_tasks_share_a_bar():
    rows = [(i, 0, 1.0 + i * 0.0002, 1.0 + i * 0.0002 + 0.0001) for i in range(100)]
    rows.append((200, 0, 2.0, 2.0001))  # after a long gap: a new bar
    rows.append((201, 1, 1.0, 1.5))  # a real task on another lane: its own bar
    rows.append((202, 0, 2.0002, 2.0003, 1, 1, 0))  # failures are never merged
    data = _chunk(rows)
    cols = glyphs.task_columns(data, 1.0, glyphs.Palette())
    assert sorted(cols["tasks"]) == [1, 1, 1, 100]
    i = cols["tasks"].index(100)
    assert cols["function"][i] == "f (x100 tiny tasks)"
    assert cols["left"][i] == 0.0 and cols["right"][i] == pytest.approx(0.0199)
    assert len(glyphs.task_columns(data, 1.0, glyphs.Palette(), merge=False)["left"]) == 103


def test_tiny_tasks_with_phases_share_a_bar_and_sum_their_phases():
    rows = [(i, 0, 1.0 + i * 0.0002, 1.0 + i * 0.0002 + 0.0001) for i in range(50)]
    rows.append((99, 1, 1.0, 1.2))  # a long task: its own bar and its own phase bar
    phases = [(i, 1.0 + i * 0.0002, 1.0 + i * 0.0002 + 0.00004) for i in range(50)] + [(50, 1.0, 1.05)]
    data = _chunk(rows, phases=phases)
    cols = glyphs.task_columns(data, 1.0, glyphs.Palette())
    assert sorted(cols["tasks"]) == [1, 50]
    merged = cols["tasks"].index(50)
    assert cols["phases"][merged] == "read 2 ms"  # 50 x 40 us
    assert cols["phases"][1 - merged] == "read 50 ms"
    ph = glyphs.phase_columns(data, 1.0, glyphs.Palette())
    assert ph["left"] == [0.0] and ph["y"] == [2]  # no slivers for the merged tasks


def _crash_row(tid, worker, ready, received, attempt=1):
    """A crashed attempt as the runtime records it: no start or end, only when it was sent and seen dead."""
    c = _chunk([(tid, worker, float("nan"), float("nan"), 2, attempt, 0)])
    c.tasks["ready"][0], c.tasks["received"][0] = ready, received
    return c


def test_crashed_worker_and_its_replacement_get_their_own_lanes():
    lanes, pal = glyphs.Lanes(2), glyphs.Palette()
    first = glyphs.task_columns(_chunk([(1, 0, 10.0, 10.2), (3, 1, 10.0, 10.4)]), 10.0, pal, lanes=lanes)
    assert first["y"] == [1, 2] and not lanes.changed
    crash = glyphs.task_columns(_crash_row(2, 0, ready=10.1, received=10.5), 10.0, pal, lanes=lanes)
    # drawn on the dead process's lane, from when its previous task ended to when the death was seen
    assert crash["y"] == [1] and crash["hatch"] == ["x"] and crash["status"] == ["crashed"]
    assert crash["left"] == [pytest.approx(0.2)] and crash["right"] == [pytest.approx(0.5)]
    assert crash["line_color"] == [glyphs.FAILED_LINE]
    assert crash["duration"] == ["at most 300 ms (its worker died)"]
    assert lanes.changed and lanes.labels() == {0: "driver", 1: "worker 0 (died)", 2: "worker 1"}
    # the retry runs on the replacement process (same index 0): a new lane at the bottom
    retry = glyphs.task_columns(_chunk([(2, 0, 10.6, 10.8, 0, 2, 0), (4, 1, 10.5, 10.7)]), 10.0, pal, lanes=lanes)
    assert retry["y"] == [3, 2] and retry["hatch"] == ["/", " "] and retry["status"][0] == "ok (attempt 2)"
    assert lanes.n_lanes == 4
    assert lanes.labels() == {0: "driver", 1: "worker 0 (died)", 2: "worker 1", 3: "worker 0 (replacement)"}
    # the same rows drawn again (a whole trace at the end) land on the same lanes
    again = glyphs.Lanes(2)
    for c in (_chunk([(1, 0, 10.0, 10.2)]), _crash_row(2, 0, 10.1, 10.5), _chunk([(2, 0, 10.6, 10.8, 0, 2, 0)])):
        ys = glyphs.task_columns(c, 10.0, glyphs.Palette(), lanes=again)["y"]
    assert ys == [3] and again.labels() == lanes.labels()


def test_new_worker_index_gets_the_next_lane_and_crash_without_worker_is_not_drawn():
    lanes = glyphs.Lanes(1)
    cols = glyphs.task_columns(_chunk([(1, 5, 1.0, 1.1), (2, -1, 1.0, 1.2)]), 1.0, glyphs.Palette(), lanes=lanes)
    assert cols["y"] == [2, 0] and lanes.labels() == {0: "driver", 1: "worker 0", 2: "worker 5"}
    assert glyphs.task_columns(_crash_row(3, -1, 1.0, 1.5), 1.0, glyphs.Palette(), lanes=lanes)["left"] == []


def test_live_state_counts_tasks_not_attempts():
    st = LiveState(start=10.0, workers=2)
    st.add(_crash_row(2, 0, 10.1, 10.5))
    st.add(_chunk([(1, 0, 10.0, 10.2), (2, 0, 10.6, 10.8, 0, 2, 0)]))
    s = st.snapshot(11.0, unfinished=0)
    assert (s.done, s.failed, s.retried) == (2, 1, 1)


def test_live_state_counters():
    st = LiveState(start=100.0, workers=2)
    st.add(_chunk([(1, 0, 100.0, 101.0), (2, 1, 100.0, 101.0, 1, 1, 0)]))
    s = st.snapshot(102.0, unfinished=5)
    assert (s.done, s.failed, s.running, s.pending) == (2, 1, 2, 3)
    assert s.speedup == pytest.approx(1.0) and s.efficiency == pytest.approx(0.5)
    assert s.progress == pytest.approx(2 / 7)
    assert st.snapshot(103.0, 0, finished=True).progress == 1.0
    from eugo_lab.render.html import counters_html

    h = counters_html(s)
    assert "<b>running</b> &middot; done 2 &middot; running 2 &middot; pending 3" in h and "width:28.6%" in h
    stopped = counters_html(st.snapshot(103.0, 0, finished=True, error="<Boom>"))
    assert "stopped by &lt;Boom&gt;" in stopped and f"background:{glyphs.FAILED_LINE}" in stopped


def test_live_line_shows_a_speedup_only_after_tasks_ran_side_by_side():
    from eugo_lab.render.html import counters_html

    one = LiveState(start=10.0, workers=2)
    one.add(_chunk([(1, 0, 10.0, 10.8)]))  # one task most of the time: busy, but never side by side
    s = one.snapshot(11.0, unfinished=0)
    assert s.side_by_side == 0.0 and not s.parallel
    assert "speedup" not in counters_html(s) and "task time so far 800 ms" in counters_html(s)
    two = LiveState(start=10.0, workers=2)
    two.add(_chunk([(1, 0, 10.0, 10.6)]))
    two.add(_chunk([(2, 1, 10.2, 10.8)]))  # a later chunk overlaps an earlier one: 0.4 s side by side
    s = two.snapshot(11.0, unfinished=0)
    assert s.side_by_side == pytest.approx(0.4) and s.parallel
    assert "speedup so far 1.2x" in counters_html(s)


class _Sink:
    def __init__(self):
        self.threads = set()
        self.rows = []
        self.chunks = []
        self.calls = 0

    def update(self, chunk, snapshot):
        self.threads.add(threading.get_ident())
        self.rows += [int(t) for t in chunk.tasks["task_id"]]
        self.chunks.append(chunk)
        self.calls += 1


def test_feed_polls_every_row_once_from_one_thread_at_about_10_per_second():
    rec = Recorder()
    mark = rec.open_region()
    sink = _Sink()
    feed = LiveFeed(rec, sink, LiveState(time.time(), 2), lambda: 0, interval=0.1).start()
    per_thread, n_threads = 5000, 4
    stats = TaskStats(time.time(), 0.001, 0.001, 0.0, 0.0, 10, 10, None, None, None)

    def record(k):
        for i in range(per_thread):
            rec.record_task(task_id=k * per_thread + i, attempt=1, function="f", worker=k % 2, status=0, batch=0,
                            submit=0.0, ready=0.0, received=0.0, stats=stats)

    t0 = time.monotonic()
    threads = [threading.Thread(target=record, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # the last rows are recorded just before the region closes: finish() takes them from the Trace
    rec.record_task(task_id=per_thread * n_threads, attempt=1, function="f", worker=0, status=0, batch=0,
                    submit=0.0, ready=0.0, received=0.0, stats=stats)
    feed.stop()
    elapsed = time.monotonic() - t0
    trace = rec.close_region(mark, {})
    snap = feed.finish(trace)  # drawn after the region closed (not part of the cell's traced time)
    assert sorted(sink.rows) == list(range(per_thread * n_threads + 1))  # nothing lost, nothing twice
    assert snap.done == per_thread * n_threads + 1 and snap.finished
    assert len(sink.threads) <= 2  # the writer thread (+ the final update from finish(), after it ended)
    assert sink.calls <= elapsed / 0.1 + 3  # ~10 updates per second at most
    assert 0 < feed.cpu < elapsed


def test_the_feeds_last_counters_end_where_the_cell_ended_not_when_its_records_were_collected():
    """An engine's records can arrive a second after the cell (Ray's events): the final elapsed is the region's."""
    clock = [1000.0]
    rec = Recorder()
    mark = rec.open_region()
    feed = LiveFeed(rec, _Sink(), LiveState(1000.0, 2), lambda: 0, interval=0.05, clock=lambda: clock[0]).start()
    feed.stop()
    trace = rec.close_region(mark, {})
    trace.meta["region_end"] = 1002.5  # the cell's code ended 2.5 s after the view began
    clock[0] = 1004.0  # ...and the engine's records were in 1.5 s later
    assert feed.finish(trace).elapsed == 2.5


def test_feed_finish_draws_exactly_the_rows_it_had_not_drawn():
    rec = Recorder()
    mark = rec.open_region()
    stats = TaskStats(time.time(), 0.001, 0.001, 0.0, 0.0, 10, 10, None, None, None)
    with_phase = TaskStats(time.time(), 0.002, 0.001, 0.0, 0.0, 10, 10, [("read", 0.0, 0.001, 0.0)], None, None)

    def record(tid, st=stats):
        rec.record_task(task_id=tid, attempt=1, function="f", worker=0, status=0, batch=0, submit=0.0, ready=0.0,
                        received=0.0, stats=st)

    record(0)  # recorded after the region opened, before the feed started: in the Trace, never streamed
    sink = _Sink()
    feed = LiveFeed(rec, sink, LiveState(time.time(), 2), lambda: 0, interval=0.05).start()
    for tid in (1, 2):
        record(tid)
    deadline = time.monotonic() + 10
    while sink.rows != [1, 2] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sink.rows == [1, 2]
    record(3, with_phase)
    rec.record_block("get", time.time(), time.time() + 0.01, 3, "cell:1")
    feed.stop()
    snap = feed.finish(rec.close_region(mark, {}))
    assert sorted(sink.rows) == [0, 1, 2, 3] and snap.done == 4
    last = sink.chunks[-1]
    assert list(last.tasks["task_id"]) == [0, 3] and list(last.phases["row"]) == [1]  # re-indexed to the chunk
    assert len(last.blocks["start"]) == 1


def test_feeds_share_one_long_lived_writer_thread():
    rec = Recorder()
    stats = TaskStats(time.time(), 0.001, 0.001, 0.0, 0.0, 10, 10, None, None, None)
    writers = []
    for k in range(2):
        mark = rec.open_region()
        sink = _Sink()
        feed = LiveFeed(rec, sink, LiveState(time.time(), 2), lambda: 0, interval=0.02).start()
        rec.record_task(task_id=k, attempt=1, function="f", worker=0, status=0, batch=0, submit=0.0, ready=0.0,
                        received=0.0, stats=stats)
        deadline = time.monotonic() + 10
        while not sink.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        feed.stop()
        feed.finish(rec.close_region(mark, {}))
        writers.append(next(iter(sink.threads - {threading.get_ident()})))
    assert writers[0] == writers[1]  # no thread (and no IOPub socket) per cell


def test_text_renderer_is_deterministic_without_timings():
    class R:
        wall_time, serial_time, speedup, efficiency, findings = 1.0, 2.0, 2.0, 1.0, []

    class S:
        backend, workers, n_tasks, functions, failed, retried, blocks = "local", 2, 3, {"f": 3}, 0, 0, 1
        cancelled = 0
        error, report, runs, measured, simulated, saved_as, exported_to = None, R(), [1], [], [], None, None
        options = {"gpu": "auto", "optimize": False}

    plain = text.summary_text(S())
    assert "2.0x" not in plain and "1.0" not in plain
    assert "speedup 2.0x" in text.summary_text(S(), precise=True)


def test_server_extension_points():
    import eugo_lab
    from eugo_lab import server

    assert eugo_lab._jupyter_server_extension_points() == [{"module": "eugo_lab.server"}]
    assert server._jupyter_server_extension_points() == [{"module": "eugo_lab.server"}]
    assert callable(server.load_jupyter_server_extension)
