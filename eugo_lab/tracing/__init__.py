"""Recording what ran where: the trace row, the live :class:`Recorder` and the immutable :class:`Trace`.

Names load on first use (PEP 562): worker processes import only :mod:`eugo_lab.contract.row`,
and NumPy loads only when a Trace is needed.
"""

from __future__ import annotations

from eugo_lab import lazy

_WHERE = {"Recorder": "eugo_lab.tracing.recorder", "TaskEvent": "eugo_lab.tracing.recorder",
          "BlockEvent": "eugo_lab.tracing.recorder", "Trace": "eugo_lab.tracing.trace"}

__all__ = ["Recorder", "TaskEvent", "BlockEvent", "Trace"]

__getattr__, __dir__ = lazy.exports(__name__, _WHERE)
