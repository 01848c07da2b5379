"""Raw samples -> summary rows, Markdown tables and the PASS/MISS list of targets.

A summary row is ``{median_s, min_s, max_s, rounds, per_item_us, cpu_per_item_us, extra}``
where ``extra`` holds further per-sample numbers (speedups, memory) as median/min/max.
"""

from __future__ import annotations

import statistics
from typing import Any


def spread(xs: list[float]) -> dict[str, float]:
    """Median, min and max of ``xs``."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def summarize(samples: list[dict], items: int | None = None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One engine's samples -> a summary row (per-item figures when ``items`` is given)."""
    walls = [s["wall"] for s in samples]
    items = items or samples[0].get("items")
    med = statistics.median(walls)
    row: dict[str, Any] = {"median_s": med, "min_s": min(walls), "max_s": max(walls), "rounds": len(walls),
                           "per_item_us": med / items * 1e6 if items else None, "cpu_per_item_us": None,
                           "items": items, "extra": {k: spread([s[k] for s in samples]) for k in extra}}
    if items and all("cpu" in s for s in samples):
        row["cpu_per_item_us"] = statistics.median(s["cpu"] for s in samples) / items * 1e6
    return row


def _fmt_extra(extra: dict) -> str:
    parts = []
    for k, v in extra.items():
        if k in ("rss", "uss"):
            parts.append(f"{k.upper()} {v['median'] / 2**20:.0f} MB ({v['min'] / 2**20:.0f}-{v['max'] / 2**20:.0f})")
        elif k == "procs":
            parts.append(f"{v['median']:.0f} processes")
        else:
            parts.append(f"{k} {v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f})")
    return "; ".join(parts)


def markdown(results: list[dict], baseline: str = "eugo_lab") -> str:
    """One table for all scenarios; ``vs eugo_lab`` is this row's median over Eugo Lab's in the scenario."""
    lines = ["| scenario | engine | median | min-max | per item (wall) | driver CPU per item | vs eugo_lab | notes |",
             "|---|---|---|---|---|---|---|---|"]
    for res in results:
        base = next((row["median_s"] for e, row in res["engines"].items() if e.startswith(baseline)), None)
        for e, row in res["engines"].items():
            per = f"{row['per_item_us']:.1f} us" if row.get("per_item_us") else ""
            cpu = f"{row['cpu_per_item_us']:.1f} us" if row.get("cpu_per_item_us") else ""
            if row.get("per_item_us") and base:
                # Engines may run fewer tiny tasks (tiny_cap): compare per item.
                b = next(r["per_item_us"] for k, r in res["engines"].items() if k.startswith(baseline))
                ratio = f"{row['per_item_us'] / b:.2f}x"
            else:
                ratio = f"{row['median_s'] / base:.2f}x" if base else ""
            n = f" (n={row['items']})" if row.get("items") and row["items"] != res.get("items") else ""
            lines.append(f"| {res['scenario']} | {e}{n} | {row['median_s']:.3f} s | {row['min_s']:.3f}-"
                         f"{row['max_s']:.3f} | {per} | {cpu} | {ratio} | {_fmt_extra(row.get('extra', {}))} |")
    return "\n".join(lines)


def target(name: str, measured: float, limit: float, unit: str, lower_is_better: bool = True,
           detail: str = "") -> dict[str, Any]:
    """A target line: PASS when ``measured`` is on the right side of ``limit``; ratio = measured / limit."""
    ok = measured <= limit if lower_is_better else measured >= limit
    return {"target": name, "measured": measured, "limit": limit, "unit": unit, "ratio": measured / limit,
            "pass": ok, "detail": detail}


def targets_markdown(targets: list[dict]) -> str:
    """The targets as a Markdown table (also printed as PASS/MISS lines by run.py)."""
    lines = ["| target | measured | limit | ratio (measured/limit) | result | detail |", "|---|---|---|---|---|---|"]
    for t in targets:
        lines.append(f"| {t['target']} | {t['measured']:.3g} {t['unit']} | {t['limit']:.3g} {t['unit']} | "
                     f"{t['ratio']:.2f} | {'PASS' if t['pass'] else 'MISS'} | {t['detail']} |")
    return "\n".join(lines)
