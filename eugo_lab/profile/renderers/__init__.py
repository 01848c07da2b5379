"""Renderers of a merged :class:`~eugo_lab.profile.model.Profile`: each made with its options, each ``render(profile)``.

- :class:`~eugo_lab.profile.renderers.text.TextRenderer`: deterministic text (a notebook's ``text/plain``);
- :class:`~eugo_lab.profile.renderers.html.HTMLRenderer`: the icicle and the hot tables, self-contained HTML.

They read the model only; a notebook's names for its cells' code come in as ``source_label``.
"""

from eugo_lab.profile.renderers.base import Renderer
from eugo_lab.profile.renderers.html import HTMLRenderer
from eugo_lab.profile.renderers.text import TextRenderer

__all__ = ["HTMLRenderer", "Renderer", "TextRenderer"]
