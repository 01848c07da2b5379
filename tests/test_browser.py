"""End to end in a real browser: JupyterLab + our server extension + headless Chromium.

Checks that the ``%%eugo`` timeline grows while the cell still runs (BokehJS loaded from
our authenticated handler, offline) and that the final summary shows the speedup.
Chromium must be installed (``apt-get install chromium``; CI does): this test never skips.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from jupyter_fixtures import REPO, Lab, write_notebook

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
OUT = REPO / "test-output"
CELL = """%%eugo -w 2
import time
from eugo_lab import hpc

@hpc.remote
def work(i):
    time.sleep(0.25)
    return i

futures = [work.remote(i) for i in range(20)]
total = sum(hpc.get(futures))
total"""

READ_BARS = """() => {
  const docs = (window.Bokeh && window.Bokeh.documents) || [];
  let best = -1;
  for (const d of docs) {
    const m = d.get_model_by_name('eugo-timeline-tasks');
    if (m) { best = Math.max(best, m.data.left.length); }
  }
  const prompts = [...document.querySelectorAll('.jp-InputPrompt')].map(e => e.textContent.trim());
  return {bars: best, prompts: prompts};
}"""


@pytest.fixture
def lab(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / "live.ipynb", ["%load_ext eugo_lab", CELL])
    server = Lab(root, tmp_path)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_server_extension_auth(lab):
    status, _ = lab.get("eugo/api/status")
    assert status == 403
    status, _ = lab.get("eugo/bokeh/static/js/bokeh.min.js")
    assert status in (302, 403)  # a page GET without login redirects to /login
    status, _ = lab.get("eugo/bokeh/static/js/bokeh.min.js", token="wrong")
    assert status in (302, 403)
    status, body = lab.get("eugo/api/status", token=lab.token)
    assert status == 200 and b'"kernels"' in body
    assert lab.token.encode() not in body
    status, body = lab.get("eugo/bokeh/static/js/bokeh.min.js", token=lab.token)
    assert status == 200 and len(body) > 100_000


def test_live_timeline_in_chromium(lab):
    assert Path(CHROMIUM).exists(), "Debian chromium is required: apt-get install -y chromium"
    from playwright.sync_api import sync_playwright

    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            console: list[str] = []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"[:300]))
            page.goto(f"{lab.url}lab/tree/live.ipynb?token={lab.token}&reset")
            page.wait_for_function(
                "() => { try { return window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
                " === 'idle'; } catch (e) { return false; } }", timeout=90_000)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            samples = []
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                s = page.evaluate(READ_BARS)
                samples.append(s)
                prompts = s["prompts"]
                if len(prompts) >= 2 and re.fullmatch(r"\[\d+\]:", prompts[1]) and s["bars"] >= 20:
                    break
                time.sleep(0.15)
            page.screenshot(path=str(OUT / "browser-live-timeline.png"), full_page=True)
            running_with_bars = [s["bars"] for s in samples
                                 if len(s["prompts"]) >= 2 and s["prompts"][1] == "[*]:" and 0 < s["bars"] < 20]
            assert running_with_bars, (f"no partial timeline seen while the cell ran; samples: {samples[-5:]}; "
                                       f"console: {console[-15:]}")
            assert samples[-1]["bars"] == 20, samples[-5:]
            page.wait_for_selector(".eugo-summary", timeout=30_000)
            summary = page.inner_text(".eugo-summary")
            page.screenshot(path=str(OUT / "browser-live-timeline.png"), full_page=True)
            assert re.search(r"speedup\s+\d+(\.\d+)?x", summary), summary
            assert "20 tasks on 2 workers" in summary
            # The server's token must never end up in what the cell showed (outputs are saved
            # into the notebook file and shared).
            outputs = page.evaluate("() => Array.from(document.querySelectorAll('.jp-OutputArea'))"
                                    ".map(e => e.innerHTML).join('')")
            assert outputs and lab.token not in outputs
        finally:
            browser.close()
