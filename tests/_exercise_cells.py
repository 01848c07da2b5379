"""Run an exercise cell the way a learner does: ``%%eugo --exercise ID`` in an IPython shell, text mode.

``run_exercise(exercise_id, cell, setup="")`` runs ``setup`` as a plain cell, then ``cell``
under ``%%eugo --exercise`` (its options, e.g. ``-w 2``, via ``line``), and returns the
:class:`~eugo_lab.exercises.base.Verdict`. A checker bug (``not checked``) fails the test:
the tests of an exercise must never mistake one for the learner's fault.
"""

from __future__ import annotations

import os
import re

from IPython import get_ipython
from IPython.testing.globalipapp import start_ipython

from eugo_lab import exercises
from eugo_lab.exercises.base import Verdict

#: The as-completed lesson's setup cell (its measure task and the driver's handle), as a learner has it.
AS_COMPLETED_SETUP = """
import time
from eugo_lab import exercises, hpc

p = exercises.problem("as-completed")

@hpc.remote
def measure(ms):
    time.sleep(ms / 1000)
    return ms

def handle(r):
    time.sleep(0.02)
    return r + 1
"""

#: The batching lesson's setup cell (its score task), as a learner has it.
BATCHING_SETUP = """
from eugo_lab import exercises, hpc

p = exercises.problem("batching")

@hpc.remote
def score(x):
    return sum((x * k) % 7 for k in range(200))
"""


def shell():
    """The test IPython shell with the magics loaded."""
    ip = start_ipython() or get_ipython()  # None when another test module started it already
    ip.run_line_magic("load_ext", "eugo_lab")
    return ip


def run_exercise(exercise_id: str, cell: str, setup: str = "", line: str = "-w 2 --no-live") -> Verdict:
    """Run ``cell`` as ``%%eugo --exercise exercise_id`` (after ``setup``) and return its verdict."""
    ip = shell()
    old = os.environ.get("EUGO_LAB_DISPLAY")
    os.environ["EUGO_LAB_DISPLAY"] = "text"
    try:
        if setup:
            r = ip.run_cell(setup)
            r.raise_error()
        exercises.set_last_verdict(None)
        ip.run_cell(f"%%eugo --exercise {exercise_id} {line}\n{cell}")
    finally:
        if old is None:
            os.environ.pop("EUGO_LAB_DISPLAY", None)
        else:
            os.environ["EUGO_LAB_DISPLAY"] = old
    verdict = exercises.last_verdict()
    assert verdict is not None, f"%%eugo --exercise {exercise_id} gave no verdict"
    assert verdict.checker_error is None, f"checker bug: {verdict.checker_error}\n{verdict.to_text()}"
    assert verdict.exercise_id == exercise_id
    return verdict


# What counts as handing over code in a verdict (tier 2 of a hint is where the code goes): a call
# submitted as a task, anything of the runtime's module, an assignment or keyword argument, a
# comprehension or loop header, a decorator, a cell magic's line. Names of functions, findings and
# options in words (get(), the Blocking finding, --profile) are evidence, not code.
CODE_PATTERNS = {
    ".remote(": re.compile(r"\.remote\("),
    "hpc.": re.compile(r"\bhpc\.\w"),
    "assignment": re.compile(r"(?<![=<>!])\b[A-Za-z_]\w*(?:\[[^\]]*\])?\s*=(?!=)\s*[\w\[\(\{\"'.-]"),
    "comprehension or loop": re.compile(r"\bfor \w+(?:, \w+)* in \w"),
    "decorator": re.compile(r"(?<![\w`])@\w"),
    "magic line": re.compile(r"%%eugo"),
}


def code_in(text: str) -> list[str]:
    """The code snippets ``text`` holds, by the rule above (empty: none)."""
    return [f"{name}: {m.group(0)!r}" for name, rx in CODE_PATTERNS.items() for m in rx.finditer(text)]


def passed_with(verdict: Verdict, evidence: str) -> str:
    """Check a table row's pass: its first line says passed and its text holds ``evidence``; returns the text."""
    text = verdict.to_text()
    assert verdict.passed and text.splitlines()[0] == f"exercise {verdict.exercise_id}: passed", text
    assert evidence in text, text
    return text


def not_yet_for(verdict: Verdict, mistake: str, message: str) -> str:
    """Check a table row's ``not yet``: its first line, ``message``, the ``mistake`` whose hints answer it, no code.

    The verdict names what happened in words (its lines before the hint pointer hold no code),
    and both hint tiers exist for the mistake. Returns the verdict's text.
    """
    text = verdict.to_text()
    assert not verdict.passed and text.splitlines()[0] == f"exercise {verdict.exercise_id}: not yet", text
    assert message in text, text
    assert verdict.mistake == mistake, text
    assert code_in("\n".join(verdict.lines[:-1])) == [], text
    assert hint_words(verdict) and hint_code(verdict)
    return text


def hint_code(verdict: Verdict) -> str:
    """Tier 2 of the hint that answers ``verdict`` (the code a ``not yet`` no longer hands over itself)."""
    from eugo_lab.exercises import catalog

    return catalog.get(verdict.exercise_id).hint(verdict.mistake).code


def hint_words(verdict: Verdict) -> str:
    """Tier 1 of the hint that answers ``verdict``: what to change, in words."""
    from eugo_lab.exercises import catalog

    return catalog.get(verdict.exercise_id).hint(verdict.mistake).change


def tier_code(exercise_id: str, mistake: str) -> str:
    """Tier 2 of ``exercise_id``'s hint for ``mistake`` (for tests that keep only a verdict's text)."""
    from eugo_lab.exercises import catalog

    return catalog.get(exercise_id).hints[mistake].code


def tier_words(exercise_id: str, mistake: str) -> str:
    """Tier 1 of ``exercise_id``'s hint for ``mistake``: what to change, in words."""
    from eugo_lab.exercises import catalog

    return catalog.get(exercise_id).hints[mistake].change


def check_cell(exercise_id: str, cell: str, passes: bool, says: str, mistake: str | None, setup: str = "",
               line: str = "-w 2 --no-live") -> Verdict:
    """One row of an exercise's table of cells: the verdict passes (or not), says ``says`` and names ``mistake``.

    A ``not yet`` must hold no code (tier 2 of the hint is where the code goes); a future's
    repr (``<hpc.Future ...>``) is the learner's value, not code.
    """
    v = run_exercise(exercise_id, cell, setup=setup, line=line)
    text = v.to_text()
    assert v.passed is passes, text
    assert says in text, text
    assert v.mistake == mistake, text
    if not passes:
        assert code_in(text.replace("<hpc.Future", "<Future")) == [], text
    return v
