"""The NVIDIA GPUs of the machine, found through NVML, else CuPy.

Nothing here fails at import or when there is no GPU: :func:`detect_gpus` returns a
:class:`Detection` whose :attr:`~Detection.reason` says plainly why no device was found.
``pynvml`` (``nvidia-ml-py``) and ``cupy`` are imported lazily, inside the functions.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

GPU_EXTRA = 'pip install "eugo-lab[gpu]"'


@dataclass(frozen=True)
class GpuInfo:
    """One NVIDIA GPU."""

    index: int
    name: str
    memory: int  # bytes
    driver: str  # driver version, e.g. "550.54.15"
    compute_capability: tuple[int, int]
    source: str  # "nvml" or "cupy"

    def describe(self) -> str:
        """``GPU 0: NVIDIA H200, 141 GB, compute capability 9.0, driver 550.54``."""
        major, minor = self.compute_capability
        return (f"GPU {self.index}: {self.name}, {self.memory / 1e9:.0f} GB, compute capability {major}.{minor}, "
                f"driver {self.driver}")


@dataclass(frozen=True)
class Detection:
    """The GPUs found here (maybe none), whether CuPy can use them, and why not when it cannot."""

    gpus: tuple[GpuInfo, ...]
    reason: str  # why no GPU is usable ("" when one is)
    cupy_version: str | None = None
    nvml: bool = False

    @property
    def available(self) -> bool:
        """A GPU exists here (CuPy may still be missing: see :attr:`usable`)."""
        return bool(self.gpus)

    @property
    def usable(self) -> bool:
        """A GPU exists and CuPy can run NumPy operations on it."""
        return bool(self.gpus) and self.cupy_version is not None

    def describe(self) -> str:
        """One line per GPU, or ``no GPU here: <reason>``."""
        if not self.gpus:
            return f"no GPU here: {self.reason}"
        lines = [g.describe() for g in self.gpus]
        lines.append(f"CuPy {self.cupy_version}" if self.cupy_version else f"CuPy is not installed ({GPU_EXTRA})")
        return "\n".join(lines)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_nvml() -> tuple[list[GpuInfo], str]:
    try:
        import pynvml
    except ImportError:
        return [], f"nvidia-ml-py is not installed ({GPU_EXTRA})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded...: no usable driver
        return [], f"NVML could not start ({_text(exc) or type(exc).__name__}): no NVIDIA driver on this machine"
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            cc = tuple(pynvml.nvmlDeviceGetCudaComputeCapability(h))
            gpus.append(GpuInfo(i, _text(pynvml.nvmlDeviceGetName(h)), int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                                driver, (int(cc[0]), int(cc[1])), "nvml"))
        return gpus, "" if gpus else "NVML found no NVIDIA GPU"
    except Exception as exc:  # noqa: BLE001 - a driver that answers oddly is reported, not raised
        return [], f"NVML failed: {_text(exc)}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - already shut down
            pass


def _cupy_version() -> str | None:
    # Without importing CuPy (half a second, and it initialises CUDA): its distribution's version.
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("cupy") is None:
        return None
    for dist in ("cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "installed"


def _from_cupy() -> tuple[list[GpuInfo], str]:
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001
        return [], f"CuPy is not installed ({GPU_EXTRA})" if isinstance(exc, ImportError) else f"CuPy: {exc}"
    try:
        rt = cupy.cuda.runtime
        driver = str(rt.driverGetVersion())
        gpus = []
        for i in range(rt.getDeviceCount()):
            p = rt.getDeviceProperties(i)
            gpus.append(GpuInfo(i, _text(p["name"]), int(p["totalGlobalMem"]), f"CUDA {driver}",
                                (int(p["major"]), int(p["minor"])), "cupy"))
        return gpus, "" if gpus else "CUDA found no GPU"
    except Exception as exc:  # noqa: BLE001 - cudaErrorNoDevice, InsufficientDriver...
        return [], f"CUDA reports no usable GPU ({_text(exc)})"


# The device nodes through which a process reaches an NVIDIA driver: /dev/nvidiactl on Linux
# (containers given a GPU get it mounted too), /dev/dxg under WSL2, where CUDA goes through DirectX.
_DRIVER_NODES = ("/dev/nvidiactl", "/dev/dxg")


def driver_absent() -> str:
    """Why no NVIDIA driver can be reached from here, or ``""`` when one may be (then ask :func:`detect_gpus`).

    A look for the driver's device files, a few microseconds: the local pool asks it on
    every start, where importing pynvml and starting NVML (~25 ms) to hear "no driver" would
    slow every ``hpc.init()`` on machines without a GPU.
    """
    if platform.system() != "Linux" or any(os.path.exists(p) for p in _DRIVER_NODES):
        return ""
    return "no NVIDIA driver on this machine (no /dev/nvidiactl)"


@functools.lru_cache(maxsize=1)
def detect_gpus() -> Detection:
    """The GPUs of this machine, found once per process (``detect_gpus.cache_clear()`` to look again)."""
    gpus, nvml_reason = _from_nvml()
    if gpus:
        return Detection(tuple(gpus), "", _cupy_version(), nvml=True)
    # No NVML (nvidia-ml-py missing, or a container without it): CuPy may still see a device.
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return Detection((), "CUDA_VISIBLE_DEVICES is empty (GPUs hidden from this process)")
    cgpus, cupy_reason = _from_cupy()
    if cgpus:
        return Detection(tuple(cgpus), "", _cupy_version())
    return Detection((), f"{nvml_reason}; {cupy_reason}")
