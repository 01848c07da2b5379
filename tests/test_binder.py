"""Binder's image installs what the courses use: the lab, and Numba for the optimization and GPU courses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (the project supports 3.10, where it is missing)

ROOT = Path(__file__).resolve().parents[1]


def _installed_extras() -> set[str]:
    text = (ROOT / "binder" / "postBuild").read_text()
    found = re.findall(r'pip install[^\n]*"\.\[([a-z,\-]+)\]"', text)
    assert len(found) == 1, f"binder/postBuild should install the package once with its extras: {found}"
    return set(found[0].split(","))


def test_binder_installs_the_lab_and_numba_extras_that_exist():
    extras = _installed_extras()
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras <= set(declared), f"unknown extras in binder/postBuild: {extras - set(declared)}"
    assert {"lab", "optimize"} <= extras
    assert any(dep.startswith("numba") for dep in declared["optimize"])  # --optimize and the CUDA simulator
