"""Repository-wide pytest hooks: a trail that names the test pytest was in if it dies.

A process that ends by ``os._exit`` or a signal prints no summary. ``make test`` reads this
file when pytest exits without removing it and says which test (and phase) it was in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TRAIL = Path(__file__).parent / ".pytest-running"


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    """A test starts: note its id."""
    TRAIL.write_text(f"{nodeid} (setup)\n")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A phase of a test ended: note the next one it is in."""
    following = {"setup": "call", "call": "teardown", "teardown": "between tests"}[report.when]
    TRAIL.write_text(f"{report.nodeid} ({report.when} {report.outcome}; now in {following})\n")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Pytest ended normally: no trail."""
    TRAIL.unlink(missing_ok=True)
