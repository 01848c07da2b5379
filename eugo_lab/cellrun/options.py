"""``%%eugo`` options: parsing helpers that validate every value before anything starts.

Each ``parse_*`` function raises :class:`OptionError` with one line that names the option
and the valid values; the magic turns it into IPython's ``UsageError``. Nothing here
evaluates user text.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

GPU_CHOICES = ("auto", "on", "off")
# Worker counts beyond this are almost certainly typos on a lab machine (and would fork-bomb it).
MAX_WORKERS = 1024
# HOST:PORT after an optional scheme (an engine's, checked against the engines' descriptors).
_ADDRESS = re.compile(r"^(?:(?P<scheme>[a-z]+://))?(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$")


def known_backends() -> tuple[str, ...]:
    """Every engine name the magic knows (the engines' descriptors); ``available()`` says which this install has."""
    from eugo_lab.contract.base import engines

    return tuple(engines())


class OptionError(ValueError):
    """A bad ``%%eugo`` option; the message is one line naming the option and the valid values."""


def parse_workers(value: Any, option: str = "-w/--workers") -> int:
    """A worker count: an integer from 1 to :data:`MAX_WORKERS`."""
    text = str(value).strip()
    if not re.fullmatch(r"[0-9]+", text):
        raise OptionError(f"{option} must be a whole number from 1 to {MAX_WORKERS}, got {text!r}")
    n = int(text)
    if not 1 <= n <= MAX_WORKERS:
        raise OptionError(f"{option} must be a whole number from 1 to {MAX_WORKERS}, got {n}")
    return n


def parse_scaling(value: str) -> tuple[int, ...]:
    """``"1,2,4"`` -> ``(1, 2, 4)``: distinct worker counts, sorted."""
    parts = [p for p in str(value).replace(" ", "").split(",") if p]
    if not parts:
        raise OptionError(f"--scaling takes comma-separated worker counts such as 1,2,4, got {value!r}")
    counts = sorted({parse_workers(p, "--scaling") for p in parts})
    return tuple(counts)


def parse_backend(value: str | None, available: list[str]) -> str | None:
    """A backend name known to the magic and installed here."""
    if value is None:
        return None
    name = str(value).strip().lower()
    known = known_backends()
    if name not in known:
        raise OptionError(f"-b/--backend must be one of {', '.join(known)}, got {value!r}")
    if name not in available:
        raise OptionError(_not_installed(f"-b/--backend {name}", name, available))
    return name


def _not_installed(what: str, name: str, available: list[str]) -> str:
    # The extras are named after their engines (eugo-lab[dask], eugo-lab[ray]).
    return (f"{what}: the {name} engine is not installed in this environment (eugo-lab without its [{name}] "
            f'extra). Install it with: pip install "eugo-lab[{name}]" and restart the kernel; '
            f"engines available: {', '.join(available)}")


def parse_address(value: str | None) -> str | None:
    """A scheduler address: ``tcp://host:port``, ``ray://host:port``, ``host:port`` or ``auto``."""
    if value is None:
        return None
    from eugo_lab.contract.base import address_forms, engines

    text = str(value).strip()
    m = _ADDRESS.match(text)
    whole = any(text in d.addresses for d in engines().values())
    scheme = m.group("scheme") if m is not None else None
    if not whole and (m is None or not 0 < int(m.group("port")) < 65536
                      or (scheme is not None and not any(scheme in d.schemes for d in engines().values()))):
        raise OptionError(f"--address must look like {address_forms()}, got {text!r}")
    return text


def parse_gpu(value: str) -> str:
    """``auto``, ``on`` or ``off``."""
    v = str(value).strip().lower()
    if v not in GPU_CHOICES:
        raise OptionError(f"--gpu must be one of {', '.join(GPU_CHOICES)}, got {value!r}")
    return v


def parse_name(value: str | None) -> str | None:
    """A Python identifier for ``--save``."""
    if value is None:
        return None
    if not str(value).isidentifier():
        raise OptionError(f"--save takes a Python variable name (letters, digits, _), got {value!r}")
    return str(value)


def parse_export(value: str | None) -> str | None:
    """A file path whose folder exists, for ``--export``."""
    if value is None:
        return None
    path = os.path.expanduser(str(value))
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OptionError(f"--export: the folder {folder!r} does not exist; give a path such as trace.json")
    return path


def parse_solution(solution: bool, exercise: str | None) -> bool:
    """``--solution`` marks an exercise's reference solution, so it needs ``--exercise ID``."""
    if solution and exercise is None:
        raise OptionError("--solution marks the reference solution of an exercise and needs the exercise: "
                          "%%eugo --exercise ID --solution")
    return bool(solution)


@dataclass(frozen=True)
class CellOptions:
    """Validated ``%%eugo`` options."""

    workers: int | None = None
    backend: str | None = None
    address: str | None = None
    gpu: str | None = None  # auto|on|off; None: not given (auto where a GPU is, see offload.cell.default_mode)
    optimize: bool = False
    no_optimize: bool = False  # --no-optimize: no automatic JIT for this cell (eugo_lab.cellrun.optimize)
    compare: bool = False
    scaling: tuple[int, ...] = ()
    live: bool = True
    save: str | None = None
    export: str | None = None
    profile: bool = False  # --profile: sample every task (eugo_lab.profile), report after the summary
    extra_meta: dict[str, Any] = field(default_factory=dict)

    def worker_counts(self, default: int | None) -> list[int | None]:
        """Worker counts to run at, in order; the last one is the main run (the live view shows it).

        ``default`` is the worker count used when ``-w`` is not given (``None``: the runtime's own).
        With ``--scaling`` the main run is ``-w`` if given, else the largest count.
        """
        if self.scaling:
            main = self.workers or max(self.scaling)
            return [n for n in self.scaling if n != main] + [main]
        main = self.workers or default
        if self.compare and main != 1:
            return [1, main]
        return [main]

    def meta(self) -> dict[str, Any]:
        """What the trace records about the options: the ``--gpu`` mode, ``--optimize``, ``--profile``.

        ``gpu`` is the offload mode the cell ran with (``auto``/``on``/``off``; the per-operation
        ledger is :mod:`eugo_lab.offload`); ``optimize`` whether the run wrapped its array-taking
        calls in the checked JIT trial and built the optimization report (:mod:`eugo_lab.cellrun.optimize`).
        """
        return {"gpu": self.gpu, "optimize": self.optimize, **({"profile": True} if self.profile else {}),
                **({"no_optimize": True} if self.no_optimize else {}),
                **self.extra_meta}


def build(*, workers: Any = None, backend: Any = None, address: Any = None, gpu: Any = None,
          optimize: bool = False, compare: bool = False, scaling: Any = None, no_live: bool = False,
          no_optimize: bool = False,
          save: Any = None, export: Any = None, available: list[str] | None = None,
          profile: bool = False) -> CellOptions:
    """Validate raw option values (strings from the command line) into :class:`CellOptions`."""
    from eugo_lab import backends
    from eugo_lab.contract.base import engines, route_address

    avail = available if available is not None else backends.available()
    w = parse_workers(workers) if workers is not None else None
    b = parse_backend(backend, avail)
    a = parse_address(address)
    descriptors = engines()
    if a is not None and b is not None and descriptors[b].local:
        remote = [n for n, d in descriptors.items() if d.schemes or d.addresses]
        raise OptionError(f"--address does not apply to -b/--backend {b} (it runs on this machine); "
                          f"use {' or '.join(f'-b {n}' for n in remote)} with an address")
    if a is not None and b is None:
        # An address routes by its scheme, as hpc.init routes it; a bare HOST:PORT goes to Dask (its descriptor says).
        routed = route_address(a)
        if routed is None:  # parse_address took it, so only a plug-in engine's odd address can get here
            raise OptionError(f"--address {a}: no engine takes this address; name one with -b/--backend")
        b = routed.name
        if b not in avail:
            raise OptionError(_not_installed(f"--address {a} needs the {b} engine", b, avail))
    if optimize and no_optimize:
        raise OptionError("use either --optimize (JIT every function with arrays, report it) or --no-optimize "
                          "(no JIT at all in this cell), not both")
    if compare and scaling:
        raise OptionError("use either --compare or --scaling, not both (--scaling 1,N includes the comparison)")
    return CellOptions(workers=w, backend=b, address=a, gpu=parse_gpu(gpu) if gpu is not None else None,
                       optimize=bool(optimize), no_optimize=bool(no_optimize), compare=bool(compare),
                       scaling=parse_scaling(scaling) if scaling is not None else (),
                       live=not no_live, save=parse_name(save), export=parse_export(export), profile=bool(profile))
