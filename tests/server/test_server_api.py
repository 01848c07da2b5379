"""The server extension's REST API (``eugo_lab.server.api``) through jupyter_server's pytest plugin.

The server runs on the repository's real ``courses/`` folder as root_dir (as ``make lab``
does), with the progress store in a temporary folder; kernels are real ipykernels.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import psutil
import pytest
from jupyter_server.auth.authorizer import Authorizer

from eugo_lab import glossary, progress
from eugo_lab.checklists.model import all_checklists
from eugo_lab.exercises.catalog import all_exercises
from eugo_lab.server.api import MAX_BODY_BYTES
from eugo_lab.settings import BOKEH_URL_ENV, IDLE_WARNING_ENV, PROGRESS_DIR_ENV, STATUS_DIR_ENV

pytest_plugins = ["pytest_jupyter.jupyter_server"]

REPO = Path(__file__).resolve().parents[2]
COURSES = REPO / "courses"


@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"eugo_lab.server": True}}}


@pytest.fixture
def jp_root_dir():
    return COURSES


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """A fresh progress store; kernels import this worktree; the extension's env changes undone afterwards."""
    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path / "progress"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    for name in (STATUS_DIR_ENV, BOKEH_URL_ENV):  # set by the extension as it loads: restored at teardown
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(IDLE_WARNING_ENV, "42")


async def fetch(jp_fetch, *parts, method="GET", body=None, headers=None):
    """(status, JSON reply) without raising on 4xx."""
    if method == "POST" and body is None:
        body = ""
    r = await jp_fetch(*parts, method=method, body=body, headers=headers, raise_error=False,
                       follow_redirects=False, request_timeout=60)
    text = r.body.decode() if r.body else ""
    return r.code, (json.loads(text) if text and r.headers.get("Content-Type", "").startswith("application/json")
                    else text)


async def post(jp_fetch, *parts, doc=None, raw=None, headers=None):
    body = raw if raw is not None else json.dumps(doc if doc is not None else {})
    return await fetch(jp_fetch, *parts, method="POST", body=body, headers=headers)


# -- the auth matrix -------------------------------------------------------------------------------


async def _kernel(jp_fetch) -> str:
    code, doc = await post(jp_fetch, "api", "kernels", doc={"name": "python3"})
    assert code == 201, doc
    return doc["id"]


async def _login(jp_fetch, jp_serverapp) -> dict[str, str]:
    """Log in through the login form, as a browser does: the cookies it then sends (login and _xsrf)."""
    r = await jp_fetch("login", headers={"Authorization": ""}, raise_error=False, follow_redirects=False)
    cookies = _cookies(r)
    xsrf = cookies["_xsrf"]
    form = urllib.parse.urlencode({"password": jp_serverapp.identity_provider.token, "_xsrf": xsrf})
    r = await jp_fetch("login", method="POST", body=form, raise_error=False, follow_redirects=False,
                       headers={"Authorization": "", "Cookie": f"_xsrf={xsrf}"})
    assert r.code == 302, r.code
    cookies.update(_cookies(r))
    return cookies


def _cookies(response) -> dict[str, str]:
    out = {}
    for header in response.headers.get_list("Set-Cookie"):
        name, _, rest = header.partition("=")
        out[name.strip()] = rest.split(";", 1)[0]
    return out


def _routes(kid: str) -> list[tuple[str, tuple[str, ...], str | None]]:
    tick = json.dumps({"checklist": "workload-readiness", "item": "task-size", "ticked": True})
    return [("GET", ("eugo", "api", "courses"), None), ("GET", ("eugo", "api", "glossary"), None),
            ("GET", ("eugo", "api", "status"), None), ("POST", ("eugo", "api", "progress"), tick),
            ("POST", ("eugo", "api", "kernels", kid, "stop"), "")]


async def test_every_route_needs_a_token_or_a_login_and_every_post_the_xsrf_token(jp_fetch, jp_serverapp):
    kid = await _kernel(jp_fetch)
    cookies = await _login(jp_fetch, jp_serverapp)
    login = "; ".join(f"{k}={v}" for k, v in cookies.items())
    for method, parts, body in _routes(kid):
        where = f"{method} {'/'.join(parts)}"
        for headers in ({"Authorization": ""}, {"Authorization": "token wrong"}):
            code, doc = await fetch(jp_fetch, *parts, method=method, body=body, headers=headers)
            assert code == 403, (where, headers, code, doc)
            assert "error" in doc and "Traceback" not in json.dumps(doc), (where, doc)
        code, doc = await fetch(jp_fetch, *parts, method=method, body=body)  # token header: no XSRF needed
        assert code == 200, (where, code, doc)
        browser = {"Authorization": "", "Cookie": login}
        if method == "GET":
            code, doc = await fetch(jp_fetch, *parts, headers=browser)
            assert code == 200, (where, code, doc)
            continue
        for xsrf in (None, "2|00000000|00000000000000000000000000000000|1700000000"):
            headers = dict(browser, **({"X-XSRFToken": xsrf} if xsrf else {}))
            code, doc = await fetch(jp_fetch, *parts, method=method, body=body, headers=headers)
            assert code == 403, (where, xsrf, code, doc)
            assert "_xsrf" in doc["error"] or "XSRF" in doc["error"], doc
        code, doc = await fetch(jp_fetch, *parts, method=method, body=body,
                                headers=dict(browser, **{"X-XSRFToken": cookies["_xsrf"]}))
        assert code == 200, (where, code, doc)
    await fetch(jp_fetch, "api", "kernels", kid, method="DELETE")


class ReadOnlyAuthorizer(Authorizer):
    """A deployment's fine-grained authorizer that lets its users look at everything and change nothing."""

    def is_authorized(self, handler, user, action, resource) -> bool:
        return action == "read"


READ_ONLY = {"ServerApp": {"jpserver_extensions": {"eugo_lab.server": True}, "authorizer_class": ReadOnlyAuthorizer}}


@pytest.mark.parametrize("jp_server_config", [READ_ONLY])
async def test_an_authorizer_that_forbids_writes_gets_reads_through_and_every_write_refused(jp_fetch, jp_serverapp):
    assert isinstance(jp_serverapp.authorizer, ReadOnlyAuthorizer)
    kid = "0" * 8  # never looked up: the authorizer answers before the handler runs
    for method, parts, body in _routes(kid):
        code, doc = await fetch(jp_fetch, *parts, method=method, body=body)
        where = f"{method} {'/'.join(parts)}"
        if method == "GET":
            assert code == 200, (where, code, doc)
        else:
            assert code == 403, (where, code, doc)
            assert doc["error"] == "User is not authorized to write on resource: eugo.", (where, doc)
    assert progress.load()["checklists"] == {}  # the refused tick changed nothing


# -- the listing -----------------------------------------------------------------------------------


def _first_heading(nb: Path) -> str:
    cells = json.loads(nb.read_text())["cells"]
    for c in cells:
        if c["cell_type"] == "markdown":
            for line in "".join(c["source"]).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    raise AssertionError(f"{nb} has no heading")


async def test_courses_lists_the_course_folders_lessons_exercises_and_checklists(jp_fetch):
    progress.record_exercise("first-task", passed=False, evidence="one task", when="2026-12-01T09:00:00+00:00")
    progress.record_exercise("fan-out", passed=True, evidence="overlapped", when="2026-12-01T09:05:00+00:00")
    progress.record_exercise("fan-out", passed=False, evidence="later", when="2026-12-01T09:10:00+00:00")
    progress.record_hint("first-task", 2)  # %eugo hint first-task, once: the panel can show it
    code, doc = await fetch(jp_fetch, "eugo", "api", "courses")
    assert code == 200, doc
    folders = sorted(p.name for p in COURSES.iterdir() if p.is_dir() and p.name[:2].isdigit())
    assert [c["id"] for c in doc["courses"]] == folders and len(folders) >= 3
    lessons = {lesson["path"]: lesson for c in doc["courses"] for lesson in c["lessons"]}
    for c in doc["courses"]:
        assert c["path"] == c["id"] and c["title"]
        assert [le["path"] for le in c["lessons"]] == [f"{c['id']}/{p.name}"
                                                        for p in sorted((COURSES / c["id"]).glob("*.ipynb"))]
        assert c["total"] == sum(len(le["exercises"]) for le in c["lessons"])
    for path, lesson in lessons.items():
        # the heading as plain text (the panel shows it with textContent): no code or emphasis marks
        assert (COURSES / path).is_file() and lesson["title"] == _first_heading(COURSES / path).replace("`", "")
    # every exercise of the catalog whose lesson exists sits under its lesson, with its status
    for ex in all_exercises():
        if (COURSES / ex.lesson).is_file():
            assert ex.id in [e["id"] for e in lessons[ex.lesson]["exercises"]], ex.id
    ex = {e["id"]: e for le in lessons.values() for e in le["exercises"]}
    assert ex["first-task"] == {"id": "first-task", "title": ex["first-task"]["title"], "status": "not yet",
                                "when": "2026-12-01T09:00:00+00:00", "hints_taken": 1}
    assert ex["fan-out"]["status"] == "passed" and ex["fan-out"]["when"] == "2026-12-01T09:05:00+00:00"
    assert ex["put"]["status"] == "not tried" and ex["put"]["when"] is None and ex["put"]["hints_taken"] == 0
    course1 = doc["courses"][0]
    assert course1["passed"] == 1 and course1["lessons"][0]["title"] == "Remote functions and futures"
    assert lessons["01-distributed-python/04-large-arguments-and-put.ipynb"]["title"] == "Large arguments and hpc.put"

    assert [c["id"] for c in doc["checklists"]] == [c.id for c in all_checklists()]
    for c, model in zip(doc["checklists"], all_checklists()):
        assert c["path"] == f"checklists/{c['id']}.ipynb" and (COURSES / c["path"]).is_file()
        assert c["title"] == model.title and c["total"] == len(model.items) and c["ticked"] == 0
        assert [i["id"] for i in c["items"]] == [i.id for i in model.items]
        assert all(i == {"id": i["id"], "text": i["text"], "ticked": False, "how": None, "evidence": None}
                   for i in c["items"])
    assert doc["vocabulary"] == {"path": "vocabulary.ipynb", "title": "Vocabulary"}
    index = COURSES / "index.ipynb"
    assert doc["index"] == ({"path": "index.ipynb", "title": _first_heading(index)} if index.exists() else None)
    if index.exists():  # titles from the index's headings ("## 1. Distributed Python with eugo.hpc")
        assert course1["title"] == "Distributed Python with eugo.hpc"
        assert all(not c["title"][0].isdigit() for c in doc["courses"])


def _course_tree(root: Path, index_md: str | None) -> Path:
    """A small courses folder: two courses (the second numbered lower), a vocabulary, maybe an index."""
    def nb(path: Path, *markdown: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": m}
                                              for m in markdown], "metadata": {}, "nbformat": 4,
                                    "nbformat_minor": 5}))

    nb(root / "10-later-course" / "01-a.ipynb", "intro text", "## Lesson *A* of `later`")
    nb(root / "02-gpu-acceleration" / "01-b.ipynb", "# [Lesson B](x.ipynb) on the GPU")
    nb(root / "vocabulary.ipynb", "# Words")
    (root / "99-not-a-course").mkdir()  # no notebook in it
    if index_md is not None:
        nb(root / "index.ipynb", index_md)
    return root


def test_course_titles_come_from_the_index_headings_else_the_folder_name(tmp_path):
    from eugo_lab.server.courses import find_courses_dir, listing

    index = ("# All courses\n\n## 2. GPU acceleration on Eugo\n\nStart with [memory](02-gpu-acceleration/01-b.ipynb)."
             "\n\n## Elsewhere\n\n[The later one](./10-later-course)")
    root = _course_tree(tmp_path / "with-index", index)
    found, prefix = find_courses_dir(root)
    doc = listing(found, prefix, progress.empty())
    assert [(c["id"], c["title"]) for c in doc["courses"]] == [("02-gpu-acceleration", "GPU acceleration on Eugo"),
                                                               ("10-later-course", "The later one")]
    assert doc["courses"][1]["lessons"][0]["title"] == "Lesson A of later"
    assert doc["courses"][0]["lessons"][0]["title"] == "Lesson B on the GPU"
    assert doc["index"] == {"path": "index.ipynb", "title": "All courses"}

    bare = _course_tree(tmp_path / "repo" / "courses", None)
    found, prefix = find_courses_dir(bare.parent)  # root_dir above the courses: paths carry the prefix
    assert (found, prefix) == (bare.resolve(), "courses")
    doc = listing(found, prefix, progress.empty())
    assert [(c["title"], c["path"]) for c in doc["courses"]] == [("GPU acceleration", "courses/02-gpu-acceleration"),
                                                                 ("Later course", "courses/10-later-course")]
    assert doc["courses"][0]["lessons"][0]["path"] == "courses/02-gpu-acceleration/01-b.ipynb"
    assert doc["index"] is None and doc["vocabulary"] == {"path": "courses/vocabulary.ipynb", "title": "Words"}
    assert all(c["path"] is None for c in doc["checklists"])  # this tree has no checklist notebooks


def test_the_courses_folder_is_configured_or_found_and_never_outside_root_dir(tmp_path):
    from eugo_lab.server.courses import find_courses_dir

    assert find_courses_dir(COURSES) == (COURSES.resolve(), "")
    assert find_courses_dir(REPO) == (COURSES.resolve(), "courses")
    assert find_courses_dir(REPO, "courses") == (COURSES.resolve(), "courses")
    assert find_courses_dir(REPO, str(COURSES)) == (COURSES.resolve(), "courses")
    for outside in ("..", "../../etc", "/etc"):
        with pytest.raises(ValueError, match="not inside the server's root_dir"):
            find_courses_dir(COURSES, outside)


async def test_a_server_outside_the_courses_lists_nothing_and_says_why(jp_fetch, jp_serverapp, tmp_path):
    # JupyterLab opened on any other folder: the panel's request is not an error (no 404 in the console).
    settings = jp_serverapp.web_app.settings
    old = settings.get("server_root_dir"), settings.get("eugo_courses_dir", "")
    settings["server_root_dir"], settings["eugo_courses_dir"] = str(tmp_path), ""
    try:
        code, doc = await fetch(jp_fetch, "eugo", "api", "courses")
    finally:
        settings["server_root_dir"], settings["eugo_courses_dir"] = old
    assert code == 200 and doc["courses"] == [] and doc["checklists"] == [], doc
    assert "--ServerApp.root_dir=courses" in doc["note"]


async def test_a_root_without_courses_answers_404_naming_the_setting(jp_fetch, jp_serverapp):
    jp_serverapp.web_app.settings["eugo_courses_dir"] = "checklists"  # a folder, but no course folders
    code, doc = await fetch(jp_fetch, "eugo", "api", "courses")
    assert code == 404 and "EugoLab.courses_dir" in doc["error"], doc
    jp_serverapp.web_app.settings["eugo_courses_dir"] = "../.."
    code, doc = await fetch(jp_fetch, "eugo", "api", "courses")
    assert code == 404 and "not inside the server's root_dir" in doc["error"], doc


# -- glossary and status ---------------------------------------------------------------------------


async def test_glossary_sends_every_term_with_the_anchor_of_its_vocabulary_heading(jp_fetch):
    code, doc = await fetch(jp_fetch, "eugo", "api", "glossary")
    assert code == 200
    assert [t["term"] for t in doc["terms"]] == glossary.terms()
    headings = {line.lstrip("#").strip().replace(" ", "-")
                for c in json.loads((COURSES / "vocabulary.ipynb").read_text())["cells"]
                if c["cell_type"] == "markdown" for line in "".join(c["source"]).splitlines()
                if line.startswith("#")}
    for t in doc["terms"]:
        e = glossary.lookup(t["term"])
        assert t == {"term": e.term, "definition": e.definition, "aliases": list(e.aliases),
                     "see_also": list(e.see_also), "lesson": e.lesson, "anchor": e.term.replace(" ", "-")}
        assert t["anchor"] in headings, t["anchor"]
        assert not t["lesson"] or (COURSES / t["lesson"]).is_file(), t["lesson"]


async def test_status_keeps_its_shape_and_says_the_idle_threshold(jp_fetch):
    code, doc = await fetch(jp_fetch, "eugo", "api", "status")
    assert code == 200 and set(doc) == {"eugo_lab", "server_version", "idle_warning_s", "kernels"}
    assert doc["idle_warning_s"] == 42.0 and doc["kernels"] == []


def test_the_idle_threshold_is_a_trait_with_an_env_default(monkeypatch):
    from traitlets import TraitError
    from traitlets.config import Config

    from eugo_lab.server.config import DEFAULT_IDLE_WARNING_S, EugoLab

    monkeypatch.delenv(IDLE_WARNING_ENV)
    assert EugoLab().idle_warning_s == DEFAULT_IDLE_WARNING_S == 600
    monkeypatch.setenv(IDLE_WARNING_ENV, "5")
    assert EugoLab().idle_warning_s == 5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(IDLE_WARNING_ENV, bad)
        assert EugoLab().idle_warning_s == DEFAULT_IDLE_WARNING_S
    c = Config()
    c.EugoLab.idle_warning_s = 7.5
    assert EugoLab(config=c).idle_warning_s == 7.5
    with pytest.raises(TraitError, match="positive"):
        EugoLab(idle_warning_s=0)


# -- progress --------------------------------------------------------------------------------------


async def test_a_tick_round_trips_through_the_store_and_the_listing(jp_fetch):
    tick = {"checklist": "workload-readiness", "item": "task-size", "ticked": True}
    code, doc = await post(jp_fetch, "eugo", "api", "progress", doc=tick)
    assert code == 200 and doc["ok"] is True
    assert doc["item"]["id"] == "task-size" and doc["item"]["ticked"] is True and doc["item"]["how"] == "manual"
    stored = progress.load()["checklists"]["workload-readiness"]["task-size"]
    assert stored["ticked"] is True and stored["how"] == "manual"
    _, listing = await fetch(jp_fetch, "eugo", "api", "courses")
    readiness = next(c for c in listing["checklists"] if c["id"] == "workload-readiness")
    assert readiness["ticked"] == 1 and readiness["items"][0] == doc["item"]
    code, doc = await post(jp_fetch, "eugo", "api", "progress", doc=dict(tick, ticked=False))
    assert code == 200 and doc["item"]["ticked"] is False
    assert progress.load()["checklists"]["workload-readiness"]["task-size"]["ticked"] is False


BAD_TICKS = [
    ("{not json", 400, "not JSON"),
    (b"\xff\xfe", 400, "not JSON"),
    ("[1, 2]", 400, "JSON list"),
    ('"workload-readiness"', 400, "JSON str"),
    ("", 400, "not JSON"),
    (json.dumps({"checklist": "workload-readiness", "item": "task-size"}), 400, "missing field 'ticked'"),
    (json.dumps({"checklist": "workload-readiness", "item": "task-size", "ticked": "yes"}), 400,
     "'ticked' must be a JSON boolean"),
    (json.dumps({"checklist": "workload-readiness", "item": "task-size", "ticked": 1}), 400,
     "'ticked' must be a JSON boolean"),
    (json.dumps({"checklist": ["workload-readiness"], "item": "task-size", "ticked": True}), 400,
     "'checklist' must be a JSON string"),
    (json.dumps({"checklist": "workload-readiness", "item": None, "ticked": True}), 400,
     "'item' must be a JSON string"),
    (json.dumps({"checklist": "workload-readiness", "item": "task-size", "ticked": True, "path": "x"}), 400,
     "unknown field(s) 'path'"),
    (json.dumps({"checklist": "../../etc/passwd", "item": "task-size", "ticked": True}), 400, "is not an id"),
    (json.dumps({"checklist": "workload-readiness", "item": "../../../progress", "ticked": True}), 400,
     "is not an id"),
    (json.dumps({"checklist": "Workload Readiness", "item": "task-size", "ticked": True}), 400, "is not an id"),
    (json.dumps({"checklist": "no-such-list", "item": "task-size", "ticked": True}), 404,
     "the checklists are: workload-readiness"),
    (json.dumps({"checklist": "workload-readiness", "item": "no-such-item", "ticked": True}), 404,
     "its items are: task-size"),
    (json.dumps({"checklist": "workload-readiness", "item": "task-size", "ticked": True,
                 "pad": "x" * MAX_BODY_BYTES}), 413, f"send at most {MAX_BODY_BYTES}"),
]


@pytest.mark.parametrize(("body", "status", "says"), BAD_TICKS, ids=[f"case{i}" for i in range(len(BAD_TICKS))])
async def test_bad_ticks_get_a_4xx_naming_what_to_send_and_change_nothing(jp_fetch, body, status, says):
    before = progress.load()
    code, doc = await post(jp_fetch, "eugo", "api", "progress", raw=body)
    assert code == status, (code, doc)
    assert isinstance(doc, dict) and set(doc) == {"error", "message"} and says in doc["error"], doc
    assert "Traceback" not in doc["error"]
    assert progress.load() == before


async def test_bad_paths_and_methods_get_json_4xx(jp_fetch):
    for parts in (("eugo", "api", "kernels", "..%2F..%2Fetc%2Fpasswd", "stop"),
                  ("eugo", "api", "kernels", "no-such-kernel", "stop"),
                  ("eugo", "api", "kernels", "x" * 200, "stop")):
        code, doc = await post(jp_fetch, *parts)
        assert code == 404 and "GET /eugo/api/status lists" in doc["error"], (parts, doc)
    code, doc = await fetch(jp_fetch, "eugo", "api", "progress")  # GET on a POST-only route
    assert code == 405
    code, _ = await post(jp_fetch, "eugo", "api", "courses")
    assert code == 405
    etc = Path("/etc/passwd")
    assert not any(str(etc) in json.dumps(d) for d in [progress.load()])


WRITER = """
import sys
from eugo_lab import progress
from eugo_lab.checklists.store import tick
items = sys.argv[2].split(",")
for i in range(int(sys.argv[1])):
    progress.record_exercise(f"race-{i}", passed=i % 2 == 0, evidence=f"attempt {i}")
    if i < len(items):
        tick("workload-readiness", items[i], True, evidence=f"measured {i}", how="measured")
"""


async def test_a_kernel_side_writer_racing_the_endpoint_loses_nothing(jp_fetch):
    readiness, *others = all_checklists()
    kernel_items = [i.id for i in readiness.items]
    n = 60
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(n), ",".join(kernel_items)], env=dict(os.environ))
    try:
        ticks = [(c.id, it.id) for c in others for it in c.items] * 2  # each twice, some calls concurrent
        for start in range(0, len(ticks), 4):
            replies = await asyncio.gather(*[
                post(jp_fetch, "eugo", "api", "progress", doc={"checklist": c, "item": i, "ticked": True})
                for c, i in ticks[start:start + 4]])
            assert all(code == 200 for code, _ in replies), replies
        assert writer.wait(timeout=120) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    store = progress.load()
    assert sorted(store["exercises"]) == sorted(f"race-{i}" for i in range(n))
    assert all(store["exercises"][f"race-{i}"]["attempts"] == 1 for i in range(n))
    assert {k: v["how"] for k, v in store["checklists"]["workload-readiness"].items()} == \
        dict.fromkeys(kernel_items, "measured")
    for c in others:
        assert {k: (v["ticked"], v["how"]) for k, v in store["checklists"][c.id].items()} == \
            {it.id: (True, "manual") for it in c.items}


# -- stopping a kernel's runtime -------------------------------------------------------------------


async def _client(jp_serverapp, kid):
    client = jp_serverapp.kernel_manager.get_kernel(kid).client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    return client


async def _run(client, code: str) -> dict:
    reply = await client.execute_interactive(code, timeout=90, output_hook=lambda msg: None)
    return reply["content"]


async def _eugo(jp_fetch, kid: str) -> dict | None:
    _, doc = await fetch(jp_fetch, "eugo", "api", "status")
    return {k["id"]: k for k in doc["kernels"]}[kid]["eugo"]


@pytest.mark.slow
async def test_stop_shuts_a_busy_kernels_runtime_down_and_leaves_the_kernel_running(jp_fetch, jp_serverapp):
    kid = await _kernel(jp_fetch)
    client = await _client(jp_serverapp, kid)
    try:
        code, doc = await post(jp_fetch, "eugo", "api", "kernels", kid, "stop")
        assert (code, doc) == (200, {"stopped": True, "was_running": False})  # no runtime yet: nothing to stop

        setup = await _run(client, "import time\nfrom eugo_lab import hpc\nhpc.init(workers=2)\n"
                                   "nap = hpc.remote(time.sleep)\nfutures = [nap.remote(60) for _ in range(4)]")
        assert setup["status"] == "ok", setup
        status = await _eugo(jp_fetch, kid)
        assert status["state"] == "running" and status["workers"] == 2
        kernel = psutil.Process(status["pid"])
        workers = kernel.children(recursive=True)
        assert len(workers) >= 2
        # the kernel is busy: a cell waits on tasks that would run for a minute
        # stop_on_error=False: the kernel must not drop the requests queued behind this cell when it fails
        busy = client.execute("hpc.get(futures)", stop_on_error=False)
        for _ in range(100):
            if (await _eugo(jp_fetch, kid))["running"] == 2:
                break
            await asyncio.sleep(0.1)
        code, doc = await post(jp_fetch, "eugo", "api", "kernels", kid, "stop")
        assert (code, doc) == (200, {"stopped": True, "was_running": True})
        assert [p.pid for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
        assert (await _eugo(jp_fetch, kid))["state"] == "none"

        reply = await client._async_get_shell_msg(timeout=30)  # the busy cell ends: its futures were cancelled
        assert reply["parent_header"]["msg_id"] == busy and reply["content"]["status"] == "error"
        assert "ancel" in reply["content"]["ename"] + reply["content"]["evalue"], reply["content"]
        assert kernel.is_running()
        after = await _run(client, "assert not hpc.is_initialized()\n"
                                   "assert hpc.get([nap.remote(0) for _ in range(3)]) == [None] * 3")
        assert after["status"] == "ok", after  # the kernel lives on, and a new runtime starts when asked
        assert (await _eugo(jp_fetch, kid))["state"] == "running"
        await _run(client, "hpc.shutdown()")
    finally:
        client.stop_channels()
        await fetch(jp_fetch, "api", "kernels", kid, method="DELETE")


def test_a_stop_request_for_another_process_is_dropped(tmp_path):
    from eugo_lab.hpc import status

    stopped = []
    pub = status.Publisher(str(tmp_path), "k1", lambda: None, stop=lambda: stopped.append(1))
    status.request_stop(str(tmp_path), "k1", os.getpid() + 1)  # a kernel's earlier process
    assert pub.check_stop_request() is False and stopped == [] and not (tmp_path / "k1.stop").exists()
    request = status.request_stop(str(tmp_path), "k1", os.getpid())
    assert pub.check_stop_request() is True and stopped == [1]
    assert json.loads((tmp_path / "k1.json").read_text())["stopped_request"] == request
    assert pub.check_stop_request() is False and stopped == [1]  # one request stops once
    with pytest.raises(ValueError, match="not a kernel id"):
        status.request_stop(str(tmp_path), "../k1", os.getpid())


async def test_a_kernel_that_never_takes_the_stop_request_gets_a_504_naming_what_to_do(jp_fetch, jp_serverapp,
                                                                                        monkeypatch):
    from eugo_lab.server import api

    monkeypatch.setattr(api, "STOP_WAIT_S", 0.5)
    kid = await _kernel(jp_fetch)
    try:
        status_dir = Path(jp_serverapp.web_app.settings["eugo_status_dir"])
        # a runtime "running" in a live process that reads no requests (this one)
        (status_dir / f"{kid}.json").write_text(json.dumps({"state": "running", "pid": os.getpid()}))
        code, doc = await post(jp_fetch, "eugo", "api", "kernels", kid, "stop")
        assert code == 504 and "interrupt the kernel" in doc["error"], doc
        assert json.loads((status_dir / f"{kid}.stop").read_text())["pid"] == os.getpid()  # still asked
    finally:
        await fetch(jp_fetch, "api", "kernels", kid, method="DELETE")


def test_a_bad_setting_gets_its_default_and_a_warning_naming_it(caplog):
    from traitlets.config import Application

    from eugo_lab.server.config import load_settings

    app = Application()
    app.parse_command_line(["--EugoLab.idle_warning_s=-5", "--EugoLab.courses_dir=lessons"])
    with caplog.at_level("WARNING", logger="eugo_lab"):
        settings = load_settings(app)
    assert settings.idle_warning_s == 42.0 and settings.courses_dir == "lessons"  # the default (env: 42); the rest kept
    said = caplog.text
    assert "EugoLab.idle_warning_s=-5 is not valid" in said and "positive number of seconds" in said
    assert "using its default, 42.0" in said


class TestABadSettingOnTheServer:
    """The extension with ``EugoLab.idle_warning_s=-5`` loads whole: its settings, its status folder."""

    @pytest.fixture
    def jp_server_config(self):
        return {"ServerApp": {"jpserver_extensions": {"eugo_lab.server": True}},
                "EugoLab": {"idle_warning_s": -5}}

    async def test_status_answers_the_default_and_kernels_get_a_status_folder(self, jp_fetch):
        code, doc = await fetch(jp_fetch, "eugo", "api", "status")
        assert code == 200 and doc["idle_warning_s"] == 42.0 and doc["kernels"] == []
        assert os.path.isdir(os.environ[STATUS_DIR_ENV])
