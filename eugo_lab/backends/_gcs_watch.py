"""Notice that the Ray cluster a driver is connected to has gone away.

When a Ray cluster's GCS dies (``ray stop``, a crash, the machine gone), Ray's driver does
not fail its pending ``ray.get`` calls: they wait, ``ray.nodes()`` blocks, ``ray.shutdown()``
blocks, and after ``gcs_rpc_server_reconnect_timeout_s`` (60 s by default) Ray ends the whole
process with exit code 1, printing one line to a stderr that a notebook may never show. In
a Jupyter kernel that is "the kernel died" with no reason given.

:class:`GcsWatch` connects to the GCS port every ``PROBE_SECONDS``; after ``LOST_AFTER``
refused or timed-out connections in a row it calls ``on_lost`` once, so the runtime can
fail the unfinished tasks with a message that says what happened and what to do, well
before Ray ends the process. A GCS that restarts within that window (Ray's GCS fault
tolerance) is not reported. Only a TCP handshake is made: nothing is sent.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

PROBE_SECONDS = 2.0
LOST_AFTER = 5  # probes in a row: about 10 s, against Ray's 60 s before it ends the process


class GcsWatch:
    """A daemon thread probing ``host:port``; ``stop()`` ends it (at the next probe at the latest)."""

    def __init__(self, host: str, port: int, on_lost: Callable[[], None],
                 probe_seconds: float = PROBE_SECONDS, lost_after: int = LOST_AFTER):
        self.host, self.port = host, port
        self._on_lost = on_lost
        self._probe_seconds = probe_seconds
        self._lost_after = lost_after
        self._stop = threading.Event()
        self.failing = False  # the last probe was refused or timed out (ray.nodes() and the like would block)
        self._thread = threading.Thread(target=self._run, name="eugo-ray-gcs-watch", daemon=True)
        self._thread.start()

    def _answers(self) -> bool:
        try:
            socket.create_connection((self.host, self.port), timeout=min(self._probe_seconds, 2.0)).close()
        except OSError:
            return False
        return True

    def answers_now(self) -> bool:
        """Probe once, now (a TCP handshake): whether the GCS answers; also updates :attr:`failing`."""
        answered = self._answers()
        self.failing = not answered
        return answered

    def _run(self) -> None:
        failures = 0
        while not self._stop.wait(self._probe_seconds):
            answered = self.answers_now()
            failures = 0 if answered else failures + 1
            if failures >= self._lost_after and not self._stop.is_set():
                self._on_lost()
                return

    def stop(self) -> None:
        """Stop probing."""
        self._stop.set()
