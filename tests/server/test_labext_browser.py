"""The JupyterLab extension end to end: JupyterLab + the server extension + the built bundle in headless Chromium.

The bundle under test is this checkout's ``eugo_lab/labextension`` (built by ``pip install``,
``make labext`` or ``jlpm build:prod`` in ``labextension/``), put first on ``JUPYTER_PATH`` so that
JupyterLab loads it rather than any installed copy. The courses are copied to a temporary root,
so nothing here writes to ``courses/``. Screenshots go to ``test-output/labext-*.png``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_fixtures import OUT, REPO, Lab, chromium, kernel_env

from eugo_lab import progress

pytestmark = pytest.mark.slow

BUNDLE = REPO / "eugo_lab" / "labextension"
NAME = "eugo-lab-labextension"
IDLE_WARNING_S = 4

SETUP = '''%load_ext eugo_lab
import random, time
from eugo_lab import hpc

@hpc.remote
def estimate_pi(seed, n=200_000):
    rng = random.Random(seed)
    inside = 0
    for _ in range(n):
        x, y = rng.random(), rng.random()
        inside += x * x + y * y <= 1.0
    return 4 * inside / n'''
EXERCISE = '''%%eugo --exercise first-task
from eugo_lab import exercises
p = exercises.problem("first-task")
future = estimate_pi.remote(p.seed, p.darts)
result = hpc.get(future)
print(result)'''
SLOW = '''%%eugo -w 2
@hpc.remote
def nap(i):
    time.sleep(0.5)
    return i

sum(hpc.get([nap.remote(i) for i in range(24)]))'''
CHECKLISTS = '''from eugo_lab import checklists
from eugo_lab.checklists.model import all_checklists

for c in all_checklists():
    print(checklists.show(c.id).to_text())'''


def _notebook(path: Path, cells: list[str]) -> None:
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                     "source": src} for i, src in enumerate(cells)],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))


def _extension_path(tmp: Path) -> Path:
    """A JUPYTER_PATH entry whose labextensions/ holds this checkout's bundle."""
    assert (BUNDLE / "package.json").is_file(), (
        f"{BUNDLE} is not built: run 'make labext' (or 'jlpm install && jlpm build:prod' in labextension/)")
    data = tmp / "jupyter-data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / NAME).symlink_to(BUNDLE, target_is_directory=True)
    return data


@pytest.fixture
def lab(tmp_path) -> Iterator[Lab]:
    tmp = tmp_path
    root = tmp / "root"
    root.mkdir()
    shutil.copytree(REPO / "courses", root / "courses", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    _notebook(root / "practice.ipynb", [SETUP, EXERCISE, SLOW, CHECKLISTS])
    # A progress store of its own: the course notebooks nbval ran earlier in the session passed their exercises
    # in the session's store, and this test counts a pass of its own from zero.
    (tmp / "progress").mkdir()
    # ...with one earlier "not yet" at fan-out for which the learner took both hint tiers (the panel shows them).
    store = tmp / "progress" / "progress.json"
    progress.record_exercise("fan-out", False, "the driver waited in get() inside the loop", path=store,
                             mistake="blocking")
    for _ in range(2):
        progress.record_hint("fan-out", 2, path=store)
    env = {"JUPYTER_PATH": str(_extension_path(tmp)), "EUGO_LAB_IDLE_WARNING_S": str(IDLE_WARNING_S),
           "EUGO_LAB_PROGRESS_DIR": str(tmp / "progress")}
    server = Lab(root, tmp, env=env)
    server.env = kernel_env(**env)  # for `jupyter labextension list` with the same path
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _api(lab: Lab, path: str) -> Any:
    req = urllib.request.Request(f"{lab.url}eugo/api/{path}", headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _open(browser: Any, lab: Lab, notebook: str) -> Any:
    """A page with ``notebook`` open, its kernel idle and the Eugo panel showing."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    page.goto(f"{lab.url}lab/tree/{notebook}?token={lab.token}&reset")
    page.wait_for_function(
        "() => { try { return window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
        " === 'idle'; } catch (e) { return false; } }", timeout=90_000)
    page.evaluate("() => window.jupyterapp.commands.execute('eugo:show-panel')")
    page.wait_for_selector("#eugo-panel .eugo-Course", timeout=30_000)
    return page


def _run_cell(page: Any, index: int) -> None:
    page.evaluate("""(i) => {
      const nb = window.jupyterapp.shell.currentWidget.content;
      nb.activeCellIndex = i;
      window.jupyterapp.commands.execute('notebook:run-cell');
    }""", index)


CELL_OUTPUT = """(i) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
  const out = cell.node.querySelector('.jp-OutputArea');
  return out ? out.textContent : '';
}"""


def _wait(predicate, timeout: float, what: str, page: Any, shot: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    page.screenshot(path=str(OUT / f"labext-{shot}-failed.png"))
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _course_counts(page: Any) -> dict[str, str]:
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#eugo-panel .eugo-Course')]
        .map(c => [c.dataset.course, c.querySelector('.eugo-Count').textContent]))""")


def test_extension_is_listed_enabled(lab):
    out = subprocess.run([str(Path(sys.executable).parent / "jupyter-labextension"), "list"], env=lab.env,
                         capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    line = next((ln for ln in text.splitlines() if NAME in ln), "")
    assert "enabled" in line and "OK" in line, text


def test_panel_courses_progress_checklist_status_and_idle_stop(lab):
    listing = _api(lab, "courses")
    first = next(c for c in listing["courses"]
                 if any(e["id"] == "first-task" for les in c["lessons"] for e in les["exercises"]))
    with chromium() as browser:
        page = _open(browser, lab, "practice.ipynb")
        # the panel lists the courses the server lists, titles as text
        titles = page.eval_on_selector_all("#eugo-panel .eugo-Course-title", "els => els.map(e => e.textContent)")
        course_titles = [c["title"] for c in listing["courses"]]
        assert titles[:len(course_titles)] == course_titles
        folders = sorted(p.name for p in (REPO / "courses").iterdir() if p.is_dir() and p.name[:2].isdigit())
        assert len(listing["courses"]) == len(folders), (course_titles, folders)
        before = _course_counts(page)[first["id"]]
        assert before == f"{first['passed']}/{first['total']}"
        page.click(f"#eugo-panel .eugo-Course[data-course='{first['id']}'] .eugo-Course-head")
        # the hints taken at an exercise are shown beside it (course 1 is open now)
        hints = page.text_content("#eugo-panel .eugo-Exercise[data-exercise='fan-out'] .eugo-Exercise-hints")
        assert hints == "2 hints", hints
        page.screenshot(path=str(OUT / "labext-panel-courses.png"))

        # an exercise passed in the notebook shows in the panel without a reload
        _run_cell(page, 0)
        _run_cell(page, 1)
        passed = f"{first['passed'] + 1}/{first['total']}"
        _wait(lambda: _course_counts(page)[first["id"]] == passed, 90, f"the course count to read {passed}",
              page, "progress")
        status = page.get_attribute("#eugo-panel .eugo-Exercise[data-exercise='first-task']", "data-status")
        assert status == "passed"
        page.screenshot(path=str(OUT / "labext-panel-exercise-passed.png"))

        # a checklist item ticked in the panel is stored
        checklist = listing["checklists"][0]
        item = next(i for i in checklist["items"] if not i["ticked"])
        page.click(f"#eugo-panel .eugo-Checklist[data-checklist='{checklist['id']}'] .eugo-Course-head")
        page.check(f"#eugo-panel .eugo-Checklist[data-checklist='{checklist['id']}'] "
                   f".eugo-Item[data-item='{item['id']}'] input")

        def stored() -> bool:
            got = next(c for c in _api(lab, "courses")["checklists"] if c["id"] == checklist["id"])
            return next(i for i in got["items"] if i["id"] == item["id"])["ticked"]

        _wait(stored, 20, "the ticked item to be stored", page, "checklist")
        count = f"#eugo-panel .eugo-Checklist[data-checklist='{checklist['id']}'] .eugo-Count"
        want = f"{checklist['ticked'] + 1}/{checklist['total']}"
        _wait(lambda: page.text_content(count) == want, 20, f"the checklist's count to read {want}", page,
              "checklist-count")
        page.screenshot(path=str(OUT / "labext-panel-checklist.png"))

        # the status bar reflects a running %%eugo cell, then returns to idle
        _run_cell(page, 2)
        busy = _wait(lambda: (t := page.text_content(".eugo-StatusItem") or "") and "running" in t and t,
                     60, "the status bar to show running tasks", page, "statusbar-busy")
        assert "2 workers" in busy, busy
        page.screenshot(path=str(OUT / "labext-statusbar-busy.png"))
        _wait(lambda: "running" not in (page.text_content(".eugo-StatusItem") or "")
              and page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status")
              == "idle", 90, "the cell to finish and the status bar to return to idle", page, "statusbar-idle")
        assert "idle" in page.text_content(".eugo-StatusItem")

        # an idle runtime gets the warning; Stop stops it
        warning = _wait(lambda: page.text_content("#eugo-panel .eugo-IdleWarning") if
                        page.query_selector("#eugo-panel .eugo-IdleWarning") else None,
                        30, "the idle warning", page, "idle-warning")
        # a local pool with no price set: no bill, said so (a priced cluster reads "$X so far at $Y/worker-hour")
        assert re.fullmatch(r"Idle cluster: .+ idle, (no bill \(your own machine\)|\$[\d.]+ so far at .+) — stop it\?",
                            warning), warning
        page.screenshot(path=str(OUT / "labext-idle-warning.png"))
        kernel_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id")
        page.click(f"#eugo-panel .eugo-Runtime[data-kernel='{kernel_id}'] .eugo-Stop")

        def stopped() -> bool:
            k = next(k for k in _api(lab, "status")["kernels"] if k["id"] == kernel_id)
            return k["eugo"] is None or k["eugo"]["state"] == "none"

        _wait(stopped, 30, "the runtime to stop", page, "stop")
        _wait(lambda: page.query_selector(f"#eugo-panel .eugo-Runtime[data-kernel='{kernel_id}']") is None
              and page.text_content(".eugo-StatusItem") == "Eugo: idle", 10,
              "the panel and the status bar to show no runtime", page, "stop-panel")
        page.screenshot(path=str(OUT / "labext-stopped.png"))

        # the item ticked in the panel shows ticked in the notebook's checklist after a kernel restart
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
        _wait(lambda: page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                                    ".status") == "idle", 60, "the restarted kernel", page, "restart")
        _run_cell(page, 3)
        mark = f"[x] {item['id']}:"
        _wait(lambda: mark in (page.evaluate(CELL_OUTPUT, 3) or ""), 60, f"{mark!r} in the checklist's output",
              page, "checklist-after-restart")
        assert not page.errors, page.errors


def test_vocabulary_tooltip(lab):
    glossary = {t["term"]: t for t in _api(lab, "glossary")["terms"]}
    with chromium() as browser:
        page = _open(browser, lab, "courses/01-distributed-python/01-remote-functions-and-futures.ipynb")
        _wait(lambda: page.evaluate("() => document.querySelectorAll('.jp-MarkdownCell .eugo-Term').length"), 30,
              "vocabulary terms to be marked", page, "tooltip-terms")
        term = page.query_selector(".jp-MarkdownCell .eugo-Term")
        term.scroll_into_view_if_needed()
        name = term.get_attribute("data-term")
        assert name in glossary
        term.hover()
        page.wait_for_selector(".eugo-TermTooltip", state="visible", timeout=5_000)
        assert page.text_content(".eugo-TermTooltip-term") == name
        assert page.text_content(".eugo-TermTooltip-definition") == glossary[name]["definition"]
        page.screenshot(path=str(OUT / "labext-tooltip.png"))
        # its link opens the vocabulary notebook
        page.click(".eugo-TermTooltip-link")
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget.context.path.endsWith('vocabulary.ipynb')",
                               timeout=30_000)

        # the launcher's card opens the course index
        page.evaluate("() => { window.jupyterapp.commands.execute('launcher:create'); }")
        card = page.wait_for_selector(".jp-LauncherCard[title='Open the Eugo course index']", timeout=10_000)
        assert "Eugo courses" in card.text_content()
        page.screenshot(path=str(OUT / "labext-launcher.png"))
        card.click()
        index = _api(lab, "courses")["index"]["path"]
        page.wait_for_function("(p) => window.jupyterapp.shell.currentWidget.context"
                               " && window.jupyterapp.shell.currentWidget.context.path === p", arg=index,
                               timeout=30_000)
        assert not page.errors, page.errors
