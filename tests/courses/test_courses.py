"""The course notebooks as files: size, saved outputs, exercises, links and vocabulary anchors.

nbval runs every notebook (``make test`` collects ``courses/``); these tests check what nbval
cannot: that a lesson has an exercise with a hidden reference solution, that committed notebooks
carry no bulky or run-specific output, and that every link between notebooks leads somewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _notebooks import cell_source, read_notebook

from eugo_lab import glossary

COURSES = Path(__file__).resolve().parents[2] / "courses"
NOTEBOOKS = sorted(p for p in COURSES.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
# Lessons live in a course folder (01-distributed-python/...); checklists have no exercise.
LESSONS = [p for p in NOTEBOOKS if p.parent != COURSES and p.parent.name[:1].isdigit()]
MAX_BYTES = 1_000_000
# Markdown links to other notebooks: [text](path.ipynb) or [text](path.ipynb#anchor); an anchor may hold
# one level of balanced parentheses, as the vocabulary's "get()" does.
LINK = re.compile(r"\]\(([^)\s]+?\.ipynb)(#(?:[^()\s]|\([^()\s]*\))*)?\)")
EXERCISE = re.compile(r"^%%eugo\b[^\n]*--exercise[ =]([\w-]+)", re.M)
SOLUTION = re.compile(r"^%%eugo\b[^\n]* --solution\b", re.M)


def _checked(cell: dict) -> bool:
    """nbval compares this cell's output (the comment marker, or the cell tag)."""
    return "NBVAL_CHECK_OUTPUT" in cell_source(cell) or "nbval-check-output" in cell.get("metadata", {}).get("tags", [])


def _name(path: Path) -> str:
    return str(path.relative_to(COURSES))


def test_there_are_lessons():
    assert len(LESSONS) >= 12, [_name(p) for p in LESSONS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_notebook_is_small_and_saved_clean(path: Path):
    assert path.stat().st_size < MAX_BYTES, f"{_name(path)} is {path.stat().st_size:,} bytes; clear its outputs"
    for i, cell in enumerate(read_notebook(path)["cells"]):
        if cell["cell_type"] != "code" or not cell.get("outputs"):
            continue
        # Saved outputs exist only where nbval compares them, and only as deterministic text.
        assert _checked(cell), f"{_name(path)} cell {i}: saved output in a cell nbval does not compare"
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"{_name(path)} cell {i}: a saved error"
            kinds = set(out.get("data", {})) - {"text/plain"}
            assert not kinds, f"{_name(path)} cell {i}: saved {sorted(kinds)} (keep text/plain only)"


@pytest.mark.parametrize("path", LESSONS, ids=_name)
def test_lesson_has_an_exercise_with_a_hidden_reference(path: Path):
    from eugo_lab.exercises import catalog

    cells = [c for c in read_notebook(path)["cells"] if c["cell_type"] == "code"]
    checked = [(i, EXERCISE.search(cell_source(c)).group(1)) for i, c in enumerate(cells)
               if EXERCISE.search(cell_source(c))]
    assert checked, f"{_name(path)} has no %%eugo --exercise cell"
    for exercise_id in {eid for _, eid in checked}:
        ex = catalog.get(exercise_id)  # an unknown id raises, naming the close ones
        assert ex.lesson == _name(path), f"exercise {exercise_id} names lesson {ex.lesson}, but is in {_name(path)}"
        hidden = [i for i, eid in checked if eid == exercise_id
                  and cells[i].get("metadata", {}).get("jupyter", {}).get("source_hidden")]
        assert hidden, f"{_name(path)}: exercise {exercise_id} has no reference solution in a collapsed cell"
        starters = [i for i, eid in checked if eid == exercise_id and i not in hidden]
        assert starters and min(starters) < min(hidden), f"{_name(path)}: {exercise_id} needs a starter cell first"
        # the reference runs as one: graded and shown, never saved as the learner's attempt
        for i in hidden:
            assert SOLUTION.search(cell_source(cells[i])), f"{_name(path)} cell {i}: the reference needs --solution"
        for i in starters:
            assert not SOLUTION.search(cell_source(cells[i])), f"{_name(path)} cell {i}: a starter is no --solution"


@pytest.mark.parametrize("path", LESSONS, ids=_name)
def test_nbval_checks_every_exercise_verdict(path: Path):
    # The starter must be graded "not yet" and the reference "passed" (as the reference, which does not count)
    # every time nbval runs the lesson:
    # the collapsed cell after each exercise cell prints the verdict's first line, and nbval compares it.
    cells = [c for c in read_notebook(path)["cells"] if c["cell_type"] == "code"]
    for i, cell in enumerate(cells):
        m = EXERCISE.search(cell_source(cell))
        if not m:
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        assert "starter" in tags or "solution" in tags, f"{_name(path)} cell {i}: tag it starter or solution"
        if "solution" in tags:
            want = f"Reference solution for {m.group(1)}: passed — this run does not count as your attempt\n"
        else:
            want = f"exercise {m.group(1)}: not yet\n"
        after = cells[i + 1] if i + 1 < len(cells) else {}
        assert "verdict-check" in after.get("metadata", {}).get("tags", []), (
            f"{_name(path)} cell {i}: no verdict check after it; add a code cell tagged verdict-check and "
            "nbval-check-output (source_hidden) running `print(last_verdict().first_line)` from eugo_lab.exercises, "
            f"with {want!r} as its stored stdout")
        assert _checked(after)
        saved = "".join("".join(o.get("text", "")) for o in after.get("outputs", []))
        assert saved == want, f"{_name(path)} cell {i}: the verdict check expects {saved!r}, not {want!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_links_between_notebooks_resolve(path: Path):
    anchors = {t.replace(" ", "-") for t in glossary.terms()}
    for cell in read_notebook(path)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for target, anchor in LINK.findall(cell_source(cell)):
            dest = (path.parent / target).resolve()
            assert dest.is_file(), f"{_name(path)} links to {target}, which does not exist"
            if dest.name == "vocabulary.ipynb" and anchor:
                assert anchor[1:] in anchors, f"{_name(path)} links to vocabulary entry {anchor}, which is not a term"


def test_every_lesson_named_by_the_glossary_exists():
    for term in glossary.terms():
        entry = glossary.lookup(term)
        if entry.lesson:
            assert (COURSES / entry.lesson).is_file(), f"{term}: lesson {entry.lesson} does not exist"


def _mentions(entry: glossary.Entry, text: str) -> int:
    """How often ``text`` names the entry's term or one of its aliases (case, hyphens and spacing ignored)."""
    flat = re.sub(r"[-\s]+", " ", text.lower())
    return sum(flat.count(re.sub(r"[-\s]+", " ", n.lower())) for n in (entry.term, *entry.aliases))


def test_a_glossary_pointer_names_a_lesson_that_uses_the_term_and_every_used_term_has_one():
    texts = {p.relative_to(COURSES).as_posix(): "\n".join(cell_source(c) for c in read_notebook(p)["cells"])
             for p in LESSONS}
    wrong, missing = [], []
    for term in glossary.terms():
        entry = glossary.lookup(term)
        if entry.lesson and not _mentions(entry, texts.get(entry.lesson, "")):
            wrong.append(f"{term} -> {entry.lesson}")
        if not entry.lesson and any(_mentions(entry, t) for t in texts.values()):
            missing.append(term)
    assert not wrong, f"these terms point at a lesson that never names them: {wrong}"
    assert not missing, f"lessons use these terms but the glossary names no lesson for them: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_a_markdown_line_that_introduces_something_is_followed_by_it(path: Path):
    # A sentence ending in a colon promises what comes next: a visible code cell, not another
    # paragraph, a hidden check or the end of the notebook.
    cells = read_notebook(path)["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown" or not cell_source(cell).rstrip().endswith(":"):
            continue
        nxt = cells[i + 1] if i + 1 < len(cells) else None
        hidden = nxt is not None and nxt.get("metadata", {}).get("jupyter", {}).get("source_hidden", False)
        assert nxt is not None and nxt["cell_type"] == "code" and not hidden, \
            f"{_name(path)} cell {i} ends with a colon but introduces nothing: {cell_source(cell)[-80:]!r}"


def test_vocabulary_has_every_term_with_its_entry():
    cells = read_notebook(COURSES / "vocabulary.ipynb")["cells"]
    headings = {cell_source(c)[3:].strip() for c in cells
                if c["cell_type"] == "markdown" and cell_source(c).startswith("## ")}
    missing = [t for t in glossary.terms() if t not in headings]
    assert not missing, f"vocabulary.ipynb lacks sections for {missing}"
    shown = {m.group(1).strip() for c in cells
             for m in [re.search(r"^%eugo glossary (.+)$", cell_source(c), re.M)] if m}
    assert set(glossary.terms()) <= shown


def test_index_links_every_lesson_and_the_vocabulary():
    index = COURSES / "index.ipynb"
    text = "\n".join(cell_source(c) for c in read_notebook(index)["cells"] if c["cell_type"] == "markdown")
    linked = {(COURSES / t).resolve() for t, _ in LINK.findall(text)}
    for path in NOTEBOOKS:
        if path != index:
            assert path.resolve() in linked, f"index.ipynb does not link {_name(path)}"


def test_index_tables_give_every_lesson_a_row_of_its_own():
    """A table row that lost its line break renders two lessons as one row and hides the second."""
    index = COURSES / "index.ipynb"
    for cell in read_notebook(index)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        rows = [line for line in cell_source(cell).splitlines() if line.startswith("| ") and ".ipynb)" in line]
        for row in rows:
            lessons = [t for t, _ in LINK.findall(row) if t.endswith(".ipynb")]
            assert len(lessons) == 1, f"index.ipynb: one table row holds {len(lessons)} lessons: {row[:160]}"
            assert row.rstrip().endswith("|") and row.count("||") == 0, f"index.ipynb: a row runs on: {row[:160]}"


# The 21 terms of the learning page's vocabulary, as the page names them.
PAGE_TERMS = ("Parallel computing", "ARM Neoverse", "Batching", "Columnar format", "Compute-bound", "Fan-out", "get()",
              "Blocking", "GPU offloading", "I/O-bound", "Long tail", "Automatic optimization", "Partition",
              "Profiling", "Scheduling overhead", "Serialization", "Speedup", "Straggler", "Transfer cost",
              "Vectorization", "Idle cluster")


def test_the_pages_vocabulary_is_all_there():
    assert len(PAGE_TERMS) == 21
    assert [glossary.lookup(t).term for t in PAGE_TERMS] == list(PAGE_TERMS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_every_eugo_magic_line_is_valid(path: Path):
    # nbval-lax lets a cell that stopped with IPython's UsageError pass, so a mistyped %%eugo option
    # would go unnoticed: parse every magic line with the magic's own parser instead.
    from IPython.core.error import UsageError
    from IPython.core.magic_arguments import parse_argstring

    from eugo_lab.magics import SUBCOMMANDS, EugoMagics

    for i, cell in enumerate(read_notebook(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        for line in cell_source(cell).splitlines():
            if line.startswith("%%eugo"):
                try:
                    parse_argstring(EugoMagics.eugo, line[len("%%eugo"):])
                except UsageError as exc:
                    pytest.fail(f"{_name(path)} cell {i}: {line!r}: {exc}")
            elif line.startswith("%eugo"):
                sub = (line.split() + [""])[1]
                assert sub in SUBCOMMANDS, f"{_name(path)} cell {i}: {line!r}: no subcommand {sub!r}"


# A "Predict" prompt: the verb itself (not "predicts", "predicted", "prediction"), "make your own prediction", or
# the same request in other words: "guess:", "guess first", "guess before you run it", "make a guess", "how long
# do you expect"; a lesson's objectives ("You will be able to ... predict ...") are no prompt, and neither is the
# noun ("was your guess right?", "from the first guess").
PREDICT = re.compile(r"\bpredict\b|\bmake your own prediction\b|\bguess\s*:|\bguess (?:first|before)\b|"
                     r"\bmake a guess\b|\bdo you expect\b", re.I)
GUESS = re.compile(r"^%eugo guess (?P<name>\S+) (?P<value>.+)$", re.M)
COMPARE = re.compile(r"compare_guess\(\s*\"(?P<name>[^\"]+)\"")


def is_prompt(cell: dict) -> bool:
    """A markdown cell that asks the learner to predict before a measurement."""
    src = cell_source(cell)
    return cell["cell_type"] == "markdown" and bool(PREDICT.search(src)) and "will be able to" not in src.lower()


def test_the_prompt_rule_sees_prompts_and_only_prompts():
    md = [{"cell_type": "markdown", "source": s} for s in (
        "**Predict:** how long?", "Now predict: which elements?", "Make your own prediction before you go on",
        "Before you run it, guess: how many?", "Guess first: does it raise?", "Guess before the next cell: bytes?",
        "make a guess before you run anything", "How long do you expect the cell to take?",
        "the replay predicts 1.9x", "a prediction for a named profile", "**You will be able to** predict it",
        "Was your guess right?", "from the first guess `np.log1p(t)`")]
    assert [is_prompt(c) for c in md] == [True] * 8 + [False] * 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_every_predict_prompt_has_a_guess_cell_and_its_measurement_prints_the_comparison(path: Path):
    from eugo_lab import guesses

    cells = read_notebook(path)["cells"]
    for i, cell in enumerate(cells):
        if not is_prompt(cell):
            continue
        # the first code cell after the prompt (after the notebook's %load_ext setup cell) records the guess
        after = [c for c in cells[i + 1:] if c["cell_type"] == "code" and "%load_ext eugo_lab" not in cell_source(c)]
        m = GUESS.search(cell_source(after[0])) if after else None
        assert m, (f"{_name(path)} cell {i} asks to predict, but the next code cell records no guess: insert a "
                   "cell with `%eugo guess NAME VALUE` right after it")
        guesses.parse(m.group("name"), m.group("value"))  # the placeholder is a valid value: nbval runs the cell
        compared = [c for c in after[1:] if any(n == m.group("name") for n in COMPARE.findall(cell_source(c)))]
        assert compared, f"{_name(path)} cell {i}: no cell after the guess prints compare_guess({m.group('name')!r})"
        assert not compared[0].get("outputs"), f"{_name(path)}: the comparison's output is the learner's, not saved"


# A lesson carries one idea: past this many cells it carries several and wants splitting.
MAX_LESSON_CELLS = 25
# A line of the reference that is no longer than this ("import numpy as np" is 18) is scaffolding,
# not the idea: it may appear earlier.
SCAFFOLD_CHARS = 20


def _code_lines(source: str) -> list[str]:
    """A cell's Python lines, stripped, without blank lines, comments and magics."""
    out = []
    for line in source.splitlines():
        text = line.split("  #")[0].strip()
        if text and not text.startswith(("#", "%")):
            out.append(text)
    return out


def _tokens(source: str) -> list[str]:
    import io
    import tokenize

    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENDMARKER}
    text = "\n".join(_code_lines(source)) + "\n"
    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in skip]


def _tokens_changed(before: str, after: str) -> int:
    """How many tokens the change from ``before`` to ``after`` replaces, inserts or deletes."""
    import difflib

    ops = difflib.SequenceMatcher(a=_tokens(before), b=_tokens(after), autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in ops if op != "equal")


def _exercise_pairs(path: Path) -> list[tuple[str, int, str, str]]:
    """``(exercise id, starter's code-cell index, starter source, reference source)`` for each reference."""
    cells = [c for c in read_notebook(path)["cells"] if c["cell_type"] == "code"]
    pairs = []
    for i, cell in enumerate(cells):
        m = EXERCISE.search(cell_source(cell))
        if not m or "solution" not in cell.get("metadata", {}).get("tags", []):
            continue
        starter = max(j for j in range(i) if m.group(1) in cell_source(cells[j]) and
                      "starter" in cells[j].get("metadata", {}).get("tags", []))
        pairs.append((m.group(1), starter, cell_source(cells[starter]), cell_source(cell)))
    return pairs


@pytest.mark.parametrize("path", LESSONS, ids=_name)
def test_a_lesson_is_short_enough_to_carry_one_idea(path: Path):
    n = len(read_notebook(path)["cells"])
    assert n <= MAX_LESSON_CELLS, f"{_name(path)} has {n} cells (at most {MAX_LESSON_CELLS}): split it or trim it"


@pytest.mark.parametrize("path", LESSONS, ids=_name)
def test_no_line_the_reference_adds_appears_earlier_in_its_lesson(path: Path):
    # The exercise applies the idea to a case the lesson did not show: copying a cell above is no answer.
    cells = [c for c in read_notebook(path)["cells"] if c["cell_type"] == "code"]
    for exercise_id, starter, start_src, ref_src in _exercise_pairs(path):
        given = set(_code_lines(start_src))
        earlier = {line for c in cells[:starter] for line in _code_lines(cell_source(c))}
        copied = [line for line in _code_lines(ref_src)
                  if line not in given and line in earlier and len(line) > SCAFFOLD_CHARS]
        assert not copied, f"{_name(path)}: {exercise_id}'s reference adds lines an earlier cell shows: {copied}"


@pytest.mark.parametrize("path", LESSONS, ids=_name)
def test_the_reference_is_more_than_a_one_token_flip_of_the_starter(path: Path):
    for exercise_id, _, start_src, ref_src in _exercise_pairs(path):
        n = _tokens_changed(start_src, ref_src)
        assert n > 2, f"{_name(path)}: {exercise_id}'s reference changes {n} token(s) of the starter"


def test_the_change_counter_counts_tokens():
    assert _tokens_changed("x = f(a)\n", "x = f(b)\n") == 1
    assert _tokens_changed("x = f(a)\n", "x = g(a, b)\n") == 3
    assert _tokens_changed("x = 1  # one\n", "# a comment\nx = 1\n") == 0


# A printed claim: "same results: {same}", "equal: {equal}", "same as pandas:", same, "correct: {correct}"...
CLAIM = re.compile(r"(?:same|equal|equals|identical|correct|match(?:es)?)\b[^\"{\n]*:\s*"
                   r"(?:\{([^}]+)\}|[\"'],\s*([^)]+)\))")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_every_printed_claim_is_checked_where_it_is_printed(path: Path):
    # A lesson printed "all four results the same as plain Python's: True" from a comparison of the four
    # results with each other: a claim is computed into a name and asserted in the same cell, or the
    # cell's output is compared by nbval.
    for i, cell in enumerate(read_notebook(path)["cells"]):
        src = cell_source(cell)
        if cell["cell_type"] != "code" or _checked(cell):
            continue
        for m in CLAIM.finditer(src):
            name = (m.group(1) or m.group(2)).strip()
            assert name.isidentifier() and re.search(rf"^\s*assert {name}\b", src, re.M), \
                f"{_name(path)} cell {i} prints a claim ({m.group(0)!r}): compute it into a name and assert it"
