"""The course folder as data for the JupyterLab panel: courses, lessons, checklists, vocabulary and progress.

:func:`find_courses_dir` decides which folder holds the courses; :func:`listing` reads it
(notebook headings only, never code) together with the learner's progress store and
returns what ``GET /eugo/api/courses`` sends. Every path in the listing is relative to the
server's root_dir (``prefix`` is the courses folder's place below it), so the front end
opens a lesson with it as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from eugo_lab import progress

#: A course folder: two digits, a dash, a name (``01-distributed-python``).
COURSE_DIR = re.compile(r"^(?P<number>\d{2})-(?P<slug>[a-z0-9][a-z0-9-]*)$")
INDEX, VOCABULARY, CHECKLISTS = "index.ipynb", "vocabulary.ipynb", "checklists"
#: A notebook larger than this is not read for its title (course notebooks are kept under 1 MB).
MAX_NOTEBOOK_BYTES = 4 * 1024 * 1024

_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<text>.+?)\s*#*\s*$", re.MULTILINE)
_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)[^)]*\)")


def course_folders(courses_dir: Path) -> list[Path]:
    """The numbered course folders that hold at least one notebook, by their number."""
    found = []
    for p in courses_dir.iterdir():
        m = COURSE_DIR.match(p.name)
        if m and p.is_dir() and not p.is_symlink() and any(p.glob("*.ipynb")):
            found.append((int(m.group("number")), p.name, p))
    return [p for _, _, p in sorted(found)]


def looks_like_courses_dir(path: Path) -> bool:
    """True when ``path`` holds course folders and the index or the vocabulary notebook."""
    try:
        return path.is_dir() and ((path / INDEX).is_file() or (path / VOCABULARY).is_file()) \
            and bool(course_folders(path))
    except OSError:
        return False


def find_courses_dir(root_dir: str | Path, configured: str = "") -> tuple[Path, str]:
    """``(courses folder, its path relative to root_dir in URL form)``; ``""`` when it is root_dir itself.

    ``configured`` (the ``EugoLab.courses_dir`` trait or ``EUGO_LAB_COURSES_DIR``; relative to
    root_dir unless absolute) wins; else root_dir when it looks like the courses folder (as
    ``make lab`` runs it), else ``<root_dir>/courses`` (a Binder or a clone opened at its top).
    A folder outside root_dir has no prefix the front end could open: ``ValueError``.
    """
    root = Path(root_dir).expanduser().resolve()
    if configured:
        chosen = (root / Path(configured).expanduser()).resolve()
    elif looks_like_courses_dir(root):
        chosen = root
    else:
        chosen = (root / "courses").resolve()
    try:
        rel = chosen.relative_to(root)
    except ValueError:
        raise ValueError(f"the courses folder {chosen} is not inside the server's root_dir {root}: the panel "
                         "could not open its notebooks; start the server with --ServerApp.root_dir at or above "
                         "it, or set EugoLab.courses_dir to a folder inside root_dir") from None
    return chosen, rel.as_posix() if rel.parts else ""


def _markdown_cells(path: Path) -> list[str]:
    """The source of each markdown cell of notebook ``path`` (empty if unreadable or not a notebook)."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return []
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    cells = nb.get("cells") if isinstance(nb, dict) else None
    out = []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            src = cell.get("source", "")
            out.append("".join(src) if isinstance(src, list) else str(src))
    return out


def _plain(markdown: str) -> str:
    """Heading text without link syntax, emphasis or code marks."""
    text = _LINK.sub(lambda m: m.group("text"), markdown)
    return re.sub(r"[*_`]", "", text).strip()


def notebook_title(path: Path) -> str:
    """The notebook's first heading (any level), else its file name without ``.ipynb``."""
    for src in _markdown_cells(path):
        m = _HEADING.search(src)
        if m:
            return _plain(m.group("text"))
    return path.stem


def course_titles(index: Path, folders: list[str]) -> dict[str, str]:
    """``{course folder: title}`` read from the index notebook.

    A course's title is the heading under which the index first links into that folder
    (``## 1. Distributed Python with eugo.hpc`` then ``[...](01-distributed-python/01-...)``; a
    leading number is dropped),
    or the text of a link to the folder itself. Courses the index does not link get none.
    """
    titles: dict[str, str] = {}
    heading = ""
    for src in _markdown_cells(index):
        for line in src.splitlines():
            m = _HEADING.match(line.strip())
            if m:  # "## 1. Distributed Python": the number is the folder's, the title is the rest
                heading = re.sub(r"^\d+[.):]\s+", "", _plain(m.group("text")))
                continue
            for link in _LINK.finditer(line):
                target = PurePosixPath(link.group("target").split("#", 1)[0])
                parts = [p for p in target.parts if p not in (".", "")]
                if not parts or parts[0] not in folders or parts[0] in titles:
                    continue
                if len(parts) == 1:  # a link to the folder: its text names the course
                    titles[parts[0]] = _plain(link.group("text")) or heading
                elif heading:
                    titles[parts[0]] = heading
    return {k: v for k, v in titles.items() if v}


def fallback_title(folder: str, lesson_titles: Sequence[str] = ()) -> str:
    """A title from the folder's name, for a course the index does not name (``01-x-y`` -> ``X y``).

    A word that the course's lesson titles spell in capitals keeps them (``02-gpu-acceleration``
    with a lesson "Automatic GPU offloading" -> ``GPU acceleration``).
    """
    m = COURSE_DIR.match(folder)
    words = (m.group("slug") if m else folder).split("-")
    upper = {w for t in lesson_titles for w in re.findall(r"\b[A-Z0-9]{2,}\b", t)}
    words = [w.upper() if w.upper() in upper else w for w in words if w]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def _join(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix, *parts) if p)


def _exercise_entry(ex: Any, store: dict[str, Any]) -> dict[str, Any]:
    status = progress.status(ex.id, store)
    entry = store.get("exercises", {}).get(ex.id)
    when = None
    if isinstance(entry, dict):
        # the pass's time once passed, else the last attempt's
        last = entry.get("last") if isinstance(entry.get("last"), dict) else {}
        when = entry.get("when") if status == progress.PASSED else (last.get("when") or entry.get("when"))
    return {"id": ex.id, "title": ex.title, "status": status, "when": when if isinstance(when, str) else None,
            "hints_taken": progress.hints_taken(entry)}


def checklist_item(item: Any, tick: dict[str, Any] | None) -> dict[str, Any]:
    """One checklist item as the API sends it, with its tick from the store (``None``: never ticked)."""
    tick = tick if isinstance(tick, dict) else {}
    how = tick.get("how")
    evidence = tick.get("evidence")
    return {"id": item.id, "text": item.text, "ticked": bool(tick.get("ticked", False)),
            "how": how if how in ("measured", "manual") else None,
            "evidence": evidence if isinstance(evidence, str) and evidence else None}


def checklist_entry(checklist: Any, store: dict[str, Any], prefix: str, courses_dir: Path) -> dict[str, Any]:
    """One checklist with its items' ticks; ``path`` is its notebook (``None`` if the folder lacks it)."""
    from eugo_lab.checklists.store import ticks

    mine = ticks(checklist.id, store)
    items = [checklist_item(it, mine.get(it.id)) for it in checklist.items]
    nb = f"{checklist.id}.ipynb"
    path = _join(prefix, CHECKLISTS, nb) if (courses_dir / CHECKLISTS / nb).is_file() else None
    return {"id": checklist.id, "title": checklist.title, "path": path, "items": items,
            "ticked": sum(i["ticked"] for i in items), "total": len(items)}


def listing(courses_dir: Path, prefix: str = "", store: dict[str, Any] | None = None) -> dict[str, Any]:
    """What ``GET /eugo/api/courses`` answers (see :mod:`eugo_lab.server.api`), progress from ``store``."""
    from eugo_lab.checklists.model import all_checklists
    from eugo_lab.exercises.catalog import all_exercises

    store = store if store is not None else progress.load()
    by_lesson: dict[str, list[Any]] = {}
    for ex in all_exercises():
        by_lesson.setdefault(ex.lesson, []).append(ex)
    folders = course_folders(courses_dir)
    index = courses_dir / INDEX
    titles = course_titles(index, [f.name for f in folders]) if index.is_file() else {}
    courses = []
    for folder in folders:
        lessons = []
        for nb in sorted(folder.glob("*.ipynb")):
            rel = f"{folder.name}/{nb.name}"
            exercises = [_exercise_entry(ex, store) for ex in by_lesson.get(rel, [])]
            lessons.append({"path": _join(prefix, rel), "title": notebook_title(nb), "exercises": exercises})
        done = [e for lesson in lessons for e in lesson["exercises"]]
        title = titles.get(folder.name) or fallback_title(folder.name, [lesson["title"] for lesson in lessons])
        courses.append({"id": folder.name, "title": title,
                        "path": _join(prefix, folder.name), "lessons": lessons,
                        "passed": sum(e["status"] == progress.PASSED for e in done), "total": len(done)})
    vocab = courses_dir / VOCABULARY
    return {
        "courses": courses,
        "checklists": [checklist_entry(c, store, prefix, courses_dir) for c in all_checklists()],
        "vocabulary": {"path": _join(prefix, VOCABULARY), "title": notebook_title(vocab)} if vocab.is_file()
        else None,
        "index": {"path": _join(prefix, INDEX), "title": notebook_title(index)} if index.is_file() else None,
    }
