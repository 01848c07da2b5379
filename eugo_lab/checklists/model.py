"""What a checklist is: items as data, the result of measuring one, and the registry of the checklists.

An :class:`Item` is an id, the sentence the learner ticks, why it matters and, when the
runtime can check it, a measurement: a function of the :class:`~eugo_lab.checklists.subject.Subject`
(the learner's function, arguments, trace and the running runtime) returning ``(ok, evidence)``.
A :class:`Result` is one item measured; :class:`Results` all of a checklist's, with a
deterministic text form.
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eugo_lab.renderable import Rendered, TextRepr

if TYPE_CHECKING:
    from eugo_lab.checklists.subject import Subject

#: A measurement: ``(ok, evidence)``; ``ok`` is None when it cannot be measured with what was given.
Measurement = Callable[["Subject"], "tuple[bool | None, str]"]


class ChecklistError(ValueError):
    """Bad input to a checklist: an unknown name or item, a value that is not a function, a wrong trace."""


@dataclass(frozen=True)
class Item:
    """One thing to check: ``id`` (stable: the progress store keys on it), ``text``, ``why``, ``measure``."""

    id: str
    text: str
    why: str
    measure: Measurement | None = None
    needs: str = ""  # what the measurement reads ("fn", "trace", "runtime", ...), for the button's tooltip

    @property
    def measurable(self) -> bool:
        """True when the runtime can check this item itself."""
        return self.measure is not None


@dataclass(frozen=True)
class Checklist:
    """A named list of items, with the title and one-line purpose the course page gives it."""

    id: str
    title: str
    purpose: str
    items: tuple[Item, ...]
    aliases: tuple[str, ...] = ()
    order: int = 0  # its place on the course page: all_checklists() lists them by it

    def item(self, item_id: str) -> Item:
        """The item ``item_id``; :class:`ChecklistError` listing the valid ids otherwise."""
        for it in self.items:
            if it.id == item_id:
                return it
        raise ChecklistError(f"the {self.title} has no item {item_id!r}; its items are: "
                             f"{', '.join(i.id for i in self.items)}")


@dataclass(frozen=True)
class Result:
    """One item after measuring: ``ok`` True/False, None when not measurable (or not measured), and why."""

    item: Item
    ok: bool | None
    evidence: str

    @property
    def id(self) -> str:
        """The item's id."""
        return self.item.id

    @property
    def mark(self) -> str:
        """``[x]`` ok, ``[ ]`` not ok, ``[?]`` not measured."""
        return {True: "[x]", False: "[ ]", None: "[?]"}[self.ok]

    def to_text(self) -> str:
        """``[x] id: text`` and, indented, the evidence."""
        tail = f"\n      {self.evidence}" if self.evidence else ""
        return f"{self.mark} {self.id}: {self.item.text}{tail}"


@dataclass(frozen=True, repr=False)
class Results(TextRepr, Rendered):
    """Every item of one checklist measured (iterable; ``results["item-id"]`` for one)."""

    checklist: Checklist
    results: tuple[Result, ...]
    notes: tuple[str, ...] = field(default=())

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, item_id: str) -> Result:
        for r in self.results:
            if r.id == item_id:
                return r
        self.checklist.item(item_id)  # raises with the valid ids
        raise KeyError(item_id)  # pragma: no cover - item() raised

    def verdicts(self) -> str:
        """One line per item: ``id: yes|no|not measured`` (no numbers: the same run gives the same text)."""
        word = {True: "yes", False: "no", None: "not measured"}
        return "\n".join(f"{r.id}: {word[r.ok]}" for r in self.results)

    def to_text(self) -> str:
        """The title, each item with its mark and evidence, and any note."""
        done = sum(r.ok is True for r in self.results)
        lines = [f"{self.checklist.title}: {done} of {len(self.results)} ok"]
        lines += [r.to_text() for r in self.results]
        lines += self.notes
        return "\n".join(lines)

    def to_html(self) -> str:
        """The results as an HTML table, every string escaped."""
        rows = "".join(
            f"<tr><td>{html.escape(r.mark)}</td><td><code>{html.escape(r.id)}</code></td>"
            f"<td>{html.escape(r.item.text)}</td><td>{html.escape(r.evidence)}</td></tr>" for r in self.results)
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return (f"<div class='eugo-checklist-results'><b>{html.escape(self.checklist.title)}</b>"
                f"<table>{rows}</table>{notes}</div>")


_REGISTRY: dict[str, Checklist] = {}


def register(checklist: Checklist) -> Checklist:
    """Add a checklist (its id and aliases must be new)."""
    for key in (checklist.id, *checklist.aliases):
        if key in _REGISTRY:
            raise ValueError(f"checklist name {key!r} is taken")
        _REGISTRY[key] = checklist
    return checklist


def all_checklists() -> list[Checklist]:
    """Every checklist of the catalog, in course-page order (their ``order``, then id)."""
    _load_catalog()
    unique = {c.id: c for c in _REGISTRY.values()}  # aliases point at the same checklist
    return sorted(unique.values(), key=lambda c: (c.order, c.id))


def get(name: str) -> Checklist:
    """The checklist called ``name`` (its id or a short alias); a did-you-mean error for anything else."""
    _load_catalog()
    if not isinstance(name, str):
        raise ChecklistError(f"a checklist name is a string, got {type(name).__name__}; "
                             f"choose one of: {', '.join(_names())}")
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    if key in _REGISTRY:
        return _REGISTRY[key]
    close = difflib.get_close_matches(key, list(_REGISTRY), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ChecklistError(f"no checklist called {name!r}; {hint}the checklists are: {', '.join(_names())}")


def _load_catalog() -> None:
    """Register every checklist (imported lazily: the catalog's modules import this one)."""
    from eugo_lab.checklists import catalog

    catalog.load()


def _names() -> list[str]:
    """Every valid name: each checklist's id with its short aliases."""
    return [f"{c.id} ({', '.join(c.aliases)})" if c.aliases else c.id for c in all_checklists()]
