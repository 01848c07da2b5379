"""The finding codes: one enumeration, each code produced by exactly one registered detector, no code spelled as text.

Read from the code itself (imports and syntax trees), never by searching text: a new
finding must add its member to :class:`Code` and its detector to the registry, and a
checklist or exercise that names a finding names it through :class:`Code`.
"""

from __future__ import annotations

import ast
import importlib
import json
from collections import Counter
from pathlib import Path

import pytest

from eugo_lab.analysis.findings import COST_REGISTRY, REGISTRY, Code
from eugo_lab.checklists.catalog.tuning import CODES
from eugo_lab.exercises.catalog import straggler

PKG = Path(__file__).resolve().parents[2] / "eugo_lab"
DETECTORS = REGISTRY + COST_REGISTRY


def test_every_code_belongs_to_exactly_one_registered_detector():
    declared = Counter(c for d in DETECTORS for c in d.codes)
    assert set(declared) == set(Code), set(Code) ^ set(declared)
    assert all(n == 1 for n in declared.values()), {c: n for c, n in declared.items() if n > 1}


def _produced(module) -> set[Code]:
    """The codes a module's source names other than in a comparison (``f.code == Code.X`` reads a finding)."""
    tree = ast.parse(Path(module.__file__).read_text())
    compared = {id(n) for c in ast.walk(tree) if isinstance(c, ast.Compare) for n in ast.walk(c)}
    return {Code[n.attr] for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "Code"
            and id(n) not in compared}


@pytest.mark.parametrize("module", sorted({d.find.__module__ for d in DETECTORS}))
def test_a_detector_module_builds_the_codes_its_detectors_declare(module):
    m = importlib.import_module(module)
    declared = {c for d in DETECTORS if d.find.__module__ == module for c in d.codes}
    assert _produced(m) == declared


def test_the_registry_runs_the_speedup_last_and_lists_it_first():
    leads = [d for d in REGISTRY if d.leads]
    assert [d.codes for d in leads] == [(Code.SPEEDUP,)] and REGISTRY[-1] is leads[0]


def test_a_code_reads_as_its_text_in_reports_and_json():
    # saved reports, the labextension and old notebooks compare codes as plain strings
    assert Code.BLOCKING == "blocking" and Code("io-bound-phase") is Code.IO_BOUND_PHASE
    assert str(Code.LONG_TAIL) == f"{Code.LONG_TAIL}" == "long-tail"
    assert json.dumps({"code": Code.TASKS_TOO_SMALL}) == '{"code": "tasks-too-small"}'


def test_checklists_and_exercises_name_findings_by_their_code():
    named = [c for cs in CODES.values() for c in cs] + list(straggler.TAIL_NAMES)
    assert named and all(isinstance(c, Code) for c in named), [c for c in named if not isinstance(c, Code)]


def _text_codes(path: Path, root: Path = PKG.parent) -> list[str]:
    """Where ``path`` spells a finding code as a string: ``x.finding("...")``, ``x.code == "..."`` (or ``in``
    a tuple of them) and ``Finding("...", ...)``."""
    values = {c.value for c in Code}
    tree = ast.parse(path.read_text(), str(path))

    def strings(node: ast.AST) -> list[str]:
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [e.value for e in elts if isinstance(e, ast.Constant) and e.value in values]

    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and n.args and (
                (isinstance(n.func, ast.Attribute) and n.func.attr == "finding")
                or (isinstance(n.func, ast.Name) and n.func.id == "Finding")):
            found += [f"{path.relative_to(root)}:{n.lineno} {s!r}" for s in strings(n.args[0])]
        elif isinstance(n, ast.Compare) and any(isinstance(x, ast.Attribute) and x.attr == "code"
                                                for x in (n.left, *n.comparators)):
            found += [f"{path.relative_to(root)}:{n.lineno} {s!r}" for c in (n.left, *n.comparators)
                      for s in strings(c)]
    return found


def test_no_finding_code_is_spelled_as_a_string_in_the_package():
    assert [hit for p in sorted(PKG.rglob("*.py")) for hit in _text_codes(p)] == []


def test_the_scan_sees_each_way_of_spelling_a_code(tmp_path):
    # The rule must be able to fail.
    bad = tmp_path / "eugo_lab" / "bad.py"
    bad.parent.mkdir()
    bad.write_text('r.finding("blocking")\nok = f.code in ("straggler", "x")\nFinding("speedup", "Speedup")\n'
                   'r.finding(Code.BLOCKING)\nitem = "contention"\n')
    assert _text_codes(bad, tmp_path) == ["eugo_lab/bad.py:1 'blocking'", "eugo_lab/bad.py:2 'straggler'",
                                "eugo_lab/bad.py:3 'speedup'"]
