"""Checked Numba compilation: a function is compiled on each worker, kept only when its result matches and it is faster.

- :mod:`~eugo_lab.jit.checked` (worker side): :class:`~eugo_lab.jit.checked.Optimized`, the
  trial, the per-process verdict cache, and the phase names that carry each verdict home;
- :mod:`~eugo_lab.jit.verdicts` (driver side, pure): the verdicts read back from a trace.

Numba is imported only when a trial compiles.
"""
