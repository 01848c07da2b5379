"""Each kernel's runtime status, published for the Jupyter server (``GET /eugo/api/status``).

The server cannot look inside a kernel, so a kernel tells it. The server extension gives
the kernels it starts a directory (``STATUS_DIR_ENV``); a kernel writes
``<dir>/<kernel id>.json`` there, atomically (a temporary file renamed over the old one):

- at once when a runtime starts or stops (``hpc.init``, ``hpc.shutdown``, ``%%eugo``);
- from one daemon thread that looks every ``PUBLISH_INTERVAL`` seconds and writes only
  when something changed (task and item counters, tracing on or off): an idle kernel
  writes nothing, and the file's ``updated`` and ``elapsed`` let a reader extrapolate.

Files, not a socket or a comm: a kernel that is busy running a cell, or hung in C code,
still has an up-to-date file; a dead kernel's file is simply ignored by the server (it
only reads the files of kernels it runs). Outside such a server (a script, pytest, a
kernel of another server) nothing is written and no thread is started.

The other way, the server asks a kernel to stop its runtime (the panel's Stop button,
``POST /eugo/api/kernels/<id>/stop``) with a stop request: ``<dir>/<kernel id>.stop``,
naming the ``pid`` of the process whose status it read (:func:`request_stop`). The same
thread finds it within ``PUBLISH_INTERVAL``, removes it and, when the pid is its own, shuts
the runtime down (``hpc.shutdown()``: workers stopped, pending futures cancelled) while the
kernel keeps running, also in the middle of a cell. Not code sent to the kernel: a busy
kernel would run it only after its cell, and it would show in the learner's history. The
pid keeps a request meant for a process from stopping the runtime of the kernel's next
process after a restart (same kernel id).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from eugo_lab.hpc import session
from eugo_lab.hpc.counters import Rate, change_key, counters, rate
from eugo_lab.settings import STATUS_DIR_ENV

# The file names, the layout's version, reading a status and writing a stop request live in a leaf
# that the server extension reads without loading the runtime; re-exported here for the kernel side.
from eugo_lab.status_files import (
    KERNEL_ID,
    STATUS_SCHEMA,
    read_status,
    request_stop,
    status_path,
    stop_request_path,
    write_json_atomically,
)

__all__ = ["PUBLISH_INTERVAL", "STATUS_SCHEMA", "Publisher", "kernel_id", "read_status", "request_stop",
           "runtime_changed", "snapshot", "stop_request_path"]

if TYPE_CHECKING:
    from eugo_lab.hpc.session import Runtime

#: Seconds between two looks at the runtime's counters (a look costs a few microseconds).
PUBLISH_INTERVAL = 1.0
_CONNECTION_FILE = re.compile(rf"kernel-(?P<id>{KERNEL_ID})\.json$")


def snapshot(rt: Runtime | None) -> dict[str, Any]:
    """The status of runtime ``rt`` (``None``: no runtime) as a JSON-ready dict.

    The :class:`~eugo_lab.hpc.counters.Counters` (backend, workers, running, queued,
    submitted, elapsed, idle; counts are of items, an ``hpc.map`` item counts as one), the
    ``price`` per worker-hour, where it came from (``price_source``) and the ``cost`` so far (both
    null where there is no bill: a pool on your own machine with no rate set), plus ``state`` (``running`` or
    ``none``), ``tracing`` and when and by which process it was taken.
    """
    from eugo_lab import __version__

    running = rt is not None and not rt._closed
    doc: dict[str, Any] = {"schema": STATUS_SCHEMA, "eugo_lab": __version__, "pid": os.getpid(),
                           "updated": time.time(), "state": "running" if running else "none"}
    if running:
        c = counters(rt)  # type: ignore[arg-type]
        try:
            r = rate(rt)
        except ValueError as exc:  # a malformed price setting: no bill, and the panel says why
            r = Rate(None, str(exc))
        # price and cost are null where there is no bill (a pool on your own machine with no rate set)
        doc.update(asdict(c), price=r.per_worker_hour, price_source=r.source, cost=r.cost(c.workers, c.elapsed),
                   tracing=bool(rt.recorder.active))  # type: ignore[union-attr]
    return doc


def kernel_id() -> str | None:
    """The Jupyter kernel id of this process (from its connection file), or ``None`` outside a kernel."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        kernel = getattr(shell, "kernel", None)
        if kernel is None:
            return None
        from ipykernel.connect import get_connection_file

        m = _CONNECTION_FILE.search(os.path.basename(get_connection_file()))
    except Exception:  # noqa: BLE001 - not a kernel, or an ipykernel without connection files
        return None
    return m.group("id") if m else None


class Publisher:
    """Writes this kernel's status file; ``notify()`` after a runtime starts or stops."""

    def __init__(self, directory: str, kid: str, current: Any, stop: Any = None):
        self.path = status_path(directory, kid)
        self.stop_path = stop_request_path(directory, kid)
        self._current = current  # a callable: the runtime now (session.current(start=False))
        self._stop = stop  # a callable that shuts the runtime down (session.stop_runtime); None: no requests
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._last: tuple | None = None
        self._stopped_request: str | None = None  # the last stop request done, for the server waiting on it
        self._thread: threading.Thread | None = None

    def notify(self) -> None:
        """Publish now (from the thread that started or stopped a runtime), and keep publishing."""
        self.publish()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="eugo-status", daemon=True)
            self._thread.start()
        self._wake.set()

    def publish(self, force: bool = True) -> bool:
        """Write the file if the status changed since the last write (always if ``force``)."""
        rt = self._current()
        key = change_key(rt)
        with self._lock:
            if not force and key == self._last:
                return False
            doc = snapshot(rt)
            if self._stopped_request:
                doc["stopped_request"] = self._stopped_request
            try:
                write_json_atomically(self.path, doc)
            except OSError:  # the server went away with its directory: nothing to tell
                return False
            self._last = key
        return True

    def check_stop_request(self) -> bool:
        """Honour a stop request for this process (see the module docstring); True if it stopped the runtime."""
        if self._stop is None:
            return False
        try:
            with open(self.stop_path) as fh:
                raw = fh.read()
            os.unlink(self.stop_path)  # taken: one request stops one runtime
        except OSError:  # no request (the usual case), or the folder went away
            return False
        try:
            doc = json.loads(raw)
        except ValueError:
            return False
        if not isinstance(doc, dict) or doc.get("pid") != os.getpid():
            return False  # meant for an earlier process of this kernel
        self._stop()  # returns once the workers are gone
        # "none" was published as the runtime was unset, before its workers stopped: say when they have
        self._stopped_request = str(doc.get("request", ""))
        self.publish()
        return True

    def _loop(self) -> None:
        while True:
            self._wake.wait(PUBLISH_INTERVAL)
            self._wake.clear()
            try:
                self.check_stop_request()
            except Exception:  # a failed shutdown must not end the publishing thread
                import logging

                logging.getLogger("eugo_lab").warning("stopping the runtime on request failed", exc_info=True)
            try:
                self.publish(force=False)
            except Exception:  # one failed reading (counters read while tasks change) must not
                # end the thread: the panel would show this kernel's status frozen for the rest of its life
                import logging

                logging.getLogger("eugo_lab").debug("publishing the runtime's status failed", exc_info=True)


_publisher: Publisher | None = None
_publisher_lock = threading.Lock()


def runtime_changed() -> None:
    """Publish the new state (if this kernel reports to a server); called whenever the runtime changes."""
    global _publisher
    directory = os.environ.get(STATUS_DIR_ENV)
    if not directory:
        return
    with _publisher_lock:
        if _publisher is None:
            kid = kernel_id()
            if kid is None:
                return
            _publisher = Publisher(directory, kid, lambda: session.current(start=False), stop=session.stop_runtime)
    _publisher.notify()


# Imported in a kernel of a server with this package's extension (``eugo_lab.hpc`` does it when the
# server's status folder is set): from then on every change of runtime is published.
session.on_runtime_changed(runtime_changed)
