"""``%%eugo --optimize`` in a real IPython shell: the "what the runtime did for you" report."""

from __future__ import annotations

import re

import pytest
from IPython import get_ipython
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

from eugo_lab import hpc
from eugo_lab.backends.local_process import usable_cores

SETUP = '''
import numpy as np
from eugo_lab import hpc

@hpc.remote
def smooth(a):
    out = np.empty_like(a)
    out[0] = a[0]
    out[-1] = a[-1]
    for i in range(1, a.shape[0] - 1):
        out[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
    return out

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


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "eugo_lab")
    yield shell
    hpc.shutdown()


@pytest.fixture
def kernel_mode(monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    monkeypatch.delenv("EUGO_LAB_BOKEH_URL", raising=False)


def _summary(cap) -> dict:
    found = [o.data for o in cap.outputs if "text/html" in o.data and "eugo-summary" in o.data["text/html"]]
    assert len(found) == 1
    return found[0]


def test_optimize_cell_prints_the_report(ip, kernel_mode):
    from eugo_lab.jit import checked as jit

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
                     r"result checked", plain), plain
    assert "[declined] JIT (Numba): tagged_sum_of_x3c_b_x3e: not compiled: it uses Python objects" in plain or \
        "[declined] JIT (Numba): tagged_sum_of_x3c_b_x3e: not compiled: it calls something Numba does not know" \
        in plain, plain
    assert "it ran unchanged. What would help:" in plain
    expected = max(1, usable_cores() // 2)
    assert f"BLAS threads per worker: {expected} ({usable_cores()} cores / 2 workers); was {usable_cores()}" in plain
    # Deterministic text/plain: the re-runs reuse the workers' verdicts and read the same, run after run.
    assert texts[1] == texts[2], texts
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
    assert "optimize: automatic" in text and "Optimizations (automatic): 0 applied, 0 declined, 1 not tried" in text
    assert "[not tried] JIT (Numba): smooth: not tried: it has not yet spent enough CPU" in text


def test_no_optimize_turns_the_automatic_jit_off_for_the_cell(ip, kernel_mode):
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --no-optimize", "hpc.get([smooth.remote(data[:10])])")
    text = _summary(cap)["text/plain"]
    assert "Optimizations" not in text and "optimize: off" in text
    with pytest.raises(Exception, match="not both"):
        ip.run_cell_magic("eugo", "--optimize --no-optimize", "1")
