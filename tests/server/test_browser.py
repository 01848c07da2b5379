"""End to end in a real browser: JupyterLab + our server extension + headless Chromium.

Checks that the ``%%eugo`` timeline grows while the cell still runs (BokehJS loaded from
our authenticated handler, offline) and that the final summary shows the speedup; that
hovering a task bar or the driver's wait shows its tooltip; that a function named with
HTML in it shows as text everywhere and runs no script; that a worker dying mid-cell
gets its replacement a labelled lane and its crashed attempt a bar; and that the
counters count ``hpc.map`` items. Screenshots go to ``test-output/``.
Chromium must be installed (``apt-get install chromium``; CI does): these tests never skip.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_fixtures import OUT, Lab, chromium, write_notebook

pytestmark = pytest.mark.slow

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


@contextlib.contextmanager
def _lab_with(tmp_path: Path, name: str, cells: list[str]) -> Iterator[Lab]:
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / name, cells)
    server = Lab(root, tmp_path)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def lab(tmp_path):
    with _lab_with(tmp_path, "live.ipynb", ["%load_ext eugo_lab", CELL]) as server:
        yield server


@contextlib.contextmanager
def _page(lab: Lab, notebook: str) -> Iterator[tuple[Any, list[str], list[str]]]:
    """A Chromium page with ``notebook`` open and its kernel idle; yields (page, console lines, dialogs seen)."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        console: list[str] = []
        dialogs: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"[:300]))

        def on_dialog(d: Any) -> None:  # an alert() from injected HTML would land here
            dialogs.append(f"{d.type}: {d.message}")
            d.dismiss()

        page.on("dialog", on_dialog)
        page.goto(f"{lab.url}lab/tree/{notebook}?token={lab.token}&reset")
        page.wait_for_function(
            "() => { try { return window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
            " === 'idle'; } catch (e) { return false; } }", timeout=90_000)
        yield page, console, dialogs


def _run_all(page: Any) -> None:
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


# Screen positions of the bars of one renderer ("eugo-tasks" or "eugo-blocks") of the k-th
# timeline on the page, after scrolling it into view, with the row data behind each bar.
BARS = """([k, renderer]) => {
  const pvs = [...window.Bokeh.index.roots].filter(v => v.model.name === 'eugo-timeline');
  const pv = pvs[k];
  pv.el.scrollIntoView({block: 'center'});
  const rv = [...pv.renderer_views.values()].find(r => r.model.name === renderer);
  const box = pv.canvas_view.el.getBoundingClientRect();
  const g = rv.glyph, data = rv.model.data_source.data;
  const get = (c, i) => (data[c] === undefined ? null : data[c][i]);
  return Array.from(g.sleft).map((l, i) => ({
    x: box.left + (l + g.sright[i]) / 2, y: box.top + g.sy[i], status: get('status', i), y_lane: get('y', i)}));
}"""

# The visible Bokeh tooltip rows as {label: value}, read from the tooltips' shadow DOM, and
# how many <img> elements they hold (user text must arrive as text, not markup).
TOOLTIP = """() => {
  const found = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList.contains('bk-Tooltip') && el.shadowRoot && el.getBoundingClientRect().width > 0) {
        const rows = {};
        const labels = el.shadowRoot.querySelectorAll('.bk-tooltip-row-label');
        const values = el.shadowRoot.querySelectorAll('.bk-tooltip-row-value');
        labels.forEach((lab, i) => {
          const value = values[i].querySelector('[data-value]') || values[i];  // not the colour swatch
          rows[lab.textContent.replace(/:\\s*$/, '').trim()] = value.textContent;
        });
        found.push({rows, imgs: el.shadowRoot.querySelectorAll('img').length});
      }
      if (el.shadowRoot) { walk(el.shadowRoot); }
    }
  };
  walk(document);
  return found;
}"""

# The k-th timeline's lane labels ({y: label}) and legend entries, from BokehJS's own models
# (the canvas draws them as text, so what the models hold is what is drawn).
AXIS_AND_LEGEND = """(k) => {
  const pv = [...window.Bokeh.index.roots].filter(v => v.model.name === 'eugo-timeline')[k];
  const axis = pv.model.left[0];
  const labels = axis.major_label_overrides;
  const entries = labels instanceof Map ? [...labels.entries()] : Object.entries(labels);
  const legend = pv.model.above.find(r => r.name === 'eugo-legend');
  return {labels: Object.fromEntries(entries.map(([y, t]) => [String(y), String(t)])),
          ticks: Array.from(axis.ticker.ticks),
          legend: legend.items.flatMap(it => it.get_labels_list_from_label_prop())};
}"""


def _hover(page: Any, bar: dict, timeout: float = 5.0) -> dict:
    """Move the mouse onto ``bar`` and return the tooltip that shows (its rows and <img> count)."""
    page.mouse.move(bar["x"] - 40, bar["y"] - 40)
    page.mouse.move(bar["x"], bar["y"], steps=4)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tips = page.evaluate(TOOLTIP)
        if tips and tips[0]["rows"]:
            return tips[0]
        time.sleep(0.1)
    raise AssertionError(f"no tooltip appeared over {bar}")


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
    with _page(lab, "live.ipynb") as (page, console, _):
        _run_all(page)
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


EVIL = "<img src=x onerror=alert(1)>"
EVIL_CELL = """%%eugo -w 2
import time
from eugo_lab import hpc

def work(i):
    with hpc.phase("read"):
        time.sleep(0.05)
    time.sleep(0.2)
    return b"x" * 1000

evil = hpc.remote(work, name="<img src=x onerror=alert(1)>")  # the name traces and displays show
futures = [evil.remote(i) for i in range(6)]
len(hpc.get(futures))"""


def test_tooltips_and_user_text_escaped_in_chromium(tmp_path):
    with _lab_with(tmp_path, "hover.ipynb", ["%load_ext eugo_lab", EVIL_CELL]) as lab, \
            _page(lab, "hover.ipynb") as (page, console, dialogs):
        _run_all(page)
        page.wait_for_selector(".eugo-summary", timeout=60_000)

        bars = page.evaluate(BARS, [0, "eugo-tasks"])
        assert len(bars) == 6, bars
        tip = _hover(page, bars[0])
        page.screenshot(path=str(OUT / "browser-tooltip-task.png"))
        rows = tip["rows"]
        assert rows["function"] == EVIL, rows  # the characters, not an image
        # 250 ms of sleeps: at least that, however busy the machine (which only adds to it)
        m = re.fullmatch(r"(\d+(?:\.\d)?) (ms|s)", rows["duration"])
        assert m and float(m[1]) * (1000 if m[2] == "s" else 1) >= 200, rows
        assert re.fullmatch(r"read \d+\.\d ms", rows["phases"]), rows
        assert re.fullmatch(r"in \d+ B, out 1\.0 kB", rows["bytes"]), rows
        assert rows["status"] == "ok" and tip["imgs"] == 0

        blocks = page.evaluate(BARS, [0, "eugo-blocks"])
        assert len(blocks) == 1, blocks
        tip = _hover(page, blocks[0])
        page.screenshot(path=str(OUT / "browser-tooltip-driver.png"))
        assert tip["rows"] == {"driver": "get() blocked on 6 futures", "at": "Cell In[2], line 13"}, tip

        axis = page.evaluate(AXIS_AND_LEGEND, 0)
        assert axis["legend"] == [EVIL] and axis["labels"] == {"0": "driver", "1": "worker 0", "2": "worker 1"}
        summary = page.inner_text(".eugo-summary")
        assert f"{EVIL} ×6" in summary and f"{EVIL}() used the CPU" in summary, summary  # table and findings
        injected = page.evaluate("() => document.querySelectorAll('.jp-OutputArea img').length")
        page.screenshot(path=str(OUT / "browser-escaping.png"), full_page=True)
        assert injected == 0 and dialogs == [], (injected, dialogs, console[-10:])


CRASH_AND_MAP = ["%load_ext eugo_lab", """%%eugo -w 2
import os, time
from eugo_lab import hpc
from eugo_lab.hpc import session

@hpc.remote
def fragile(i):
    time.sleep(0.2)
    if i == 2 and not os.path.exists(FLAG):
        open(FLAG, "w").close()
        os._exit(1)  # this worker process dies mid-task, on the first attempt only
    return os.getpid()

started_with = {w.pid for w in session.current().backend.workers()}
hpc.get([fragile.remote(i) for i in range(8)])
# then until the replacement process has run something (it takes a moment to start)
while not set(hpc.get([fragile.remote(-1), fragile.remote(-1)])) - started_with:
    pass""", """%%eugo -w 2
@hpc.remote
def step(x):
    time.sleep(0.01)
    return x

len(hpc.get(hpc.map(step, range(300))))"""]

COUNTERS = """() => Array.from(document.querySelectorAll('.eugo-counters')).map(e => e.textContent)"""


def test_crash_lanes_and_map_item_counters_in_chromium(tmp_path):
    cells = list(CRASH_AND_MAP)
    cells[1] = cells[1].replace("FLAG", repr(str(tmp_path / "crashed-once")))
    with _lab_with(tmp_path, "crash.ipynb", cells) as lab, _page(lab, "crash.ipynb") as (page, console, _):
        _run_all(page)
        seen: list[str] = []
        deadline = time.monotonic() + 75
        while time.monotonic() < deadline:
            texts = page.evaluate(COUNTERS)
            if len(texts) == 2:
                seen.append(texts[1])
                if texts[1].startswith("finished"):
                    break
            time.sleep(0.08)
        page.wait_for_function("() => document.querySelectorAll('.eugo-summary').length === 2", timeout=30_000)

        # while the map ran, the counters counted its 300 items (a count of batches stays <= 4)
        counts = [tuple(int(x) for x in re.search(r"done (\d+) · running (\d+) · pending (\d+)", t).groups())
                  for t in seen if t.startswith("running")]
        assert any(sum(c) == 300 and c[2] > 8 for c in counts), (counts, console[-10:])
        assert seen[-1].startswith("finished · done 300 · running 0 · pending 0"), seen[-3:]

        # the crash: the dead process's lane says so, the replacement got a lane, both bars are there
        axis = page.evaluate(AXIS_AND_LEGEND, 0)
        died = [y for y, lab_ in axis["labels"].items() if lab_.endswith("(died)")]
        new = [y for y, lab_ in axis["labels"].items() if lab_.endswith("(replacement)")]
        assert len(died) == 1 and new == ["3"] and axis["ticks"] == [0, 1, 2, 3], axis
        assert axis["labels"][died[0]].split()[:2] == axis["labels"]["3"].split()[:2]  # same worker index
        bars = page.evaluate(BARS, [0, "eugo-tasks"])
        crashed = [b for b in bars if b["status"] == "crashed"]
        retried = [b for b in bars if b["status"] == "ok (attempt 2)"]
        assert len(crashed) == 1 and str(crashed[0]["y_lane"]) == died[0], bars
        assert len(retried) == 1 and any(str(b["y_lane"]) == "3" for b in bars), bars
        tip = _hover(page, crashed[0])
        page.screenshot(path=str(OUT / "browser-crash-lanes.png"))
        assert tip["rows"]["status"] == "crashed", tip
        assert re.fullmatch(r"at most \d+(\.\d+)? ms \(its worker died\)", tip["rows"]["duration"]), tip
        summaries = page.evaluate("() => Array.from(document.querySelectorAll('.eugo-summary')).map(e => e.innerText)")
        assert "failed / retried\t1 / 1" in summaries[0], summaries[0]


FINDINGS_CELL = """%%eugo -w 2
import time
from eugo_lab import hpc

@hpc.remote
def setup(i):
    time.sleep(0.06)
    return i

def part(data):
    with hpc.phase("<img src=x onerror=alert(1)>"):
        time.sleep(0.01)
    time.sleep(len(data) / 8e6)  # a bigger partition takes longer
    return 1

evil = hpc.remote(part, name="<img src=x onerror=alert(1)>")
for i in range(3):
    hpc.get(setup.remote(i))  # the Blocking finding's line
len(hpc.get([evil.remote(b"x" * n) for n in (100_000, 200_000, 400_000, 800_000, 1_600_000, 3_200_000)]))"""


def test_new_findings_and_biggest_win_escaped_in_chromium(tmp_path):
    with _lab_with(tmp_path, "findings.ipynb", ["%load_ext eugo_lab", FINDINGS_CELL]) as lab, \
            _page(lab, "findings.ipynb") as (page, console, dialogs):
        _run_all(page)
        page.wait_for_selector(".eugo-summary", timeout=60_000)
        summary = page.inner_text(".eugo-summary")
        page.screenshot(path=str(OUT / "browser-findings.png"), full_page=True)
        assert re.search(r"Biggest win: .+ — predicted \S+ m?s → \S+ m?s", summary), summary
        assert f"{EVIL}() inputs range from 100 kB to 3.2 MB" in summary, summary  # Unbalanced partitions
        assert f"every {EVIL}() task does about the same work" in summary, summary
        assert "move the get() at cell line 18 out of the loop" in summary, summary  # Blocking, with its line
        assert re.search(r"saves \S+ m?s: \S+ m?s → \S+ m?s predicted", summary), summary
        # Six partitions of very different sizes after three blocking gets: the tasks ran side by side
        # for a tenth to a quarter of the cell, depending on the machine. A speedup (with its
        # efficiency) is shown only where that was long enough, else how long they were side by side.
        assert ("tasks side by side" in summary) != ("efficiency" in summary), summary
        assert "0.0x" not in summary, summary
        injected = page.evaluate("() => document.querySelectorAll('.jp-OutputArea img').length")
        assert injected == 0 and dialogs == [], (injected, dialogs, console[-10:])


BY_VALUE_CELL = """%%eugo -w 2
import time
import numpy as np
from eugo_lab import hpc

@hpc.remote
def rows(a):
    return a.shape[0]

data = np.ones(4_000_000)  # 32 MB, sent by value to every task
n = sum(hpc.get([rows.remote(data) for _ in range(6)]))
t = time.time()
while time.time() - t < 0.2:  # the driver's own work after the results
    pass
n"""

# The driver lane as drawn (its own segments and the blocked waits) and the x axis's range.
DRIVER_LANE = """() => {
  const pv = [...window.Bokeh.index.roots].filter(v => v.model.name === 'eugo-timeline').pop();
  const doc = pv.model.document;
  const d = doc.get_model_by_name('eugo-timeline-driver').data;
  const b = doc.get_model_by_name('eugo-timeline-blocks').data;
  const segs = Array.from(d.left).map((l, i) => ({kind: d.kind[i], left: l, right: d.right[i], label: d.label[i]}))
    .concat(Array.from(b.left).map((l, i) => ({kind: 'blocked', left: l, right: b.right[i], label: b.label[i]})));
  const prompts = [...document.querySelectorAll('.jp-InputPrompt')].map(e => e.textContent.trim());
  return {segs, start: pv.model.x_range.start, end: pv.model.x_range.end, tags: Array.from(pv.model.tags),
          background: pv.model.background_fill_color, prompts,
          summary: (document.querySelector('.eugo-driver-lead') || {}).textContent || null};
}"""


def test_driver_lane_axis_and_dark_theme_in_chromium(tmp_path):
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    with _lab_with(tmp_path, "byvalue.ipynb", ["%load_ext eugo_lab", BY_VALUE_CELL]) as server, \
            _page(server, "byvalue.ipynb") as (page, console, _):
        _run_all(page)
        deadline = time.monotonic() + 240
        got: dict = {}
        while time.monotonic() < deadline:
            try:
                got = page.evaluate(DRIVER_LANE)
            except Exception:  # noqa: BLE001 - the figure is not on the page yet
                got = {}
            if got and got["prompts"][-1:] != ["[*]:"] and got["summary"] and any(
                    s["kind"] == "own work" for s in got["segs"]):
                break
            time.sleep(0.5)
        assert got and got["summary"], console[-20:]
        page.screenshot(path=str(shots / "driver-lane-light.png"), full_page=True)
        segs = sorted(got["segs"], key=lambda s: s["left"])
        # The lane accounts for the whole cell: from 0 to its end, no gaps, and the axis spans the same.
        assert segs[0]["left"] == pytest.approx(0.0, abs=1e-6)
        assert all(abs(a["right"] - b["left"]) < 1e-6 for a, b in zip(segs, segs[1:]))
        assert got["start"] == 0.0 and got["end"] == pytest.approx(segs[-1]["right"], rel=1e-6)
        kinds = {s["kind"] for s in segs}
        assert {"serializing", "own work", "blocked"} <= kinds, kinds
        ser = sum(s["right"] - s["left"] for s in segs if s["kind"] == "serializing")
        # How long serializing took is the machine's speed (and the local pool now shares a large array sent
        # by value): the segment is drawn and names what was serialized.
        assert ser > 0 and "32 MB" in next(s["label"] for s in segs if s["kind"] == "serializing")
        # The driver's 0.2 s after the results is drawn, not cut off.
        assert segs[-1]["kind"] == "own work" and segs[-1]["right"] - segs[-1]["left"] >= 0.19
        assert "of this cell ran in the driver" in got["summary"]
        assert "0.0x" not in page.text_content(".eugo-summary")
        # The status bar's numbers carry their units: workers, and the cost so far in dollars.
        # The panel's model polls the status every 2 s: wait for the poll that follows the cell's runtime.
        page.wait_for_function(
            "() => /worker/.test(document.querySelector('.eugo-StatusItem')?.textContent || '')", timeout=20000)
        status = page.text_content(".eugo-StatusItem") or ""
        assert re.fullmatch(r"Eugo: \d+ workers?, (idle|\d+ running.*), (\$\d+\.\d+ so far at \$[\d.]+/worker-hour"
                            r"|no bill \(your own machine\))", status), status
        # Dark theme: the Bokeh timeline follows, as the summary does.
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                      "{theme: 'JupyterLab Dark'})")
        dark = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            dark = page.evaluate(DRIVER_LANE)
            if "eugo-theme-dark" in dark["tags"]:
                break
            time.sleep(0.3)
        assert "eugo-theme-dark" in dark["tags"], dark["tags"]
        time.sleep(1.0)
        page.screenshot(path=str(shots / "driver-lane-dark.png"), full_page=True)
        bg = page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim()")
        assert dark["background"].lower() == bg.lower() and bg.lower() not in ("#fff", "#ffffff", "white")
        # ...and back.
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                      "{theme: 'JupyterLab Light'})")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "eugo-theme-light" not in page.evaluate(DRIVER_LANE)["tags"]:
            time.sleep(0.3)
        assert "eugo-theme-light" in page.evaluate(DRIVER_LANE)["tags"]
