"""``%%eugo`` and ``%eugo`` at the IPython level (no kernel, no browser)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

from eugo_lab import glossary, hpc
from eugo_lab.cellrun import options as opt
from eugo_lab.cellrun.live import LiveFeed
from eugo_lab.cellrun.live_state import LiveState
from eugo_lab.render import glyphs, live, text
from eugo_lab.tracing.recorder import TASK_FLOAT_COLUMNS, TASK_INT_COLUMNS, Chunk, Recorder

SETUP = """
import time
from eugo_lab import hpc

@hpc.remote
def nap(x):
    time.sleep(0.02)
    return x * 2
"""


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython()
    shell.run_line_magic("load_ext", "eugo_lab")
    return shell


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
        "  gpu: auto, optimize: off\n"
        "  (timings, speedup and findings: see the rich view, or hpc.last_trace())")
    tr = hpc.last_trace()
    assert len(tr) == 6 and tr.meta["workers"] == 2


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


def test_compare_runs_on_one_worker_too(ip, kernel_mode):
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --compare --no-live", "hpc.get([nap.remote(i) for i in range(6)])")
    b = summary_bundle(cap)
    assert "runs at workers: 1, 2" in b["text/plain"]
    assert "measured speedup, 2 workers" in b["text/html"]
    assert "<svg class='eugo-speedup'" in b["text/html"]
    assert hpc.last_trace().meta["workers"] == 2
    assert hpc.cluster().workers == 2


def test_scaling_plot(ip, kernel_mode):
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "--scaling 1,2 --no-live", "hpc.get([nap.remote(i) for i in range(4)])")
    b = summary_bundle(cap)
    assert "runs at workers: 1, 2" in b["text/plain"]
    assert "<svg class='eugo-speedup'" in b["text/html"] and "ideal" in b["text/html"]


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


def test_user_text_is_escaped(ip, kernel_mode):
    ip.run_cell("""
from eugo_lab import hpc
def evil(x):
    return x
evil.__name__ = evil.__qualname__ = "<img src=x onerror=alert(1)>"
evil_r = hpc.remote(evil)
""")
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live", "hpc.get([evil_r.remote(i) for i in range(2)])")
    h = summary_bundle(cap)["text/html"]
    assert "<img" not in h
    assert "&lt;img src=x onerror=alert(1)&gt;" in h


def test_terminal_prints_precise_text(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell(SETUP)
    ip.run_cell_magic("eugo", "-w 2", "hpc.get([nap.remote(i) for i in range(2)])")
    out = capsys.readouterr().out
    assert "%%eugo: 2 tasks on 2 workers" in out and "speedup" in out and "wall time" in out


# -- %eugo line magic ---------------------------------------------------------------------------------
def test_status_stop_trace(ip, kernel_mode):
    hpc.init(backend="local", workers=2)
    with capture_output() as cap:
        ip.run_line_magic("eugo", "status --price 1.5")
    b = bundles(cap)[-1]
    assert b["text/plain"] == "eugo runtime: backend local, 2 workers (live numbers in the rich view)"
    assert "cost so far" in b["text/html"] and "per worker-hour" in b["text/html"]
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
    assert cols["phases"][0] == "read 200.0 ms"
    assert cols["bytes"][0] == "in 100 B, out 2.0 kB"
    assert cols["status"][1:] == ["error", "ok (attempt 2)"]
    assert glyphs.block_columns(data, 10.0) == {"left": [0.0], "right": [0.5], "y": [0],
                                                "label": ["get() blocked on 3 futures"], "source": ["cell:3"]}
    ph = glyphs.phase_columns(data, 10.0, glyphs.Palette())
    assert ph["phase"] == ["read"] and ph["y"] == [1] and ph["function"] == ["f"]
    assert glyphs.lane_labels(3) == {0: "driver", 1: "worker 0", 2: "worker 1"}
    assert glyphs.max_lane(data) == 2


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


def test_live_state_counters():
    st = LiveState(start=100.0, workers=2)
    st.add(_chunk([(1, 0, 100.0, 101.0), (2, 1, 100.0, 101.0, 1, 1, 0)]))
    s = st.snapshot(102.0, unfinished=5)
    assert (s.done, s.failed, s.running, s.pending) == (2, 1, 2, 3)
    assert s.speedup == pytest.approx(1.0) and s.efficiency == pytest.approx(0.5)
    assert s.progress == pytest.approx(2 / 7)
    assert st.snapshot(103.0, 0, finished=True).progress == 1.0


class _Sink:
    def __init__(self):
        self.threads = set()
        self.rows = []
        self.calls = 0

    def update(self, chunk, snapshot):
        self.threads.add(threading.get_ident())
        self.rows += list(chunk.tasks["task_id"])
        self.calls += 1


def test_feed_polls_every_row_once_from_one_thread_at_about_10_per_second():
    rec = Recorder()
    mark = rec.open_region()
    sink = _Sink()
    feed = LiveFeed(rec, sink, LiveState(time.time(), 2), lambda: 0, interval=0.1).start()
    per_thread, n_threads = 5000, 4
    stats = (time.time(), 0.001, 0.001, 0.0, 0.0, 10, 10, None, None)

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
    time.sleep(0.25)
    feed.stop()
    elapsed = time.monotonic() - t0
    rec.close_region(mark, {})
    assert sorted(sink.rows) == list(range(per_thread * n_threads))  # nothing lost, nothing twice
    assert len(sink.threads) <= 2  # the writer thread (+ the final flush from stop(), after it ended)
    assert sink.calls <= elapsed / 0.1 + 3  # ~10 updates per second at most


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
