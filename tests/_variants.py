"""What every test of a hidden second case checks (``eugo_lab.exercises.problems``): one copy for every such file.

A module that uses them marks its tests ``pytest.mark.usefixtures("hidden_seed")`` (tests/conftest.py): every
hidden case made then comes from :data:`SEED`, so a test knows what must never be shown.
"""

from __future__ import annotations

from _exercise_cells import code_in, hint_code, hint_words

from eugo_lab.exercises import catalog, problems

SEED = 12_345  # the hidden case's seed in these tests


def lesson(exercise_id: str):
    catalog.get(exercise_id)  # loads the catalog, so the problem is declared
    return problems.lesson_case(exercise_id)


def hidden(exercise_id: str):
    catalog.get(exercise_id)
    return problems.make(exercise_id, SEED, hidden=True)


def carried_over(v) -> str:
    """Check a ``not yet`` of the hidden case; returns its text."""
    text = v.to_text()
    assert text.splitlines()[0] == f"exercise {v.exercise_id}: not yet", text
    assert "met the criteria on the lesson's inputs, but not on a second case the checker made with other inputs " \
           "of the same kind" in text, text
    assert "so your answer did not carry over" in text and "a value is written into the cell" in text, text
    assert v.mistake == problems.CARRY_OVER
    assert code_in("\n".join(v.lines[:-1])) == [], text
    assert "p." in hint_words(v)
    assert "exercises.problem(" in hint_code(v)
    return text


def not_yet(v, mistake: str, says: str) -> str:
    """Check a ``not yet`` on the lesson's case: its mistake, its sentence, no code, hints for it."""
    text = v.to_text()
    assert not v.passed and v.mistake == mistake, text
    assert says in text, text
    assert code_in("\n".join(v.lines[:-1])) == [], text
    assert hint_words(v) and hint_code(v)
    return text


def passed_twice(v) -> str:
    text = v.to_text()
    assert v.passed and text.splitlines()[0] == f"exercise {v.exercise_id}: passed", text
    assert text.splitlines()[-1] == "  " + problems.SECOND_CASE, text
    return text


def never_shown(text: str, *values) -> None:
    """None of ``values`` (the hidden case's inputs and answer, as the learner would see them) is in ``text``."""
    for value in values:
        assert str(value) not in text, (value, text)
