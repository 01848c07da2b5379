"""Run a ``%%eugo --gpu auto|on`` cell with its ``import numpy`` bound to the dispatching proxy.

How the proxy binds, for this cell only:

- while the cell runs, the namespace's ``__builtins__`` is a copy of :mod:`builtins` whose
  ``__import__`` returns the proxy for ``numpy`` and its submodules when a session is active
  (a function defined in the cell keeps that copy, and gets the real numpy after the cell);
  other modules (pandas, SciPy, the runtime itself) import through the real ``builtins``
  and keep the real ``numpy``, which is never modified;
- names that already refer to ``numpy`` (``np`` from an earlier cell) point at the proxy
  during the cell;
- when the cell ends, those names point at the real module again, values still on the
  device come to the host, and proxies in the namespace (also one level into lists,
  tuples and dicts) and the cell's result become plain NumPy arrays (or scalars); the ledger
  keeps the digest of each array a name held as a proxy (:attr:`Ledger.left`).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from eugo_lab.contract import cellrecord
from eugo_lab.contract.digest import digest
from eugo_lab.hardware.gpus import GPU_EXTRA, detect_gpus
from eugo_lab.offload import dispatch, predictions
from eugo_lab.offload.devices import CupyDevice, Device, NoDeviceError
from eugo_lab.offload.ledger import Ledger
from eugo_lab.offload.profiles import prediction_profile, profile_for_name
from eugo_lab.offload.proxy import AccelArray, ProxyModule
from eugo_lab.settings import GPU_PROFILE_ENV

_real_import = builtins.__import__
_override: list[Device] = []
_devices: dict[int, Device] = {}

#: The cell's offload ledger in its cell record: every run of a cell's body puts its own (``None`` under
#: ``--gpu off``), and a later region or native cell leaves it as it was (it is the latest ``--gpu`` cell's).
LEDGER = cellrecord.register(cellrecord.Slot("offload", "the Ledger of the latest %%eugo --gpu auto|on cell"))


def last_ledger() -> Ledger | None:
    """The ledger of the last ``%%eugo --gpu auto|on`` cell (``None`` after ``--gpu off``)."""
    return cellrecord.read(LEDGER)


@contextlib.contextmanager
def use_device(device: Device) -> Iterator[Device]:
    """Cells run in this block use ``device`` (a :class:`~eugo_lab.offload.devices.FakeDevice` in tests)."""
    _override.append(device)
    try:
        yield device
    finally:
        _override.remove(device)


def _import_hook(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    mod = _real_import(name, globals, locals, fromlist, level)
    s = dispatch.active()
    if s is None or s._bypass() or level != 0 or not (name == "numpy" or name.startswith("numpy.")):
        return mod
    return s.module(mod) if isinstance(mod, types.ModuleType) else mod


def choose_device(mode: str) -> tuple[Device | None, str]:
    """The device for ``mode`` (``None``: predictions only) and a note; ``on`` without one raises NoDeviceError."""
    __tracebackhide__ = True  # the error is the message, not where it was raised
    if _override:
        return _override[-1], ""
    det = detect_gpus()
    if det.usable:
        from eugo_lab.offload.calibrate import calibrated

        if 0 not in _devices:
            try:
                dev = CupyDevice(profile_for_name(det.gpus[0].name))
                dev.profile = calibrated(dev)
            except Exception as exc:  # a CUDA/CuPy mismatch: say so; auto still predicts
                why = f"{det.gpus[0].name} found, but CuPy could not use it ({type(exc).__name__}: {exc})"
                if mode == "on":
                    raise NoDeviceError(f"--gpu on: {why}. Check that cupy-cuda12x matches the driver "
                                        "(nvidia-smi), or use --gpu auto or --gpu off") from exc
                return None, why
            _devices[0] = dev
        return _devices[0], ""
    if mode == "on":
        if det.available:
            raise NoDeviceError(f"--gpu on: this machine has {det.gpus[0].name}, but CuPy is not installed, so "
                                f"NumPy operations cannot run on it; {GPU_EXTRA}, or use --gpu auto or --gpu off")
        raise NoDeviceError(f"--gpu on needs an NVIDIA GPU, and there is none here ({det.reason}). Use --gpu auto to "
                            "run on the CPU and see what a GPU would do (predictions), or --gpu off")
    if det.available:
        return None, f"{det.gpus[0].name} found, but CuPy is not installed ({GPU_EXTRA})"
    return None, ""


def _prediction_profile() -> Any:
    """What to predict for without a usable device: EUGO_LAB_GPU_PROFILE, else the GPU that is here, else H100."""
    det = detect_gpus()
    if det.available and not os.environ.get(GPU_PROFILE_ENV):
        return profile_for_name(det.gpus[0].name)
    return prediction_profile()


def device_profile() -> Any:
    """The device profile a ``--gpu auto`` cell predicts with here: measured or published, never both.

    With a usable GPU: its profile calibrated on it (``profile.calibrated`` is True, the figures
    are measurements). Without one: the published profile named by ``EUGO_LAB_GPU_PROFILE``, else
    that of the GPU found (when CuPy is missing), else the H100's (``calibrated`` is False).
    """
    device, _ = choose_device("auto")
    return device.profile if device is not None else _prediction_profile()


#: What the summary says when ``--gpu`` was not given and there is no GPU to offload to.
NO_GPU_DEFAULT_NOTE = "no GPU here, NumPy ran unchanged; --gpu auto shows what a GPU would do"


def default_mode(requested: str | None) -> tuple[str, str]:
    """The mode a cell runs in, and a note for the summary, given ``--gpu`` (``None``: not given).

    Not given means ``auto`` where a usable GPU is: something to gain, no annotation needed.
    Without one, the cell's NumPy runs unproxied (``off``): routing every operation through
    the proxy only to predict costs ~20 us per operation and changes ``type()`` inside the
    cell, a price a learner should choose with ``--gpu auto``, not pay by default.
    """
    if requested is not None:
        return requested, ""
    if detect_gpus().usable:
        return "auto", ""
    return "off", NO_GPU_DEFAULT_NOTE


def check(mode: str) -> None:
    """Before the cell's runtime and trace start: find (and calibrate, once) the device.

    Raises :class:`NoDeviceError` when ``--gpu on`` cannot be honoured, so that nothing starts.
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    if mode != "off":
        choose_device(mode)


def _plain(v: Any) -> Any:
    if isinstance(v, AccelArray):
        h = v._s.host_value(v)
        return h[()] if v._scalar else h
    if isinstance(v, ProxyModule):
        return v.__dict__["_real"]
    return v


def _restore_namespace(ns: dict, ledger: Any) -> None:
    """Make the namespace's proxies plain again; note in ``ledger`` each array a name held as a proxy.

    Those arrays are what the cell's placed operations produced (or were handed), so a grader
    can tell them from a value an earlier cell left, or a plain copy of one: ``ledger.left``
    gets its digest, ``ledger.chains`` how many placed operations in a row made it.
    """
    for k, v in list(ns.items()):
        if isinstance(v, (AccelArray, ProxyModule)):
            ns[k] = _plain(v)
            if isinstance(v, AccelArray):
                ledger.left[k] = digest(ns[k])
                ledger.chains[k] = v._chain
        elif isinstance(v, list) and any(isinstance(x, AccelArray) for x in v):
            v[:] = [_plain(x) for x in v]
        elif isinstance(v, tuple) and any(isinstance(x, AccelArray) for x in v) and type(v) is tuple:
            ns[k] = tuple(_plain(x) for x in v)
        elif isinstance(v, dict) and k != "__builtins__" and any(isinstance(x, AccelArray) for x in v.values()):
            for kk, x in list(v.items()):
                v[kk] = _plain(x)


def run(shell: Any, mode: str, body: Callable[..., Any], *args: Any) -> Any:
    """Run ``body(*args)`` (the cell) under ``--gpu mode``; returns its value as plain NumPy. ``off``: just the call.

    In every mode the cell's calls of the cost model are recorded (:func:`predictions.last_cell`).
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    with predictions.recording():
        return _run(shell, mode, body, *args)


def _run(shell: Any, mode: str, body: Callable[..., Any], *args: Any) -> Any:
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    cellrecord.contribute(LEDGER, None)
    if mode == "off":
        return body(*args)
    device, note = choose_device(mode)
    session = dispatch.Offload(mode, device, device.profile if device else _prediction_profile())
    session.ledger.note = note
    g, ns = shell.user_global_ns, shell.user_ns
    missing = object()
    saved = g.get("__builtins__", missing)
    hooked = dict(vars(builtins))
    hooked["__import__"] = _import_hook
    sampler = None
    if isinstance(device, CupyDevice):
        from eugo_lab.offload.nvml import BusySampler

        sampler = BusySampler(device.index).start()
    value: Any = None
    try:
        with session.activate():
            for space in {id(g): g, id(ns): ns}.values():
                for k, v in list(space.items()):
                    if v is np or (isinstance(v, types.ModuleType) and v.__name__.startswith("numpy.")
                                   and not isinstance(v, ProxyModule)):
                        space[k] = session.module(v)
            g["__builtins__"] = hooked
            value = body(*args)
    finally:
        if saved is missing:
            g.pop("__builtins__", None)
        else:
            g["__builtins__"] = saved
        ledger = session.close()
        for space in {id(g): g, id(ns): ns}.values():
            _restore_namespace(space, ledger)
        if sampler is not None:
            ledger.busy = sampler.stop()
            ledger.busy_note = sampler.note
        cellrecord.contribute(LEDGER, ledger)
    return _plain(value) if not isinstance(value, (list, tuple)) else type(value)(_plain(v) for v in value) \
        if type(value) in (list, tuple) else value
