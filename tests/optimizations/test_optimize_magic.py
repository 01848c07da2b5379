"""``%%eugo --optimize`` in a real IPython shell: the "what the runtime did for you" report."""

from __future__ import annotations

import re

import pytest
from _stencil import stencil_source
from IPython.utils.capture import capture_output

from eugo_lab import hpc
from eugo_lab.backends.local_process import usable_cores

SETUP = '''
import numpy as np
from eugo_lab import hpc

@hpc.remote
''' + stencil_source("smooth") + '''

class Tag:
    def __init__(self, v):
        self.v = v

@hpc.remote
def tagged_sum_of_x3c_b_x3e(a):
    t = Tag(0.0)
    for i in range(a.shape[0]):
        t.v += a[i]
    return t.v

data = np.random.default_rng(0).random(100_000)
'''
CELL = "hpc.get([smooth.remote(data) for _ in range(6)] + [tagged_sum_of_x3c_b_x3e.remote(data) for _ in range(2)])"


@pytest.fixture
def kernel_mode(monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    monkeypatch.delenv("EUGO_LAB_BOKEH_URL", raising=False)


def _summary(cap) -> dict:
    found = [o.data for o in cap.outputs if "text/html" in o.data and "eugo-summary" in o.data["text/html"]]
    assert len(found) == 1
    return found[0]


def test_optimize_cell_prints_the_report(ip, kernel_mode, monkeypatch):
    from eugo_lab.jit import checked as jit
    from eugo_lab.threadguard.variables import LIMIT_ENV, THREAD_VARS, USER_ENV

    # The guard's line is about a notebook whose user set no thread variables: clear any that an earlier test
    # of this process left in its environment (the report then said "your setting ... the guard left it").
    for v in (*THREAD_VARS, LIMIT_ENV, USER_ENV):
        monkeypatch.delenv(v, raising=False)

    ip.run_cell(SETUP)
    jit.reset()  # the threads a previous test module left have no verdicts here anyway (workers are fresh)
    hpc.shutdown()
    texts = []
    for _ in range(3):
        with capture_output() as cap:
            ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --optimize", CELL)
        b = _summary(cap)
        texts.append(b["text/plain"])
        html = b["text/html"]
        assert "eugo-optimizations" in html and "<b>" not in html.split("eugo-optimizations")[1].replace(
            "<b>Optimizations", "")
    plain = texts[0]
    print(plain)
    assert "optimize: on" in plain
    assert "Optimizations (--optimize):" in plain
    assert re.search(r"\[applied\] JIT \(Numba\): smooth: compiled in ~?[\d.]+ m?s; .* per call \(~\d+x\), "
                     r"exact for every input \(proven from its compiled code\); result checked", plain), plain
    assert "[declined] JIT (Numba): tagged_sum_of_x3c_b_x3e: not compiled: it uses Python objects" in plain or \
        "[declined] JIT (Numba): tagged_sum_of_x3c_b_x3e: not compiled: it calls something Numba does not know" \
        in plain, plain
    assert "it ran unchanged. What would help:" in plain
    expected = max(1, usable_cores() // 2)
    assert f"BLAS threads per worker: {expected} ({usable_cores()} cores / 2 workers); was {usable_cores()}" in plain
    # Deterministic text/plain: the re-runs reuse the workers' verdicts and read the same, run after run, except
    # the one measured fact the JIT line states of this run's own compiled calls (their median, bucketed: the same
    # number as the report's data, not the cached trial's fastest run).
    per_call = re.compile(r"-> ~?[\d.]+ [mu]?s per call \(~\d+x\)")
    assert per_call.sub("-> T per call", texts[1]) == per_call.sub("-> T per call", texts[2]), texts
    assert "compiled earlier on these workers, reused" in texts[1]
    rep = hpc.last_optimizations()
    assert rep is not None and rep.find("smooth", "jit").applied
    assert not rep.find("tagged_sum_of_x3c_b_x3e", "jit").applied and rep.find("tagged_sum_of_x3c_b_x3e").advice


def test_report_html_escapes_user_text():
    from eugo_lab.optimizations.report import Optimization, OptimizationReport
    from eugo_lab.render.optimizations import optimizations_html, optimizations_text

    rep = OptimizationReport((Optimization("jit", "<script>x</script>", False, "<script>x</script>: no",
                                           "<script>x</script>: no", "why <b>", "help &"),))
    html = optimizations_html(rep)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert optimizations_text(rep) == ("Optimizations (--optimize): 0 applied, 1 declined\n"
                                       "  [declined] JIT (Numba): <script>x</script>: no")


def test_without_optimize_the_report_says_what_the_runtime_did_on_its_own(ip, kernel_mode):
    # No option: the automatic JIT; a 10-element call is far from the CPU it waits for, and the line says so.
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off", "hpc.get([smooth.remote(data[:10])])")
    text = _summary(cap)["text/plain"]
    assert "optimize: automatic" in text, text
    # smooth's own line, and the heading counts it; other lines the process may add (a thread limit its
    # workers got from an earlier test's runtime) are not this test's subject.
    section = _section(text)
    assert re.match(r"Optimizations \(automatic\): \d+ applied, \d+ declined, [1-9]\d* not tried", section[0]), text
    assert any(ln.startswith("  [not tried] JIT (Numba): smooth: not tried: it has not yet spent enough CPU")
               for ln in section), text


def test_no_optimize_turns_the_automatic_jit_off_for_the_cell(ip, kernel_mode):
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --no-optimize", "hpc.get([smooth.remote(data[:10])])")
    text = _summary(cap)["text/plain"]
    assert "Optimizations" not in text and "optimize: off" in text
    with pytest.raises(Exception, match="not both"):
        ip.run_cell_magic("eugo", "--optimize --no-optimize", "1")


STAR = '''
@hpc.remote
def first_of(*a):
    return a[0]
'''


def _section(text: str) -> list[str]:
    """The summary's "Optimizations" lines (heading and items), as optimizations_text writes them, indented 2 more."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("  Optimizations ("))
    out = [lines[i][2:]]
    out += [ln[2:] for ln in lines[i + 1:] if ln.startswith("    [")]
    return out


def test_last_optimizations_is_what_the_automatic_jit_did_in_the_last_cell(ip, kernel_mode):
    from eugo_lab.render.optimizations import optimizations_text

    ip.run_cell(SETUP + STAR)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off",
                          "hpc.get([smooth.remote(data[:10]), first_of.remote(1)])")
    text = _summary(cap)["text/plain"]
    rep = hpc.last_optimizations()
    assert rep is not None and rep.mode == "automatic"
    assert _section(text) == optimizations_text(rep).splitlines(), (text, optimizations_text(rep))
    smooth_line, star_line = rep.find("smooth", "jit"), rep.find("first_of", "jit")
    assert not smooth_line.tried and "not yet spent enough CPU" in smooth_line.reason
    # first_of's line comes from the workers' own verdict (its *args: decided from its code, once per worker)
    assert not star_line.tried and star_line.reason == "it is not a plain function Numba compiles"
    assert "*args" in star_line.precise

    with capture_output():
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --no-optimize", "hpc.get([smooth.remote(data[:10])])")
    assert hpc.last_optimizations() is None  # the latest cell optimized nothing


def test_last_optimizations_names_a_decline_and_its_reason(ip, kernel_mode, monkeypatch):
    from eugo_lab.jit import auto
    from eugo_lab.render.optimizations import optimizations_text

    pytest.importorskip("numba")
    # In this process (threads backend), any sampled call qualifies: the compile then declines for a reason.
    monkeypatch.setattr(auto, "MIN_CPU_S", 0.01)
    monkeypatch.setattr(auto, "MIN_SAMPLES", 1)
    monkeypatch.setattr(auto, "MIN_PYTHON_SHARE", 0.0)
    ip.run_cell(SETUP)
    cell = ("from eugo_lab.jit import auto\n"
            "for _ in range(40):\n"
            "    hpc.get(tagged_sum_of_x3c_b_x3e.remote(data))\n"
            "    auto.wait_for_compiles()\n")
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-b threads -w 1 --no-live --gpu off", cell)
    rep = hpc.last_optimizations()
    item = rep.find("tagged_sum_of_x3c_b_x3e", "jit")
    assert rep.mode == "automatic" and item.tried and not item.applied, item
    assert item.reason.startswith("it uses Python objects") or item.reason.startswith("it calls something"), item
    assert item.advice
    assert _section(_summary(cap)["text/plain"]) == optimizations_text(rep).splitlines()


def test_last_optimizations_after_a_traced_region_reports_that_region(ip, kernel_mode):
    from eugo_lab.hpc import session
    from eugo_lab.optimizations.report import RUNTIME_OFF

    ip.run_cell(SETUP + STAR)
    first_of = ip.user_ns["first_of"]
    with capture_output():
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --no-optimize", "hpc.get([smooth.remote(data[:10])])")
    with hpc.trace():
        hpc.get([first_of.remote(2)])
    rep = hpc.last_optimizations()
    assert rep is not None and rep.mode == "automatic" and rep is hpc.last_optimizations()  # built once
    assert rep.find("first_of", "jit").reason == "it is not a plain function Numba compiles"
    assert rep.find("smooth") is None  # that ran in the cell before, not in this region
    rt = session.current()
    rt.auto_optimize = False  # as hpc.init(optimize=False) leaves it
    try:
        with hpc.trace():
            hpc.get([first_of.remote(3)])
    finally:
        rt.auto_optimize = True
    off = hpc.last_optimizations()
    assert [o.precise for o in off.items] == [RUNTIME_OFF]


def test_a_profiled_cell_says_the_automatic_jit_was_off(ip, kernel_mode):
    from eugo_lab.optimizations.report import PROFILED_OFF

    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --profile", "hpc.get([smooth.remote(data[:10])])")
    text = _summary(cap)["text/plain"]
    assert PROFILED_OFF in text and "not yet spent enough CPU" not in text, text
    assert [o.precise for o in hpc.last_optimizations().items] == [PROFILED_OFF]


def test_optimize_compiles_a_task_given_put_references(ip, kernel_mode):
    # Before: the task's trial ran the compiled code on writable copies of the read-only put array, Numba compiled
    # a second version for them inside the timed run, and the report said "not compiled: ... not faster by the
    # 1.5x a swap needs" (before that, such a task had no JIT line at all).
    ip.run_cell(SETUP)
    hpc.shutdown()
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --optimize",
                          "ref = hpc.put(data)\nout = hpc.get([smooth.remote(ref) for _ in range(4)])")
    plain = _summary(cap)["text/plain"]
    assert re.search(r"\[applied\] JIT \(Numba\): smooth: compiled in .*exact for every input", plain), plain
    import numpy as np

    a = ip.user_ns["data"]
    expected = a.copy()
    expected[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0  # the loop's arithmetic, in the same order
    for r in ip.user_ns["out"]:
        np.testing.assert_array_equal(r, expected)


ASKED = '''
import numpy as np
from eugo_lab import hpc

@hpc.remote(optimize=True)
def halved_sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * 0.5
    return s

big = np.arange(200_000, dtype=np.float64)
'''
ASKED_CELL = "hpc.get([halved_sum.remote(big) for _ in range(4)])"


def _asked_is_named(cap, why: str) -> None:
    """The summary and hpc.last_optimizations() say the automatic JIT was off ``why`` but halved_sum's own JIT ran."""
    text = _summary(cap)["text/plain"]
    in_force = f"automatic JIT off {why}; optimize=True on halved_sum"
    assert f"optimize: {in_force}" in text and "optimize: automatic\n" not in text, text
    assert _section(text)[0].startswith(f"Optimizations ({in_force}): "), text
    rep = hpc.last_optimizations()
    line = rep.find("runtime").precise
    assert line.endswith("every function ran as plain Python except halved_sum, declared @hpc.remote(optimize=True), "
                         "which ran its own JIT as asked"), line
    assert rep.find("halved_sum", "jit") is not None, rep.items  # its own verdict's line (compiled or not)


def test_a_profiled_cell_names_the_functions_that_asked_for_their_own_jit(ip, kernel_mode):
    # Before: "automatic JIT off while profiling ...: every function ran as plain Python" while the optimize=True
    # function kept running compiled. The decorator is part of the code as written: it runs as asked, and is named.
    ip.run_cell(ASKED)
    with capture_output():
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off", ASKED_CELL)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --profile", ASKED_CELL)
    _asked_is_named(cap, "while profiling")


def test_a_runtime_without_the_automatic_jit_says_so_and_names_optimize_true(ip, kernel_mode):
    # Before: "optimize: automatic" and "Optimizations (automatic)" under hpc.init(optimize=False), and "every
    # function ran as plain Python" while the optimize=True function ran compiled.
    ip.run_cell(ASKED)
    hpc.shutdown()
    hpc.init("local", workers=2, optimize=False)
    try:
        with capture_output() as cap:
            ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off", ASKED_CELL)
        _asked_is_named(cap, "by hpc.init(optimize=False)")
    finally:
        hpc.shutdown()


def test_a_function_run_as_tasks_and_in_the_notebook_has_one_line_and_one_count(ip, kernel_mode):
    # Before: two lines for sq (its tasks' verdict, then its calls in the notebook's process), counted twice in the
    # heading ("2 not tried" for one function); a summary read "4 not tried" over the lines of 2 functions.
    cell = "def sq(x):\n    return x * x\n\nprint(sum(sq(i) for i in range(5)))\nr = hpc.map(sq, range(40))\n"
    ip.run_cell("from eugo_lab import hpc")
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off", cell)
    rep = hpc.last_optimizations()
    jit = [o for o in rep.items if o.kind == "jit"]
    assert [o.target for o in jit] == ["sq"], rep.items
    assert "; in the notebook: " in jit[0].precise, jit[0].precise
    section = _section(_summary(cap)["text/plain"])
    counted = sum(int(n) for n in re.findall(r"(\d+) (?:applied|declined|not tried)", section[0]))
    assert counted == len(section) - 1 == len(rep.items), section
