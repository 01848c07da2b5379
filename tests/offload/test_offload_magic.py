"""``%%eugo --gpu auto|on|off`` in a real IPython shell, and the per-operation report it shows."""

from __future__ import annotations

import numpy
import pytest
from _offload import HOST, Shell
from IPython.utils.capture import capture_output

from eugo_lab import hpc
from eugo_lab.hardware.gpus import Detection
from eugo_lab.offload import cell, dispatch
from eugo_lab.offload.devices import FakeDevice, NoDeviceError
from eugo_lab.offload.ledger import Ledger, OpRecord
from eugo_lab.offload.profiles import published
from eugo_lab.render.offload import offload_html, offload_text

CELL = """
import numpy as np
x = np.linspace(0, 1, 2_000_000)
y = np.exp(x) * 3 + x
s = y.sum()
m = np.ones((400, 400), dtype=np.float32)
p = m @ m
tiny = np.arange(8) * 2
"""


@pytest.fixture(autouse=True)
def no_gpu_fixed_host(monkeypatch):
    # The same answers on every machine: no GPU (even on a GPU runner) and a host with round numbers.
    monkeypatch.setattr(cell, "detect_gpus", lambda: Detection((), "NVML could not start: no NVIDIA driver"))
    monkeypatch.setattr(dispatch.Offload, "host", property(lambda self: HOST))
    monkeypatch.delenv("EUGO_LAB_GPU_PROFILE", raising=False)


def test_auto_without_a_gpu_prints_the_report_labelled_as_predictions(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell_magic("eugo", "--gpu auto -w 1", CELL)
    out = capsys.readouterr().out
    assert "gpu: auto" in out
    assert "no GPU here, everything ran on the CPU; placements and GPU times are PREDICTIONS for " \
           "NVIDIA H100 SXM (published)" in out
    assert ("6 ops ran on the CPU (no GPU here); predicted for NVIDIA H100 SXM (published): 5 on GPU, "
            "1 on CPU (1 too small), 33.3 MB would move") in out  # m @ m: m crosses once
    assert "nothing on the GPU side was measured" in out
    assert type(ip.user_ns["y"]) is numpy.ndarray and type(ip.user_ns["s"]) is numpy.float64
    assert ip.user_ns["np"] is numpy
    numpy.testing.assert_allclose(ip.user_ns["p"], numpy.full((400, 400), 400.0, dtype=numpy.float32))


def test_the_rich_display_has_a_deterministic_text_and_an_html_table(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    texts = []
    for _ in range(2):
        with capture_output() as cap:
            ip.run_cell_magic("eugo", "--gpu auto -w 1 --no-live", CELL)
        (bundle,) = [o.data for o in cap.outputs if "eugo-summary" in o.data.get("text/html", "")]
        texts.append(bundle["text/plain"])
        assert "<div class='eugo-offload'>" in bundle["text/html"]
        assert "measured on the CPU (host timer)" in bundle["text/html"]
    assert texts[0] == texts[1]
    # Before: "gpu: predicted 500 us vs 5 ms on CPU", the model's CPU time, where the HTML quoted the measured one.
    # The text says the CPU side was measured: its number, and how it compares, differ from run to run.
    assert "gpu: predicted 500 us; the CPU side was measured" in texts[0]  # never raw timings
    assert "(CPU)" not in texts[0] and "ms on CPU" not in texts[0]  # no measured number, no model CPU time


def test_on_without_a_gpu_is_a_clear_error_before_anything_starts(ip):
    hpc.shutdown()
    with pytest.raises(NoDeviceError) as err:
        ip.run_cell_magic("eugo", "--gpu on", "raise AssertionError('the cell must not run')")
    assert "--gpu on needs an NVIDIA GPU, and there is none here" in str(err.value)
    assert "--gpu auto" in str(err.value) and "--gpu off" in str(err.value)
    assert not hpc.is_initialized()


def test_off_leaves_numpy_alone(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell_magic("eugo", "--gpu off -w 1", "import numpy as np\nkind = type(np).__name__\nz = np.ones(3) + 1\n")
    out = capsys.readouterr().out
    assert "gpu: off" in out and "GPU offload" not in out
    assert ip.user_ns["kind"] == "module" and ip.user_ns["np"] is numpy
    assert cell.last_ledger() is None


def test_a_cell_without_numpy_shows_no_report(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell_magic("eugo", "-w 1", "x = sum(range(10))\n")
    assert "GPU offload" not in capsys.readouterr().out


def test_on_with_a_device_measures_it(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    with cell.use_device(FakeDevice(published("h100"), fail={"matmul"})):
        ip.run_cell_magic("eugo", "--gpu on -w 1", CELL)
    out = capsys.readouterr().out
    assert "GPU offload (--gpu on) on fake device modelled on NVIDIA H100 SXM (published); device times measured " \
           "by fake device (NumPy time + modelled latency)" in out
    assert "6 ops: 5 on GPU, 1 on CPU (1 fallback: FakeDeviceError: out of memory in matmul" in out
    assert "(GPU)" in out  # precise text: measured on the device
    numpy.testing.assert_allclose(ip.user_ns["p"], numpy.full((400, 400), 400.0, dtype=numpy.float32))


def test_the_text_report_exactly():
    sh = Shell()
    code = compile("import numpy as np\na = np.ones(1_000_000)\nb = a * 2\nc = b.sum()\nd = np.ones(3) + 1\n",
                   "<cell>", "exec")
    cell.run(sh, "auto", exec, code, sh.user_ns, sh.user_ns)
    assert offload_text(cell.last_ledger()) == """\
GPU offload (--gpu auto): no GPU here, everything ran on the CPU; placements and GPU times are PREDICTIONS for \
NVIDIA H100 SXM (published)
  3 ops ran on the CPU (no GPU here); predicted for NVIDIA H100 SXM (published): 2 on GPU, 1 on CPU (1 too small), \
16.0 MB would move
  op        shapes   dtype    predicted where  predicted moved  why
  multiply  1000000  float64  gpu              8.0 MB to GPU    gpu: predicted 200 us; the CPU side was measured (the \
detailed report gives its time)
  sum       1000000  float64  gpu              -                gpu: predicted 20 us; the CPU side was measured (the \
detailed report gives its time)
  add       3        float64  cpu              -                cpu (predicted): too small: 20 us on GPU (launch \
10 us); the CPU side was measured (the detailed report gives its time)
  to host   1000000  float64  transfer         8.0 MB to host   predicted: the value leaves the cell
  (no GPU here: measured times are the CPU's; nothing on the GPU side was measured)"""


def test_html_escapes_all_user_text():
    led = Ledger(device="<b>dev</b>", predictions_only=False, measured_by="CUDA events")
    led.add(OpRecord("<script>alert(1)</script>", ((3,),), "float64", "cpu", "fallback", "cpu: GPU failed (<img>)",
                     "cpu: GPU failed (<img>)", fallback="<img src=x>"))
    html = offload_html(led)
    assert "<script>" not in html and "<img" not in html and "<b>dev" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;dev&lt;/b&gt;" in html


@pytest.mark.parametrize("backend", ["local", "threads"])
def test_remote_functions_defined_in_an_offloaded_cell_get_plain_numpy(ip, monkeypatch, capsys, backend):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell_magic("eugo", f"--gpu auto -w 2 -b {backend}", """
import numpy as np
from eugo_lab import hpc

@hpc.remote
def work(a):
    import numpy
    return type(np).__name__, type(numpy).__name__, type(a).__name__, float(np.sum(a * 2))

x = np.arange(10.0)
got = hpc.get([work.remote(x), work.remote(x + 1)])
""")
    # In a worker process the cell's `np` arrives as the real numpy. A `-b threads` worker shares the
    # cell's globals, so it sees the proxy module, whose calls run as plain NumPy off the cell's thread.
    np_type = "module" if backend == "local" else "ProxyModule"
    assert ip.user_ns["got"] == [(np_type, "module", "ndarray", 90.0), (np_type, "module", "ndarray", 110.0)]
    assert "GPU offload (--gpu auto)" in capsys.readouterr().out
    assert cell.last_ledger().n_ops() == 1  # `x + 1`; nothing the workers did
    hpc.shutdown()


def test_a_gpu_without_cupy_predicts_for_its_own_profile_and_says_why(ip, monkeypatch, capsys):
    from eugo_lab.hardware.gpus import GpuInfo

    gpu = GpuInfo(0, "Tesla T4", 16 * 10**9, "535.1", (7, 5), "nvml")
    monkeypatch.setattr(cell, "detect_gpus", lambda: Detection((gpu,), ""))  # cupy_version None: not usable
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell_magic("eugo", "--gpu auto -w 1", "import numpy as np\na = np.ones(10) + 1\n")
    out = capsys.readouterr().out
    assert 'note: Tesla T4 found, but CuPy is not installed (pip install "eugo-lab[gpu]")' in out
    assert "PREDICTIONS for Tesla T4 (published T4 figures)" in out
    with pytest.raises(NoDeviceError, match="this machine has Tesla T4, but CuPy is not installed"):
        ip.run_cell_magic("eugo", "--gpu on -w 1", "x = 1\n")


def test_gpu_not_given_runs_numpy_unproxied_without_a_gpu_and_says_so(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell_magic("eugo", "-w 1", "import numpy as np\nkind = type(np.arange(3)).__module__")
    assert ip.user_ns["kind"] == "numpy"  # a real ndarray inside the cell: nothing was proxied
    out = capsys.readouterr().out
    assert "gpu: off (no GPU here, NumPy ran unchanged; --gpu auto shows what a GPU would do)" in out
    assert "GPU offload" not in out


def test_gpu_not_given_is_auto_where_a_gpu_is(monkeypatch):
    from eugo_lab.hardware.gpus import Detection

    usable = Detection((), "")
    monkeypatch.setattr(type(usable), "usable", property(lambda self: True))
    monkeypatch.setattr(cell, "detect_gpus", lambda: usable)
    assert cell.default_mode(None) == ("auto", "")
    assert cell.default_mode("off") == ("off", "")


def test_a_cell_of_array_operations_and_no_task_leads_with_its_offload_report(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell_magic("eugo", "--gpu auto -w 1", CELL)
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first == "%%eugo: 6 array operations, no tasks"
    for said_of_tasks in ("tasks on", "speedup", "efficiency", "failed:", "Biggest win", "side by side"):
        assert said_of_tasks not in out, said_of_tasks
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "--gpu auto -w 1 --no-live", CELL)
    (html,) = [o.data["text/html"] for o in cap.outputs if "eugo-summary" in o.data.get("text/html", "")]
    assert "6 array operations, no tasks" in html and "<div class='eugo-offload'>" in html
    assert "<svg" not in html and "speedup" not in html  # no timeline, no speedup for a cell that ran no task


def test_a_cell_with_tasks_and_array_operations_shows_both(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    with_a_task = CELL + "\nfrom eugo_lab import hpc\nv = hpc.get(hpc.remote(abs).remote(-1))\n"
    ip.run_cell_magic("eugo", "--gpu auto -w 1", with_a_task)
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("%%eugo: 1 task on 1 worker")
    assert "GPU offload (--gpu auto)" in out
