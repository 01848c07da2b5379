"""Execution engines by name. Optional engines are imported only when asked for.

To add an engine: write one module with a :class:`~eugo_lab.contract.base.Backend`
subclass and register its :class:`~eugo_lab.contract.base.EngineDescriptor`
(``register_engine``); an engine of this package also gets its descriptor in
``contract.base``'s table, so it is known before its module (and what it needs) is imported.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (~6 ms): hpc.init() imports this package on its
# way to starting the local pool's worker template (local_template), which that import delays.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eugo_lab.contract.base import Backend, EngineDescriptor


def _descriptors() -> dict[str, EngineDescriptor]:
    # The engines' descriptors (contract.base): where each class is, its address schemes, is it local.
    from eugo_lab.contract.base import engines

    return engines()


def known() -> list[str]:
    """Every engine name this package has, installed or not."""
    return sorted(_descriptors())


def installed(name: str) -> bool:
    """True if engine ``name``'s packages are installed here (found on the path, not imported)."""
    d = _descriptors().get(name)
    return d is not None and all(installed_package(p) for p in d.packages)


def available() -> list[str]:
    """Names accepted by ``hpc.init(backend=...)`` in this installation: the engines whose packages are installed."""
    return [name for name in known() if installed(name)]


def missing_message(name: str) -> str:
    """Why engine ``name`` cannot start here and the exact command that installs it."""
    d = _descriptors()[name]
    absent = [p for p in d.packages if not installed_package(p)]
    how = (f'Install it with: pip install "eugo-lab[{d.extra}]" and restart the kernel' if d.extra
           else "Install it and restart the kernel")
    return (f"the {name} engine needs {', '.join(absent) or 'a package'}, which is not installed in this "
            f"environment" + (f" (eugo-lab was installed without its [{d.extra}] extra)" if d.extra else "")
            + f". {how}; engines available now: {', '.join(available())}")


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

    d = _descriptors()[name]
    factory = getattr(importlib.import_module(d.module), d.cls)
    params = inspect.signature(factory).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return set(params)


def resolve_name(backend: str | None, *, address: str | None = None, cluster: Any = None) -> str:
    """Pick the backend name from explicit arguments; raise ``ValueError`` listing valid names.

    No name: a cluster object goes to the engine that takes cluster managers, an address to the
    engine whose scheme it has (``tcp://`` or none: Dask, ``ray://`` or ``auto``: Ray), else the local pool.
    An engine whose packages are not installed raises ``ImportError`` with the install command.
    """
    known = _descriptors()
    if backend is None:
        if cluster is not None:
            backend = next((d.name for d in known.values() if d.takes_cluster), "local")
        else:  # routed as %%eugo --address routes it (a bare HOST:PORT: the engine whose descriptor takes one)
            from eugo_lab.contract.base import route_address

            routed = route_address(address) if address else None
            backend = routed.name if routed is not None else "local"
    if not isinstance(backend, str) or backend not in known:
        raise ValueError(f"unknown backend {backend!r}; valid backends: {', '.join(available())}")
    if not installed(backend):  # said now, before a running runtime is shut down for it
        raise ImportError(missing_message(backend))
    if address is not None and known[backend].local:
        raise ValueError(
            f"address={address!r} does not apply to backend {backend!r}; the local engines run on "
            f"this machine. Valid backends: {', '.join(available())}"
        )
    return backend


def create(name: str, **options: Any) -> Backend:
    """Instantiate backend ``name`` with its options (``None`` values are dropped)."""
    d = _descriptors()[name]
    module, cls, extra = d.module, d.cls, d.extra
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
