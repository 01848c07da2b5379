"""Profiling tasks: where a program spends its time, sampled inside every task on every worker.

Three layers, as in pyinstrument: collect -> model -> renderers.

- :mod:`~eugo_lab.profile.collect` (worker side): the sampler and the serialized per-task session;
- :mod:`~eugo_lab.profile.model` (driver side, pure): :class:`~eugo_lab.profile.model.Profile`,
  every task's samples merged;
- :mod:`~eugo_lab.profile.renderers`: ``TextRenderer`` and ``HTMLRenderer``, which take the model.

``hpc.profile()`` (the region) lives in the runtime, :mod:`eugo_lab.hpc.profiling`; showing a
profile in a notebook cell lives in the cell runner, :mod:`eugo_lab.cellrun.profile_display`.
Nothing heavy loads with this package: worker processes import ``collect`` at start-up.
"""
