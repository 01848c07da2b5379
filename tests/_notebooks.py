"""Reading the course notebooks as the tests of ``courses/`` do: the JSON as saved, a cell's source as one string."""

from __future__ import annotations

import json
from pathlib import Path


def read_notebook(path: Path) -> dict:
    """The notebook at ``path``, its JSON as saved."""
    return json.loads(path.read_text(encoding="utf-8"))


def cell_source(cell: dict) -> str:
    """A cell's source as one string (nbformat saves it as a list of lines or as one string)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src
