"""The course vocabulary as data: ``lookup("straggler")`` returns the entry, or raises with close matches.

Definitions live in ``terms.json`` (course content, editable without touching code);
this module only finds entries. Findings in analysis reports name a ``term`` that
``%eugo glossary TERM`` explains.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_DATA = Path(__file__).with_name("terms.json")


@dataclass(frozen=True)
class Entry:
    """One vocabulary term: its name, definition, other spellings and related terms."""

    term: str
    definition: str
    aliases: tuple[str, ...] = ()
    see_also: tuple[str, ...] = ()
    #: The lesson that shows the term at work, relative to ``courses/`` (empty: the vocabulary's own demo).
    lesson: str = ""

    def to_text(self) -> str:
        """Plain text (deterministic: it is course data)."""
        lines = [f"{self.term}: {self.definition}"]
        if self.see_also:
            lines.append(f"See also: {', '.join(self.see_also)}")
        if self.lesson:
            lines.append(f"Lesson: courses/{self.lesson}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython's printer
        p.text(self.to_text())

    def _repr_html_(self) -> str:
        also = ""
        if self.see_also:
            also = f"<div><i>See also:</i> {html.escape(', '.join(self.see_also))}</div>"
        if self.lesson:
            also += f"<div><i>Lesson:</i> <code>courses/{html.escape(self.lesson)}</code></div>"
        return (f"<div class='eugo-glossary'><b>{html.escape(self.term)}</b>: "
                f"{html.escape(self.definition)}{also}</div>")


class UnknownTermError(KeyError):
    """A term that is not in the vocabulary; ``suggestions`` holds close matches."""

    def __init__(self, term: str, suggestions: list[str]):
        self.term = term
        self.suggestions = suggestions
        hint = f"Did you mean: {', '.join(suggestions)}?" if suggestions else f"Known terms: {', '.join(terms())}"
        super().__init__(f"no glossary entry for {term!r}. {hint}")

    def __str__(self) -> str:
        return self.args[0]


def _key(s: str) -> str:
    """Normalise a spelling: case, punctuation and spacing do not matter ("I/O bound" == "io-bound")."""
    return re.sub(r"[^a-z0-9]+", "", s.lower())


@lru_cache(maxsize=1)
def _entries() -> tuple[Entry, ...]:
    data = json.loads(_DATA.read_text(encoding="utf-8"))
    return tuple(Entry(term=d["term"], definition=d["definition"], aliases=tuple(d.get("aliases", ())),
                       see_also=tuple(d.get("see_also", ())), lesson=d.get("lesson", "")) for d in data["terms"])


@lru_cache(maxsize=1)
def _index() -> dict[str, Entry]:
    idx: dict[str, Entry] = {}
    for e in _entries():
        for name in (e.term, *e.aliases):
            idx.setdefault(_key(name), e)
    return idx


def terms() -> list[str]:
    """Every term, in course order."""
    return [e.term for e in _entries()]


def close_matches(term: str, n: int = 3) -> list[str]:
    """Terms spelled like ``term`` or containing it (for "did you mean")."""
    k = _key(term)
    keys = _index()
    found: list[str] = []
    for cand in difflib.get_close_matches(k, list(keys), n=n * 2, cutoff=0.75):
        found.append(keys[cand].term)
    if k:
        found += [e.term for kk, e in keys.items() if k in kk or (len(kk) > 2 and kk in k)]
    return list(dict.fromkeys(found))[:n]


def lookup(term: str) -> Entry:
    """The entry for ``term`` (any alias or spelling); :class:`UnknownTermError` lists close matches."""
    e = _index().get(_key(term))
    if e is None:
        raise UnknownTermError(term, close_matches(term))
    return e


__all__ = ["Entry", "UnknownTermError", "lookup", "terms", "close_matches"]
