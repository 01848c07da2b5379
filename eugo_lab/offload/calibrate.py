"""Replace a device's published figures by measurements on it (once per process, about a second on a GPU).

Measured with the device's own timer (CUDA events): a host->device copy of pageable NumPy
memory, a tiny kernel's launch, a large elementwise add (memory bandwidth) and square
matmuls (FP32 and FP64). The measured figures already include what NumPy-style code
reaches, so the efficiency factors of the calibrated profile are 1.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from eugo_lab.offload.devices import Device
from eugo_lab.offload.profiles import DeviceProfile

_CACHE: dict[str, DeviceProfile] = {}


def _timed(device: Device, fn: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = device.timer()
        t.start()
        fn()
        t.stop()
        best = min(best, t.elapsed())
    return best


def calibrate(device: Device, base: DeviceProfile | None = None, scale: float = 1.0) -> DeviceProfile:
    """A :class:`DeviceProfile` measured on ``device`` (``scale`` < 1 shrinks the test sizes, for tests)."""
    import numpy as np

    base = base or device.profile
    n = max(int((1 << 25) * scale), 1024)  # 32 M float32 = 128 MB per operand: far past any GPU cache
    host = np.ones(n, dtype=np.float32)
    device.to_device(host)  # first copy pays for the CUDA context and the memory pool
    small = np.ones(1, dtype=np.float32)
    transfer_s = _timed(device, lambda: device.to_device(small), 5)
    h2d_s = _timed(device, lambda: device.to_device(host))
    add = device.resolve("add", ufunc=True)
    matmul = device.resolve("matmul", ufunc=True)
    assert add is not None and matmul is not None
    tiny = device.to_device(small)
    launch_s = _timed(device, lambda: add(tiny, tiny), 20)
    a = device.to_device(host)
    b = device.to_device(host)
    add(a, b)
    add_s = _timed(device, lambda: add(a, b))
    k = max(int(4096 * scale ** 0.5), 64)
    flops = {}
    for dt in ("float32", "float64"):
        m = device.to_device(np.ones((k, k), dtype=dt))
        matmul(m, m)  # cuBLAS picks its kernel on the first call
        flops[dt] = 2 * k**3 / max(_timed(device, lambda m=m: matmul(m, m)), 1e-9)
    eps = 1e-9
    return replace(base, name=f"{device.name} (calibrated)", source=f"calibrated on {device.name}",
                   transfer_s=transfer_s, link_bw=host.nbytes / max(h2d_s - transfer_s, eps), launch_s=launch_s,
                   mem_bw=3 * host.nbytes / max(add_s - launch_s, eps), fp32=flops["float32"],
                   fp64=flops["float64"], mem_eff=1.0, link_eff=1.0, flop_eff=1.0)


def calibrated(device: Device) -> DeviceProfile:
    """``calibrate(device)``, cached per device name for the process."""
    if device.name not in _CACHE:
        _CACHE[device.name] = calibrate(device)
    return _CACHE[device.name]
