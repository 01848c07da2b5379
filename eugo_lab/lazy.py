"""Names a package exports but loads on first use (PEP 562), so importing the package stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def exports(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for ``where`` (``{name: module that defines it}``).

    Usage, at the end of a package's ``__init__``::

        __getattr__, __dir__ = lazy.exports(__name__, {"predict": "eugo_lab.offload.cost"})
    """

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook PEP 562 names
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:  # noqa: N807 - the module hook PEP 562 names
        return sorted(set(vars(importlib.import_module(package))) | set(where))

    return __getattr__, __dir__
