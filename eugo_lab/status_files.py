"""The status files that kernels and the Jupyter server share: their names, their layout, reading and writing.

A leaf: it imports nothing of ``eugo_lab`` but ``settings``' names, so the server extension reads
a kernel's status (and asks it to stop its runtime) without loading the runtime, its futures or
its recorder into the server process. The kernel side, what writes these files and honours a stop
request, is :mod:`eugo_lab.hpc.status`.

In the folder the server names (``STATUS_DIR_ENV``), kernel ``<id>`` writes ``<id>.json`` (its
status) and the server writes ``<id>.stop`` (a stop request naming the pid it is meant for).
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

#: Version of the status file's layout, for the server and the JupyterLab extension.
STATUS_SCHEMA = 1

#: What a kernel id looks like; anything else is refused, so a request can never name another path.
KERNEL_ID = r"[0-9A-Za-z_-]+"


def status_path(directory: str, kid: str) -> str:
    """Where kernel ``kid`` publishes its status (``ValueError`` if ``kid`` is not a kernel id)."""
    if not re.fullmatch(KERNEL_ID, kid):
        raise ValueError(f"not a kernel id: {kid!r}")
    return os.path.join(directory, f"{kid}.json")


def stop_request_path(directory: str, kid: str) -> str:
    """Where the server puts a stop request for kernel ``kid`` (``ValueError`` if ``kid`` is not a kernel id)."""
    if not re.fullmatch(KERNEL_ID, kid):
        raise ValueError(f"not a kernel id: {kid!r}")
    return os.path.join(directory, f"{kid}.stop")


def write_json_atomically(path: str, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` through a temporary file renamed over it: a reader sees the old or the new file.

    ``OSError`` (the folder went away, say) reaches the caller.
    """
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


def read_status(directory: str, kid: str) -> dict[str, Any] | None:
    """The status kernel ``kid`` published in ``directory``; ``None`` if it has not (or it is unreadable)."""
    try:
        path = status_path(directory, kid)
    except ValueError:
        return None  # not a kernel id: never let it name another path
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def request_stop(directory: str, kid: str, pid: int) -> str:
    """Ask kernel ``kid``'s process ``pid`` to stop its runtime (written atomically); returns the request's id.

    Once the runtime is down, the kernel's status file carries ``"stopped_request": <that id>``.
    """
    import secrets

    path = stop_request_path(directory, kid)
    request = secrets.token_hex(8)
    write_json_atomically(path, {"pid": int(pid), "request": request, "requested": time.time()})
    return request
