"""Saving an object that has ``to_dict()`` / ``from_dict()`` as one JSON file, and reading it back.

A trace and a profile are both written this way (``trace.save(path)``, ``Trace.load(path)``),
so a run recorded on one machine can be analysed or drawn on another. A leaf: it imports
nothing of ``eugo_lab``.
"""

from __future__ import annotations

import json
from typing import Self


class JsonFile:
    """Mixin for a class with ``to_dict()`` and a ``from_dict()`` classmethod: ``save(path)`` and ``load(path)``."""

    def save(self, path: str) -> None:
        """Write this object as JSON (``load`` reads it back)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f)  # type: ignore[attr-defined]

    @classmethod
    def load(cls, path: str) -> Self:
        """Read an object written by :meth:`save`."""
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))  # type: ignore[attr-defined]
