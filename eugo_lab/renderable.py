"""The one interface every output of Eugo Lab renders through: ``to_text()`` and ``to_html()``.

A cell's summary, an analysis report, an exercise verdict, a checklist, a profile and the
GPU offload table are each a typed object with these two methods, so a notebook, a
terminal and a test all draw the same object the same way. ``to_text()`` is the
deterministic form (nbval compares it as ``text/plain``); ``to_html()`` escapes every
string that came from the user's code or data. :class:`Rendered` gives an object IPython's
``_repr_mimebundle_`` from the two.

At the package root (not in ``eugo_lab.render``) and importing nothing else of
``eugo_lab``: the analysis, exercises and checklists layers define renderable objects and
may not import the renderers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Renderable(Protocol):
    """An output: deterministic text and HTML of the same content."""

    def to_text(self) -> str:
        """Plain text, the same for the same content (no timings that vary run to run unless asked)."""
        ...

    def to_html(self) -> str:
        """HTML with every user-supplied string escaped."""
        ...


def mimebundle(obj: Renderable) -> dict[str, str]:
    """IPython's display bundle of ``obj``: ``{"text/plain": obj.to_text(), "text/html": obj.to_html()}``."""
    return {"text/plain": obj.to_text(), "text/html": obj.to_html()}


class Rendered:
    """Mixin for a :class:`Renderable`: IPython displays it as :func:`mimebundle` of itself."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return mimebundle(self)  # type: ignore[arg-type]


class TextRepr:
    """Mixin for a :class:`Renderable` whose ``repr()`` and IPython pretty form are its ``to_text()``.

    A dataclass using it sets ``repr=False``, or the generated ``__repr__`` would shadow this one.
    """

    def __repr__(self) -> str:
        return self.to_text()  # type: ignore[attr-defined]

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.to_text())  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Drawn(Rendered):
    """A data object (a ledger, a report) with the two renderer functions that draw it.

    ``text(data, precise)`` gives the text (``precise`` adds measured numbers), ``html(data)`` the HTML.
    """

    data: Any
    text: Callable[[Any, bool], str]
    html: Callable[[Any], str]

    def to_text(self, precise: bool = False) -> str:
        """``text(data, precise)``."""
        return self.text(self.data, precise)

    def to_html(self) -> str:
        """``html(data)``."""
        return self.html(self.data)
