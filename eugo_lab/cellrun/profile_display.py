"""``%%eugo --profile``: the merged profile of the cell's main run, shown after its summary."""

from __future__ import annotations

import sys
from typing import Any

from eugo_lab.profile.model import Profile
from eugo_lab.profile.renderers import HTMLRenderer, TextRenderer


def show(trace: Any, text_only: bool = False) -> Profile:
    """Display the merged profile of ``trace``: text/plain plus the HTML view (``text_only``: print the text)."""
    p = Profile.from_trace(trace)
    bundle = mimebundle(p)
    if text_only:
        print(bundle["text/plain"])
    else:
        from IPython.display import display

        display(bundle, raw=True)
    return p


def notebook_source_label(source: str) -> str:
    """``path:line`` of a notebook cell's code -> ``Cell In[2], line 7`` (IPython's name for it); else unchanged.

    Asks IPython only when it is already loaded: outside a notebook no code came from a cell.
    """
    path, sep, line = source.rpartition(":")
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if sep and ipython is not None else None
    n = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(path) if shell is not None else None
    return f"Cell In[{n}], line {line}" if n is not None else source


def mimebundle(report: Profile) -> dict[str, str]:
    """``report`` as a notebook shows it: the deterministic text and the HTML view, cells named as IPython does.

    Also what an ``hpc.profile()`` region shows as a cell's result (the runtime asks the contract's provider
    table for ``"profile_display"``: a display is built here, never in the runtime).
    """
    return {"text/plain": TextRenderer(source_label=notebook_source_label).render(report),
            "text/html": HTMLRenderer(source_label=notebook_source_label).render(report)}
