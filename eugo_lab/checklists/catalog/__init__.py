"""The checklists, one module per checklist; loaded on first use (importing this package imports none of them).

A module registers its :class:`~eugo_lab.checklists.model.Checklist` with
:func:`~eugo_lab.checklists.model.register` when imported; the checklist's ``order`` is its
place on the course page. :func:`load` finds and imports every module of this package.
"""

from __future__ import annotations

from eugo_lab.discovery import import_submodules


def load() -> None:
    """Import every checklist module of this package (each registers its checklist); imports once."""
    import_submodules(__name__)
