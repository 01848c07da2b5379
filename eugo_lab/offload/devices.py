"""Device backends the dispatcher runs operations on: CuPy on a real GPU, and a fake for tests.

A backend moves arrays (``to_device``/``to_host``), finds the device version of a NumPy
function or ufunc method (``resolve``; ``None`` when it has none) and times work on the
device (``timer``: CUDA events on a GPU, never host clocks). :class:`FakeDevice` keeps its
"device" arrays as NumPy arrays in a wrapper, counts every transfer and launch, adds the
latency its profile models to its timings, and can be told to raise (the fallback path).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from eugo_lab.hardware.gpus import GPU_EXTRA
from eugo_lab.offload.profiles import DeviceProfile


class NoDeviceError(RuntimeError):
    """``--gpu on`` (or an explicit device request) on a machine without a usable GPU."""


def import_cupy() -> Any:
    """``import cupy``, or an ImportError that names the pip extra."""
    try:
        import cupy
    except ImportError as exc:
        raise ImportError(f"CuPy is needed to run NumPy operations on the GPU; {GPU_EXTRA} "
                          "(it installs cupy-cuda12x and nvidia-ml-py)") from exc
    return cupy


class Timer:
    """Times a stretch of device work; :meth:`elapsed` may synchronise, so call it late (at the report)."""

    def start(self) -> None:
        """Mark the start."""

    def stop(self) -> None:
        """Mark the end."""

    def elapsed(self) -> float:
        """Seconds between start and stop."""
        raise NotImplementedError


class Device:
    """The interface the dispatcher needs from a device backend."""

    name: str = "device"
    profile: DeviceProfile
    measured_by: str = "device timer"

    def is_device_array(self, x: Any) -> bool:
        """Whether ``x`` lives on this device."""
        raise NotImplementedError

    def to_device(self, host: Any) -> Any:
        """Copy a NumPy array to the device."""
        raise NotImplementedError

    def to_host(self, dev: Any) -> Any:
        """Copy a device array to a NumPy array."""
        raise NotImplementedError

    def resolve(self, name: str, method: str = "__call__", ufunc: bool = False) -> Callable | None:
        """The device version of ``numpy.<name>`` (or of ``ufunc.<method>``); ``None`` if there is none."""
        raise NotImplementedError

    def timer(self) -> Timer:
        """A new, unstarted :class:`Timer`."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait for all queued device work."""


# -- CuPy ----------------------------------------------------------------------------------------------
class _EventTimer(Timer):
    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._end.record()

    def elapsed(self) -> float:
        self._end.synchronize()
        return float(self._cp.cuda.get_elapsed_time(self._start, self._end)) / 1e3  # ms -> s


class CupyDevice(Device):
    """A real GPU through CuPy; timings are CUDA events."""

    measured_by = "CUDA events"

    def __init__(self, profile: DeviceProfile, index: int = 0) -> None:
        self.cp = import_cupy()
        self.index = index
        self.cp.cuda.Device(index).use()
        props = self.cp.cuda.runtime.getDeviceProperties(index)
        raw = props["name"]
        self.name = raw.decode() if isinstance(raw, bytes) else str(raw)
        self.profile = profile

    def is_device_array(self, x: Any) -> bool:
        """Whether ``x`` is a device array of this backend."""
        return isinstance(x, self.cp.ndarray)

    def to_device(self, host: Any) -> Any:
        """Copy a NumPy array to the device."""
        return self.cp.asarray(host)

    def to_host(self, dev: Any) -> Any:
        """Copy a device array to the host."""
        return self.cp.asnumpy(dev)

    def resolve(self, name: str, method: str = "__call__", ufunc: bool = False) -> Callable | None:
        """The device version of ``numpy.<name>`` (``None``: none)."""
        obj: Any = self.cp
        for part in name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        if ufunc and method != "__call__":
            return getattr(obj, method, None)
        return obj if callable(obj) else None

    def timer(self) -> Timer:
        """A new device timer."""
        return _EventTimer(self.cp)

    def synchronize(self) -> None:
        """Wait for queued device work."""
        self.cp.cuda.get_current_stream().synchronize()


# -- the fake device (tests, demos on machines without a GPU) -------------------------------------------
class FakeDeviceError(RuntimeError):
    """What the fake device raises when told to fail (stands in for CuPy's OutOfMemoryError and the like)."""


class FakeDeviceArray:
    """A "device" array: a NumPy array that refuses silent conversion, as a CuPy array does."""

    __slots__ = ("data",)

    def __init__(self, data: Any) -> None:
        self.data = data

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)
    size = property(lambda self: self.data.size)
    nbytes = property(lambda self: self.data.nbytes)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("implicit conversion of a (fake) device array to NumPy is not allowed; use to_host()")

    def __getitem__(self, key: Any) -> FakeDeviceArray:
        return FakeDeviceArray(self.data[_unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self.data[_unwrap(key)] = _unwrap(value)

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"FakeDeviceArray({self.data!r})"


def _unwrap(x: Any) -> Any:
    if isinstance(x, FakeDeviceArray):
        return x.data
    if isinstance(x, (tuple, list)):
        return type(x)(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    import numpy as np

    if isinstance(x, np.ndarray):
        raise TypeError("a host NumPy array was passed to a (fake) device function; move it with to_device() first")
    return x


def _wrap(x: Any) -> Any:
    import numpy as np

    if isinstance(x, np.ndarray):
        return FakeDeviceArray(x)
    if isinstance(x, np.generic):  # CuPy returns 0-d device arrays where NumPy returns scalars
        return FakeDeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    return x


class _FakeTimer(Timer):
    def __init__(self, dev: FakeDevice) -> None:
        self._dev = dev
        self._t0 = self._t1 = 0.0
        self._m0 = self._m1 = 0.0

    def start(self) -> None:
        self._t0, self._m0 = time.perf_counter(), self._dev.modelled_s

    def stop(self) -> None:
        self._t1, self._m1 = time.perf_counter(), self._dev.modelled_s

    def elapsed(self) -> float:
        # NumPy's own time plus the latency the profile models for the transfers and launches in between
        # (added without sleeping when sleep=False, so tests stay fast).
        wall = self._t1 - self._t0
        return wall if self._dev.sleep else wall + (self._m1 - self._m0)


class FakeDevice(Device):
    """A NumPy-backed device that counts transfers, models latency from a profile, and can raise.

    ``fail`` names operations (``"matmul"``, ``"add"``, ``"sum"``...) whose device version raises
    :class:`FakeDeviceError`, or is a callable ``name -> bool``. ``sleep=True`` really waits the
    modelled latency (so host clocks see it too).
    """

    measured_by = "fake device (NumPy time + modelled latency)"

    def __init__(self, profile: DeviceProfile, fail: Any = (), sleep: bool = False) -> None:
        self.profile = profile
        self.name = f"fake device modelled on {profile.name}"
        self._fail = fail if callable(fail) else (lambda name, names=frozenset(fail): name in names)
        self.sleep = sleep
        self.h2d_count = self.d2h_count = self.h2d_bytes = self.d2h_bytes = self.launches = 0
        self.modelled_s = 0.0

    def _model(self, seconds: float) -> None:
        self.modelled_s += seconds
        if self.sleep:
            time.sleep(seconds)

    def is_device_array(self, x: Any) -> bool:
        """Whether ``x`` is a device array of this backend."""
        return isinstance(x, FakeDeviceArray)

    def to_device(self, host: Any) -> FakeDeviceArray:
        """Copy a NumPy array to the device."""
        import numpy as np

        arr = np.array(host, copy=True)
        self.h2d_count += 1
        self.h2d_bytes += arr.nbytes
        p = self.profile
        self._model(p.transfer_s + arr.nbytes / (p.link_bw * p.link_eff))
        return FakeDeviceArray(arr)

    def to_host(self, dev: Any) -> Any:
        """Copy a device array to the host."""
        arr = dev.data.copy()
        self.d2h_count += 1
        self.d2h_bytes += arr.nbytes
        p = self.profile
        self._model(p.transfer_s + arr.nbytes / (p.link_bw * p.link_eff))
        return arr

    def resolve(self, name: str, method: str = "__call__", ufunc: bool = False) -> Callable | None:
        """The device version of ``numpy.<name>`` (``None``: none)."""
        import numpy as np

        obj: Any = np
        for part in name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        target = getattr(obj, method) if ufunc and method != "__call__" else obj
        label = name if method == "__call__" else f"{name}.{method}"

        def run(*args: Any, **kwargs: Any) -> Any:
            if self._fail(label) or self._fail(name):
                raise FakeDeviceError(f"out of memory in {label} (fake device told to fail)")
            self.launches += 1
            self._model(self.profile.launch_s)
            return _wrap(target(*_unwrap(args), **_unwrap(kwargs)))

        return run

    def timer(self) -> Timer:
        """A new device timer."""
        return _FakeTimer(self)
