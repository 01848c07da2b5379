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

from eugo_lab.renderable import Renderable
from eugo_lab.settings import BOKEH_URL_ENV
from eugo_lab.settings import DISPLAY_MODE_ENV as MODE_ENV  # "lab", "kernel" or "text" (tests, benchmarks)
from eugo_lab.units import split_source


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


def show(obj: Renderable) -> None:
    """Display a :class:`~eugo_lab.renderable.Renderable`: its ``to_text()`` and ``to_html()``."""
    publish(obj.to_text(), obj.to_html())


def show_widget(widget: Any, text: str) -> None:
    """Display an ipywidget with a deterministic ``text/plain`` instead of its varying repr."""
    from IPython.display import display

    data = dict(widget._repr_mimebundle_() or {})
    data["text/plain"] = text
    display(data, raw=True)


#: BokehJS loader, run by the page. Synchronous on purpose: the live view's jupyter_bokeh widget
#: calls ``window.Bokeh.require`` the moment its view is built, which is when the next output
#: (the widget) arrives, milliseconds later. Bokeh's own loader (``output_notebook``) injects
#: ``<script src>`` tags that finish loading much later on a page that has not loaded BokehJS
#: yet, and the widget then fails with "Could not create a view" for the whole cell. A
#: synchronous request (served from the browser's cache after the first time) has finished
#: before the page processes the next output. Only ``bokeh.min.js``: the timeline uses no
#: Bokeh widgets, tables, WebGL or math text.
def source_label(source: str) -> str:
    """``/tmp/ipykernel_1/123.py:13`` -> ``Cell In[2], line 13`` (IPython's name for a cell's code); else unchanged.

    Sources are recorded as ``file:line``; a notebook cell's file is a temporary name that
    means nothing to the person reading the timeline.
    """
    path, line = split_source(source)
    if not path:
        return source
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return source
    shell = get_ipython()
    n = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(path) if shell is not None else None
    return f"Cell In[{n}], line {line}" if n is not None else source


_LOADER = """(function () {
  var version = %(version)s, url = %(url)s;
  if (window.Bokeh !== undefined && window.Bokeh.version === version) { return; }
  var xhr = new XMLHttpRequest();
  xhr.open("GET", url, false);
  xhr.send(null);
  if (xhr.status !== 200) {
    console.error("eugo: could not load BokehJS from " + url + " (HTTP " + xhr.status + ")");
    return;
  }
  var script = document.createElement("script");
  script.textContent = xhr.responseText + "\\n//# sourceURL=" + url;
  document.head.appendChild(script);
})();
"""
#: The mimetype jupyter_bokeh's JupyterLab renderer runs as a script (the one ``output_notebook`` uses).
LOAD_MIME_TYPE = "application/vnd.bokehjs_load.v0+json"


def bokehjs_loader(root_url: str) -> str:
    """The JavaScript that loads BokehJS from ``root_url`` (our authenticated static handler) if needed."""
    import json

    import bokeh

    url = root_url.rstrip("/") + "/static/js/bokeh.min.js?v=" + bokeh.__version__
    # json.dumps makes JS string literals; "</" is escaped too, so nothing can end a <script> early.
    return _LOADER % {"version": json.dumps(bokeh.__version__).replace("</", "<\\/"),
                      "url": json.dumps(url).replace("</", "<\\/")}


def load_bokehjs(root_url: str) -> None:
    """Tell the page to load BokehJS from ``root_url`` before the live view's widget is shown.

    Re-sent for every live view (a few hundred bytes: a URL, not the library), because a
    reloaded page has forgotten BokehJS; the browser caches the file. ``text/plain`` is
    empty: nothing to read, and nothing shows where the script cannot run (an untrusted
    notebook).
    """
    from IPython.display import display

    js = bokehjs_loader(root_url)
    display({"text/plain": "", "application/javascript": js, LOAD_MIME_TYPE: js}, raw=True)
