"""BLAS/OpenMP thread limits in worker processes: cores ÷ workers threads each, unless the user chose.

- :mod:`~eugo_lab.threadguard.limits` (driver side): the limit, the workers' environment, the report line;
- :mod:`~eugo_lab.threadguard.variables` (both ends of a worker's start): the thread variables and
  ``apply_once()``, which a worker runs before its first task.

This package imports nothing: worker processes import ``variables`` at start-up, and every
module loaded on that path delays the first result.
"""
