"""The Jupyter server extension: BokehJS served locally, and the REST API of the JupyterLab panel.

The API (courses and progress, checklist ticks, the glossary, each kernel's runtime status,
stopping a runtime) is documented in :mod:`eugo_lab.server.api`; its settings
(``c.EugoLab.courses_dir``, ``c.EugoLab.idle_warning_s``) in :mod:`eugo_lab.server.config`.

Enabled on install by ``etc/jupyter/jupyter_server_config.d/eugo_lab.json``. It tells
the kernels this server starts where BokehJS lives (``EUGO_LAB_BOKEH_URL``), so the
``%%eugo`` live timeline loads it from here, never from a CDN and never inlined.
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "eugo_lab.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from eugo_lab.server.handlers import setup_handlers

    setup_handlers(serverapp)


# The older name, for jupyter_server versions and tools that still look for it.
load_jupyter_server_extension = _load_jupyter_server_extension
