"""Hints in tiers: a ``not yet`` says what happened without code, ``%eugo hint`` gives the words, then the code."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from _exercise_cells import code_in, run_exercise, shell
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from eugo_lab import exercises, progress
from eugo_lab.exercises import base, catalog, hints, listing
from eugo_lab.server.courses import _exercise_entry
from eugo_lab.settings import PROGRESS_DIR_ENV

CATALOG = Path(base.__file__).parent / "catalog"
FAN_OUT = """import time
from eugo_lab import exercises, hpc

p = exercises.problem("fan-out")

@hpc.remote
def slow_square(x):
    time.sleep(0.05)
    return x * x

results = []
for x in p.xs:
    results.append(hpc.get(slow_square.remote(x)))
"""


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv(PROGRESS_DIR_ENV, str(tmp_path / "progress"))
    return tmp_path / "progress" / "progress.json"


def hint_magic(line: str) -> str:
    """``%eugo hint ...`` through the real magic in the test shell (text mode), as printed."""
    ip = shell()
    old = os.environ.get("EUGO_LAB_DISPLAY")
    os.environ["EUGO_LAB_DISPLAY"] = "text"
    try:
        with capture_output() as out:
            ip.run_line_magic("eugo", f"hint {line}".strip())
    finally:
        if old is None:
            os.environ.pop("EUGO_LAB_DISPLAY", None)
        else:
            os.environ["EUGO_LAB_DISPLAY"] = old
    return out.stdout


# -- the rule: verdict messages hold no code ---------------------------------------------------------------


def _message_texts(path: Path) -> list[tuple[int, str]]:
    """The literal text of every ``not_yet(...)``/``NotYet(...)`` message and message helper in ``path``."""
    tree = ast.parse(path.read_text())
    found = []
    helpers = {"compare", "_values_differ", "_transfer_advice", "_kept_on_cpu", "_jit_declined_line"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("not_yet", "NotYet", "append"):
                text = "".join(s.value for arg in node.args for s in ast.walk(arg)
                               if isinstance(s, ast.Constant) and isinstance(s.value, str))
                found.append((node.lineno, text))
        elif isinstance(node, ast.FunctionDef) and node.name in helpers:
            found.extend((s.lineno, s.value) for s in ast.walk(node)
                         if isinstance(s, ast.Constant) and isinstance(s.value, str))
    return found


def test_the_code_rule_can_fail():
    assert code_in("submit them (futures = [f.remote(x) for x in xs]), then hpc.get(futures)")
    assert code_in("decorate it with @cuda.jit") and code_in("pass batch=\"auto\"")
    assert code_in("run %%eugo --exercise x --profile")
    assert not code_in("your loop called get() at cell line 11: the Blocking finding; w * exp(w) = signal")


@pytest.mark.parametrize("path", sorted(CATALOG.glob("[a-z]*.py")), ids=lambda p: p.stem)
def test_no_verdict_message_of_the_catalog_hands_over_code(path):
    bad = [(line, code_in(text)) for line, text in _message_texts(path) if code_in(text)]
    assert not bad, f"{path.name}: messages with code (move it to the exercise's hint tiers): {bad}"


def test_the_grader_messages_hold_no_code_either():
    assert not [t for _, t in _message_texts(Path(base.__file__)) if code_in(t)]
    assert not code_in(base.HINT_POINTER.format(id="fan-out"))


# -- the tiers as data -----------------------------------------------------------------------------------


def test_every_exercise_declares_two_tiers_for_every_mistake_its_checker_names():
    for path in sorted(CATALOG.glob("[a-z]*.py")):
        keys = {kw.value.value for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
                for kw in node.keywords if kw.arg == "mistake" and isinstance(kw.value, ast.Constant)}
        mine = [e for e in catalog.all_exercises() if e.check.__module__.endswith("." + path.stem)]
        assert mine, path
        for key in keys - {None}:
            assert any(key in e.hints for e in mine), f"{path.name}: mistake {key!r} has no hint"
    for ex in catalog.all_exercises():
        assert base.DEFAULT in ex.hints, ex.id
        for key, h in ex.hints.items():
            assert h.change.strip() and h.code.strip(), (ex.id, key)
            assert not code_in(h.change), f"{ex.id} {key}: tier 1 is words, the code is tier 2: {h.change!r}"


def test_a_hint_needs_both_tiers_and_a_default():
    with pytest.raises(ValueError, match="both tiers"):
        base.Hint("words", " ")
    with pytest.raises(ValueError, match="'default' entry"):
        base.exercise("x-no-default", lesson="x.ipynb", title="t", hints={"m": ("a", "b")})
    with pytest.raises(ValueError, match="hints="):
        base.exercise("x-bad", lesson="x.ipynb", title="t", hints="words")  # type: ignore[arg-type]


def test_a_mistake_without_a_hint_is_a_checker_bug_not_the_learners(monkeypatch):
    ex = catalog.get("fan-out")

    def check(a):
        return a.not_yet("something", mistake="no-such-key")

    bad = base.Exercise(ex.id, ex.lesson, ex.title, check, ex.hints)
    v = base.grade(bad, base.Attempt(ex.id, trace=None, namespace={}))
    assert v.status == base.NOT_CHECKED and "no hint for mistake 'no-such-key'" in v.to_text()


def test_every_not_yet_ends_pointing_at_the_hint():
    ex = catalog.get("fan-out")
    v = base.grade(ex, base.Attempt(ex.id, trace=None, namespace={}, error=ZeroDivisionError("division by zero")))
    assert v.lines[-1] == "for a hint, run %eugo hint fan-out: it says what to change, in words; run it a second " \
                          "time for the code."
    assert v.mistake is None and ex.hint(v.mistake) is ex.hints[base.DEFAULT]


# -- the store -------------------------------------------------------------------------------------------


def test_hints_are_counted_per_attempt_and_kept_for_the_same_mistake(store):
    progress.record_exercise("fan-out", False, "blocked", mistake="blocking-loop")
    assert progress.record_hint("fan-out", 2)[0]["hints"] == 1
    last, counted = progress.record_hint("fan-out", 2)
    assert last["hints"] == 2 and counted
    last, counted = progress.record_hint("fan-out", 2)  # a third call shows tier 2 again, counts nothing
    assert last["hints"] == 2 and not counted
    assert progress.load()["exercises"]["fan-out"]["hints_taken"] == 2
    e = progress.record_exercise("fan-out", False, "blocked again", mistake="blocking-loop")
    assert e["last"]["hints"] == 2  # the same mistake again: the code was shown already
    e = progress.record_exercise("fan-out", False, "now local", mistake="local")
    assert e["last"]["hints"] == 0 and e["hints_taken"] == 2  # a new mistake starts at the words
    e = progress.record_exercise("fan-out", True, "did it")
    assert e["last"]["mistake"] is None and e["last"]["hints"] == 0
    last, counted = progress.record_hint("fan-out", 2)
    assert last["status"] == progress.PASSED and not counted


def test_a_store_written_before_hints_and_guesses_still_loads(store):
    store.parent.mkdir(parents=True)
    old = {"schema_version": 1, "checklists": {},
           "exercises": {"fan-out": {"passed": False, "when": "t1", "evidence": "e", "attempts": 1,
                                     "last": {"status": "not yet", "when": "t1", "evidence": "e"}}}}
    store.write_text(json.dumps(old))
    data = progress.load()
    assert data["guesses"] == {} and data["exercises"]["fan-out"]["attempts"] == 1
    assert progress.hints_taken(data["exercises"]["fan-out"]) == 0
    assert [r.hints for r in listing.rows() if r.id == "fan-out"] == [0]
    assert _exercise_entry(catalog.get("fan-out"), data)["hints_taken"] == 0
    last, counted = progress.record_hint("fan-out", 2)  # an old attempt has no mistake: the general tiers
    assert counted and last["hints"] == 1 and "mistake" not in last
    assert hints.take("fan-out").body == catalog.get("fan-out").hints[base.DEFAULT].code


# -- %eugo hint ------------------------------------------------------------------------------------------


def test_hint_twice_after_a_real_attempt_gives_the_words_then_the_code(store):
    v = run_exercise("fan-out", FAN_OUT)
    assert v.mistake == "blocking-loop" and code_in(v.to_text()) == []
    first = hint_magic("")  # no id: the exercise this kernel graded last
    tiers = catalog.get("fan-out").hints["blocking-loop"]
    assert first.splitlines()[0] == "hint 1 of 2 for fan-out: what to change"
    assert tiers.change in " ".join(first.split()) and ".remote(" not in first
    assert "run %eugo hint fan-out again for the code." in first
    second = hint_magic("fan-out")
    assert second.splitlines()[0] == "hint 2 of 2 for fan-out: the code"
    assert "    futures = [slow_square.remote(x) for x in p.xs]" in second.splitlines()
    again = hint_magic("fan-out")
    assert again.splitlines()[0] == "hint 2 of 2 for fan-out (shown before: there are only two): the code"
    assert progress.load()["exercises"]["fan-out"]["hints_taken"] == 2
    assert "1 hint" not in listing.listing_text(listing.rows()) and "2 hints taken" in listing.listing_text(
        listing.rows())


@pytest.mark.parametrize("exercise_id", catalog.ids())
def test_every_exercise_answers_hint_twice_through_the_magic(store, exercise_id):
    ex = catalog.get(exercise_id)
    mistake = next(k for k in sorted(ex.hints) if k != base.DEFAULT)  # one of its own mistakes
    progress.record_exercise(ex.id, False, "a typical mistake", mistake=mistake)
    first, second = hint_magic(ex.id), hint_magic(ex.id)
    assert first.startswith(f"hint 1 of 2 for {ex.id}: what to change\n")
    assert " ".join(ex.hints[mistake].change.split()) in " ".join(first.split())
    assert second.startswith(f"hint 2 of 2 for {ex.id}: the code\n")
    code = [line.strip() for line in ex.hints[mistake].code.splitlines() if line.strip()]
    assert all(line in second for line in code)


def test_hint_without_an_attempt_and_after_a_pass_says_so(store):
    assert hint_magic("put").startswith("no attempt at put is saved yet: run its exercise cell")
    progress.record_exercise("put", True, "shared")
    assert hint_magic("put").startswith("your last attempt at put passed: there is nothing to hint.")
    assert progress.load()["exercises"]["put"].get("hints_taken", 0) == 0


def test_hint_for_an_unknown_id_or_no_graded_cell_is_a_usage_error(store):
    with pytest.raises(UsageError, match="did you mean 'fan-out'"):
        shell().run_line_magic("eugo", "hint fanout")
    with pytest.raises(UsageError, match="one exercise id at most"):
        shell().run_line_magic("eugo", "hint fan-out put")
    exercises.set_last_verdict(None)
    with pytest.raises(UsageError, match="no exercise cell has been graded in this kernel yet"):
        shell().run_line_magic("eugo", "hint")


def test_the_hint_html_escapes_and_puts_the_code_in_pre():
    shown = hints.Shown("x", 2, "a < b & <script>")
    assert "<pre><code>a &lt; b &amp; &lt;script&gt;</code></pre>" in shown.to_html()
    assert "<script>" not in shown.to_html()
