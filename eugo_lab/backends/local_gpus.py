"""Which GPUs the local pool gives a worker of its own, and the words for a request it cannot meet.

The pool runs one GPU worker per device, with ``CUDA_VISIBLE_DEVICES`` set to that device
alone, so a CUDA library in the worker (CuPy, Numba, PyTorch) sees exactly one GPU, as its
device 0. The devices, first rule that applies:

1. ``hpc.init(gpus=...)``: a list of devices (``[0, 1]``, or CUDA ids such as ``"GPU-5e1c..."``
   or MIG ids), ``0``/``[]`` for none, or a count ``n`` for the first ``n`` devices found;
2. ``EUGO_LAB_GPU_DEVICES`` (``0,1``; ``none``), the same list from the environment;
3. ``CUDA_VISIBLE_DEVICES`` of the driver, when set: those devices (empty or ``-1``: none);
4. every GPU NVML finds (:func:`eugo_lab.hardware.gpus.detect_gpus`).

Numbers in rules 1-2 count within ``CUDA_VISIBLE_DEVICES`` when it is set, as CUDA counts
them. Devices named in rules 1-2 are taken as given when no driver lists any: that is how a
machine without a GPU (CI, tests) runs a pool with GPU workers, whose tasks then see
``CUDA_VISIBLE_DEVICES=0`` with no device behind it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, NoReturn

from eugo_lab.settings import GPU_DEVICES_ENV

CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class Devices:
    """The local pool's GPUs: what each GPU worker's ``CUDA_VISIBLE_DEVICES`` is, and where they came from."""

    tokens: tuple[str, ...]  # one per GPU worker: its CUDA_VISIBLE_DEVICES
    indices: tuple[int, ...]  # the device number the trace and hpc.cluster() show for each
    source: str  # "gpus=", GPU_DEVICES_ENV, CUDA_VISIBLE, "NVML", or "" when there are none
    reason: str = ""  # no devices: why not, in words ("no NVIDIA GPU visible: no NVIDIA driver ...")
    detected: bool = False  # numbered as NVML numbers them (the workers then get CUDA_DEVICE_ORDER=PCI_BUS_ID)
    #: A GPU was found on this machine behind the devices. False: they were named (``gpus=[0]``,
    #: EUGO_LAB_GPU_DEVICES) on a machine where NVML finds none, so their workers' tasks run on the CPU.
    present: bool = True

    def __len__(self) -> int:
        return len(self.tokens)

    def describe(self) -> str:
        """``GPU 0, GPU 1`` (a device named by its id is shown by that id)."""
        return ", ".join(f"GPU {i}" if t.isdigit() else f"GPU {i} ({t})" for t, i in zip(self.tokens, self.indices))


def _parse(value: Any, where: str) -> list[str] | int:
    """``value`` of ``gpus=`` or the variable as a list of device tokens, or a count."""
    if isinstance(value, bool):
        return [] if value is False else _bad(value, where)
    if isinstance(value, int):
        return value if value >= 0 else _bad(value, where)
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "none":
            return []
        value = [p.strip() for p in text.split(",")]
    if not isinstance(value, (list, tuple)):
        return _bad(value, where)
    tokens = []
    for v in value:
        tok = str(v).strip() if isinstance(v, (int, str)) and not isinstance(v, bool) else ""
        if not tok or "," in tok or (isinstance(v, int) and v < 0) or tok.startswith("-"):
            return _bad(value, where)
        tokens.append(tok)
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"{where} names a device twice ({value!r}): each GPU worker holds a device of its own")
    return tokens


def _bad(value: Any, where: str) -> NoReturn:
    none = "be 0 for none" if where == "gpus=" else "be 'none'"
    raise ValueError(f"{where} must list GPU devices ([0, 1], '0,1', CUDA ids such as 'GPU-5e1c...') or {none}, "
                     f"got {value!r}")


def _visible() -> list[str] | None:
    """The driver's ``CUDA_VISIBLE_DEVICES`` as device tokens (``[]``: all hidden), or None when unset."""
    raw = os.environ.get(CUDA_VISIBLE)
    if raw is None:
        return None
    tokens = [t.strip() for t in raw.split(",") if t.strip()]
    # CUDA stops at the first invalid entry: "-1" (a common way to hide every GPU) ends the list.
    out = []
    for t in tokens:
        if t.startswith("-"):
            break
        out.append(t)
    return out


def _detected() -> tuple[int, str]:
    """How many GPUs NVML finds here, and why none when it finds none (cheap when there is no driver)."""
    from eugo_lab.hardware import gpus as detect

    absent = detect.driver_absent()
    if absent:
        return 0, absent
    det = detect.detect_gpus()
    return len(det.gpus), det.reason


def _number(tokens: list[str], source: str, detected: bool = False, present: bool = True) -> Devices:
    indices = [int(t) if t.isdigit() else i for i, t in enumerate(tokens)]
    return Devices(tuple(tokens), tuple(indices), source, detected=detected, present=present)


def resolve(gpus: Any = None) -> Devices:
    """The devices the local pool gives a GPU worker each (see the module docstring for the rules)."""
    where, asked = "gpus=", gpus
    if asked is None:
        raw = os.environ.get(GPU_DEVICES_ENV, "").strip()
        if raw:
            where, asked = GPU_DEVICES_ENV, raw
    visible = _visible()
    if asked is not None:
        wanted = _parse(asked, where)
        if wanted == 0 or wanted == []:
            return Devices((), (), where, f"{where}{asked!r} asked for none" if where == "gpus=" else
                           f"{where}={asked} asked for none")
        if isinstance(wanted, int):  # the first n devices found
            found = resolve(None)
            if len(found) < wanted:
                raise ValueError(f"gpus={wanted} asks for {wanted} GPU worker{'s' if wanted > 1 else ''}, but this "
                                 f"machine shows "
                                 f"{len(found)} GPU(s) ({found.describe() or found.reason}); name the devices "
                                 "(gpus=[0, 1]) or ask for fewer")
            return Devices(found.tokens[:wanted], found.indices[:wanted], where, detected=found.detected,
                           present=found.present)
        if visible is not None:  # numbers count within CUDA_VISIBLE_DEVICES, as CUDA counts them
            out = []
            for t in wanted:
                if t.isdigit():
                    if int(t) >= len(visible):
                        shown = os.environ[CUDA_VISIBLE]
                        raise ValueError(f"{where} names device {t}, but CUDA_VISIBLE_DEVICES={shown!r} shows "
                                         f"{len(visible)} device(s) (0 to {len(visible) - 1})")
                    out.append(visible[int(t)])
                else:
                    out.append(t)
            return _number(out, where, present=_detected()[0] > 0)
        count, _ = _detected()
        bad = [t for t in wanted if t.isdigit() and count and int(t) >= count]
        if bad:
            raise ValueError(f"{where} names device {bad[0]}, but NVML finds {count} GPU(s) here "
                             f"(0 to {count - 1})")
        return _number(wanted, where, detected=count > 0, present=count > 0)
    if visible is not None:
        if not visible:
            return Devices((), (), CUDA_VISIBLE, f"CUDA_VISIBLE_DEVICES={os.environ[CUDA_VISIBLE]!r} hides every GPU")
        from eugo_lab.hardware import gpus as detect

        absent = detect.driver_absent()
        if absent:
            return Devices((), (), CUDA_VISIBLE, f"no NVIDIA GPU visible: {absent}")
        return _number(visible, CUDA_VISIBLE, present=_detected()[0] > 0)
    count, reason = _detected()
    if not count:
        return Devices((), (), "", f"no NVIDIA GPU visible: {reason}")
    return _number([str(i) for i in range(count)], "NVML", detected=True)


def fit(devices: Devices, workers: int | None) -> Devices:
    """``devices`` for a pool of ``workers`` (None: the default size, which grows to hold them all).

    ``workers=`` is the user's word on the pool's size: of devices found, only the first
    ``workers`` get a GPU worker; devices the user named each need a worker, so too few is an error.
    """
    if not workers or len(devices) <= workers:
        return devices
    if devices.source in ("gpus=", GPU_DEVICES_ENV):
        raise ValueError(f"{devices.source} names {len(devices)} GPUs ({devices.describe()}), but workers={workers}: "
                         f"each GPU needs a worker of its own; ask for workers={len(devices)} or more, or name fewer")
    return Devices(devices.tokens[:workers], devices.indices[:workers], devices.source, detected=devices.detected,
                   present=devices.present)


def worker_envs(devices: Devices, n_workers: int) -> list[dict[str, str]]:
    """The variables each worker adds to the pool's environment: workers ``0..len(devices)-1`` hold a GPU each.

    The others get ``CUDA_VISIBLE_DEVICES=""`` (no GPU): a task that did not ask for one must
    not quietly share a device with the task that holds it.
    """
    if not devices.tokens:
        return [{} for _ in range(n_workers)]
    envs: list[dict[str, str]] = []
    for i in range(n_workers):
        if i < len(devices):
            env = {CUDA_VISIBLE: devices.tokens[i]}
            if devices.detected and "CUDA_DEVICE_ORDER" not in os.environ:
                env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's numbering = NVML's = nvidia-smi's
            envs.append(env)
        else:
            envs.append({CUDA_VISIBLE: ""})
    return envs
