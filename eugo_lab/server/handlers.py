"""Authenticated and authorized handlers: the installed BokehJS, ``/eugo/api/status``, and the panel's REST API.

``/eugo/bokeh/static/...`` serves BokehJS; :mod:`eugo_lab.server.api` holds (and documents)
the rest of the REST API and how every handler is authorized (all of this module's are reads).

``/eugo/api/status`` lists the kernels this server runs, each with the status its eugo
runtime last published (read through :mod:`eugo_lab.status_files`, written by
:mod:`eugo_lab.hpc.status`), and ``idle_warning_s``: after how many idle seconds the panel warns
of an idle cluster (``EugoLab.idle_warning_s``).
"""

from __future__ import annotations

import os
from typing import Any

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join

from eugo_lab.server.api import (
    AUTH_RESOURCE,
    READ,
    CoursesHandler,
    EugoAPIHandler,
    GlossaryHandler,
    ProgressHandler,
    StopRuntimeHandler,
)
from eugo_lab.server.config import load_settings
from eugo_lab.settings import BOKEH_URL_ENV, STATUS_DIR_ENV
from eugo_lab.status_files import read_status

#: URL prefix, under the server's base_url, that ``bokeh.resources.Resources(mode="server")`` expects.
BOKEH_PREFIX = "eugo/bokeh/"


class BokehJSHandler(JupyterHandler, tornado.web.StaticFileHandler):
    """Static files of the installed BokehJS (``bokeh.util.paths.bokehjs_path()``), for logged-in users only."""

    auth_resource = AUTH_RESOURCE

    @tornado.web.authenticated
    @authorized(READ)
    def get(self, path: str, include_body: bool = True) -> Any:
        """Serve one file (403 without a valid token or login cookie, or without read access)."""
        return super().get(path, include_body)

    @tornado.web.authenticated
    @authorized(READ)
    def head(self, path: str) -> Any:
        """Headers only (authenticated like ``get``)."""
        return super().head(path)

    def set_extra_headers(self, path: str) -> None:
        """Files are versioned by Bokeh's ``?v=`` hash: let the browser keep them for a day."""
        self.set_header("Cache-Control", "private, max-age=86400")


class StatusHandler(EugoAPIHandler):
    """``GET /eugo/api/status``: eugo_lab and server versions, the idle threshold, and the kernels this server runs."""

    @tornado.web.authenticated
    @authorized(READ)
    async def get(self) -> None:
        """The status as JSON."""
        import jupyter_server

        from eugo_lab import __version__

        status_dir = self.settings.get("eugo_status_dir", "")
        kernels = []
        for k in self.kernel_manager.list_kernels():
            kid = k.get("id")
            kernels.append({"id": kid, "name": k.get("name"), "execution_state": k.get("execution_state"),
                            "connections": k.get("connections"),
                            # what the kernel's eugo runtime last published (None: it has not used eugo yet)
                            "eugo": read_status(status_dir, kid) if status_dir and kid else None})
        self.reply({"eugo_lab": __version__, "server_version": jupyter_server.__version__,
                    "idle_warning_s": self.settings.get("eugo_idle_warning_s"), "kernels": kernels})


def _make_status_dir(runtime_dir: str) -> str:
    """A private directory for this server's kernels' status files, removed when the server exits.

    Named after the server's pid, so that the directories of servers that were killed (and
    never ran their exit handler) are recognised and removed by the next server.
    """
    import atexit
    import glob
    import shutil
    import tempfile

    import psutil

    os.makedirs(runtime_dir, exist_ok=True)
    for old in glob.glob(os.path.join(runtime_dir, "eugo-status-*-*")):
        pid = os.path.basename(old).split("-")[2]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    path = tempfile.mkdtemp(prefix=f"eugo-status-{os.getpid()}-", dir=runtime_dir)  # mode 0700
    atexit.register(shutil.rmtree, path, True)
    return path


def _bokehjs_dir() -> str | None:
    """Where the installed BokehJS lives, or ``None`` without Bokeh (it is in the ``lab`` extra)."""
    try:
        from bokeh.util.paths import bokehjs_path
    except ImportError:
        return None
    return str(bokehjs_path())


def setup_handlers(serverapp: Any) -> None:
    """Register the handlers and publish the BokehJS URL to kernels started from now on."""
    web_app = serverapp.web_app
    base_url = web_app.settings["base_url"]
    host = ".*$"
    api = url_path_join(base_url, "eugo", "api")
    handlers: list[tuple] = [
        (url_path_join(api, "status"), StatusHandler),
        (url_path_join(api, "courses"), CoursesHandler),
        (url_path_join(api, "progress"), ProgressHandler),
        (url_path_join(api, "glossary"), GlossaryHandler),
        (url_path_join(api, "kernels", "([^/]+)", "stop"), StopRuntimeHandler),
    ]
    bokeh_dir = _bokehjs_dir()
    if bokeh_dir is not None:
        handlers.append((url_path_join(base_url, BOKEH_PREFIX, "static", "(.*)"), BokehJSHandler, {"path": bokeh_dir}))
    web_app.add_handlers(host, handlers)
    config = load_settings(serverapp, serverapp.log)  # a bad value: its default and a warning, never half loaded
    web_app.settings["eugo_courses_dir"] = config.courses_dir
    web_app.settings["eugo_idle_warning_s"] = config.idle_warning_s
    # Kernels inherit the server's environment: this is how %%eugo learns base_url, and
    # where each kernel publishes its runtime status (eugo_lab.status_files).
    if bokeh_dir is not None:
        os.environ[BOKEH_URL_ENV] = url_path_join(base_url, BOKEH_PREFIX)
        serverapp.log.info("eugo_lab: serving BokehJS at %s", os.environ[BOKEH_URL_ENV])
    else:
        # The config file that enables this extension comes with every install, the lab extra
        # (Bokeh) does not. Without a URL, %%eugo shows live counters and the static timeline.
        os.environ.pop(BOKEH_URL_ENV, None)
        serverapp.log.warning('eugo_lab: bokeh is not installed, so the %%eugo live timeline is off; '
                              'pip install "eugo-lab[lab]" and restart the server')
    status_dir = _make_status_dir(serverapp.runtime_dir)
    web_app.settings["eugo_status_dir"] = status_dir
    os.environ[STATUS_DIR_ENV] = status_dir
