"""GPU detection (the no-GPU path, NVML and CuPy stand-ins) and the CPU description."""

from __future__ import annotations

import builtins
import subprocess
import sys
import types

import pytest

from eugo_lab.hardware import cpu
from eugo_lab.hardware import gpus as detect

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7763 64-Core Processor
processor\t: 1
model name\t: AMD EPYC 7763 64-Core Processor
"""
GRACE = """processor\t: 0
BogoMIPS\t: 2000.00
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd4f
"""
GRAVITON2 = GRACE.replace("0xd4f", "0xd0c")
OTHER_ARM = GRACE.replace("0x41", "0x61").replace("0xd4f", "0x022")


@pytest.mark.parametrize("text, machine, arch, model", [
    (X86, "x86_64", "x86-64", "AMD EPYC 7763 64-Core Processor"),
    (GRACE, "aarch64", "aarch64", "ARM Neoverse V2"),
    (GRAVITON2, "aarch64", "aarch64", "ARM Neoverse N1"),
    (OTHER_ARM, "arm64", "aarch64", "ARM CPU (implementer 0x61, part 0x022)"),
    ("", "riscv64", "riscv64", "unknown riscv64 CPU"),
])
def test_parse_cpu(text, machine, arch, model):
    info = cpu.parse_cpu(text, machine, 4)
    assert (info.arch, info.model, info.cores) == (arch, model, 4)
    assert str(info) == f"{model} ({arch}, 4 cores)"


@pytest.mark.parametrize("text, machine, sve_bytes, simd, bits", [
    (X86 + "flags\t: fpu sse2 ssse3 sse4_1 sse4_2 avx avx2 fma\n", "x86_64", 0, ("AVX2", "AVX", "SSE4.2", "SSE2"), 256),
    (X86 + "flags\t: fpu sse2 sse4_2 avx avx2 avx512f avx512dq\n", "x86_64", 0,
     ("AVX-512", "AVX2", "AVX", "SSE4.2", "SSE2"), 512),
    (GRACE + "Features\t: fp asimd evtstrm aes sve sve2 bf16\n", "aarch64", 16, ("SVE2", "SVE", "NEON"), 128),
    (GRACE.replace("0xd4f", "0xd40") + "Features\t: fp asimd sve\n", "aarch64", 32, ("SVE", "NEON"), 256),
    (GRAVITON2 + "Features\t: fp asimd evtstrm aes crc32\n", "aarch64", 0, ("NEON",), 128),
    (X86, "x86_64", 0, (), 0),
])
def test_parse_cpu_names_its_simd_and_the_widest_register(text, machine, sve_bytes, simd, bits):
    info = cpu.parse_cpu(text, machine, 2, sve_bytes)
    assert (info.simd, info.vector_bits) == (simd, bits)
    assert info.lanes == {"float64": bits // 64, "float32": bits // 32}
    assert "SVE" not in str(info) and "AVX" not in str(info)  # the one-line description stays as it was


def test_this_machine_reports_the_simd_its_flags_list():
    info = cpu.cpu_info()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = f.read()
    assert bool(info.simd) == any(word in flags for word in ("sse2", "asimd"))
    assert info.vector_bits in (0, 128, 256, 512, 1024, 2048)


def test_describe_cpu_names_this_machine():
    text = cpu.describe_cpu()
    assert cpu.cpu_info().arch in text and "core" in text
    assert not text.startswith("unknown")


def _hide(monkeypatch, *names):
    real = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.split(".")[0] in names:
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    for n in names:
        monkeypatch.delitem(sys.modules, n, raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)


def _detect_afresh():
    """``detect_gpus()`` run now (not its cached answer), leaving no cached answer behind."""
    detect.detect_gpus.cache_clear()
    try:
        return detect.detect_gpus()
    finally:
        detect.detect_gpus.cache_clear()


def test_no_pynvml_and_no_cupy_is_said_plainly(monkeypatch):
    _hide(monkeypatch, "pynvml", "cupy")
    det = _detect_afresh()
    assert not det.available and not det.usable and det.gpus == ()
    assert "nvidia-ml-py is not installed" in det.reason and "CuPy is not installed" in det.reason
    assert det.describe().startswith("no GPU here: ")
    assert 'pip install "eugo-lab[gpu]"' in det.describe()


def _fake_pynvml(fail_init=False):
    m = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def init():
        if fail_init:
            raise NVMLError("NVML Shared Library Not Found")

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    m.nvmlDeviceGetCount = lambda: 1
    m.nvmlDeviceGetHandleByIndex = lambda i: f"handle{i}"
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=150_754_820_096)
    m.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)
    return m


def test_nvml_that_cannot_start_means_no_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_init=True))
    _hide(monkeypatch, "cupy")
    det = _detect_afresh()
    assert not det.available
    assert "NVML could not start (NVML Shared Library Not Found): no NVIDIA driver on this machine" in det.reason


def test_a_gpu_through_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    _hide(monkeypatch, "cupy")
    det = _detect_afresh()
    assert det.available and not det.usable  # a GPU, but no CuPy to use it
    (g,) = det.gpus
    assert (g.name, g.memory, g.driver, g.compute_capability, g.source) == \
        ("NVIDIA H200", 150_754_820_096, "550.54.15", (9, 0), "nvml")
    assert det.describe() == ("GPU 0: NVIDIA H200, 151 GB, compute capability 9.0, driver 550.54.15\n"
                              'CuPy is not installed (pip install "eugo-lab[gpu]")')


def test_importing_hardware_and_offload_never_fails_and_imports_nothing_heavy():
    code = ("import sys\nimport eugo_lab.hardware, eugo_lab.hardware.cpu, eugo_lab.offload, eugo_lab.offload.cost\n"
            "from eugo_lab.hardware.gpus import detect_gpus\nd = detect_gpus()\n"
            "print(sorted(m for m in ('cupy', 'numba', 'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_busy_sampler_with_an_nvml_stand_in(monkeypatch):
    from eugo_lab.offload.nvml import BusySampler

    fake = _fake_pynvml()
    readings = iter([10, 50, 90] + [30] * 1000)
    fake.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=next(readings))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    s = BusySampler(interval=0.001).start()
    import time

    time.sleep(0.05)
    mean, peak, n = s.stop()
    assert peak == 90 and n >= 4 and 10 <= mean <= 90


def test_busy_sampler_without_nvml_says_so(monkeypatch):
    from eugo_lab.offload.nvml import BusySampler

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_init=True))
    s = BusySampler().start()
    assert s.stop() is None and s.note == "GPU busy % not sampled (NVMLError)"


def test_calibration_runs_through_the_device_interface():
    from eugo_lab.offload.calibrate import calibrate
    from eugo_lab.offload.devices import FakeDevice
    from eugo_lab.offload.profiles import published

    t4 = published("t4")
    dev = FakeDevice(t4)
    p = calibrate(dev, scale=1 / 512)
    assert p.calibrated and p.source == f"calibrated on {dev.name}" and p.name.endswith("(calibrated)")
    assert (p.mem_eff, p.link_eff, p.flop_eff) == (1.0, 1.0, 1.0)
    # the fake's transfers cost what T4's profile models, plus NumPy's copy: below the modelled link rate
    assert 0 < p.link_bw <= t4.link_bw * t4.link_eff * 1.05
    assert p.launch_s >= t4.launch_s and p.transfer_s >= t4.transfer_s
    assert p.fp32 > 0 and p.fp64 > 0 and p.mem_bw > 0
