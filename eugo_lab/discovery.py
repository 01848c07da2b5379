"""Find a catalog's modules by themselves: every module of a package, imported in name order.

The exercises and the checklists each keep one module per topic in a ``catalog`` package; a
module registers what it holds when imported, and each entry carries its own course position
(an exercise's lesson path, a checklist's ``order``), so no hand-kept list of module names
decides what exists or in which order it is shown.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType


@functools.cache
def import_submodules(package: str) -> tuple[ModuleType, ...]:
    """Import every module directly inside ``package`` (a dotted name), sorted by name; imports once."""
    found = importlib.import_module(package)
    names = sorted(info.name for info in pkgutil.iter_modules(found.__path__) if not info.name.startswith("_"))
    return tuple(importlib.import_module(f"{package}.{name}") for name in names)
