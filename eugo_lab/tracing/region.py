"""What the object of ``with hpc.trace() as t`` is to the layers that read traces.

The runtime's region class derives from :class:`Region`, so the analyses recognize it
(and unwrap its Trace) without importing the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eugo_lab.tracing.trace import Trace

#: What a region object says when its trace is asked for while the block still runs.
NOT_ENDED = "the trace is available after the 'with hpc.trace()' block ends"


class Region:
    """A recording region: ``trace`` is its :class:`~eugo_lab.tracing.trace.Trace` once the block ended, else None."""

    trace: Trace | None
