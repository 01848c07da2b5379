"""``%%eugo --profile``: the merged profile of the cell's main run, shown after its summary."""

from __future__ import annotations

from typing import Any

from eugo_lab.hpc.profiling import mimebundle
from eugo_lab.profile.model import Profile


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
