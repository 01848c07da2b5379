"""``%%eugo`` without the ``lab`` extra (ipywidgets, Bokeh, jupyter_bokeh): static report and a one-line hint.

The packages are hidden with ``sys.modules[name] = None`` (an import then raises
``ImportError``, as when they are not installed). tests/courses/test_fresh_install.py does the
same in a real kernel of a fresh ``pip install eugo-lab``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from IPython.utils.capture import capture_output
from jupyter_fixtures import REPO, kernel_env

from eugo_lab import hpc
from eugo_lab.render import html, live

SETUP = """
import time
from eugo_lab import hpc

@hpc.remote
def nap(x):
    time.sleep(0.01)
    return x * 2
"""
CELL = "hpc.get([nap.remote(i) for i in range(6)])"
NO_LIVE_VIEW = ('eugo: live view off: ipywidgets, bokeh and jupyter_bokeh are not installed; '
                'pip install "eugo-lab[lab]" and restart the kernel')
NO_TIMELINE = ('eugo: live timeline off (counters only): bokeh and jupyter_bokeh are not installed; '
               'pip install "eugo-lab[lab]" and restart the kernel')
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def ip(ip):
    """The shared shell, with this module's setup cell run in it."""
    ip.run_cell(SETUP)
    return ip


def _hide(monkeypatch, *modules: str) -> None:
    """Make ``modules`` (and submodules already imported) unimportable, and forget an earlier hint."""
    for name in [m for m in sys.modules if m.split(".")[0] in modules] + list(modules):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(live, "_hinted", False)


@pytest.fixture
def no_lab_extra(monkeypatch):
    """A kernel without our server and without the lab extra."""
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    monkeypatch.delenv("EUGO_LAB_BOKEH_URL", raising=False)
    _hide(monkeypatch, "ipywidgets", "bokeh", "jupyter_bokeh")


def _run(ip, line: str, cell: str = CELL):
    with capture_output() as cap:
        value = ip.run_cell_magic("eugo", line, cell)
    return value, [o.data for o in cap.outputs]


def _summary(bundles: list[dict]) -> dict:
    found = [b for b in bundles if "eugo-summary" in b.get("text/html", "")]
    assert len(found) == 1, bundles
    return found[0]


def test_cell_runs_traced_with_static_report_and_one_hint_per_kernel(ip, no_lab_extra):
    value, first = _run(ip, "-w 2")
    assert value == [0, 2, 4, 6, 8, 10]
    assert not any(WIDGET in b for b in first)
    assert first[0]["text/plain"] == NO_LIVE_VIEW
    assert "\n" not in first[0]["text/plain"]
    s = _summary(first)
    assert s["text/plain"].startswith("%%eugo: 6 tasks on 2 workers (backend local)\n  functions: nap x6")
    assert "<svg class='eugo-timeline'" in s["text/html"] and "speedup" in s["text/html"]
    assert len(hpc.last_trace()) == 6  # traced exactly as with the live view

    value, second = _run(ip, "-w 2")
    assert value == [0, 2, 4, 6, 8, 10]
    assert [b["text/plain"] for b in second] == [s["text/plain"]]  # no second hint; same deterministic text


def test_hint_html_is_escaped():
    assert "&lt;b&gt;x&lt;/b&gt; &amp; y" in html.hint_html("<b>x</b> & y")


def test_compare_and_scaling_work_without_widgets(ip, no_lab_extra):
    value, out = _run(ip, "-w 2 --compare")
    assert value == [0, 2, 4, 6, 8, 10]
    assert not any(WIDGET in b for b in out)
    assert [b["text/plain"].splitlines()[0] for b in out] == [
        "%%eugo: running on 1 worker for comparison", NO_LIVE_VIEW, "%%eugo: 6 tasks on 2 workers (backend local)"]
    s = _summary(out)
    assert "runs at workers: 1, 2" in s["text/plain"] and "<svg class='eugo-speedup'" in s["text/html"]
    value, out = _run(ip, "--scaling 1,2")
    assert value == [0, 2, 4, 6, 8, 10]
    s = _summary(out)
    assert "runs at workers: 1, 2" in s["text/plain"] and "<svg class='eugo-speedup'" in s["text/html"]
    assert not any(b["text/plain"] == NO_LIVE_VIEW for b in out)


def test_no_live_gives_no_hint(ip, no_lab_extra):
    _, out = _run(ip, "-w 2 --no-live")
    assert [b["text/plain"].splitlines()[0] for b in out] == ["%%eugo: 6 tasks on 2 workers (backend local)"]


def test_jupyterlab_without_bokeh_shows_live_counters_and_the_static_timeline(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "lab")
    monkeypatch.setenv("EUGO_LAB_BOKEH_URL", "/eugo/bokeh/")
    _hide(monkeypatch, "bokeh", "jupyter_bokeh")
    value, out = _run(ip, "-w 2")
    assert value == [0, 2, 4, 6, 8, 10]
    assert out[0]["text/plain"] == NO_TIMELINE
    widgets = [b for b in out if WIDGET in b]
    assert len(widgets) == 1 and widgets[0]["text/plain"] == live.LIVE_TEXT
    assert not any("application/javascript" in b for b in out)  # no BokehJS loader without Bokeh
    assert "<svg class='eugo-timeline'" in _summary(out)["text/html"]


def test_line_magics_work_without_widgets(ip, no_lab_extra):
    _run(ip, "-w 2")
    with capture_output() as cap:
        ip.run_line_magic("eugo", "status")
        ip.run_line_magic("eugo", "trace")
        ip.run_line_magic("eugo", "glossary")
        ip.run_line_magic("eugo", "glossary straggler")
        ip.run_line_magic("eugo", "stop")
    texts = [o.data["text/plain"] for o in cap.outputs]
    assert texts[0].startswith("eugo runtime: backend local, 2 workers")
    assert texts[1].startswith("%%eugo: 6 tasks on 2 workers")
    assert texts[2].startswith("Glossary terms: ")
    assert "straggler" in texts[3].lower()
    assert texts[4] == "eugo: runtime stopped; its workers are gone"


def test_fresh_interpreter_never_imports_widgets_or_jupyter_server():
    """Nothing imported before the blockers: importing, loading the magic and running a cell need none of them."""
    code = textwrap.dedent(f"""
        import os, sys
        HIDDEN = ("ipywidgets", "bokeh", "jupyter_bokeh", "jupyter_server", "tornado")
        for name in HIDDEN:
            sys.modules[name] = None
        import eugo_lab, eugo_lab.server
        assert eugo_lab._jupyter_server_extension_points() == [{{"module": "eugo_lab.server"}}]
        from IPython.testing.globalipapp import start_ipython
        from IPython.utils.capture import capture_output
        os.environ["EUGO_LAB_DISPLAY"] = "kernel"
        ip = start_ipython()
        ip.run_line_magic("load_ext", "eugo_lab")
        ip.run_cell({SETUP!r})
        texts = []
        for _ in range(2):
            with capture_output() as cap:
                assert ip.run_cell_magic("eugo", "-w 2", {CELL!r}) == [0, 2, 4, 6, 8, 10]
            texts += [o.data["text/plain"] for o in cap.outputs]
        ip.run_line_magic("eugo", "stop")
        assert texts.count({NO_LIVE_VIEW!r}) == 1, texts
        assert sum(t.startswith("%%eugo: 6 tasks on 2 workers") for t in texts) == 2, texts
        leaked = [m for m in sys.modules if m.split(".")[0] in HIDDEN and sys.modules[m] is not None]
        assert not leaked, leaked
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], env=kernel_env(), cwd=str(REPO), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr
    assert "ModuleNotFoundError" not in r.stdout + r.stderr


def test_server_extension_without_bokeh_serves_status_and_publishes_no_bokeh_url(monkeypatch, tmp_path):
    """The config file enabling the extension comes with every install: a server without Bokeh must still load."""
    import logging
    from types import SimpleNamespace

    from eugo_lab.server import handlers
    from eugo_lab.settings import BOKEH_URL_ENV, STATUS_DIR_ENV

    monkeypatch.setenv(BOKEH_URL_ENV, "/stale/")
    monkeypatch.delenv(STATUS_DIR_ENV, raising=False)
    _hide(monkeypatch, "bokeh")
    added, warnings = [], []
    log = logging.getLogger("test-server")
    monkeypatch.setattr(log, "warning", lambda msg, *a: warnings.append(msg % a if a else msg))
    from traitlets.config import Configurable

    web_app = SimpleNamespace(settings={"base_url": "/"}, add_handlers=lambda host, hs: added.extend(hs))
    app = Configurable()  # the extension's settings (EugoLab) take the server app as their traitlets parent
    app.web_app, app.runtime_dir, app.log = web_app, str(tmp_path), log
    handlers.setup_handlers(app)
    routes = [h[0] for h in added]
    assert "/eugo/api/status" in routes and not any("bokeh" in r for r in routes), routes
    assert BOKEH_URL_ENV not in os.environ  # kernels of this server: live counters and the static timeline
    assert warnings == ['eugo_lab: bokeh is not installed, so the %%eugo live timeline is off; '
                        'pip install "eugo-lab[lab]" and restart the server']
