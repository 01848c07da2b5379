"""The one error of recording a cell on a smaller copy of its engine (``%%eugo --compare``/``--scaling``)."""

from __future__ import annotations


class NotComparable(RuntimeError):
    """The cell cannot be measured truthfully on another number of task slots (the message says why and what to do)."""
