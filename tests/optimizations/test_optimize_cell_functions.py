"""A ``%%eugo`` cell's own functions, called in the driver, go through the automatic JIT; the report has a line each."""

from __future__ import annotations

import pytest
import test_optimize_magic as _magic
from _stencil import stencil_source
from IPython.utils.capture import capture_output

from eugo_lab.jit import auto

CELL = '''
import numpy as np

def smooth(a):
    out = np.empty_like(a)
    n = a.shape[0]
    for i in range(n):
        lo, hi = max(0, i - 3), min(n, i + 4)
        s = 0.0
        for j in range(lo, hi):
            s += a[j]
        out[i] = s / (hi - lo)
    return out

def chatty(a):
    print("working")
    return a

def numbers():
    yield 1

data = np.random.default_rng(0).random(40_000)
results = [smooth(data) for _ in range(4)]
chatty(1)
list(numbers())
'''


kernel_mode = _magic.kernel_mode  # the same display fixture (the shell, ip, is tests/conftest.py's)


def _text(cap) -> str:
    return _magic._summary(cap)["text/plain"]


def test_a_cell_that_defines_and_calls_a_loop_heavy_function_reports_it(ip, kernel_mode, monkeypatch):
    # Before: "1 applied: threads" and nothing about smooth. Now one line per function of the cell.
    monkeypatch.setattr(auto, "MIN_CPU_S", 0.05)
    monkeypatch.setattr(auto, "MIN_SAMPLES", 4)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-b threads -w 1 --no-live --gpu off", CELL)
    auto.wait_for_compiles()
    text = _text(cap)
    assert "Optimizations (automatic)" in text, text
    line = next(ln for ln in text.splitlines() if "smooth:" in ln)
    # smooth qualified on its measured bytecode time: compiled or declined with a reason, never silent
    assert "JIT (Numba): smooth: " in line and ("compiled in" in line or "not compiled" in line
                                                or "not tried" in line), line
    assert "chatty: not tried: it has effects" in text and "numbers: not tried: it is not a plain function" in text
    ns = ip.user_ns
    assert not isinstance(ns["smooth"], auto.CellFunction)  # given back plain after the cell
    assert "__eugo_cell_jit__" not in ns
    import numpy as np

    for r in ns["results"]:
        np.testing.assert_allclose(r, ns["smooth"](ns["data"]), rtol=1e-12)


def test_no_optimize_leaves_the_cell_functions_alone(ip, kernel_mode):
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-b threads -w 1 --no-live --gpu off --no-optimize", "def f(x):\n    return x\nf(1)")
    assert "Optimizations" not in _text(cap)


FIVE_CALLS = '''
import numpy as np

''' + stencil_source("blur") + '''

data = np.random.default_rng(0).random(400_000)
results = [blur(data) for _ in range(5)]
'''


@pytest.mark.parametrize("flag", ["", "--optimize"])
def test_a_loop_called_five_times_in_a_cell_is_compiled_and_used_in_that_cell(ip, kernel_mode, monkeypatch, flag):
    # Before: a loop function defined and called five times in a cell (~0.3 s a call over 400,000 floats) was
    # reported "not tried: being compiled in the background; the run ended before a call could check", with or
    # without --optimize: every call ran plain beside the compile. The rule, not this machine's speed: a call
    # counts as long (it waits for the compile), and a few samples decide (a faster machine samples less). The
    # compile takes 2 s, as on a busy 2-core VM: longer than the cell's plain calls, wherever it runs.
    import time

    real = auto._compile

    def busy_machine_compile(fn, pos, sig):
        time.sleep(2.0)
        real(fn, pos, sig)

    monkeypatch.setattr(auto, "_compile", busy_machine_compile)
    monkeypatch.setattr(auto, "WAIT_FOR_COMPILE_S", 0.0)
    monkeypatch.setattr(auto, "MIN_CPU_S", 0.01)
    monkeypatch.setattr(auto, "MIN_SAMPLES", 1)
    auto.reset()  # a fresh process's state: the other case's verdict for the same code is not reused
    with capture_output() as cap:
        ip.run_cell_magic("eugo", f"-b threads -w 1 --no-live --gpu off {flag}".strip(), FIVE_CALLS)
    text = _text(cap)
    line = next(ln for ln in text.splitlines() if "blur:" in ln)
    assert "[applied] JIT (Numba): blur: compiled in" in line and "exact for every input" in line, line
    assert "not tried" not in text, text
    st = next(s for s in auto._states.values() if s.name == "blur")
    assert sum(s.calls for s in st.sigs.values() if s.status == auto.COMPILED) >= 1  # used within the cell
    import numpy as np

    ns = ip.user_ns
    for r in ns["results"]:
        np.testing.assert_array_equal(r, ns["blur"](ns["data"]))
