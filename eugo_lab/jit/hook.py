"""What the runtime uses of the JIT, gathered for :func:`eugo_lab.contract.hooks.provider` (``"jit"``).

The runtime wraps function records in these (see :mod:`eugo_lab.hpc.optimized`) without importing
this package: it asks the contract's provider table for ``"jit"`` and gets this module.
"""

from __future__ import annotations

from eugo_lab.jit.auto import AutoJit, Packed
from eugo_lab.jit.checked import Optimized, code_key

__all__ = ["AutoJit", "Optimized", "Packed", "code_key"]
