"""Profiling tasks: where a program spends its time, sampled inside every task on every worker.

- :mod:`~eugo_lab.profile.collect` (worker side): the sampler and the serialized per-task session;
- :mod:`~eugo_lab.profile.model` (driver side, pure): :class:`Profile`, every task's samples merged;
- :mod:`~eugo_lab.profile.text`, :mod:`~eugo_lab.profile.html`: the renderers;
- :mod:`~eugo_lab.profile.region`: ``hpc.profile()``, the context manager.

Nothing heavy loads with this package: worker processes import ``collect`` at start-up.
"""
