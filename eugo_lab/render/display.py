"""Where output goes: a JupyterLab page with our server extension, a bare kernel, or a terminal.

- ``lab``: a kernel started by a Jupyter server that runs ``eugo_lab.server``; the
  extension exports ``EUGO_LAB_BOKEH_URL`` (``{base_url}eugo/bokeh/``) to the kernels it
  starts, and BokehJS is loaded from there (never from a CDN, never inlined).
- ``kernel``: a kernel without that server (nbclient, nbconvert, another frontend): live
  ipywidgets counters, then a static HTML summary with an SVG timeline.
- ``text``: terminal IPython or plain Python: the precise text summary is printed.

Every rich display carries a deterministic ``text/plain`` (see :mod:`eugo_lab.render.text`).
"""

from __future__ import annotations

import os
from typing import Any

from eugo_lab.server import BOKEH_URL_ENV

#: Override the detected mode: "lab", "kernel" or "text" (tests and benchmarks set it).
MODE_ENV = "EUGO_LAB_DISPLAY"


def bokeh_root_url() -> str | None:
    """The URL prefix our server extension serves BokehJS under, if this kernel's server has it."""
    url = os.environ.get(BOKEH_URL_ENV)
    return url or None


def mode(shell: Any = None) -> str:
    """``lab``, ``kernel`` or ``text`` (see the module docstring)."""
    forced = os.environ.get(MODE_ENV)
    if forced in ("lab", "kernel", "text"):
        return forced
    if shell is None or not hasattr(shell, "kernel"):
        return "text"
    return "lab" if bokeh_root_url() else "kernel"


def publish(text: str, html: str | None = None) -> None:
    """Display a bundle: deterministic ``text/plain`` plus optional ``text/html``."""
    from IPython.display import display

    data = {"text/plain": text}
    if html is not None:
        data["text/html"] = html
    display(data, raw=True)


def show_widget(widget: Any, text: str) -> None:
    """Display an ipywidget with a deterministic ``text/plain`` instead of its varying repr."""
    from IPython.display import display

    data = dict(widget._repr_mimebundle_() or {})
    data["text/plain"] = text
    display(data, raw=True)


_loaded_for: set[str] = set()


def load_bokehjs(root_url: str) -> None:
    """Tell the page to load BokehJS from ``root_url`` (our authenticated static handler).

    Re-sent for every live view (a few hundred bytes: script URLs, not the 8 MB library),
    because a reloaded page has forgotten it; the browser caches the files.
    """
    from bokeh.io import output_notebook
    from bokeh.resources import Resources

    # 60 s, not Bokeh's 5 s: on a busy 2-core machine the first load of 8 MB of JS can be slow,
    # and a timed-out load leaves the timeline blank for the whole cell.
    output_notebook(resources=Resources(mode="server", root_url=root_url), hide_banner=True, load_timeout=60_000)
    _loaded_for.add(root_url)
