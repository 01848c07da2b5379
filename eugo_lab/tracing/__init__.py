"""Recording what ran where: the live :class:`Recorder` and the immutable :class:`Trace`."""

__all__ = ["Recorder", "TaskEvent", "BlockEvent", "Trace"]


def __getattr__(name: str):  # noqa: ANN202 - PEP 562 hook
    # Nothing loads with the package itself, so a worker that needs only a small module of it
    # (the trace row's layout) does not import the recorder too: with dataclasses, inspect and
    # socket that was ~10 ms of a local-pool worker's CPU before its hello. NumPy loads only
    # when a Trace is needed.
    if name in ("Recorder", "TaskEvent", "BlockEvent"):
        from eugo_lab.tracing import recorder

        return getattr(recorder, name)
    if name == "Trace":
        from eugo_lab.tracing.trace import Trace

        return Trace
    raise AttributeError(name)
