"""Ticks in the learner's progress store (``checklists`` key), shared with the exercises and the server extension.

Layout, under ``store["checklists"]``::

    {"workload-readiness": {"task-size": {"ticked": true, "how": "measured",
                                          "evidence": "one call takes 0.8 s ...", "when": "2026-12-01T09:30:00+00:00"}}}

Every change goes through :func:`eugo_lab.progress.update` (read-modify-write under
the store's lock, written atomically), so a kernel and the JupyterLab panel ticking at once lose nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eugo_lab import progress

MEASURED, MANUAL = "measured", "manual"


def ticks(checklist_id: str, store: dict[str, Any] | None = None, path: Path | None = None) -> dict[str, dict]:
    """``{item id: entry}`` for one checklist (entries as in the module docstring; missing: never ticked)."""
    store = store if store is not None else progress.load(path)
    found = store.get("checklists", {}).get(checklist_id, {})
    return {k: dict(v) for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}


def tick(checklist_id: str, item_id: str, ticked: bool, evidence: str = "", how: str = MANUAL,
         path: Path | None = None) -> dict[str, Any]:
    """Save one item's state (``ticked``, with the evidence when it was measured); returns the entry."""
    return tick_many(checklist_id, {item_id: (ticked, evidence)}, how, path)[item_id]


def tick_many(checklist_id: str, states: dict[str, tuple[bool, str]], how: str = MANUAL,
              path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Save several items' ``(ticked, evidence)`` in one write (a whole measured checklist); returns the entries."""
    if how not in (MEASURED, MANUAL):
        raise ValueError(f"how must be {MEASURED!r} or {MANUAL!r}, got {how!r}")
    when = progress.now()
    entries = {item_id: {"ticked": bool(ticked), "how": how, "evidence": str(evidence), "when": when}
               for item_id, (ticked, evidence) in states.items()}

    def change(data: dict[str, Any]) -> None:
        lists = data.setdefault("checklists", {})
        mine = lists.get(checklist_id)
        if not isinstance(mine, dict):
            mine = lists[checklist_id] = {}
        mine.update(entries)

    if entries:
        progress.update(change, path)
    return entries
