"""Repository-wide pytest hooks: a private progress store, and a trail that names the tests pytest was in if it dies.

Every run gets its own empty progress folder (``EUGO_LAB_PROGRESS_DIR``, set in
``os.environ`` so nbval's kernels and any subprocess inherit it): tests and the course
notebooks' exercise cells never read or write a learner's real progress. Each notebook nbval
runs starts its kernel with a fresh store of its own, ``<run folder>/notebooks/<notebook path
under the rootdir, without .ipynb>``, which stays until the run ends: the tests marked
``after_notebooks`` run last and read what each notebook's run left there
(tests/exercises/test_solutions_never_count.py).

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
#: The subfolder of the run's progress folder that holds each notebook's own store.
NOTEBOOK_STORES = "notebooks"
_notebooks_started: set[Path] = set()


def pytest_configure(config: pytest.Config) -> None:
    """Point the progress store at a temporary folder for the whole run (kernels inherit it)."""
    global _progress_dir
    _progress_dir = tempfile.mkdtemp(prefix="eugo-progress-")
    os.environ[_PROGRESS_ENV] = _progress_dir
    config.addinivalue_line("markers", "after_notebooks: runs after every other test, once the notebooks have run")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """A notebook's first cell starts its kernel (nbval's file setup): with a fresh progress store of its own."""
    path = getattr(item, "path", None)
    if _progress_dir is None or path is None or path.suffix != ".ipynb" or path in _notebooks_started:
        yield
        return
    _notebooks_started.add(path)
    root = item.config.rootpath
    where = path.relative_to(root) if path.is_relative_to(root) else Path("outside-rootdir", path.name)
    own = Path(_progress_dir, NOTEBOOK_STORES, where.with_suffix(""))
    own.mkdir(parents=True)
    os.environ[_PROGRESS_ENV] = str(own)
    try:
        yield
    finally:  # the kernel has its environment: the tests after it keep the run's folder
        os.environ[_PROGRESS_ENV] = _progress_dir


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``after_notebooks`` run last (testpaths collects tests/ before courses/)."""
    last = [i for i in items if i.get_closest_marker("after_notebooks")]
    if last:
        items[:] = [i for i in items if not i.get_closest_marker("after_notebooks")] + last


def _note(line: str) -> None:
    _recent.append(f"{time.strftime('%H:%M:%S')} {line}")
    TRAIL.write_text("\n".join(_recent) + "\n")


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    """A test starts."""
    _note(f"{nodeid}: setup starts")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A phase of a test ended."""
    _note(f"{report.nodeid}: {report.when} {report.outcome}")
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        _notebook_seconds[path] = _notebook_seconds.get(path, 0.0) + report.duration


# Seconds each notebook took under nbval (all its cells), printed after the run: the courses
# promise each lesson under 2 minutes on 2 cores and the whole set under 15.
_notebook_seconds: dict[str, float] = {}
NOTEBOOK_BUDGET_S = 120.0


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report how long each notebook took (its cells summed), slowest first."""
    if not _notebook_seconds:
        return
    total = sum(_notebook_seconds.values())
    terminalreporter.section(f"notebooks: {len(_notebook_seconds)} in {total / 60:.1f} min")
    for path, secs in sorted(_notebook_seconds.items(), key=lambda kv: -kv[1]):
        over = "  OVER the 2-minute budget" if secs > NOTEBOOK_BUDGET_S else ""
        terminalreporter.write_line(f"{secs:7.1f} s  {path}{over}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run ended normally: no trail."""
    TRAIL.unlink(missing_ok=True)


# Notebooks (nbval): only the deterministic text/plain form of a display is compared. The rich forms
# carry ids, inline styles and widget model ids that change on every run; committed notebooks keep
# text/plain alone in their NBVAL_CHECK_OUTPUT cells.
NOT_COMPARED = ("text/html", "application/javascript", "application/vnd.jupyter.widget-view+json",
                "application/vnd.bokehjs_exec.v0+json", "application/vnd.bokehjs_load.v0+json", "text/markdown")


def pytest_collectstart(collector: pytest.Collector) -> None:
    """Tell nbval which display forms not to compare."""
    if getattr(collector, "fspath", None) is not None and str(collector.fspath).endswith(".ipynb"):
        collector.skip_compare += NOT_COMPARED


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's progress folder."""
    if _progress_dir is not None:
        shutil.rmtree(_progress_dir, ignore_errors=True)
