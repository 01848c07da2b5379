"""Process helpers shared by the tests (a module, not conftest: workers import test modules).

Test modules that workers import by reference must not import ``conftest``: on a worker
that name can resolve to the repository's root ``conftest.py``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import psutil


def children() -> set[int]:
    """Pids of this process's descendants."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def is_alive(pid: int) -> bool:
    """The process exists and is not a zombie (killed, not yet reaped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # gone (or reaped) between the listing and the look
        return False


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    """Wait until none of ``pids`` is alive (zombies count as gone); return the survivors."""
    deadline = time.monotonic() + timeout
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if is_alive(p)}
        if alive:
            time.sleep(0.05)
    return alive


def signal_all(procs: Iterable[psutil.Process | int], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` (default SIGKILL) to each of ``procs`` (processes or pids), passing over those already gone."""
    for p in procs:
        try:
            (p if isinstance(p, psutil.Process) else psutil.Process(p)).send_signal(sig)
        except psutil.Error:
            pass


def start_driver(tmp_path: Path, source: str, mode: str, n_pids: int) -> tuple[subprocess.Popen, list[int]]:
    """Run ``source`` as a driver script (``mode`` its argument) in its own session, and wait for it.

    The script prints a line of ``n_pids`` pids after a first word, then ``READY``; returns the
    process (stdout a text pipe, for the lines that follow) and those pids.
    """
    script = tmp_path / "driver.py"
    script.write_text(source)
    proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=tmp_path)
    pids = [int(p) for p in proc.stdout.readline().split()[1:]]
    assert len(pids) == n_pids
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    return proc, pids


def listening(pids: Iterable[int]) -> list[tuple[str, str, int]]:
    """``(process name, ip, port)`` of every socket the processes ``pids`` listen on."""
    found = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for c in proc.net_connections("inet"):
                if c.status == psutil.CONN_LISTEN:
                    found.append((proc.name(), c.laddr.ip, c.laddr.port))
        except psutil.Error:
            pass
    return found
