"""Course 2 exercises: each reference passes, each typical mistake is ``not yet`` with its own message.

They run here without a GPU: the break-even on the published prediction profile, the transfer
on the ledger's predicted bytes and placements (for a slow and a fast injected host), the GPU
request refused by a pool without GPU workers, the kernel on Numba's CUDA simulator (on a GPU
machine the same cells grade what the GPU did).
"""

from __future__ import annotations

import dataclasses

import pytest

from eugo_lab import hpc
from eugo_lab.offload import kernels
from tests._exercise_cells import code_in, hint_code, run_exercise

kernels.cuda()  # before anything imports numba.cuda: the simulator where there is no GPU


@pytest.fixture(autouse=True, scope="module")
def _stop_workers():
    yield
    hpc.shutdown()


# -- gpu-break-even -------------------------------------------------------------------------------------
BREAK_EVEN_SETUP = """
from eugo_lab.offload import predict, host_profile
from eugo_lab.offload.cell import device_profile
from eugo_lab.offload.cost import sample_operation
host, gpu = host_profile(), device_profile()
"""


def scan(resident: bool, start: int = 10, stop: int = 31, step_back: bool = False) -> str:
    return f"""
size = None
for e in range({start}, {stop}):
    n = 1 << e
    op = sample_operation("elementwise", n, work="special", name="power", resident={resident})
    if predict(op, host, gpu).where == "gpu":
        size = n{" // 2" if step_back else ""}
        break
"""


def test_break_even_reference_passes():
    v = run_exercise("gpu-break-even", scan(resident=False), BREAK_EVEN_SETUP, line="--no-live")
    assert v.passed, v.to_text()
    assert "published figures, a prediction" in v.to_text()  # no GPU here: the profile is named as such


def test_break_even_with_the_data_already_on_the_device_is_not_yet():
    v = run_exercise("gpu-break-even", scan(resident=True), BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed
    assert "size where it pays for data already on the GPU" in v.to_text()


def test_break_even_too_large_or_on_the_cpu_side_is_not_yet():
    v = run_exercise("gpu-break-even", scan(resident=False) + "size = size * 4\n", BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and "already wins at half your size" in v.to_text()
    v = run_exercise("gpu-break-even", scan(resident=False, step_back=True), BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and "still keeps np.power on the CPU" in v.to_text()
    v = run_exercise("gpu-break-even", scan(resident=False, stop=12), BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and "found no size" in v.to_text()


# -- gpu-transfer ---------------------------------------------------------------------------------------
TRANSFER_SETUP = """
import numpy as np
signal = np.random.default_rng(7).uniform(1.0, 100.0, 2_000_000)
"""
NEWTON = """
import numpy as np
{prelude}w = np.log1p({src})
for step in range(20):
    w = w * (1 + np.log({src}) - np.log(w)) / (1 + w)
{check}"""


def transfer(prelude: str = "", src: str = "signal", check: str = "") -> str:
    return NEWTON.format(prelude=prelude, src=src, check=check)


REFERENCE = transfer("s = np.asarray(signal)\n", "s")
GPU_AUTO = "--gpu auto --no-live -w 1"


@pytest.fixture(params=[12e9, 100e9], ids=["slow-host", "fast-host"])
def host(request, monkeypatch):
    """A host whose main memory moves 12 GB/s (a loaded machine) or 100 GB/s (a quiet one, or cache-fed).

    The grade must not depend on which: the cost model reads the host profile through
    ``profiles.host_profile`` when a cell starts, so an injected one decides every placement.
    """
    from eugo_lab.offload import profiles

    fake = dataclasses.replace(profiles.host_profile(), mem_bw=request.param)
    monkeypatch.setattr(profiles, "host_profile", lambda: fake)
    return fake


def test_transfer_reference_passes(host):
    v = run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line=GPU_AUTO)
    assert v.passed, v.to_text()
    text = v.to_text()
    assert "a prediction for a named GPU profile: no GPU here" in text
    assert "all 140 operations of the loop would run on NVIDIA H100" in text


def test_transfer_starter_recopies_signal_every_step(host):
    v = run_exercise("gpu-transfer", transfer(), TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed
    text = v.to_text()
    assert "`log` copied 16.0 MB to the GPU on each of its 20 calls" in text
    assert "s = np.asarray(signal)" in hint_code(v) and code_in(text) == []


def test_transfer_convergence_check_on_the_cpu_drags_the_data_back(host):
    check = "    if np.allclose(w * np.exp(w), s):\n        pass\n"
    v = run_exercise("gpu-transfer", REFERENCE.rstrip("\n") + "\n" + check, TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed
    assert "`allclose` ran on the CPU 20 times" in v.to_text()
    assert "float(np.max(np.abs(w * np.exp(w) - s)))" in hint_code(v)


def test_transfer_wrong_result_and_no_gpu_mode_are_not_yet(host):
    v = run_exercise("gpu-transfer", REFERENCE.replace("range(20)", "range(2)"), TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed and "does not solve w * exp(w) = signal" in v.to_text()
    v = run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line="--no-live -w 1")
    assert not v.passed and "it ran without GPU placement" in v.to_text() and "--gpu auto" in hint_code(v)


def test_transfer_kept_on_the_cpu_is_not_credited_as_staying_on_the_device(monkeypatch):
    # A host whose exp/log and memory outrun the link: the model keeps everything on the CPU and nothing
    # moves. That must read as "the loop did not use the GPU", never as "the data stayed on the device".
    from eugo_lab.offload import profiles

    fake = dataclasses.replace(profiles.host_profile(), mem_bw=1e12, special_rate=1e12)
    monkeypatch.setattr(profiles, "host_profile", lambda: fake)
    v = run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed
    text = v.to_text()
    assert "on the CPU, so no data was kept on the device: the loop did not use the GPU" in text
    assert "the data stayed on the device" not in text
    assert "On this host, copying its operands to the device costs more" in text


def test_setitem_on_a_value_the_model_keeps_on_the_device_moves_nothing_back():
    from eugo_lab.offload.cell import last_ledger

    cell = "s = np.asarray(signal)\nr = np.sqrt(s)\nr[0] = 1.0\nt = np.sqrt(r)\n"
    run_exercise("gpu-transfer", cell, TRANSFER_SETUP, line=GPU_AUTO)
    ledger = last_ledger()
    fetched = [r for r in ledger.rows if r.is_transfer and r.why == "host needed"]
    assert fetched == []  # the device writes the element where the array is, as the GPU path does


# -- gpu-request ----------------------------------------------------------------------------------------
TILE_FN = """
import numpy as np
from eugo_lab import hpc

@hpc.remote{request}
def tile_energy(i):
    v = np.arange(i * 200_000, (i + 1) * 200_000, dtype=np.float64) / 200_000
    return float(np.sum(v * v))

"""
REQUEST_REFERENCE = TILE_FN.format(request="(gpus=1)") + """
try:
    results = hpc.get([tile_energy.remote(i) for i in range(4)])
except hpc.ResourceRequestError as err:
    print("no GPU worker:", err)
    results = hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])
"""


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.delenv("EUGO_LAB_GPU_DEVICES", raising=False)
    hpc.shutdown()  # the next cell starts a pool that looks for GPUs again


def test_request_reference_passes_without_gpu_workers(no_gpu):
    v = run_exercise("gpu-request", REQUEST_REFERENCE)
    assert v.passed, v.to_text()
    assert "refused with ResourceRequestError" in v.to_text()


def test_request_without_asking_for_a_gpu_is_not_yet(no_gpu):
    cell = TILE_FN.format(request="") + "results = hpc.get([tile_energy.remote(i) for i in range(4)])\n"
    v = run_exercise("gpu-request", cell)
    assert not v.passed and "no task of this cell asked for a GPU" in v.to_text()


def test_request_uncaught_or_without_a_fallback_is_not_yet(no_gpu):
    cell = TILE_FN.format(request="(gpus=1)") + "results = hpc.get([tile_energy.remote(i) for i in range(4)])\n"
    v = run_exercise("gpu-request", cell)
    assert not v.passed and "stopped with ResourceRequestError" in v.to_text()
    cell = REQUEST_REFERENCE.replace("results = hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])",
                                     "results = []")
    v = run_exercise("gpu-request", cell)
    assert not v.passed and "does not hold the 4 energies" in v.to_text()
    cell = REQUEST_REFERENCE.replace("hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])",
                                     "[float(np.sum((np.arange(i * 200_000, (i + 1) * 200_000) / 200_000) ** 2)) "
                                     "for i in range(4)]")
    v = run_exercise("gpu-request", cell)
    assert not v.passed and "ran as tasks on the cluster" in v.to_text()


def test_request_on_gpu_workers_passes_only_when_every_task_held_one(monkeypatch):
    # A pool with a worker pinned to device 0 (no device stands behind it here: the scheduling is real)
    from eugo_lab.backends import local_gpus

    monkeypatch.setenv("EUGO_LAB_GPU_DEVICES", "0")
    monkeypatch.setattr(local_gpus, "_detected", lambda: (1, ""))  # as if a GPU stood behind device 0
    hpc.shutdown()
    v = run_exercise("gpu-request", REQUEST_REFERENCE)
    assert v.passed and "ran on GPU workers" in v.to_text()
    # no GPU found behind the named device: the verdict passes the request, and never says a GPU ran the tiles
    monkeypatch.setattr(local_gpus, "_detected", lambda: (0, "no NVIDIA driver"))
    hpc.shutdown()
    v = run_exercise("gpu-request", REQUEST_REFERENCE)
    assert v.passed and "ran on GPU workers" not in v.to_text()
    assert "no GPU was detected on this machine, so the tiles ran on the CPU" in v.to_text()
    cell = TILE_FN.format(request="") + "results = hpc.get([tile_energy.remote(i) for i in range(4)])\n"
    v = run_exercise("gpu-request", cell, line="-w 2 --no-live")
    assert not v.passed and "ran on workers without a GPU" in v.to_text()
    hpc.shutdown()


# -- grid-stride ----------------------------------------------------------------------------------------
KERNEL = """
from eugo_lab.offload import kernels
cuda = kernels.cuda()

@cuda.jit
def square_kernel(x, out):
{body}
"""
GRID_STRIDE = """    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = x[i] * x[i]"""


def test_grid_stride_reference_passes():
    v = run_exercise("grid-stride", KERNEL.format(body=GRID_STRIDE), line="--no-live")
    assert v.passed, v.to_text()
    assert "Numba CUDA simulator" in v.to_text() or "the GPU" in v.to_text()


def test_one_element_per_thread_is_not_yet():
    body = "    i = cuda.grid(1)\n    if i < x.shape[0]:\n        out[i] = x[i] * x[i]"
    v = run_exercise("grid-stride", KERNEL.format(body=body), line="--no-live")
    assert not v.passed and "wrote only the first 64: each thread handled one element" in v.to_text()


def test_starting_at_the_thread_index_misses_elements_and_wrong_values_are_named():
    body = GRID_STRIDE.replace("cuda.grid(1), x.shape", "cuda.threadIdx.x, x.shape")
    v = run_exercise("grid-stride", KERNEL.format(body=body), line="--no-live")
    assert not v.passed and "never written: 32-63, 96-127, 160-191, 224-255, ..." in v.to_text()
    v = run_exercise("grid-stride", KERNEL.format(body=GRID_STRIDE.replace("x[i] * x[i]", "x[i] + x[i]")),
                     line="--no-live")
    assert not v.passed and "element 1 of the output is 0.25, not the square of the input's, 0.015625" in v.to_text()


def test_break_even_measured_line_times_both_sides_on_a_device():
    # On a GPU the check adds measured times at the learner's size; the fake device runs the same path here.
    from eugo_lab.exercises.catalog import gpu
    from eugo_lab.offload.devices import FakeDevice
    from eugo_lab.offload.profiles import published

    line = gpu._measured_line(10_000, FakeDevice(published("h100")))
    assert line.startswith("measured at 10,000: CPU ") and "with the copies to the device" in line
