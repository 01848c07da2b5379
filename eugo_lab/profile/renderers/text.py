"""The profile as deterministic text: names, short file paths and whole percentages; no raw timings.

The same :class:`~eugo_lab.profile.model.Profile` always renders to the same text, so a
notebook's ``text/plain`` can be compared by nbval; nothing here computes a statistic.
"""

from __future__ import annotations

from eugo_lab.profile.model import Profile
from eugo_lab.profile.renderers.base import Renderer

_NAME_W = 32


def _pct(share: float) -> str:
    return f"{round(share * 100):d}%"


def _cut(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 1] + "~"


class TextRenderer(Renderer):
    """The hottest functions and lines of a profile, as shares of the profiled tasks' time (the ``text/plain``)."""

    def render(self, p: Profile) -> str:
        """The profile as text; the same profile always gives the same text."""
        if p.total <= 0:
            return "Profile: no samples (no task was profiled, or every task was too short to sample)"
        ntasks = f"{p.tasks} task{'s' if p.tasks != 1 else ''}"
        nworkers = f"{p.workers} worker{'s' if p.workers != 1 else ''}"
        out = [f"Profile: {ntasks} on {nworkers}; shares of the tasks' time"]
        hot = [h for h in p.hot_functions(None) if round(h.self_share * 100) >= 1 or round(h.total_share * 100) >= 1]
        out.append("Hottest functions (self: its own lines, native: in C code it called, total: with callees)")
        out.append(f"  {'self':>5} {'native':>6} {'total':>5}  {'function':<{_NAME_W}} where")
        for h in hot[:self.functions]:
            tag = "" if h.where == "app" else f"  [{h.where}]"
            out.append(f"  {_pct(h.self_share):>5} {_pct(h.native_share):>6} {_pct(h.total_share):>5}  "
                       f"{_cut(h.function, _NAME_W):<{_NAME_W}} {self.where(h.file, h.path, h.line)}{tag}")
        out.append("Hottest lines")
        for line in [x for x in p.hot_lines(None) if round(x.share * 100) >= 1][:self.lines]:
            src = f"  {_cut(line.source, 60)}" if line.source else ""
            out.append(f"  {_pct(line.share):>5}  {self.where(line.file, line.path, line.line)} "
                       f"({_cut(line.function, _NAME_W)}){src}")
        return "\n".join(out)
