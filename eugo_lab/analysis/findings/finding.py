"""The :class:`Finding` record every detector returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eugo_lab.units import fmt_seconds as fmt_s


@dataclass(frozen=True)
class Finding:
    """One thing the analysis noticed.

    ``code`` is a stable id, a :class:`~eugo_lab.analysis.findings.Code` (tests and UIs key
    on it), ``term`` the vocabulary term it illustrates, ``verdict`` one short sentence,
    ``evidence`` the numbers behind it, ``advice`` one concrete next step, ``related``
    further vocabulary terms the advice uses,
    ``severity`` one of ``"problem"``, ``"warning"``, ``"note"`` (a mistake whose fix would
    save only a few percent), ``"info"``.

    What fixing it is worth, from a replay of the trace with the mistake removed
    (:mod:`eugo_lab.analysis.whatif`): ``saves`` the predicted seconds saved, ``wall_after``
    the predicted wall time after the fix (``None`` for findings that are not mistakes,
    such as the speedup), ``fix`` the fix in a few words for the report's "Biggest win" line.
    """

    code: str
    term: str
    severity: str
    verdict: str
    advice: str
    evidence: dict[str, Any] = field(default_factory=dict)
    related: tuple[str, ...] = ()
    saves: float | None = None
    wall_after: float | None = None
    fix: str = ""

    def saving_text(self) -> str:
        """``saves 1.1 s: 3.4 s → 2.3 s predicted`` ('' when the finding has no fix to price)."""
        if self.saves is None or self.wall_after is None:
            return ""
        before = self.wall_after + self.saves
        if self.saves < 0.01 * before:  # a note: say so rather than print "saves 0 s: 1.8 s → 1.8 s"
            return f"saves almost nothing on this run (under 1% of {fmt_s(before)}, predicted)"
        return f"saves {fmt_s(self.saves)}: {fmt_s(before)} → {fmt_s(self.wall_after)} predicted"

    def to_text(self) -> str:
        """``[severity] Term: verdict``, the advice, and what the fix saves when it has a price."""
        saving = self.saving_text()
        tail = f"\n    {saving}" if saving else ""
        return f"[{self.severity}] {self.term}: {self.verdict}\n    -> {self.advice}{tail}"
