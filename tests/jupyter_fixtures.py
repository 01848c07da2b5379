"""Helpers for tests that start JupyterLab or kernels with this worktree's ``eugo_lab`` on the path."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
from _clusters import free_port
from _processes import signal_all

REPO = Path(__file__).resolve().parents[1]
#: Debian's Chromium: Playwright cannot download its own browsers here.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Where browser tests save their screenshots.
OUT = REPO / "test-output"


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium through Playwright, offline (no updates, sync or background requests)."""
    assert Path(CHROMIUM).exists(), "Debian chromium is required: apt-get install -y chromium"
    from playwright.sync_api import sync_playwright

    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            yield browser
        finally:
            browser.close()


def kernel_env(**extra: str) -> dict[str, str]:
    """The environment for a child kernel/server: our worktree first on ``sys.path``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.pop("EUGO_LAB_BOKEH_URL", None)
    env.pop("EUGO_LAB_DISPLAY", None)
    env.update(extra)
    return env


def kill_tree(proc: subprocess.Popen, timeout: float = 10) -> None:
    """Stop a process and every descendant (kernels, pool workers): SIGTERM, then SIGKILL."""
    try:
        parent = psutil.Process(proc.pid)
        procs = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    signal_all(procs, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    signal_all(alive)
    psutil.wait_procs(alive, timeout=5)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


class Lab:
    """A JupyterLab server on 127.0.0.1 with a token and our server extension enabled."""

    def __init__(self, root: Path, tmp: Path, env: dict[str, str] | None = None):
        """``env``: extra environment for the server and its kernels (e.g. ``JUPYTER_PATH``)."""
        self.root = root
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        settings = tmp / "settings"
        tracker = settings / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True)
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        notices = settings / "@jupyterlab" / "apputils-extension"
        notices.mkdir(parents=True)  # no "get notified about Jupyter news?" toast over the page
        (notices / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        for d in ("config", "runtime", "ws"):
            (tmp / d).mkdir()
        env = kernel_env(JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
                         **(env or {}))
        self.log_path = tmp / "lab.log"
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.proc = subprocess.Popen([
            sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0", "--ServerApp.allow_root=True",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
            "--ServerApp.jpserver_extensions=eugo_lab.server=True",
            f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp / 'ws'}",
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.expose_app_in_browser=True",
        ], env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=str(root))

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("JupyterLab exited:\n" + self.log())
            try:
                with urllib.request.urlopen(f"{self.url}api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("JupyterLab did not start:\n" + self.log())

    def get(self, path: str, token: str | None = None) -> tuple[int, bytes]:
        """GET without following redirects (an unauthenticated page GET redirects to /login)."""
        req = urllib.request.Request(self.url + path)
        if token:
            req.add_header("Authorization", f"token {token}")
        try:
            with _NO_REDIRECT.open(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, b""

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        kill_tree(self.proc)
        self._log.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_NO_REDIRECT = urllib.request.build_opener(_NoRedirect)


def write_notebook(path: Path, cells: list[str]) -> None:
    """A minimal nbformat-4 notebook of code cells."""
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": src} for i, src in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
