"""What ``%%eugo --optimize`` did: every automatic optimization of a run (JIT, batching, thread guard), as data.

- :mod:`~eugo_lab.optimizations.report`: :class:`~eugo_lab.optimizations.report.OptimizationReport`,
  built from the run's trace, the thread guard's plan and the batching counters;
  ``eugo_lab.render.optimizations`` draws it.
"""
