"""On a real GPU: CuPy and NVML, calibration, model vs measured crossovers within 2x, the report's measured times.

Skipped only where this machine has no NVIDIA GPU. Where it has one, a missing CuPy or
nvidia-ml-py fails (with the pip command), never skips. ``make gpu-check`` runs these.
"""

from __future__ import annotations

import numpy
import pytest
from _offload import Shell

from eugo_lab.hardware.gpus import detect_gpus

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not detect_gpus().available, reason=f"no NVIDIA GPU here ({detect_gpus().reason})"),
]


@pytest.fixture(scope="module")
def device():
    from eugo_lab.offload import calibrate, profiles
    from eugo_lab.offload.devices import CupyDevice

    det = detect_gpus()
    assert det.usable, f"a GPU is here but CuPy is not: {det.describe()}"
    dev = CupyDevice(profiles.profile_for_name(det.gpus[0].name))
    dev.profile = calibrate.calibrated(dev)
    return dev


def test_nvml_sees_the_gpu():
    det = detect_gpus()
    assert det.nvml, 'NVML did not answer: pip install "eugo-lab[gpu]" (nvidia-ml-py)'
    g = det.gpus[0]
    assert g.name and g.memory > 10**9 and g.compute_capability >= (6, 0) and g.driver


def test_device_round_trip_and_cuda_event_timing(device):
    a = numpy.arange(1_000_000, dtype=numpy.float32)
    d = device.to_device(a)
    assert device.is_device_array(d)
    t = device.timer()
    t.start()
    r = device.resolve("add", ufunc=True)(d, d)
    t.stop()
    numpy.testing.assert_array_equal(device.to_host(r), a + a)
    assert 0 < t.elapsed() < 1.0


def test_calibration_is_plausible(device):
    p = device.profile
    assert p.calibrated
    assert 1e9 < p.link_bw < 1e12, p  # PCIe Gen3 .. NVLink-C2C
    assert 1e-6 < p.launch_s < 2e-4, p
    assert 1e11 < p.mem_bw < 2e13, p
    assert p.fp32 > 1e12, p


@pytest.mark.parametrize("index", range(7))
def test_model_vs_measured_crossover_within_2x(device, index):
    import time

    from benchmarks import gpu_crossover as gx
    from eugo_lab.offload.devices import import_cupy
    from eugo_lab.offload.profiles import host_profile

    case = gx.CASES[index]
    measured = gx.measured_crossover(case, import_cupy(), time.monotonic() + 15)
    predicted = gx.predicted_crossover(case, host_profile(), device.profile)
    # sizes step by sqrt(2): "within 2x" is within two steps either way
    assert gx.agree(case, measured, predicted), f"{case}: measured {measured}, predicted {predicted}"


def test_the_report_measures_on_the_gpu(device):
    from eugo_lab.offload import cell
    from eugo_lab.render.offload import offload_text

    sh = Shell()
    src = ("import numpy as np\nimport time\na = np.ones(20_000_000, dtype=np.float32)\n"
           "for _ in range(20):\n    a = np.sqrt(a * 1.0001 + 0.5)\ns = float(a.sum())\nt = np.ones(4) + 1\n")
    with cell.use_device(device):
        from eugo_lab.offload.nvml import BusySampler

        sampler = BusySampler().start()
        cell.run(sh, "auto", exec, compile(src, "<cell>", "exec"), sh.user_ns, sh.user_ns)
        busy = sampler.stop()
    ledger = cell.last_ledger()
    gpu_rows = [r for r in ledger.ops if r.where == "gpu"]
    assert gpu_rows and all(r.measured_where == "gpu" and r.measured_s > 0 for r in gpu_rows)
    assert ledger.measured_by == "CUDA events"
    assert [r for r in ledger.ops if r.where == "cpu" and r.why == "too small"]
    assert busy is not None and busy[2] >= 1
    ref = numpy.ones(20_000_000, dtype=numpy.float32)
    for _ in range(20):
        ref = numpy.sqrt(ref * 1.0001 + 0.5)
    numpy.testing.assert_allclose(sh.user_ns["a"], ref, rtol=1e-5)
    text = offload_text(ledger, precise=True)
    assert "device times measured by CUDA events" in text and "(GPU)" in text
    for r in gpu_rows:  # predicted and measured within an order of magnitude for these bandwidth-bound ops
        if r.predicted_gpu_s and r.count >= 5:
            assert 0.1 < r.measured_s / r.predicted_gpu_s < 10, (r.op, r.measured_s, r.predicted_gpu_s)


# -- GPU workers of the local pool (per-call resource requests) ----------------------
def _devices_seen() -> tuple[int, str, str, int]:
    """In a worker: how many devices CUDA shows, the PCI bus of device 0, CUDA_VISIBLE_DEVICES, the pid."""
    import os

    import cupy

    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:  # cudaErrorNoDevice: every GPU hidden
        return 0, "", os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), os.getpid()
    bus = cupy.cuda.Device(0).pci_bus_id if n else ""
    return n, bus, os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), os.getpid()


def _bus(text: str) -> str:
    """A PCI bus id without its domain, lower case (CUDA writes 0000:..., NVML 00000000:...)."""
    return text.split(":", 1)[-1].lower()


def test_a_gpus_1_task_sees_exactly_its_own_device_and_a_cpu_task_none():
    import pynvml

    from eugo_lab import hpc
    from eugo_lab.hpc import session

    det = detect_gpus()
    n_gpu = len(det.gpus)
    info = hpc.init(workers=n_gpu + 1)  # the devices are found, not named: what a user with a GPU gets
    try:
        assert info.gpus == n_gpu and sorted(info.gpu_workers) == list(range(n_gpu)), info
        on_gpu = hpc.remote(gpus=1)(_devices_seen)
        with hpc.trace() as t:
            seen = hpc.get([on_gpu.remote() for _ in range(2 * n_gpu)])
        assert all(n == 1 for n, _, _, _ in seen), seen  # one device each, never all of them
        gpu_of = {w.pid: w.gpu for w in session.current().backend.workers()}
        pynvml.nvmlInit()
        try:
            for _, bus, cvd, pid in seen:
                assert gpu_of[pid] >= 0 and cvd == str(gpu_of[pid])
                nvml_bus = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(gpu_of[pid])).busId
                assert _bus(bus) == _bus(nvml_bus if isinstance(nvml_bus, str) else nvml_bus.decode())
        finally:
            pynvml.nvmlShutdown()
        assert sum(t.gpu_tasks().values()) == len(seen) and set(t.gpu_tasks()) <= set(range(n_gpu))
        # a task that asked for no GPU runs on the CPU worker, which sees none
        n, _, cvd, pid = hpc.get(hpc.remote(_devices_seen).remote())
        assert (n, cvd, gpu_of[pid]) == (0, "", -1)
    finally:
        hpc.shutdown()
