"""Numba ``@cuda.jit`` kernels on the GPU where there is one, on Numba's CUDA simulator where there is not.

Call :func:`cuda` before anything imports ``numba.cuda``: on a machine without a GPU it sets
``NUMBA_ENABLE_CUDASIM=1`` first, so the same kernel code (threads, blocks, a grid-stride
loop) runs, slowly, in Python threads. :func:`target` says plainly which one runs.
Simulated threads cost ~0.1-0.4 ms each: keep simulated launches to a few hundred threads.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

#: Simulated launches above this many threads take seconds; the grid-stride loop covers any size anyway.
MAX_SIMULATED_THREADS = 1024
_NUMBA_HINT = 'pip install numba (or "eugo-lab[gpu]")'


@dataclass(frozen=True)
class KernelTarget:
    """Where ``@cuda.jit`` kernels run in this process."""

    kind: str  # "gpu" or "simulator"
    device: str  # the GPU's name, or "Numba CUDA simulator"

    def describe(self) -> str:
        """``kernels run on the GPU (NVIDIA H200)`` or ``kernels run on the Numba CUDA simulator (no GPU here)``."""
        if self.kind == "gpu":
            return f"kernels run on the GPU ({self.device})"
        return "kernels run on the Numba CUDA simulator (no GPU here): same code, Python threads, slow"


def cuda() -> Any:
    """``numba.cuda``: the real one with a GPU, the simulator without (set up before Numba reads its config)."""
    if "numba.cuda" not in sys.modules and "NUMBA_ENABLE_CUDASIM" not in os.environ:
        from eugo_lab.hardware.gpus import detect_gpus

        if not detect_gpus().available:
            os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
            if "numba" in sys.modules:  # numba imported, numba.cuda not yet: re-read the environment
                from numba.core import config

                config.reload_config()
    try:
        from numba import cuda as numba_cuda
    except ImportError as exc:
        raise ImportError(f"Numba is needed for CUDA kernels (and their simulator); {_NUMBA_HINT}") from exc
    return numba_cuda


def target() -> KernelTarget:
    """Where kernels run here; raises with what to do when neither a GPU nor the simulator is available."""
    numba_cuda = cuda()
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return KernelTarget("simulator", "Numba CUDA simulator")
    if numba_cuda.is_available():
        return KernelTarget("gpu", str(numba_cuda.get_current_device().name.decode()
                                       if isinstance(numba_cuda.get_current_device().name, bytes)
                                       else numba_cuda.get_current_device().name))
    raise RuntimeError("numba.cuda was imported without the CUDA simulator and this machine has no usable GPU. "
                       "Restart the kernel and call eugo_lab.offload.kernels.cuda() before importing numba.cuda "
                       "(or set NUMBA_ENABLE_CUDASIM=1 before starting Python)")


@dataclass(frozen=True)
class KernelRun:
    """What a launch did: where, and its grid."""

    target: KernelTarget
    blocks: int
    threads_per_block: int
    n: int

    def describe(self) -> str:
        """``ran on the Numba CUDA simulator (no GPU here): 4 blocks x 32 threads = 128 threads over 1000 elements``."""
        where = f"the GPU ({self.target.device})" if self.target.kind == "gpu" else \
            "the Numba CUDA simulator (no GPU here)"
        total = self.blocks * self.threads_per_block
        return (f"ran on {where}: {self.blocks} blocks x {self.threads_per_block} threads = {total} threads "
                f"over {self.n} elements (grid-stride loop)")


def check_grid(blocks: int, threads_per_block: int) -> KernelTarget:
    """The target, after checking the grid is one this target can run in reasonable time."""
    if blocks < 1 or threads_per_block < 1:
        raise ValueError(f"blocks and threads_per_block must be >= 1, got {blocks} and {threads_per_block}")
    t = target()
    if t.kind == "simulator" and blocks * threads_per_block > MAX_SIMULATED_THREADS:
        raise ValueError(f"{blocks} x {threads_per_block} threads is too many for the CUDA simulator (at most "
                         f"{MAX_SIMULATED_THREADS}, each thread is a Python thread): use fewer blocks; the "
                         "grid-stride loop still covers every element")
    return t


_saxpy_kernel: list[Any] = []
# The kernel must reach numba.cuda through a module global: the simulator swaps in its fake
# `cuda` (grid, threadIdx...) by replacing globals that refer to the module while a kernel runs.
nbcuda: Any = None


def _saxpy() -> Any:
    global nbcuda
    if not _saxpy_kernel:
        nbcuda = cuda()

        @nbcuda.jit
        def saxpy_kernel(a, x, y, out):  # a CUDA kernel: Numba types it
            start = nbcuda.grid(1)  # this thread's index in the whole grid
            stride = nbcuda.gridsize(1)  # threads in the whole grid
            for i in range(start, x.shape[0], stride):  # grid-stride loop: any n with any grid
                out[i] = a * x[i] + y[i]

        _saxpy_kernel.append(saxpy_kernel)
    return _saxpy_kernel[0]


def saxpy(a: float, x: Any, y: Any, blocks: int = 4, threads_per_block: int = 32) -> tuple[Any, KernelRun]:
    """``a * x + y`` by a ``@cuda.jit`` kernel with a grid-stride loop; returns (result, what ran where)."""
    import numpy as np

    t = check_grid(blocks, threads_per_block)
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.ascontiguousarray(y, dtype=np.float32)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-d arrays of the same length, got shapes {x.shape} and {y.shape}")
    numba_cuda = cuda()
    dx, dy = numba_cuda.to_device(x), numba_cuda.to_device(y)
    dout = numba_cuda.device_array_like(dx)
    _saxpy()[blocks, threads_per_block](np.float32(a), dx, dy, dout)
    return dout.copy_to_host(), KernelRun(t, blocks, threads_per_block, int(x.shape[0]))
