"""The REST API of the JupyterLab panel, under the server's ``base_url``.

Every handler is ``@tornado.web.authenticated`` (no token or login cookie: 403) and
``@authorized`` by the server's authorizer on the resource ``eugo`` (:data:`AUTH_RESOURCE`):
the GETs are ``read``; ticking a checklist item and stopping a kernel's runtime are ``write``,
as jupyter_server's own kernel actions are, so a deployment whose authorizer forbids writes
answers them 403 and changes nothing. Every handler answers JSON; a POST from a browser
session also needs the ``_xsrf`` cookie echoed in the ``X-XSRFToken`` header, exactly as
jupyter_server's own API (a request that carries the token in its ``Authorization`` header
is exempt there and here: a token is no ambient credential a foreign page could use).
Errors are ``{"error": "<what was wrong and what to send>"}`` with a 4xx status
(``message`` repeats it for jupyter_server's clients), never a traceback.

``GET /eugo/api/courses``::

    {"courses": [{"id": "01-distributed-python", "title": "...", "path": "01-distributed-python",
                  "lessons": [{"path": "01-distributed-python/01-remote-functions-and-futures.ipynb",
                               "title": "<first heading of the notebook>",
                               "exercises": [{"id": "first-task", "title": "...",
                                              "status": "passed" | "not yet" | "not tried",
                                              "when": "<ISO time>" | null,
                                              "hints_taken": <int>}]}],
                  "passed": <int>, "total": <int>}],
     "checklists": [{"id": "workload-readiness", "title": "...", "path": "checklists/workload-readiness.ipynb",
                     "items": [{"id": "...", "text": "...", "ticked": bool,
                                "how": "measured" | "manual" | null, "evidence": str | null}],
                     "ticked": <int>, "total": <int>}],
     "vocabulary": {"path": "vocabulary.ipynb", "title": "Vocabulary"} | null,
     "index": {"path": "index.ipynb", "title": "..."} | null}

  Courses are the numbered folders (``NN-name``) in number order; a course's title is the
  heading under which the index notebook links into it (else its folder name). ``when``
  is the pass's time once passed, else the last attempt's; ``hints_taken`` counts the hint tiers
  ``%eugo hint`` showed for the exercise (0 for a store written before hints). Paths are relative to the
  server's root_dir: with the courses folder below it (root_dir = the repository) they
  start with ``courses/``. Where the courses are: see :func:`eugo_lab.server.courses.find_courses_dir`;
  none found: an empty listing with a ``note`` saying how to point the server at the courses
  (200: a JupyterLab opened on another folder is not an error); a configured folder that holds no
  courses, or lies outside root_dir: 404.

``POST /eugo/api/progress`` with ``{"checklist": "<id>", "item": "<item id>", "ticked": true | false}``
  (JSON, at most 64 KB, no other keys) -> ``{"ok": true, "item": {...as in the listing...}}``,
  saved through :mod:`eugo_lab.progress` (locked read-modify-write, atomic file),
  as a ``manual`` tick. Unknown checklist or item: 404 listing the valid ids.

``GET /eugo/api/glossary`` -> ``{"terms": [{"term", "definition", "aliases", "see_also", "lesson",
  "anchor"}]}``; ``anchor`` is the term with spaces replaced by ``-``, the id of its heading
  in ``vocabulary.ipynb``; ``lesson`` is relative to the courses folder ("" for none).

``GET /eugo/api/status`` (:mod:`eugo_lab.server.handlers`) -> ``{"eugo_lab", "server_version",
  "idle_warning_s", "kernels": [{"id", "name", "execution_state", "connections", "eugo": <doc> | null}]}``.

``POST /eugo/api/kernels/<kernel id>/stop`` (empty body) -> ``{"stopped": true, "was_running": bool}``
  once that kernel's Eugo runtime is shut down (its workers gone, pending futures cancelled);
  the kernel itself keeps running. The server leaves a stop request in the kernels' private
  status folder and waits for the kernel's status thread to take it
  (:mod:`eugo_lab.status_files`), so a kernel busy in a cell stops too. Unknown kernel: 404;
  a kernel that does not take the request within ``STOP_WAIT_S``: 504.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import psutil
import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado.ioloop import IOLoop

from eugo_lab.status_files import read_status, request_stop

#: The largest request body taken (a tick is ~80 bytes).
MAX_BODY_BYTES = 64 * 1024
#: Seconds the stop endpoint waits for the kernel to shut its runtime down.
STOP_WAIT_S = 30.0
#: What a checklist or item id looks like; anything else (a path, markup) is refused before any lookup.
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,79}$")
KERNEL_ID_PATTERN = re.compile(r"^[0-9A-Za-z_-]{1,80}$")

_TICK_FIELDS = {"checklist": str, "item": str, "ticked": bool}

#: The resource every Eugo Lab handler asks the server's authorizer about.
AUTH_RESOURCE = "eugo"
#: The authorizer's actions: looking (listings, status, BokehJS) and changing (ticks, stopping a runtime).
READ, WRITE = "read", "write"


class BadRequest(tornado.web.HTTPError):
    """A 4xx whose message is the ``error`` the client gets."""

    def __init__(self, status: int, error: str):
        super().__init__(status, log_message=error)
        self.error = error


class EugoAPIHandler(APIHandler):
    """JSON in, JSON out; every error as ``{"error": ...}``; authorized on :data:`AUTH_RESOURCE`."""

    auth_resource = AUTH_RESOURCE

    def reply(self, doc: dict[str, Any], status: int = 200) -> None:
        """Send ``doc`` as JSON."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(doc))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """``{"error": ..., "message": ...}``: what was wrong, never a traceback."""
        exc = (kwargs.get("exc_info") or (None, None, None))[1]
        if isinstance(exc, BadRequest):
            error = exc.error
        elif isinstance(exc, tornado.web.HTTPError):
            error = (exc.log_message % exc.args if exc.args else exc.log_message) if exc.log_message \
                else (exc.reason or self._reason)
            if status_code == 403 and not exc.log_message:
                error = ("not logged in: send the server's token (Authorization: token ...) or log in, and "
                         "from a browser session echo the _xsrf cookie in an X-XSRFToken header")
        else:  # a bug here: logged with its traceback by tornado, the client only learns that
            error = "internal error in the Eugo Lab server extension (see the server's log)"
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": error, "message": error}))

    def json_body(self) -> dict[str, Any]:
        """The request's JSON object (400 if it is not one, 413 if it is over :data:`MAX_BODY_BYTES`)."""
        body = self.request.body or b""
        if len(body) > MAX_BODY_BYTES:
            raise BadRequest(413, f"the request body is {len(body)} bytes; send at most {MAX_BODY_BYTES} "
                                  "(one JSON object)")
        try:
            doc = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadRequest(400, f"the request body is not JSON ({exc}); send a JSON object such as "
                                  '{"checklist": "workload-readiness", "item": "task-size", "ticked": true}')
        if not isinstance(doc, dict):
            raise BadRequest(400, f"the request body is a JSON {type(doc).__name__}; send a JSON object")
        return doc

    async def blocking(self, fn: Any, *args: Any) -> Any:
        """Run file work (the progress store's lock may be held by a kernel) off the event loop."""
        return await IOLoop.current().run_in_executor(None, fn, *args)


#: What ``GET /eugo/api/courses`` says when this server runs outside the courses (nothing configured, none
#: found): an empty listing, not an error, so a JupyterLab opened on any folder shows a quiet panel.
NO_COURSES_NOTE = ("no Eugo courses under this server's root: start JupyterLab with --ServerApp.root_dir=courses "
                   "(make lab does), or set EugoLab.courses_dir / EUGO_LAB_COURSES_DIR")


def _courses_dir(handler: EugoAPIHandler) -> tuple[Any, str] | None:
    from eugo_lab.server.courses import find_courses_dir, looks_like_courses_dir

    root = handler.settings.get("server_root_dir") or handler.serverapp.root_dir
    configured = handler.settings.get("eugo_courses_dir", "")
    try:
        found, prefix = find_courses_dir(root, configured)
    except ValueError as exc:
        raise BadRequest(404, str(exc))
    if not looks_like_courses_dir(found):
        if not configured:
            return None  # a server started elsewhere: an empty listing with NO_COURSES_NOTE
        raise BadRequest(404, f"no courses folder at {found} (it needs numbered course folders and index.ipynb or "
                              "vocabulary.ipynb); start the server with --ServerApp.root_dir=courses, or set "
                              "EugoLab.courses_dir / EUGO_LAB_COURSES_DIR")
    return found, prefix


class CoursesHandler(EugoAPIHandler):
    """``GET /eugo/api/courses``: courses, lessons, checklists and vocabulary with the learner's progress."""

    @tornado.web.authenticated
    @authorized(READ)
    async def get(self) -> None:
        """The listing (see the module docstring)."""
        from eugo_lab.server.courses import listing

        where = _courses_dir(self)
        if where is None:
            self.reply({"courses": [], "checklists": [], "vocabulary": None, "index": None, "note": NO_COURSES_NOTE})
            return
        self.reply(await self.blocking(listing, *where))


def _tick_request(doc: dict[str, Any]) -> tuple[str, str, bool]:
    """``(checklist, item, ticked)`` from a POST body, or a 400 naming the field and what to send."""
    extra = sorted(set(doc) - set(_TICK_FIELDS))
    if extra:
        raise BadRequest(400, f"unknown field(s) {', '.join(map(repr, extra))}; send exactly "
                              '{"checklist": "<id>", "item": "<item id>", "ticked": true or false}')
    for name, kind in _TICK_FIELDS.items():
        if name not in doc:
            raise BadRequest(400, f"missing field {name!r}; send "
                                  '{"checklist": "<id>", "item": "<item id>", "ticked": true or false}')
        if not isinstance(doc[name], kind):
            raise BadRequest(400, f"{name!r} must be a JSON {'boolean' if kind is bool else 'string'}, got "
                                  f"{type(doc[name]).__name__} {json.dumps(doc[name])[:60]}")
    for name in ("checklist", "item"):
        if not ID_PATTERN.match(doc[name]):
            raise BadRequest(400, f"{name!r} {doc[name][:80]!r} is not an id: ids are lowercase letters, digits "
                                  "and dashes, as GET /eugo/api/courses lists them")
    return doc["checklist"], doc["item"], doc["ticked"]


class ProgressHandler(EugoAPIHandler):
    """``POST /eugo/api/progress``: tick or untick one checklist item."""

    @tornado.web.authenticated
    @authorized(WRITE)
    async def post(self) -> None:
        """Save the tick through the progress store and answer the item as the listing shows it."""
        from eugo_lab.checklists.model import all_checklists
        from eugo_lab.checklists.store import MANUAL, tick
        from eugo_lab.server.courses import checklist_item

        checklist_id, item_id, ticked = _tick_request(self.json_body())
        checklists = {c.id: c for c in all_checklists()}
        checklist = checklists.get(checklist_id)
        if checklist is None:
            raise BadRequest(404, f"no checklist {checklist_id!r}; the checklists are: {', '.join(checklists)}")
        item = next((it for it in checklist.items if it.id == item_id), None)
        if item is None:
            raise BadRequest(404, f"the {checklist.title} has no item {item_id!r}; its items are: "
                                  f"{', '.join(it.id for it in checklist.items)}")
        entry = await self.blocking(lambda: tick(checklist.id, item.id, ticked, how=MANUAL))
        self.reply({"ok": True, "item": checklist_item(item, entry)})


class GlossaryHandler(EugoAPIHandler):
    """``GET /eugo/api/glossary``: every vocabulary entry, for the tooltips."""

    @tornado.web.authenticated
    @authorized(READ)
    def get(self) -> None:
        """The terms in course order."""
        from eugo_lab.glossary import lookup, terms

        entries = [lookup(t) for t in terms()]
        self.reply({"terms": [{"term": e.term, "definition": e.definition, "aliases": list(e.aliases),
                               "see_also": list(e.see_also), "lesson": e.lesson,
                               "anchor": e.term.replace(" ", "-")} for e in entries]})


class StopRuntimeHandler(EugoAPIHandler):
    """``POST /eugo/api/kernels/<id>/stop``: shut a kernel's Eugo runtime down, leaving the kernel running."""

    @tornado.web.authenticated
    @authorized(WRITE)
    async def post(self, kernel_id: str) -> None:
        """Ask the kernel (a stop request it reads) and wait until its workers are gone."""
        if not KERNEL_ID_PATTERN.match(kernel_id) or kernel_id not in self.kernel_manager.list_kernel_ids():
            raise BadRequest(404, f"no kernel {kernel_id[:80]!r} runs on this server; GET /eugo/api/status lists "
                                  "the kernels and their ids")
        status_dir = self.settings.get("eugo_status_dir", "")
        doc = read_status(status_dir, kernel_id) if status_dir else None
        if not doc or doc.get("state") != "running" or not isinstance(doc.get("pid"), int):
            self.reply({"stopped": True, "was_running": False})  # nothing to stop
            return
        pid = doc["pid"]
        request = await self.blocking(request_stop, status_dir, kernel_id, pid)
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            now = read_status(status_dir, kernel_id) or {}
            if now.get("stopped_request") == request or now.get("pid") != pid or not psutil.pid_exists(pid):
                # done, or the kernel was restarted (its old process and runtime are gone)
                self.reply({"stopped": True, "was_running": True})
                return
        raise BadRequest(504, f"kernel {kernel_id} did not stop its Eugo runtime within {STOP_WAIT_S:g} s (it may "
                              "be running C code that holds the interpreter); it will stop once the kernel gets "
                              "to it, or interrupt the kernel and try again")
