"""The interactive checklist: a checkbox per item, a Measure button per measurable one, ticks saved.

:class:`ChecklistView` holds the state (ticks from the progress store, the evidence of the
last measurement) and draws it three ways: ipywidgets (checkboxes, buttons, the evidence
under each item, every user string escaped), a deterministic ``text/plain`` (marks and item
texts, no numbers: what nbval compares) and, with ``precise=True``, the same text with the
evidence (what a terminal prints).

A button measures its item on the inputs the view was made with (``fn``, ``args``,
``kwargs``, ``trace``; without ``trace``, the last trace at the moment it is pressed), ticks
it when ok, unticks it when not, and saves that with the evidence. Ticking a box by hand
saves it too. Ticks live in the per-user progress store, so they survive a kernel restart.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from eugo_lab.checklists import store
from eugo_lab.checklists.measuring import measure_item, save
from eugo_lab.checklists.model import Checklist, Result, get
from eugo_lab.checklists.subject import Subject
from eugo_lab.renderable import TextRepr


class ChecklistView(TextRepr):
    """One checklist on screen; ``view.measure(item_id)`` is what its button does."""

    def __init__(self, name: str, fn: Any = None, args: Any = (), kwargs: Any = None, trace: Any = None, *,
                 deadline: float | None = None, price: float | None = None, path: Path | None = None):
        self.checklist: Checklist = get(name)
        # Checked now, so bad input fails here with a clear message, not later inside a button.
        Subject(fn, args, kwargs, trace, deadline=deadline, price=price)
        self._inputs = dict(fn=fn, args=args, kwargs=kwargs, trace=trace, deadline=deadline, price=price)
        self.path = path
        saved = store.ticks(self.checklist.id, path=path)
        self.ticked = {it.id: bool(saved.get(it.id, {}).get("ticked", False)) for it in self.checklist.items}
        self.evidence = {it.id: str(saved.get(it.id, {}).get("evidence", "")) for it in self.checklist.items}
        self._widget: Any = None
        self._rows: dict[str, Any] = {}
        self._quiet = False  # True while the view itself sets a checkbox (not a manual tick)

    # -- what the buttons and boxes do ----------------------------------------------------------------
    def measure(self, item_id: str) -> Result:
        """Measure one item now, tick or untick it by the result, save it, and update the widgets."""
        item = self.checklist.item(item_id)
        if not item.measurable:
            return Result(item, None, "tick this one yourself: the runtime cannot check it")
        result = measure_item(self.checklist, item, Subject(**self._inputs))
        self.evidence[item_id] = result.evidence
        if result.ok is not None:
            self.ticked[item_id] = result.ok
        save(self.checklist, [result], self.path)
        self._refresh(item_id)
        return result

    def measure_all(self) -> list[Result]:
        """Every measurable item, in order (what the Measure all button does)."""
        return [self.measure(it.id) for it in self.checklist.items if it.measurable]

    def set_tick(self, item_id: str, ticked: bool) -> None:
        """Tick or untick by hand (a checkbox click): saved, with no evidence."""
        self.checklist.item(item_id)
        self.ticked[item_id] = bool(ticked)
        store.tick(self.checklist.id, item_id, bool(ticked), "", store.MANUAL, path=self.path)
        self._refresh(item_id)

    # -- text ----------------------------------------------------------------------------------------
    def to_text(self, precise: bool = False) -> str:
        """Title, purpose and one line per item (``[x]`` ticked); ``precise`` adds the evidence."""
        c = self.checklist
        lines = [c.title, c.purpose]
        for it in c.items:
            mark = "[x]" if self.ticked[it.id] else "[ ]"
            how = "measurable" if it.measurable else "tick it yourself"
            lines.append(f"  {mark} {it.id}: {it.text} ({how})")
            if precise and self.evidence[it.id]:
                lines.append(f"        {self.evidence[it.id]}")
        done = sum(self.ticked.values())
        lines.append(f"{done} of {len(c.items)} ticked. Measure checks an item on your function, trace or "
                     "runtime; ticks are saved to your progress.")
        return "\n".join(lines)

    def to_html(self) -> str:
        """A static HTML form of the same (every string escaped), for where widgets cannot render."""
        c = self.checklist
        rows = []
        for it in c.items:
            mark = "&#9745;" if self.ticked[it.id] else "&#9744;"
            ev = f"<div class='eugo-evidence'>{html.escape(self.evidence[it.id])}</div>" if self.evidence[it.id] else ""
            rows.append(f"<li>{mark} <b>{html.escape(it.text)}</b> <code>{html.escape(it.id)}</code>"
                        f"<div class='eugo-why'>{html.escape(it.why)}</div>{ev}</li>")
        return (f"<div class='eugo-checklist'><h4>{html.escape(c.title)}</h4><p>{html.escape(c.purpose)}</p>"
                f"<ul>{''.join(rows)}</ul></div>")

    # -- widgets -------------------------------------------------------------------------------------
    @property
    def widget(self) -> Any:
        """The ipywidgets form (built on first use)."""
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def row(self, item_id: str) -> dict[str, Any]:
        """The widgets of one item: ``checkbox``, ``button`` (None for a manual item), ``evidence``, ``why``."""
        self.widget  # noqa: B018 - builds the rows
        return self._rows[item_id]

    def _build(self) -> Any:
        try:
            import ipywidgets as w
        except ImportError as exc:
            raise ImportError('the interactive checklist needs ipywidgets: pip install "eugo-lab[lab]" '
                              "(measure() works without it)") from exc
        c = self.checklist
        parts: list[Any] = [w.HTML(f"<h4>{html.escape(c.title)}</h4><p>{html.escape(c.purpose)}</p>")]
        for it in c.items:
            box = w.Checkbox(value=self.ticked[it.id], description=it.text, indent=False,
                             layout=w.Layout(width="auto"))
            box.observe(lambda change, i=it.id: self._on_box(i, change["new"]), names="value")
            button = None
            line: list[Any] = [box]
            if it.measurable:
                button = w.Button(description="Measure", tooltip=f"measure it on your {it.needs}",
                                  layout=w.Layout(width="7em"))
                button.on_click(lambda _b, i=it.id: self.measure(i))
                line.insert(0, button)
            why = w.HTML(f"<div style='margin-left:8em;color:#555'>{html.escape(it.why)}</div>")
            evidence = w.HTML(self._evidence_html(it.id))
            self._rows[it.id] = {"checkbox": box, "button": button, "why": why, "evidence": evidence}
            parts += [w.HBox(line), why, evidence]
        everything = w.Button(description="Measure all", button_style="info")
        everything.on_click(lambda _b: self.measure_all())
        parts.append(everything)
        return w.VBox(parts)

    def _evidence_html(self, item_id: str) -> str:
        ev = self.evidence[item_id]
        return f"<div style='margin-left:8em'><i>{html.escape(ev)}</i></div>" if ev else ""

    def _on_box(self, item_id: str, value: bool) -> None:
        if not self._quiet:
            self.set_tick(item_id, value)

    def _refresh(self, item_id: str) -> None:
        row = self._rows.get(item_id)
        if row is None:
            return
        self._quiet = True
        try:
            row["checkbox"].value = self.ticked[item_id]
        finally:
            self._quiet = False
        row["evidence"].value = self._evidence_html(item_id)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        try:
            data = dict(self.widget._repr_mimebundle_() or {})
        except ImportError:
            data = {"text/html": self.to_html()}
        data["text/plain"] = self.to_text()
        return data


def show(name: str, fn: Any = None, args: Any = (), kwargs: Any = None, trace: Any = None, *,
         deadline: float | None = None, price: float | None = None) -> ChecklistView:
    """The interactive checklist ``name`` for these inputs (a notebook displays the returned view).

    Same inputs as :func:`eugo_lab.checklists.measure`; ``%eugo checklist NAME`` calls this.
    """
    return ChecklistView(name, fn, args, kwargs, trace, deadline=deadline, price=price)


#: ``%eugo checklist NAME`` options: each names a variable of the notebook (never an expression).
LINE_OPTIONS = ("--fn", "--args", "--kwargs", "--trace")
LINE_USAGE = "%eugo checklist NAME [--fn VAR] [--args VAR] [--kwargs VAR] [--trace VAR]"


def from_line(words: list[str], namespace: dict[str, Any]) -> ChecklistView:
    """The view for ``%eugo checklist`` words; options name variables in ``namespace`` (looked up, not evaluated)."""
    from eugo_lab.checklists.model import ChecklistError, all_checklists

    if not words:
        names = ", ".join(c.id for c in all_checklists())
        raise ChecklistError(f"which checklist? {LINE_USAGE}; the checklists are: {names}")
    name, rest = words[0], words[1:]
    found: dict[str, Any] = {}
    if len(rest) % 2:
        raise ChecklistError(f"each option takes a variable name: {LINE_USAGE}, got {' '.join(rest)!r}")
    for opt, var in zip(rest[::2], rest[1::2]):
        if opt not in LINE_OPTIONS:
            raise ChecklistError(f"unknown option {opt!r}; valid options: {', '.join(LINE_OPTIONS)} ({LINE_USAGE})")
        if not var.isidentifier() or var not in namespace:
            raise ChecklistError(f"{opt} {var}: no variable called {var!r} in this notebook; define it first "
                                 "(options name variables, not expressions)")
        found[opt[2:]] = namespace[var]
    args = found.get("args", ())
    if not isinstance(args, (tuple, list)):
        args = (args,)  # one variable: the call's single argument
    return ChecklistView(name, found.get("fn"), args, found.get("kwargs"), found.get("trace"))
