"""Running a lesson top to bottom, hidden reference solutions included, passes none of its exercises.

Each lesson's reference solution runs as ``%%eugo --exercise ID --solution``: graded and shown,
never saved. The check reads the progress store a whole run of the notebook left behind:

- where nbval ran the lesson in this pytest run (``make test`` runs every notebook), the store
  its kernel used (the root conftest gives each notebook's kernel a fresh one), so the
  notebooks are not run twice; this test runs after them (``after_notebooks``);
- where it ran none (this file on its own), it executes every lesson itself, each in a real
  kernel with a fresh store.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from jupyter_fixtures import kernel_env
from nbclient import NotebookClient

from eugo_lab import progress
from eugo_lab.exercises import catalog
from eugo_lab.settings import PROGRESS_DIR_ENV

pytestmark = [pytest.mark.slow, pytest.mark.after_notebooks]

REPO = Path(__file__).resolve().parents[2]
COURSES = REPO / "courses"
# Lessons live in a course folder (01-distributed-python/...); the checklists and index have no exercise.
LESSONS = sorted(p for p in COURSES.glob("[0-9]*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)
#: The seconds one cell may take when this test runs a lesson itself (nbval's own limit is pytest's timeout).
CELL_TIMEOUT_S = 300


def _exercises(lesson: Path) -> list[str]:
    name = str(lesson.relative_to(COURSES))
    return [e.id for e in catalog.all_exercises() if e.lesson == name]


def _store_left_by_nbval(lesson: Path) -> Path:
    """Where the root conftest put this lesson's store if nbval ran it in this pytest run."""
    return Path(os.environ[PROGRESS_DIR_ENV], "notebooks", lesson.relative_to(REPO).with_suffix(""))


def _run_whole_notebook(lesson: Path, store: Path) -> None:
    """Execute every code cell, hidden ones included, in a fresh kernel whose progress store is ``store``."""
    nb = nbformat.read(lesson, as_version=4)
    # allow_errors: a cell that fails is nbval's to report; this test only reads what the run saved
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=nb.metadata.kernelspec.name, allow_errors=True,
                   resources={"metadata": {"path": str(lesson.parent)}}).execute(env=kernel_env(
                       **{PROGRESS_DIR_ENV: str(store)}))


@pytest.mark.timeout(len(LESSONS) * 240)  # run here: twice the courses' 2-minute budget per lesson
def test_running_every_lesson_top_to_bottom_passes_none_of_its_exercises(tmp_path):
    ran_by_nbval = [lesson for lesson in LESSONS if _store_left_by_nbval(lesson).is_dir()]
    assert len(LESSONS) >= 12 and all(_exercises(lesson) for lesson in LESSONS)
    passed = []
    for lesson in ran_by_nbval or LESSONS:
        if ran_by_nbval:
            store = _store_left_by_nbval(lesson)
        else:
            store = tmp_path / lesson.stem
            _run_whole_notebook(lesson, store)
        saved = progress.load(store / progress.FILENAME)["exercises"]
        for exercise_id in _exercises(lesson):
            # the starter cell's run was graded and saved: the lesson ran its exercise cells
            assert exercise_id in saved, f"{lesson.name}: no attempt at {exercise_id} saved; did the lesson run?"
            if saved[exercise_id]["passed"]:
                passed.append(f"{lesson.name}: {exercise_id}")
    assert not passed, f"running the lessons passed their exercises (a reference solution counted): {passed}"
