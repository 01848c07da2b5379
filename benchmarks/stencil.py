"""The 3-point stencil that the JIT benchmarks and tests compile: one loop over an array, in its own module.

Workers import it by reference (``benchmarks.optimizations`` and ``tests/_optimize_tasks.py``
send it), so it imports NumPy only; ``benchmarks.tasks`` stays NumPy-free for the start-up
benchmark's first task.
"""

from __future__ import annotations

import numpy as np


def smooth(a):
    """A 3-point stencil as a plain Python loop: Python bytecode over an array, what a JIT is for."""
    out = np.empty_like(a)
    out[0] = a[0]
    out[-1] = a[-1]
    for i in range(1, a.shape[0] - 1):
        out[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
    return out
