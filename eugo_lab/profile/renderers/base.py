"""What every profile renderer shares: the options it is made with, and how it names a place in the code.

A renderer is made once with its options and turns a :class:`~eugo_lab.profile.model.Profile`
into a string (:meth:`Renderer.render`), as pyinstrument's renderers turn its session.
Nothing here computes a statistic: the model does.
"""

from __future__ import annotations

from collections.abc import Callable

from eugo_lab.profile.model import Profile

#: Rows of each table: enough to see where the time goes, short enough to read.
FUNCTIONS = 8
LINES = 8

#: Rewrites ``path:line`` into the name a reader knows it by (a notebook gives its cells'
#: code names like ``Cell In[2], line 7``); the display layer passes one, the profile never asks IPython.
SourceLabel = Callable[[str], str]


class Renderer:
    """Turns a :class:`Profile` into one string; ``functions``/``lines``: rows of the hot tables."""

    def __init__(self, functions: int = FUNCTIONS, lines: int = LINES, source_label: SourceLabel | None = None):
        self.functions = functions
        self.lines = lines
        self.source_label = source_label

    def render(self, p: Profile) -> str:
        """The rendered profile."""
        raise NotImplementedError

    def where(self, file: str, path: str, line: int) -> str:
        """``file:line``, or the notebook's name for a cell's code (``Cell In[2], line 7``) when it has one."""
        label = self.source_label(f"{path}:{line}") if path and self.source_label is not None else ""
        return label if label.startswith("Cell In[") else f"{file}:{line}"
