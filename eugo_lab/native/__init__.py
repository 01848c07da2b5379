"""Recording a cell that uses an engine's own API (Dask's ``distributed.Client``, Ray) into a Trace.

``%%eugo`` understands ``eugo_lab.hpc`` through its runtime's recorder. A cell written with
Dask's futures (``client.submit``, ``client.map``, ``gather``, ``as_completed``, ``dask.compute``)
never touches that runtime, so these modules read the engine's own records instead (Dask: a
worker plugin's log of each task's transitions and a record of the driver's blocking calls)
and write them through the same :class:`~eugo_lab.tracing.recorder.Recorder` into the same
:class:`~eugo_lab.tracing.trace.Trace`. The analyses, findings and displays then work unchanged.

What an engine does not report is written into ``trace.meta["not_recorded"]`` in words, never
filled with a guess.
"""
