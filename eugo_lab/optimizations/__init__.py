"""What the runtime's optimizations did in a run (JIT, batching, thread guard), as data: ``--optimize`` or automatic.

- :mod:`~eugo_lab.optimizations.report`: :class:`~eugo_lab.optimizations.report.OptimizationReport`,
  built from the run's trace, the thread guard's plan and the batching counters;
  ``eugo_lab.render.optimizations`` draws it.
"""
