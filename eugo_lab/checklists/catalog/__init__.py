"""The four checklists, in the order the course page lists them (importing this module registers them)."""

from __future__ import annotations

from eugo_lab.checklists.catalog.cost import COST
from eugo_lab.checklists.catalog.ml import ML
from eugo_lab.checklists.catalog.readiness import READINESS
from eugo_lab.checklists.catalog.tuning import TUNING

CHECKLISTS = (READINESS, TUNING, COST, ML)

__all__ = ["CHECKLISTS"]
