"""GPU offload for NumPy code: a pure cost model, a dispatching proxy, the per-operation report.

- :mod:`~eugo_lab.offload.profiles`: host profile (measured once per process), published device profiles;
- :mod:`~eugo_lab.offload.cost`: ``predict(op, host, device)`` -> where an operation should run, and why;
- :mod:`~eugo_lab.offload.calibrate`: replace published figures by measurements on the device;
- :mod:`~eugo_lab.offload.devices`: the device backends (CuPy, and a NumPy-backed fake for tests);
- :mod:`~eugo_lab.offload.proxy` and :mod:`~eugo_lab.offload.dispatch`: the array proxy and the per-op dispatcher;
- :mod:`~eugo_lab.offload.ops`: which NumPy operations the dispatcher knows, and their kinds;
- :mod:`~eugo_lab.offload.ledger`: what each operation did (where, why, bytes, predicted vs measured);
- :mod:`~eugo_lab.offload.cell`: run a ``%%eugo --gpu`` cell with ``import numpy`` bound to the proxy;
- :mod:`~eugo_lab.offload.nvml`: GPU busy % sampled during a cell;
- :mod:`~eugo_lab.offload.kernels`: Numba ``@cuda.jit`` on the GPU, or on the CUDA simulator without one.

Which GPUs this machine has is :mod:`eugo_lab.hardware.gpus`. Importing this package imports
nothing heavy; CuPy, pynvml and Numba are imported when used.
"""

from __future__ import annotations

from eugo_lab import lazy

_EXPORTS = {
    "predict": "eugo_lab.offload.cost",
    "break_even": "eugo_lab.offload.cost",
    "Operation": "eugo_lab.offload.cost",
    "host_profile": "eugo_lab.offload.profiles",
    "published": "eugo_lab.offload.profiles",
    "offload": "eugo_lab.offload.dispatch",
    "last_ledger": "eugo_lab.offload.cell",
}

__all__ = sorted(_EXPORTS)

# ``from eugo_lab.offload import predict`` imports only the cost model.
__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
