"""The per-operation GPU offload report of a ``%%eugo --gpu`` cell: text and HTML.

Input is an :class:`eugo_lab.offload.ledger.Ledger`; its rows write their own times, nothing is computed here.
``precise=False`` (``text/plain`` of the rich display) is deterministic: names, shapes,
dtypes, places, bytes and reasons with times bucketed to 1-2-5 steps; measured times and
GPU busy % only in the precise text (terminal) and in the HTML. Without a GPU the report
says on every line that placements and GPU times are predictions for a named profile. A
time is shown only where one was measured: an operation whose device timer failed reads
"not measured", never "0 us".
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from eugo_lab.renderable import Drawn
from eugo_lab.units import fmt_bytes

if TYPE_CHECKING:  # named for the reader and the type checker; the ledger is filled where operations run
    from eugo_lab.offload.ledger import Ledger, OpRecord

MAX_TEXT_ROWS = 30


def _shapes(shapes: tuple) -> str:
    return ", ".join("x".join(str(n) for n in s) if s else "scalar" for s in shapes) or "-"


def _moved(r: OpRecord) -> str:
    parts = []
    if r.h2d_bytes:
        parts.append(f"{fmt_bytes(r.h2d_bytes)} to GPU")
    if r.d2h_bytes:
        parts.append(f"{fmt_bytes(r.d2h_bytes)} to host")
    return ", ".join(parts) or "-"


def _busy(ledger: Ledger) -> str:
    if ledger.busy is None:
        return ledger.busy_note or ("GPU busy %: not sampled (no GPU here)" if ledger.predictions_only
                                    else "GPU busy %: not sampled")
    mean, peak, n = ledger.busy
    return f"GPU busy {mean:.0f}% on average, {peak:.0f}% at most ({n} NVML samples)"


def _unmeasured(ledger: Ledger) -> str:
    n = ledger.unmeasured_gpu
    return (f"{n} GPU operation{'s' if n != 1 else ''} not measured: the device timer gave no time, so no time "
            f"is shown for {'them' if n != 1 else 'it'}")


def heading(ledger: Ledger) -> str:
    """First line: the mode, the device, and whether the GPU side is measured or predicted."""
    if ledger.predictions_only:
        return (f"GPU offload (--gpu {ledger.mode}): no GPU here, everything ran on the CPU; "
                f"placements and GPU times are PREDICTIONS for {ledger.device}")
    return f"GPU offload (--gpu {ledger.mode}) on {ledger.device}; device times measured by {ledger.measured_by}"


def offload_text(ledger: Ledger, precise: bool = False) -> str:
    """The report as text; ``precise`` adds predicted and measured times and GPU busy %."""
    lines = [heading(ledger)] + ([f"  note: {ledger.note}"] if ledger.note else []) + ["  " + ledger.summary()]
    pred = "predicted " if ledger.predictions_only else ""
    cols = ["op", "shapes", "dtype", f"{pred}where", f"{pred}moved", "why"]
    if precise:
        cols += ["predicted CPU", "predicted GPU", "measured"]
    rows = []
    for r in ledger.rows:
        where = r.where if r.count == 1 else f"{r.where} x{r.count}"
        cells = [r.op, _shapes(r.shapes), r.dtype, where, _moved(r), r.reason if precise else r.reason_bucketed]
        if precise:
            measured = r.measured_text + (f" ({'GPU' if r.measured_where == 'gpu' else 'CPU'})" if r.measured else "")
            cpu, gpu = r.predicted_text
            cells += [cpu or "-", gpu or "-", measured]
        rows.append(cells)
    shown = rows[:MAX_TEXT_ROWS]
    widths = [max(len(str(c)) for c in col) for col in zip(cols, *shown)]
    for cells in [cols, *shown]:
        lines.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip())
    if len(rows) > len(shown):
        lines.append(f"  ... {len(rows) - len(shown)} more rows (all of them in the rich view)")
    if ledger.unmeasured_gpu:
        lines.append("  " + _unmeasured(ledger))
    if precise:
        lines.append("  " + _busy(ledger))
    if ledger.predictions_only:
        lines.append("  (no GPU here: measured times are the CPU's; nothing on the GPU side was measured)")
    elif not precise:
        lines.append("  (predicted vs measured times and GPU busy %: see the rich view)")
    return "\n".join(lines)


_TH = "style='text-align:left; padding: 0 0.6em'"


def offload_html(ledger: Ledger) -> str:
    """The report as an HTML table; every piece of user text (operation names, reasons) is escaped."""
    pred = ledger.predictions_only
    head = escape(heading(ledger))
    measured = "measured on the CPU (host timer)" if pred else f"measured ({escape(ledger.measured_by)})"
    cols = ["operation", "shapes", "dtype", "predicted place" if pred else "ran on", "count",
            "to GPU" + (" (predicted)" if pred else ""), "to host" + (" (predicted)" if pred else ""), "why",
            "predicted CPU", "predicted GPU", measured]
    body = []
    for r in ledger.rows:
        side = "GPU" if r.measured_where == "gpu" else "CPU"
        m = f"{r.measured_text} on {side}" if r.measured else r.measured_text
        cells = [r.op, _shapes(r.shapes), r.dtype, r.where, str(r.count),
                 fmt_bytes(r.h2d_bytes) if r.h2d_bytes else "", fmt_bytes(r.d2h_bytes) if r.d2h_bytes else "",
                 r.reason, *r.predicted_text, m]
        body.append("<tr>" + "".join(f"<td {_TH}>{escape(str(c))}</td>" for c in cells) + "</tr>")
    note = ("<div><i>No GPU here: the place, bytes moved and GPU times are what the cost model predicts for "
            f"{escape(ledger.device)}; only CPU times were measured.</i></div>" if pred else "")
    if ledger.note:
        note += f"<div>Note: {escape(ledger.note)}</div>"
    if ledger.unmeasured_gpu:
        note += f"<div>{escape(_unmeasured(ledger))}</div>"
    return (f"<div class='eugo-offload'><div><b>{head}</b></div><div>{escape(ledger.summary())}</div>{note}"
            f"<table><tr>{''.join(f'<th {_TH}>{escape(c)}</th>' for c in cols)}</tr>{''.join(body)}</table>"
            f"<div>{escape(_busy(ledger))}</div></div>")


def offload_view(ledger: Ledger) -> Drawn:
    """The ``--gpu`` per-operation table of one cell (its offload ledger) as a renderable."""
    return Drawn(ledger, offload_text, offload_html)
