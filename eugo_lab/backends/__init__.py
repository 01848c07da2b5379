"""Execution engines by name. Optional engines are imported only when asked for.

To add an engine: write one module with a :class:`~eugo_lab.contract.base.Backend`
subclass and add its name here.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (~6 ms): hpc.init() imports this package on its
# way to starting the local pool's worker template (local_template), which that import delays.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eugo_lab.contract.base import Backend

# name -> (module, class, pip extra that provides it or None)
_REGISTRY: dict[str, tuple[str, str, str | None]] = {
    "local": ("eugo_lab.backends.local", "LocalBackend", None),
    "threads": ("eugo_lab.backends.threads", "ThreadBackend", None),
    "dask": ("eugo_lab.backends.dask", "DaskBackend", "dask"),
    "ray": ("eugo_lab.backends.ray", "RayBackend", "ray"),
}
# The top-level packages each extra installs that its engine imports: looked up, never imported
# (importing ray takes seconds and starts threads).
_NEEDS: dict[str, tuple[str, ...]] = {"dask": ("dask", "distributed"), "ray": ("ray",)}


def known() -> list[str]:
    """Every engine name this package has, installed or not."""
    return sorted(_REGISTRY)


def installed(name: str) -> bool:
    """True if engine ``name``'s packages are installed here (found on the path, not imported)."""
    return name in _REGISTRY and all(installed_package(p) for p in _NEEDS.get(name, ()))


def available() -> list[str]:
    """Names accepted by ``hpc.init(backend=...)`` in this installation: the engines whose packages are installed."""
    return [name for name in known() if installed(name)]


def missing_message(name: str) -> str:
    """Why engine ``name`` cannot start here and the exact command that installs it."""
    extra = _REGISTRY[name][2]
    absent = [p for p in _NEEDS.get(name, ()) if not installed_package(p)]
    return (f"the {name} engine needs {', '.join(absent) or 'a package'}, which is not installed in this "
            f"environment (eugo-lab was installed without its [{extra}] extra). Install it with: "
            f'pip install "eugo-lab[{extra}]" and restart the kernel; engines available now: '
            f"{', '.join(available())}")


def installed_package(package: str) -> bool:
    """True if the top-level ``package`` can be found on the path (without importing it)."""
    from importlib.util import find_spec

    try:
        return find_spec(package) is not None
    except (ImportError, ValueError):  # a broken or half-removed install: not usable
        return False


def option_names(name: str) -> set[str] | None:
    """The keyword options engine ``name`` takes (``None``: it takes any); imports the engine's module."""
    import inspect

    module, cls, _ = _REGISTRY[name]
    factory = getattr(importlib.import_module(module), cls)
    params = inspect.signature(factory).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)


def resolve_name(backend: str | None, *, address: str | None = None, cluster: Any = None) -> str:
    """Pick the backend name from explicit arguments; raise ``ValueError`` listing valid names."""
    if backend is None:
        if cluster is not None or (address and address.startswith(("tcp://", "tls://", "ws://", "wss://"))):
            backend = "dask"
        elif address and (address.startswith("ray://") or address == "auto"):
            backend = "ray"
        else:
            backend = "local"
    if not isinstance(backend, str) or backend not in _REGISTRY:
        raise ValueError(f"unknown backend {backend!r}; valid backends: {', '.join(available())}")
    if not installed(backend):  # said now, before a running runtime is shut down for it
        raise ImportError(missing_message(backend))
    if address is not None and backend in ("local", "threads"):
        raise ValueError(
            f"address={address!r} does not apply to backend {backend!r}; the local engines run on "
            f"this machine. Valid backends: {', '.join(available())}"
        )
    return backend


def create(name: str, **options: Any) -> Backend:
    """Instantiate backend ``name`` with its options (``None`` values are dropped)."""
    module, cls, extra = _REGISTRY[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        hint = f' Install it with: pip install "eugo-lab[{extra}]"' if extra else ""
        raise ImportError(f"backend {name!r} needs a package that is not installed ({exc.name}).{hint}") from exc
    opts = {k: v for k, v in options.items() if v is not None}
    factory = getattr(mod, cls)
    import inspect

    params = inspect.signature(factory).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(opts) - set(params))
        if unknown:
            valid = ", ".join(sorted(params)) or "none"
            raise ValueError(f"backend {name!r} does not take {', '.join(unknown)}; its options are: {valid}")
    return factory(**opts)
