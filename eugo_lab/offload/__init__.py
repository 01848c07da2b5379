"""GPU offload for NumPy code: detection, a pure cost model, a dispatching proxy, the per-operation report.

- :mod:`~eugo_lab.accel.detect`: ``detect_gpus()`` (NVML, then CuPy; never raises), ``describe_cpu()``;
- :mod:`~eugo_lab.accel.profiles`: host profile (measured once per process), published device profiles;
- :mod:`~eugo_lab.accel.cost`: ``predict(op, host, device)`` -> where an operation should run, and why;
- :mod:`~eugo_lab.accel.calibrate`: replace published figures by measurements on the device;
- :mod:`~eugo_lab.accel.devices`: the device backends (CuPy, and a NumPy-backed fake for tests);
- :mod:`~eugo_lab.accel.proxy` and :mod:`~eugo_lab.accel.dispatch`: the array proxy and the per-op dispatcher;
- :mod:`~eugo_lab.accel.ledger`: what each operation did (where, why, bytes, predicted vs measured);
- :mod:`~eugo_lab.accel.cell`: run a ``%%eugo --gpu`` cell with ``import numpy`` bound to the proxy;
- :mod:`~eugo_lab.accel.nvml`: GPU busy % sampled during a cell;
- :mod:`~eugo_lab.accel.kernels`: Numba ``@cuda.jit`` on the GPU, or on the CUDA simulator without one.

Importing this package imports nothing heavy; CuPy, pynvml and Numba are imported when used.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (~2 ms): accel.thread_vars is on the start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_EXPORTS = {
    "detect_gpus": "eugo_lab.accel.detect",
    "describe_cpu": "eugo_lab.accel.detect",
    "predict": "eugo_lab.accel.cost",
    "break_even": "eugo_lab.accel.cost",
    "Operation": "eugo_lab.accel.cost",
    "host_profile": "eugo_lab.accel.profiles",
    "published": "eugo_lab.accel.profiles",
    "offload": "eugo_lab.accel.dispatch",
    "last_ledger": "eugo_lab.accel.cell",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Lazy exports (PEP 562): ``from eugo_lab.accel import predict`` imports only the cost model."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'eugo_lab.accel' has no attribute {name!r}")
