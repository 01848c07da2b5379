"""The lessons read in course order: a term of the vocabulary is defined before a lesson leans on it.

``tests/courses/test_courses.py`` checks each notebook on its own (links resolve, every "Predict" prompt has a
guess cell, a lesson stays short). This file reads the lessons the way a learner does, one after another
from ``00-start-here``, and checks what only that order shows:

- the first time a lesson's prose uses a term of the vocabulary (``eugo_lab/glossary/terms.json``, by
  its name), that lesson or an earlier one has linked the term to its entry in ``vocabulary.ipynb``
  (the link is where a lesson defines it: "**term**" linked, with a sentence saying what it is);
- every glossary entry that names a lesson names one that uses the term by its name, so
  ``%eugo glossary TERM`` sends the learner to a lesson that shows it (not one that shares an alias).

A heading may name a term before the section's text defines it, the title of another lesson in a link
("[Task size and batching](...)") is a pointer, not a use, and so is the closing line that says what the
next lesson teaches ("Next: ... how batching fixes it"): none of them counts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _notebooks import cell_source, read_notebook

from eugo_lab import glossary

COURSES = Path(__file__).resolve().parents[2] / "courses"
START = COURSES / "00-start-here.ipynb"
#: The lessons in the order a learner takes them: the tour, then each course folder's lessons by number.
ORDER = [START] + sorted(p for p in COURSES.glob("[0-9][0-9]-*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)
VOCABULARY_LINK = re.compile(r"\[([^\]]*)\]\((?:\.\./)*vocabulary\.ipynb#((?:[^()\s]|\([^()\s]*\))+)\)")
OTHER_LINK = re.compile(r"\[[^\]]*\]\((?!https?:)[^)\s]+?\.ipynb(?:#[^)\s]*)?\)")
URL = re.compile(r"\]\([^)\s]+\)")
DEFINED = "\x00{}\x00"


def _name(path: Path) -> str:
    return path.relative_to(COURSES).as_posix()


def anchor(term: str) -> str:
    """The vocabulary's anchor for ``term`` (its heading, spaces as hyphens)."""
    return term.replace(" ", "-")


def term_pattern(term: str) -> re.Pattern[str]:
    """The term's name in prose: any case, hyphen or space between its words, a plural ending."""
    words = [re.escape(w) for w in re.split(r"[-\s]+", term.strip())]
    body = r"[-\s]+".join(words)
    if term.endswith(")"):  # get(): the parentheses are the name
        return re.compile(r"(?<![\w.])" + body, re.I)
    plural = r"(?:ies)?" if term.lower().endswith("y") else r"(?:s|es)?"
    if term.lower().endswith("y"):  # proxy -> proxies
        body = body[:-1] + r"(?:y|(?=ies))"
    return re.compile(r"(?<![\w#/-])" + body + plural + r"(?![\w(-])", re.I)


def prose(markdown: str) -> str:
    """What a learner reads as the lesson's own words: headings dropped, links to other lessons dropped,
    a link to a vocabulary entry replaced by a marker of the term it defines, other links' targets dropped."""
    lines = [line for line in markdown.splitlines() if not line.lstrip().startswith(("#", "Next:"))]
    text = "\n".join(lines)
    text = VOCABULARY_LINK.sub(lambda m: DEFINED.format(m.group(2)) + m.group(1), text)
    text = OTHER_LINK.sub(" ", text)
    return URL.sub("]", text)


def first_undefined_use(term: str, texts: list[tuple[str, str]]) -> str | None:
    """Where ``texts`` (``(where, prose)`` in course order) first use ``term`` before defining it; None if never."""
    mark, pattern = DEFINED.format(anchor(term)), term_pattern(term)
    for where, text in texts:
        use = pattern.search(text)
        defined = text.find(mark)
        if defined >= 0 and (use is None or defined <= use.start()):
            return None
        if use is not None:
            return f"{where}: ...{text[max(0, use.start() - 70):use.end() + 30]}...".replace("\n", " ")
    return None


def _course_prose() -> list[tuple[str, str]]:
    out = []
    for path in ORDER:
        for i, cell in enumerate(read_notebook(path)["cells"]):
            if cell["cell_type"] == "markdown":
                out.append((f"{_name(path)} cell {i}", prose(cell_source(cell))))
    return out


def test_the_order_starts_with_the_tour_and_holds_every_lesson():
    assert ORDER[0] == START and len(ORDER) > 20
    names = [_name(p) for p in ORDER[1:]]
    assert names[0] == "01-distributed-python/01-remote-functions-and-futures.ipynb"
    assert names == sorted(names) and not any(n.startswith("checklists/") for n in names)


def test_the_term_rule_sees_uses_and_definitions():
    proxy = term_pattern("Proxy")
    assert proxy.search("the proxies keep") and proxy.search("a Proxy") and not proxy.search("proxying")
    assert term_pattern("get()").search("the `get()` call") and not term_pattern("get()").search("hpc.get()")
    assert term_pattern("Fan-out").search("a fan out of tasks") and term_pattern("Key prefix").search("key prefixes")
    assert not term_pattern("Kernel").search("kernelspec")
    text = prose("## Stragglers\nOne [**straggler**](../vocabulary.ipynb#Straggler) holds the run.")
    assert first_undefined_use("Straggler", [("a", text)]) is None
    assert first_undefined_use("Straggler", [("a", prose("A straggler holds it.")), ("b", text)]).startswith("a:")
    assert first_undefined_use("Batching", [("a", prose("See [Task size and batching](05-task.ipynb)."))]) is None
    teaser = prose("Next: [Lesson 5](05-task.ipynb): how batching helps")
    assert first_undefined_use("Batching", [("a", teaser)]) is None
    assert first_undefined_use("Straggler", [("a", prose("See [stragglers](https://example.com/straggler)."))])


@pytest.mark.parametrize("term", glossary.terms())
def test_a_term_is_defined_where_a_lesson_first_uses_it(term: str):
    where = first_undefined_use(term, _course_prose())
    assert where is None, (f"{term!r} is used before any lesson defines it, at {where}: link its first use to "
                           f"the vocabulary, [**{term.lower()}**](../vocabulary.ipynb#{anchor(term)}), with a "
                           "sentence saying what it is")


@pytest.mark.parametrize("term", [t for t in glossary.terms() if glossary.lookup(t).lesson])
def test_a_glossary_pointer_leads_to_a_lesson_that_uses_the_term(term: str):
    lesson = glossary.lookup(term).lesson
    path = COURSES / lesson
    text = "\n".join(cell_source(c) for c in read_notebook(path)["cells"])
    assert term_pattern(term).search(text), (
        f"the glossary sends {term!r} to {lesson}, which never names it: point it at the lesson that shows it")
