"""``%eugo exercises``: every exercise with its lesson, the learner's status and the hints taken, as text and HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from eugo_lab import progress
from eugo_lab.exercises import catalog


@dataclass(frozen=True)
class Row:
    """One exercise in the listing."""

    id: str
    title: str
    lesson: str
    status: str  # passed | not yet | not tried
    hints: int = 0  # hint tiers %eugo hint showed for this exercise, over all its attempts


def rows(store: dict[str, Any] | None = None) -> list[Row]:
    """Every exercise in course order with its status from ``store`` (default: the progress file)."""
    store = store if store is not None else progress.load()
    saved = store.get("exercises", {})
    return [Row(e.id, e.title, e.lesson, progress.status(e.id, store), progress.hints_taken(saved.get(e.id)))
            for e in catalog.all_exercises()]


def _hints(n: int) -> str:
    return f"; {n} hint{'s' if n != 1 else ''} taken" if n else ""


def listing_text(found: list[Row]) -> str:
    """A fixed-width table: status, id, title, lesson; first line counts the passes."""
    done = sum(r.status == progress.PASSED for r in found)
    w_id = max((len(r.id) for r in found), default=2)
    w_st = max(len(progress.NOT_TRIED), len(progress.NOT_YET))
    lines = [f"Exercises: {done} of {len(found)} passed"]
    for r in found:
        lines.append(f"  {r.status:<{w_st}}  {r.id:<{w_id}}  {r.title} ({r.lesson}){_hints(r.hints)}")
    lines.append("Run an exercise cell (%%eugo --exercise ID) to check your solution; %eugo hint ID helps with "
                 "one that is not yet passed.")
    return "\n".join(lines)


def listing_html(found: list[Row]) -> str:
    """The same table in HTML (every string escaped)."""
    done = sum(r.status == progress.PASSED for r in found)
    body = "".join(
        f"<tr class='eugo-exercise-{html.escape(r.status.replace(' ', '-'))}'><td>{html.escape(r.status)}</td>"
        f"<td><code>{html.escape(r.id)}</code></td><td>{html.escape(r.title)}</td>"
        f"<td>{html.escape(r.lesson)}</td><td>{r.hints}</td></tr>" for r in found)
    return (f"<div class='eugo-exercises'><p>Exercises: {done} of {len(found)} passed</p>"
            "<table><tr><th>status</th><th>exercise</th><th>title</th><th>lesson</th><th>hints taken</th></tr>"
            f"{body}</table></div>")
