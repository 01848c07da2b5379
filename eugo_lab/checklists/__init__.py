"""The four checklists of the course page, as data plus the code that measures them on your own work.

- :func:`measure` ``(NAME, fn=None, args=(), kwargs=None, trace=None)`` -> :class:`Results`:
  every item with ``ok`` (True, False, None: not measurable) and ``evidence`` in your numbers;
- :func:`show` (and ``%eugo checklist NAME``): the interactive checklist, checkboxes and a
  Measure button per measurable item, ticks saved to your progress store;
- :func:`get`, :func:`all_checklists`: the checklists themselves (``Checklist.items``).

Names: ``workload-readiness`` (``readiness``), ``performance-tuning`` (``tuning``),
``cost-optimization`` (``cost``), ``quick-guide-ml-engineer`` (``ml``).

Names load on first use (PEP 562): a worker that runs one of the checklists' probe tasks
imports only :mod:`eugo_lab.checklists.probes`.
"""

from __future__ import annotations

from eugo_lab import lazy

_EXPORTS = {
    "measure": "eugo_lab.checklists.measuring",
    "show": "eugo_lab.checklists.view",
    "ChecklistView": "eugo_lab.checklists.view",
    "get": "eugo_lab.checklists.model",
    "all_checklists": "eugo_lab.checklists.model",
    "Checklist": "eugo_lab.checklists.model",
    "ChecklistError": "eugo_lab.checklists.model",
    "Item": "eugo_lab.checklists.model",
    "Result": "eugo_lab.checklists.model",
    "Results": "eugo_lab.checklists.model",
    "tick": "eugo_lab.checklists.store",
    "ticks": "eugo_lab.checklists.store",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
