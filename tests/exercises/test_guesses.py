"""Predictions recorded: ``%eugo guess NAME VALUE``, saved per lesson, printed beside the measurement."""

from __future__ import annotations

import os

import pytest
from _exercise_cells import shell
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from eugo_lab import guesses, progress
from eugo_lab.settings import PROGRESS_DIR_ENV

LESSON = "01-distributed-python/05-task-size-and-batching.ipynb"


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """A private store, no kernel guesses, no notebook path, text displays."""
    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path / "progress"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    shell().user_ns.pop("__session__", None)
    guesses.forget()
    yield
    guesses.forget()


def magic(line: str) -> str:
    ip = shell()
    with capture_output() as out:
        ip.run_line_magic("eugo", line)
    return out.stdout


@pytest.mark.parametrize("text, value, kind", [
    ("2x", 2.0, "ratio"), ("1.5 ×", 1.5, "ratio"), ("0.5 s", 0.5, "time"), ("300 ms", 0.3, "time"),
    ("300ms", 0.3, "time"), ("40%", 40.0, "percent"), ("12 MB", 12e6, "size"), ("512 MiB", 512 * 2**20, "size"),
    ("40 MB/s", 40e6, "rate"), ("8", 8.0, "count"), ("20,000", 20_000.0, "count"), ("2 min", 120.0, "time"),
    ("1e6", 1e6, "count"), ("-3 %", -3.0, "percent"), ("250 us", 250e-6, "time"),
])
def test_values_with_their_units(text, value, kind):
    g = guesses.parse("n", text)
    assert g.value == pytest.approx(value) and g.kind == kind and g.text == " ".join(text.split())


@pytest.mark.parametrize("text", ["fast", "2 parsecs", "", "x2", "1/2", "2 2", "nan", "inf s"])
def test_a_bad_value_names_the_accepted_forms(text):
    with pytest.raises(guesses.GuessError, match="2x, 40%, 300 ms, 0.5 s"):
        guesses.parse("speedup", text)


def test_a_bad_name_is_refused():
    with pytest.raises(guesses.GuessError, match="not a guess name"):
        guesses.parse("2fast", "2x")


def test_guess_then_compare_in_the_kernel(capsys):
    said = magic("guess batch-speedup 300 ms")
    assert said.startswith("your prediction (batch-speedup): 300 ms, kept in this kernel")
    capsys.readouterr()
    guesses.compare_guess("batch-speedup", 0.412, "s")
    assert capsys.readouterr().out == "your prediction (batch-speedup): 300 ms  |  measured: 412 ms\n"
    # no lesson known: nothing saved, and saying so is what the magic printed
    assert progress.load()["guesses"] == {}


def test_no_guess_prints_so_and_does_not_fail(capsys):
    capsys.readouterr()
    guesses.compare_guess("never-made", 1.73, "x")
    assert capsys.readouterr().out == "no guess recorded for never-made  |  measured: 1.73x\n"
    guesses.compare_guess("never-made", None, "")
    assert "measured: none (no such value on this machine)" in capsys.readouterr().out


def test_a_guess_in_a_notebook_is_saved_per_lesson_and_survives_a_restart(monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", f"/home/me/eugo/courses/{LESSON}")
    assert guesses.lesson_of_kernel() == LESSON
    assert "saved with your progress" in magic("guess speedup 2x")
    saved = progress.load()["guesses"][LESSON]["speedup"]
    assert saved["text"] == "2x" and saved["value"] == 2.0 and saved["kind"] == "ratio" and saved["when"]
    guesses.forget()  # a new kernel: only the store remembers
    c = guesses.compare("speedup", 1.5, "x", LESSON)
    assert c.text == "your prediction (speedup): 2x  |  measured: 1.5x"
    assert guesses.compare("speedup", 1.5, "x", "another/lesson.ipynb").guess is None  # per lesson


def test_a_bare_number_reads_as_the_measurements_unit_and_other_kinds_are_not_compared():
    magic("guess n 2")
    assert guesses.compare("n", 1.7, "x").text == "your prediction (n): 2 (read as 2x)  |  measured: 1.7x"
    magic("guess t 40%")
    text = guesses.compare("t", 0.3, "s").text
    assert text.startswith("your prediction (t): 40%  |  measured: 300 ms") and "not comparable" in text


def test_the_magic_refuses_bad_input_with_what_to_write():
    with pytest.raises(UsageError, match="needs a name and a value"):
        shell().run_line_magic("eugo", "guess speedup")
    with pytest.raises(UsageError, match="accepted|write a number"):
        shell().run_line_magic("eugo", "guess speedup lots")
    with pytest.raises(guesses.GuessError, match="not a unit compare_guess knows"):
        guesses.compare("speedup", 1.0, "furlongs")
    with pytest.raises(guesses.GuessError, match="must be a number"):
        guesses.compare("speedup", "fast", "x")  # type: ignore[arg-type]


def test_an_unwritable_store_keeps_the_guess_in_the_kernel(monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", f"courses/{LESSON}")

    def broken(*a, **k):
        raise OSError("read-only file system")

    monkeypatch.setattr(progress, "record_guess", broken)
    with pytest.warns(UserWarning, match="kept in this kernel but not saved"):
        g, saved = guesses.record("speedup", "2x", LESSON)
    assert not saved and guesses.recorded("speedup", LESSON) == g
    assert os.environ["JPY_SESSION_NAME"].endswith(LESSON)


def test_a_value_that_was_not_measured_says_what_it_is():
    guesses.record("copy", "2x")
    assert guesses.compare("copy", 3.0, "x").text == "your prediction (copy): 2x  |  measured: 3x"
    said = guesses.compare("copy", 3.0, "x", source="predicted for NVIDIA H100").text
    assert said == "your prediction (copy): 2x  |  predicted for NVIDIA H100: 3x"
    assert "measured" not in guesses.compare("other", 3.0, "x", source="predicted").text
    with pytest.raises(guesses.GuessError, match="source"):
        guesses.compare("copy", 3.0, "x", source=" ")
