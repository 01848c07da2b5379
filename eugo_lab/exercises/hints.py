"""``%eugo hint [ID]``: the next tier of help for the learner's last attempt at an exercise.

A ``not yet`` says what the run did, in words; the first ``%eugo hint ID`` says what to change
(tier 1, words), the second shows the code (tier 2). Which tiers answer the attempt depends on
the mistake its verdict named, saved with the attempt in the progress store, and so is the
count of tiers shown (:func:`eugo_lab.progress.record_hint`): a new kernel continues where the
last one stopped, and ``%eugo exercises`` and the panel show how many hints were taken.
Without an ID, the exercise of the last exercise cell this kernel graded.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from eugo_lab import progress
from eugo_lab.exercises import base, catalog, last_verdict
from eugo_lab.renderable import Rendered

#: How many tiers every exercise's hints have: what to change, in words, then the code.
TIERS = 2


class HintError(ValueError):
    """``%eugo hint`` cannot say which exercise is meant (the message says what to run)."""


@dataclass(frozen=True)
class Shown(Rendered):
    """What ``%eugo hint`` shows: a tier of an exercise's hint, or why there is none (``tier`` 0).

    ``repeat``: every tier was shown before, so the last one is shown again.
    """

    exercise_id: str
    tier: int
    body: str
    repeat: bool = False

    @property
    def heading(self) -> str:
        """``hint 1 of 2 for ID: what to change`` / ``hint 2 of 2 for ID: the code``; the note when no tier."""
        if not self.tier:
            return f"no hint for {self.exercise_id}"
        what = "what to change" if self.tier == 1 else "the code"
        again = " (shown before: there are only two)" if self.repeat else ""
        return f"hint {self.tier} of {TIERS} for {self.exercise_id}{again}: {what}"

    @property
    def footer(self) -> str:
        """The next step after this tier."""
        if self.tier == 1:
            return f"run %eugo hint {self.exercise_id} again for the code."
        if self.tier == TIERS:
            return f"then run the exercise cell again (%%eugo --exercise {self.exercise_id})."
        return ""

    def to_text(self) -> str:
        """The heading, the tier (code indented by four spaces), the next step."""
        if not self.tier:
            return self.body
        indent = "    " if self.tier == TIERS else "  "
        body = "\n".join(indent + line if line else "" for line in self.body.splitlines())
        return "\n".join(x for x in (self.heading, body, self.footer) if x)

    def __str__(self) -> str:
        return self.to_text()

    def to_html(self) -> str:
        """The same, every string escaped; the code in a ``<pre>``."""
        if not self.tier:
            return f"<div class='eugo-hint'><p>{html.escape(self.body)}</p></div>"
        body = (f"<pre><code>{html.escape(self.body)}</code></pre>" if self.tier == TIERS
                else f"<p>{html.escape(self.body)}</p>")
        return (f"<div class='eugo-hint eugo-hint-tier-{self.tier}'><p><b>{html.escape(self.heading)}</b></p>"
                f"{body}<p>{html.escape(self.footer)}</p></div>")


def which(exercise_id: str | None) -> base.Exercise:
    """The exercise ``exercise_id`` (unknown: the catalog's did-you-mean error), else the kernel's last graded one."""
    if exercise_id is not None:
        return catalog.get(exercise_id)
    verdict = last_verdict()
    if verdict is None:
        raise HintError("no exercise cell has been graded in this kernel yet: name the exercise (%eugo hint ID); "
                        "%eugo exercises lists them")
    return catalog.get(verdict.exercise_id)


def take(exercise_id: str | None = None) -> Shown:
    """Show the next tier for the last saved attempt at the exercise, and count it in the progress store."""
    ex = which(exercise_id)
    saved = progress.record_hint(ex.id, TIERS)
    if saved is None:
        return Shown(ex.id, 0, f"no attempt at {ex.id} is saved yet: run its exercise cell (%%eugo --exercise "
                               f"{ex.id}) first; a hint answers what your run did.")
    last, counted = saved
    if last.get("status") != progress.NOT_YET:
        return Shown(ex.id, 0, f"your last attempt at {ex.id} passed: there is nothing to hint. "
                               "%eugo exercises shows every exercise and the hints you took.")
    mistake = last.get("mistake")
    # a key this version's exercise no longer has (an older store) gets the exercise's general tiers
    hint = ex.hint(mistake if isinstance(mistake, str) and mistake in ex.hints else None)
    tier = max(1, int(last["hints"]))
    return Shown(ex.id, tier, hint.tiers[tier - 1], repeat=not counted)
