"""Repository-wide pytest hooks: a private progress store, and a trail that names the tests pytest was in if it dies.

Every run gets its own empty progress folder (``EUGO_LAB_PROGRESS_DIR``, set in
``os.environ`` so nbval's kernels and any subprocess inherit it): tests and the course
notebooks' exercise cells never read or write a learner's real progress.

A process that ends by ``os._exit`` or a signal prints no summary, and what it wrote to
stderr during a test stays in pytest's capture. ``make test`` prints this file when pytest
exits without removing it: the last test phases, with the time each one ended.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

TRAIL = Path(__file__).parent / ".pytest-running"
_recent: collections.deque[str] = collections.deque(maxlen=12)
_PROGRESS_ENV = "EUGO_LAB_PROGRESS_DIR"  # eugo_lab.settings.PROGRESS_DIR_ENV (not imported: conftest loads first)
_progress_dir: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Point the progress store at a temporary folder for the whole run (kernels inherit it)."""
    global _progress_dir
    _progress_dir = tempfile.mkdtemp(prefix="eugo-progress-")
    os.environ[_PROGRESS_ENV] = _progress_dir


def _note(line: str) -> None:
    _recent.append(f"{time.strftime('%H:%M:%S')} {line}")
    TRAIL.write_text("\n".join(_recent) + "\n")


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    """A test starts."""
    _note(f"{nodeid}: setup starts")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A phase of a test ended."""
    _note(f"{report.nodeid}: {report.when} {report.outcome}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run ended normally: no trail."""
    TRAIL.unlink(missing_ok=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's progress folder."""
    if _progress_dir is not None:
        shutil.rmtree(_progress_dir, ignore_errors=True)
