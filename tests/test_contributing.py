"""The contributor's guide (CONTRIBUTING.md) names files and the names in them: each must exist as named.

A recipe that points at a moved file or a renamed registry sends the next engineer the wrong way; this keeps
the guide's pointers true as the house changes (the recipes themselves are followed by the tests they name).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDE = (REPO / "CONTRIBUTING.md").read_text()
ROOTS = ("eugo_lab/", "tests/", "courses/", "benchmarks/")


def _paths() -> list[str]:
    """Every `path` in the guide that starts at the repository's root, without placeholders such as <name>."""
    found = {p for p in re.findall(r"`([^`\s]+)`", GUIDE) if p.startswith(ROOTS) and "<" not in p}
    return sorted(found)


def test_every_file_the_guide_names_exists():
    paths = _paths()
    assert len(paths) > 30  # the guide names the house's files; an empty list would prove nothing
    missing = [p for p in paths if not (REPO / p).exists()]
    assert missing == [], f"CONTRIBUTING.md names files that do not exist: {missing}"


def test_every_name_the_guide_places_in_a_file_is_there():
    """`NAME` in `FILE` and `FILE`'s `NAME`: NAME (its last dotted part) is defined or used in FILE."""
    pairs = re.findall(r"`([\w.]+)` in `([\w/]+\.py)`", GUIDE)
    pairs += [(name, path) for path, name in re.findall(r"`([\w/]+\.py)`'s `([\w.]+)`", GUIDE)]
    pairs = [(n, p) for n, p in pairs if not n.endswith(".py")]
    assert len(pairs) >= 8
    absent = [(n, p) for n, p in pairs if not re.search(rf"\b{re.escape(n.split('.')[-1])}\b", (REPO / p).read_text())]
    assert absent == [], f"CONTRIBUTING.md places names where they are not: {absent}"
