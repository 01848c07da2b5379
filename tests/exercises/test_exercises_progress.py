"""The progress store, the exercise registry and the magic's exercise plumbing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from _exercise_cells import run_exercise, shell
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from eugo_lab import progress
from eugo_lab.exercises import base, catalog, listing
from eugo_lab.settings import PROGRESS_DIR_ENV

REFERENCE = """import time
from eugo_lab import exercises, hpc

p = exercises.problem("fan-out")

@hpc.remote
def slow_square(x):
    time.sleep(0.05)
    return x * x

results = hpc.get([slow_square.remote(x) for x in p.xs])
"""


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A private, empty progress folder for one test."""
    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path / "progress"))
    return tmp_path / "progress" / "progress.json"


def test_the_test_run_never_uses_the_real_store():
    # The root conftest points every run at a temporary folder (nbval kernels inherit os.environ).
    d = os.environ[PROGRESS_DIR_ENV]
    assert "eugo-progress-" in d and os.path.isdir(d)
    assert progress.progress_dir() == progress.Path(d)


def test_default_location_is_the_jupyter_data_dir(monkeypatch):
    from jupyter_core.paths import jupyter_data_dir

    monkeypatch.delenv(PROGRESS_DIR_ENV)
    assert progress.progress_path() == progress.Path(jupyter_data_dir()) / "eugo_lab" / "progress.json"


def test_a_pass_is_kept_and_the_last_attempt_too(store):
    progress.record_exercise("fan-out", False, "first try", when="t1")
    progress.record_exercise("fan-out", True, "did it", when="t2")
    e = progress.record_exercise("fan-out", False, "broke it again", when="t3")
    assert e["passed"] is True and e["when"] == "t2" and e["evidence"] == "did it" and e["attempts"] == 3
    assert e["last"] == {"status": "not yet", "when": "t3", "evidence": "broke it again", "mistake": None, "hints": 0}
    data = json.loads(store.read_text())
    assert data["schema_version"] == 1 and data["checklists"] == {} and data["exercises"]["fan-out"] == e
    assert progress.status("fan-out") == "passed" and progress.status("put") == "not tried"
    progress.record_exercise("put", False, "no")
    assert progress.status("put") == "not yet"
    assert not [p for p in store.parent.iterdir() if p.name.endswith(".tmp")]  # no temp file left behind


def test_a_corrupt_file_is_moved_aside_with_a_warning(store):
    store.parent.mkdir(parents=True)
    store.write_text('{"schema_version": 1, "exercises": {"fan-out": ')
    with pytest.warns(progress.CorruptProgressWarning) as caught:
        progress.record_exercise("fan-out", True, "ok")
    msg = str(caught[0].message)
    aside = [p for p in store.parent.iterdir() if p.name.startswith("progress.json.corrupt-")]
    assert len(aside) == 1 and str(store) in msg and str(aside[0]) in msg
    assert aside[0].read_text() == '{"schema_version": 1, "exercises": {"fan-out": '  # kept as it was
    assert json.loads(store.read_text())["exercises"]["fan-out"]["passed"] is True
    store.write_text("[1, 2]")  # valid JSON, not a store
    with pytest.warns(progress.CorruptProgressWarning, match="not an Eugo Lab progress store"):
        assert progress.load() == progress.empty()
    assert len([p for p in store.parent.iterdir() if ".corrupt-" in p.name]) == 2


def test_a_newer_schema_is_never_overwritten(store):
    store.parent.mkdir(parents=True)
    store.write_text('{"schema_version": 99, "exercises": {}}')
    with pytest.raises(progress.ProgressError, match="newer eugo-lab"):
        progress.record_exercise("fan-out", True, "ok")
    assert store.read_text() == '{"schema_version": 99, "exercises": {}}'


HAMMER = """
import sys
from eugo_lab import progress
name, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    progress.record_exercise(f"{name}-{i % 5}", i % 2 == 0, f"{name} {i}")
    progress.update(lambda d, i=i: d["checklists"].setdefault(name, []).append(i))
"""


def test_two_processes_writing_at_once_lose_nothing(store):
    # A kernel and the server extension: two processes doing read-modify-write on the same file.
    env = {**os.environ, PROGRESS_DIR_ENV: str(store.parent), "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", HAMMER, name, "40"], env=env) for name in ("kernel", "server")]
    for p in procs:
        assert p.wait(120) == 0
    data = progress.load()
    for name in ("kernel", "server"):
        assert data["checklists"][name] == list(range(40))  # every update of both writers survived
        assert sum(data["exercises"][f"{name}-{k}"]["attempts"] for k in range(5)) == 40


def test_registry_and_did_you_mean():
    assert "fan-out" in catalog.ids()
    assert catalog.get("fan-out") is catalog.get(" fan-out ")
    with pytest.raises(base.UnknownExerciseError) as err:
        catalog.get("fanout")
    assert "did you mean 'fan-out'" in str(err.value) and "exercises: " in str(err.value)
    assert [e.id for e in catalog.all_exercises()] == sorted(catalog.ids(), key=lambda i: (catalog.get(i).lesson, i))
    with pytest.raises(ValueError, match="lower-case"):
        base.exercise("Fan Out", lesson="x.ipynb", title="t", hints=("words", "code"))


def test_catalog_is_loaded_lazily():
    code = ("import sys\nimport eugo_lab.exercises.catalog\n"
            "print(any(m.startswith('eugo_lab.exercises.catalog.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_verdict_text_and_html():
    v = base.Verdict("fan-out", False, ("use <b>hpc.get</b> once",), details=("1.9x",))
    assert v.to_text() == "exercise fan-out: not yet\n  use <b>hpc.get</b> once"
    assert v.to_text(precise=True).endswith("measured: 1.9x")
    h = v.to_html(precise=True)
    assert "<b>hpc.get</b>" not in h and "&lt;b&gt;hpc.get&lt;/b&gt;" in h and "1.9x" in h
    assert "1.9x" not in v._repr_html_() and "&lt;b&gt;hpc.get&lt;/b&gt;" in v._repr_html_()  # nbval can compare it
    assert base.Verdict("fan-out", True).first_line == "exercise fan-out: passed"


def test_a_reference_verdict_says_so_first_and_that_it_does_not_count():
    v = base.Verdict("fan-out", True, ("every task was submitted first",)).as_reference()
    assert v.first_line == "Reference solution for fan-out: passed — this run does not count as your attempt"
    assert v.to_text().splitlines() == [v.first_line, "  every task was submitted first"]
    assert "<b>Reference solution for fan-out</b>: passed — this run does not count as your attempt" in v.to_html()
    assert v.passed and v.status == "passed" and v.evidence() == "every task was submitted first"


def test_the_catalog_finds_every_topic_module_by_itself():
    from eugo_lab.discovery import import_submodules

    folder = Path(catalog.__file__).parent
    on_disk = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    assert [m.__name__.rsplit(".", 1)[1] for m in import_submodules(catalog.__name__)] == on_disk
    registered_by = {e.check.__module__.rsplit(".", 1)[1] for e in catalog.all_exercises()}
    assert registered_by == set(on_disk)  # every module registers at least one exercise
    lessons = [e.lesson for e in catalog.all_exercises()]
    assert lessons == sorted(lessons)  # course order comes from the lesson paths


def test_a_checker_bug_is_not_the_learners_fault():
    ex = base.Exercise("demo", "x.ipynb", "demo", check=lambda a: {}["missing"])
    v = base.grade(ex, base.Attempt("demo", trace=None, namespace={}))
    assert v.first_line == "exercise demo: not checked" and v.checker_error.startswith("KeyError")
    assert "bug in Eugo Lab, not a mistake in your cell" in v.to_text()
    assert "passed" not in v.to_text()


def test_unknown_id_is_a_usage_error_before_anything_runs():
    from eugo_lab import hpc

    hpc.shutdown()
    ip = shell()
    with pytest.raises(UsageError, match="did you mean 'fan-out'"):
        ip.run_cell_magic("eugo", "--exercise fan_out", "raise AssertionError('the cell must not run')")
    assert not hpc.is_initialized()


def test_a_verdict_is_saved_and_listed(store, monkeypatch):
    ip = shell()
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    with capture_output() as cap:
        ip.run_line_magic("eugo", "exercises")
    assert cap.stdout.startswith("Exercises: 0 of ")
    assert re.search(r"^  not tried  fan-out +Submit all", cap.stdout, re.M)
    v = run_exercise("fan-out", REFERENCE)
    assert v.passed, v.to_text()
    entry = json.loads(store.read_text())["exercises"]["fan-out"]
    assert entry["passed"] is True and entry["attempts"] == 1 and entry["evidence"] == v.evidence()
    with capture_output() as cap:
        ip.run_line_magic("eugo", "exercises")
    first = cap.stdout
    assert re.search(r"^  passed     fan-out +Submit all, get once \(01-distributed-python/02-fan-out-without-"
                     r"blocking\.ipynb\)$", first, re.M) and first.startswith("Exercises: 1 of ")
    assert re.search(r"^  not tried  put +Share a large array with hpc.put", first, re.M)
    with capture_output() as cap:
        ip.run_line_magic("eugo", "exercises")
    assert cap.stdout == first  # deterministic
    rows = listing.rows()
    assert "<td>passed</td>" in listing.listing_html(rows)


def test_the_reference_solution_is_graded_and_never_saved(store, monkeypatch):
    ip = shell()
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    starter = REFERENCE.replace("results = hpc.get([slow_square.remote(x) for x in p.xs])",
                                "results = [hpc.get(slow_square.remote(x)) for x in p.xs]")
    assert not run_exercise("fan-out", starter).passed  # the learner's own attempt: saved
    before = store.read_text()
    v = run_exercise("fan-out", REFERENCE, line="-w 2 --no-live --solution")
    assert v.passed and v.reference, v.to_text()
    assert v.first_line == "Reference solution for fan-out: passed — this run does not count as your attempt"
    assert store.read_text() == before  # nothing written: not a pass, not even an attempt
    assert progress.status("fan-out") == "not yet"
    with capture_output() as cap:
        ip.run_line_magic("eugo", "exercises")
    assert re.search(r"^  not yet    fan-out ", cap.stdout, re.M) and cap.stdout.startswith("Exercises: 0 of ")


def test_solution_without_an_exercise_is_refused_before_anything_runs(store):
    from eugo_lab import hpc

    hpc.shutdown()
    ip = shell()
    with pytest.raises(UsageError, match=r"--solution marks the reference solution of an exercise and needs the "
                                         r"exercise: %%eugo --exercise ID --solution"):
        ip.run_cell_magic("eugo", "--solution -w 2", "raise AssertionError('the cell must not run')")
    assert not hpc.is_initialized() and not store.exists()


def test_verdict_shown_after_the_summary_as_text_and_html(store, monkeypatch):
    ip = shell()
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    with capture_output() as cap:
        ip.run_cell(f"%%eugo --exercise fan-out -w 2 --no-live\n{REFERENCE}")
    data = [o.data for o in cap.outputs]
    kinds = ["summary" if "eugo-summary" in d.get("text/html", "") else
             "verdict" if "eugo-exercise" in d.get("text/html", "") else "other" for d in data]
    assert kinds.index("verdict") > kinds.index("summary")
    verdict = data[kinds.index("verdict")]
    assert verdict["text/plain"].splitlines()[0] == "exercise fan-out: passed"
    assert "measured" not in verdict["text/plain"]  # the varying numbers are in the HTML only
    assert "measured" in verdict["text/html"]


def test_store_that_cannot_be_written_warns_and_keeps_the_cell(store, monkeypatch):
    store.parent.mkdir(parents=True)
    store.write_text('{"schema_version": 99}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v = run_exercise("fan-out", REFERENCE)
    assert v.passed, v.to_text()
    assert any("was not saved" in str(w.message) and "newer eugo-lab" in str(w.message) for w in caught)


def test_a_checker_bug_in_the_magic_is_shown_as_such_and_not_saved(store, monkeypatch):
    def broken(a):
        return a.namespace["no such name"]

    monkeypatch.setitem(base._REGISTRY, "broken-demo", base.Exercise("broken-demo", "x.ipynb", "demo", broken))
    ip = shell()
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    with capture_output() as cap:
        ip.run_cell("%%eugo --exercise broken-demo -w 2 --no-live\nx = 1\n")
    assert "exercise broken-demo: not checked" in cap.stdout
    assert "bug in Eugo Lab, not a mistake in your cell" in cap.stdout
    assert not store.exists()  # not counted as an attempt of the learner's
    with pytest.raises(AssertionError, match="checker bug: KeyError"):
        run_exercise("broken-demo", "x = 1\n")
