"""Recording what ran where: the trace row, the live :class:`Recorder` and the immutable :class:`Trace`.

Names load on first use (PEP 562): worker processes import only :mod:`eugo_lab.contract.row`,
and NumPy loads only when a Trace is needed.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"Recorder": "recorder", "TaskEvent": "recorder", "BlockEvent": "recorder", "Trace": "trace"}

__all__ = ["Recorder", "TaskEvent", "BlockEvent", "Trace"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'eugo_lab.tracing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"eugo_lab.tracing.{module}"), name)
