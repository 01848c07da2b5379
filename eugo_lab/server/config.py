"""The server extension's settings: ``c.EugoLab.courses_dir`` and ``c.EugoLab.idle_warning_s``.

Set them in a Jupyter config file, on the command line (``--EugoLab.idle_warning_s=30``) or,
when neither sets them, through ``EUGO_LAB_COURSES_DIR`` and ``EUGO_LAB_IDLE_WARNING_S``
(:mod:`eugo_lab.settings`): the browser tests use the latter to make the idle warning quick.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from traitlets import Float, TraitError, Unicode, default, validate
from traitlets.config import Config, Configurable

from eugo_lab.settings import COURSES_DIR_ENV, IDLE_WARNING_ENV

#: Seconds of idleness after which the panel warns of an idle cluster, unless configured.
DEFAULT_IDLE_WARNING_S = 600.0

log = logging.getLogger("eugo_lab")


class EugoLab(Configurable):
    """Settings of Eugo Lab's Jupyter server extension."""

    courses_dir = Unicode(
        help="The folder of the courses that GET /eugo/api/courses lists, absolute or relative to the server's "
             "root_dir (it must lie inside root_dir, so that the panel can open its notebooks). Empty: "
             f"${COURSES_DIR_ENV}, else root_dir when it holds the course folders, else <root_dir>/courses.",
    ).tag(config=True)

    idle_warning_s = Float(
        help="Seconds a kernel's Eugo runtime may sit idle before the JupyterLab panel warns that an idle "
             f"cluster is still running (and costing). Default: ${IDLE_WARNING_ENV}, else "
             f"{DEFAULT_IDLE_WARNING_S:g}.",
    ).tag(config=True)

    @default("courses_dir")
    def _courses_dir_default(self) -> str:
        return os.environ.get(COURSES_DIR_ENV, "")

    @default("idle_warning_s")
    def _idle_warning_default(self) -> float:
        raw = os.environ.get(IDLE_WARNING_ENV, "").strip()
        if not raw:
            return DEFAULT_IDLE_WARNING_S
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not math.isfinite(value) or value <= 0:
            log.warning("eugo_lab: %s=%r is not a positive number of seconds; using %g",
                        IDLE_WARNING_ENV, raw, DEFAULT_IDLE_WARNING_S)
            return DEFAULT_IDLE_WARNING_S
        return value

    @validate("idle_warning_s")
    def _check_idle_warning(self, proposal: dict) -> float:
        value = proposal["value"]
        if not math.isfinite(value) or value <= 0:
            raise TraitError(f"EugoLab.idle_warning_s must be a positive number of seconds, got {value!r}")
        return value


def load_settings(parent: Any, logger: logging.Logger | logging.LoggerAdapter | None = None) -> EugoLab:
    """The extension's settings from ``parent``'s config (the server app); a bad value falls back to its default.

    A bad setting (``--EugoLab.idle_warning_s=-5``) must not leave the extension half loaded, with
    its routes answering ``null`` settings and no status folder for the kernels: the setting gets
    its default, and the server's log says which setting, its bad value, the valid values and the
    default used instead. Each ``EugoLab`` value is tried on its own, so one bad value costs only itself.
    """
    out = logger or log
    section = parent.config.EugoLab if "EugoLab" in parent.config else {}
    kept = Config()
    for name, value in section.items():
        try:
            EugoLab(config=Config({"EugoLab": {name: value}}))
        except TraitError as exc:
            fallback = getattr(EugoLab(), name, None)
            shown = str(value) if isinstance(value, str) else repr(value)  # a command-line value as typed
            out.warning("eugo_lab: the setting EugoLab.%s=%s is not valid (%s); using its default, %r. "
                        "Fix it in your Jupyter config or on the command line and restart the server.",
                        name, shown, exc, fallback)
            continue
        kept.EugoLab[name] = value
    return EugoLab(config=kept)
