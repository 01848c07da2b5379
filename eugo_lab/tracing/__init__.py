"""Recording what ran where: the live :class:`Recorder` and the immutable :class:`Trace`."""

from eugo_lab.tracing.recorder import BlockEvent, Recorder, TaskEvent

__all__ = ["Recorder", "TaskEvent", "BlockEvent", "Trace"]


def __getattr__(name: str):  # NumPy loads only when a Trace is needed
    if name == "Trace":
        from eugo_lab.tracing.trace import Trace

        return Trace
    raise AttributeError(name)
