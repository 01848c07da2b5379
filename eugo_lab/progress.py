"""The learner's progress: one small JSON file per user, shared by kernels and the Jupyter server extension.

Where: ``$EUGO_LAB_PROGRESS_DIR`` if set (tests point it at a temporary folder), else
``<jupyter data dir>/eugo_lab/`` (``jupyter --data-dir``); the file is ``progress.json``::

    {"schema_version": 1,
     "exercises": {"fan-out": {"passed": true, "when": "2026-12-01T09:30:00+00:00",
                               "evidence": "...", "attempts": 3, "hints_taken": 2,
                               "last": {"status": "not yet", "when": "...", "evidence": "...",
                                        "mistake": "blocking-loop", "hints": 2}}},
     "checklists": {},
     "guesses": {"01-distributed-python/05-task-size-and-batching.ipynb":
                     {"batch-speedup": {"text": "2x", "value": 2.0, "unit": "x", "when": "..."}}}}

An exercise keeps its best attempt (``passed``, ``when``, ``evidence``: a pass stays a pass)
and its last one (``last``): which mistake its verdict named (``mistake``, ``null`` for none)
and how many hint tiers ``%eugo hint`` has shown for it (``hints``). ``hints_taken`` counts
every tier shown for the exercise over all its attempts. ``checklists`` belongs to the
checklists, ``guesses`` (the learner's predictions, per lesson and name) to
:mod:`eugo_lab.guesses`; :func:`update` is the one way anyone changes the file. A store
written before a field existed loads as it is: every reader treats a missing field as
none taken, none recorded.

Safety: every change is read-modify-write under an advisory lock (``fcntl.flock`` on
``progress.json.lock``), and the new file is written to a temporary file in the same folder
and moved over the old one with ``os.replace``, so a kernel and the server writing at once
lose nothing and a crash mid-write leaves the old file whole. A file that cannot be parsed
is never overwritten: it is moved aside to ``progress.json.corrupt-<timestamp>`` with a
warning naming both paths, and a fresh store starts.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from eugo_lab.settings import PROGRESS_DIR_ENV

SCHEMA_VERSION = 1
FILENAME = "progress.json"
#: What :func:`status` says of an exercise.
PASSED, NOT_YET, NOT_TRIED = "passed", "not yet", "not tried"


class ProgressError(RuntimeError):
    """The progress file cannot be used (unreadable and cannot be moved aside, or from a newer version)."""


class CorruptProgressWarning(UserWarning):
    """The progress file could not be parsed and was moved aside (the message names both paths)."""


def progress_dir() -> Path:
    """The folder of the store: ``$EUGO_LAB_PROGRESS_DIR``, else ``<jupyter data dir>/eugo_lab``."""
    forced = os.environ.get(PROGRESS_DIR_ENV)
    if forced:
        return Path(forced).expanduser()
    return _jupyter_data_dir() / "eugo_lab"


def progress_path() -> Path:
    """The store's file (the server extension reads and writes the same one)."""
    return progress_dir() / FILENAME


def _jupyter_data_dir() -> Path:
    try:
        from jupyter_core.paths import jupyter_data_dir
    except ImportError:  # a plain-Python install without Jupyter: jupyter_core's own defaults
        if os.environ.get("JUPYTER_DATA_DIR"):
            return Path(os.environ["JUPYTER_DATA_DIR"]).expanduser()
        if os.name == "nt":
            return Path(os.environ.get("APPDATA", Path.home())) / "jupyter"
        if os.uname().sysname == "Darwin":
            return Path.home() / "Library" / "Jupyter"
        return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "jupyter"
    return Path(jupyter_data_dir())


def empty() -> dict[str, Any]:
    """A store with nothing in it."""
    return {"schema_version": SCHEMA_VERSION, "exercises": {}, "checklists": {}, "guesses": {}}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the store's advisory lock (a separate file, so os.replace of the store keeps it valid)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no flock; writes stay atomic, concurrent updates may race
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _set_aside(path: Path, why: str) -> Path:
    """Move an unusable store to ``progress.json.corrupt-<timestamp>`` and warn; returns the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        os.replace(path, target)
    except OSError as exc:
        raise ProgressError(f"the progress file {path} is unusable ({why}) and could not be moved aside "
                            f"({exc}); move or delete it yourself, then run the cell again") from None
    warnings.warn(f"eugo: the progress file {path} was unusable ({why}); it was moved to {target} and a new "
                  "one started. Your earlier progress is in that file.", CorruptProgressWarning, stacklevel=3)
    return target


def _read(path: Path) -> dict[str, Any]:
    """The store at ``path`` (held under the lock): empty if missing, set aside if corrupt."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return empty()
    except OSError as exc:
        raise ProgressError(f"cannot read the progress file {path}: {exc}; check its permissions") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        _set_aside(path, f"not valid JSON: {exc}")
        return empty()
    if not isinstance(data, dict) or not isinstance(data.get("exercises", {}), dict) \
            or not isinstance(data.get("checklists", {}), dict) or not isinstance(data.get("guesses", {}), dict):
        _set_aside(path, "not an Eugo Lab progress store")
        return empty()
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise ProgressError(f"the progress file {path} was written by a newer eugo-lab (schema {version}, this one "
                            f"reads {SCHEMA_VERSION}); upgrade eugo-lab to record progress")
    if version != SCHEMA_VERSION:
        _set_aside(path, f"schema_version {version!r}, expected {SCHEMA_VERSION}")
        return empty()
    data.setdefault("exercises", {})
    data.setdefault("checklists", {})
    data.setdefault("guesses", {})
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` atomically: a temporary file in the same folder, then ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load(path: Path | None = None) -> dict[str, Any]:
    """The whole store (a copy: change it with :func:`update`)."""
    path = path or progress_path()
    if not path.exists():
        return empty()
    with _locked(path):
        return _read(path)


def update(change: Callable[[dict[str, Any]], Any], path: Path | None = None) -> dict[str, Any]:
    """Apply ``change(store)`` (it edits the dict in place) under the lock and save atomically; returns the store."""
    path = path or progress_path()
    with _locked(path):
        data = _read(path)
        change(data)
        data["schema_version"] = SCHEMA_VERSION
        _write(path, data)
    return data


def now() -> str:
    """The current time as ISO 8601 in UTC, to the second (what ``when`` holds)."""
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def record_exercise(exercise_id: str, passed: bool, evidence: str, when: str | None = None,
                    path: Path | None = None, mistake: str | None = None) -> dict[str, Any]:
    """Save one graded attempt: the best (a pass is kept) and the last; returns the exercise's entry.

    ``mistake``: the key of the mistake a ``not yet`` verdict named (what ``%eugo hint`` answers).
    An attempt that makes the same mistake as the last one keeps its hints (the learner who saw
    the words and tries again gets the code next); a different mistake, or a pass, starts at none.
    """
    when = when or now()
    entry: dict[str, Any] = {}

    def change(data: dict[str, Any]) -> None:
        old = data["exercises"].get(exercise_id)
        e = dict(old) if isinstance(old, dict) else {}
        before = e.get("last") if isinstance(e.get("last"), dict) else {}
        key = None if passed else mistake
        kept = hints_shown(before) if not passed and before.get("status") == NOT_YET \
            and before.get("mistake") == key else 0
        last = {"status": PASSED if passed else NOT_YET, "when": when, "evidence": evidence,
                "mistake": key, "hints": kept}
        e["attempts"] = int(e.get("attempts", 0) or 0) + 1
        e["hints_taken"] = hints_taken(e)
        if passed or not e.get("passed"):  # a later "not yet" does not undo a pass
            e.update(passed=bool(passed), when=when, evidence=evidence)
        e["last"] = last
        data["exercises"][exercise_id] = e
        entry.update(e)

    update(change, path)
    return entry


def _count(value: Any) -> int:
    """A stored count, or 0 where an older store (or a hand edit) left none or nonsense."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def hints_shown(attempt: Any) -> int:
    """How many hint tiers were shown for one stored attempt (``last``); 0 for an older store's."""
    return _count(attempt.get("hints")) if isinstance(attempt, dict) else 0


def hints_taken(entry: Any) -> int:
    """How many hint tiers were shown for an exercise over all its attempts; 0 for an older store's."""
    return _count(entry.get("hints_taken")) if isinstance(entry, dict) else 0


def record_hint(exercise_id: str, tiers: int, path: Path | None = None) -> tuple[dict[str, Any], bool] | None:
    """Count one more hint tier shown for the last attempt at ``exercise_id`` (at most ``tiers``).

    Returns ``(that attempt as saved, counted)``: its ``hints`` is the tier to show now;
    ``counted`` is False when nothing changed, because the last attempt passed (its ``status``
    says so) or every tier was shown before (the last one is shown again). ``None`` when the
    exercise has no attempt.
    """
    found: list[tuple[dict[str, Any], bool]] = []

    def change(data: dict[str, Any]) -> None:
        e = data["exercises"].get(exercise_id)
        if not isinstance(e, dict) or not isinstance(e.get("last"), dict):
            return
        last = dict(e["last"])
        shown = hints_shown(last)
        counted = last.get("status") == NOT_YET and shown < tiers
        if counted:
            last["hints"] = shown = shown + 1
            data["exercises"][exercise_id] = dict(e, last=last, hints_taken=hints_taken(e) + 1)
        found.append((dict(last, hints=min(shown, tiers)), counted))

    update(change, path)
    return found[0] if found else None


def record_guess(lesson: str, name: str, guess: dict[str, Any], path: Path | None = None) -> None:
    """Save the learner's prediction ``name`` for ``lesson`` (a later guess of the same name replaces it)."""
    def change(data: dict[str, Any]) -> None:
        mine = data["guesses"].get(lesson)
        mine = dict(mine) if isinstance(mine, dict) else {}
        mine[name] = dict(guess)
        data["guesses"][lesson] = mine

    update(change, path)


def guesses(lesson: str, store: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{name: guess}`` saved for ``lesson`` (from ``store``, else the file); empty when none."""
    store = store if store is not None else load()
    mine = store.get("guesses", {}).get(lesson)
    return {k: v for k, v in mine.items() if isinstance(v, dict)} if isinstance(mine, dict) else {}


def status(exercise_id: str, store: dict[str, Any] | None = None) -> str:
    """``passed``, ``not yet`` or ``not tried`` for ``exercise_id`` (from ``store``, else the file)."""
    store = store if store is not None else load()
    e = store.get("exercises", {}).get(exercise_id)
    if not isinstance(e, dict):
        return NOT_TRIED
    return PASSED if e.get("passed") else NOT_YET
