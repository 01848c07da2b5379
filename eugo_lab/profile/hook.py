"""What the runtime uses of the profiler, gathered for :func:`eugo_lab.contract.hooks.provider` (``"profile"``).

``hpc.profile()`` and ``%%eugo --profile`` (see :mod:`eugo_lab.hpc.profiling`) wrap functions in
:class:`Profiled` and merge what the workers sampled into a :class:`Profile`, without the runtime
importing this package.
"""

from __future__ import annotations

from eugo_lab.profile.collect import DEFAULT_INTERVAL, PYINSTRUMENT_INTERVAL, SAMPLERS, Profiled
from eugo_lab.profile.model import Profile

__all__ = ["DEFAULT_INTERVAL", "PYINSTRUMENT_INTERVAL", "SAMPLERS", "Profile", "Profiled"]
