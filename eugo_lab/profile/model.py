"""Driver side of profiling: merge every task's samples into one :class:`Profile` (pure; no rendering).

Each profiled task attempt sends back a pyinstrument session (``TaskStats.profile``); the
recorder keeps them per task in the :class:`~eugo_lab.tracing.trace.Trace` (``trace.profiles``).
:meth:`Profile.from_trace` loads them, merges them with pyinstrument's
``Session.combine`` and aggregates the merged samples into:

- :meth:`Profile.hot_functions`: where the time went, by function (self and total share);
- :meth:`Profile.hot_lines`: by source line (the line executing, or calling C code, when sampled);
- :meth:`Profile.tree`: the merged call tree, which the icicle view draws.

Shares are fractions of the *sampled task time*: the body time of every profiled task on
every worker, as the samples cover it (wall clock, like pyinstrument). File names are
shortened deterministically: relative to the worker's ``sys.path`` entry that holds them
(``numpy/linalg/linalg.py``, ``tests/workload.py``), else the base name.
"""

from __future__ import annotations

import linecache
import os
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eugo_lab.jsonfile import JsonFile
from eugo_lab.profile.collect import FORMAT, loads

# pyinstrument's frame info: "name NUL file NUL first_line" then attributes, each after SOH.
_SEP, _ATTR = "\x00", "\x01"
NATIVE_FILE = "<built-in>"  # pyinstrument's file name for C functions (and ours for GIL-released time)
UNSAMPLED_FILE = "<unsampled>"  # a task no sample covered: its time, under its function (collect.UNSAMPLED)


@dataclass(frozen=True)
class HotFunction:
    """One Python function's share of task time, across all profiled tasks and workers.

    Self shares add up to 1 minus :attr:`Profile.unsampled_share` (usually 0).

    ``self_share``: samples whose innermost Python frame was this function (its own lines,
    including C functions it called directly); ``native_share``: the part of that spent in
    C code (pyinstrument's sampler names each C function; the thread sampler sees C code that
    released the GIL); ``python_share`` = self minus native, time in the function's own
    bytecode, what a JIT compiler could speed up. ``total_share`` includes its callees.
    ``where``: ``"app"`` (your code) or ``"library"`` (inside the Python install: stdlib, site-packages).
    """

    function: str
    file: str
    line: int
    self_share: float
    total_share: float
    native_share: float
    where: str
    path: str = ""  # the file as the worker named it (renderers may label a notebook cell's file)

    @property
    def python_share(self) -> float:
        """Share of task time in this function's own Python bytecode."""
        return max(self.self_share - self.native_share, 0.0)


@dataclass(frozen=True)
class HotLine:
    """One source line's share of task time (the line running, or waiting on a call it made, when sampled)."""

    function: str
    file: str
    line: int
    share: float
    native_share: float
    source: str  # the line's text where the driver can read the file ("" otherwise)
    path: str = ""  # the file as the worker named it


@dataclass(frozen=True)
class ProfileNode:
    """A node of the merged call tree: one function called along one path; times in seconds."""

    function: str
    file: str
    line: int
    time: float
    self_time: float
    children: tuple[ProfileNode, ...]
    # "app" (your code), "library" (the Python install), "native" (C code, GIL released) or
    # "unsampled" (the time of tasks no sample covered, under their function)
    kind: str = "app"
    path: str = ""  # the file as the worker named it

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready nested dict."""
        return {"function": self.function, "file": self.file, "line": self.line, "time": self.time,
                "self_time": self.self_time, "kind": self.kind, "path": self.path,
                "children": [c.to_dict() for c in self.children]}


class _Frame:
    """A parsed frame info: display name, full file, first line, current line, flags."""

    __slots__ = ("name", "file", "first", "line", "native", "unsampled", "key")

    def __init__(self, info: str):
        ident, _, attrs = info.partition(_ATTR)
        name, file, first = (ident.split(_SEP) + ["", "0"])[:3]
        line = 0
        for a in attrs.split(_ATTR) if attrs else ():
            if a[:1] == "l":
                line = int(a[1:] or 0)
            elif a[:1] == "c":
                name = f"{a[1:]}.{name}"
        self.name, self.file, self.first, self.line = name, file, int(first or 0), line
        self.native = file == NATIVE_FILE
        self.unsampled = file == UNSAMPLED_FILE
        self.key = (name, file, self.first)


def _combine(sessions: list[Any]) -> Any:
    """Merge many sessions with pyinstrument's ``Session.combine``, pairwise (it copies records: n log n, not n^2)."""
    from pyinstrument.session import Session

    while len(sessions) > 1:
        sessions = [Session.combine(sessions[i], sessions[i + 1]) if i + 1 < len(sessions) else sessions[i]
                    for i in range(0, len(sessions), 2)]
    return sessions[0]


class Profile(JsonFile):
    """Where the profiled tasks spent their time: the merged samples of every task on every worker.

    Build one with :meth:`from_trace` (what ``hpc.profile()`` and ``%%eugo --profile`` do);
    save it with :meth:`to_dict` / :meth:`from_dict`. ``session`` is the merged
    :class:`pyinstrument.session.Session`, for pyinstrument's own renderers.
    """

    def __init__(self, session: Any, tasks: int, workers: int, functions: Sequence[str] = ()):
        self.session = session
        self.tasks = int(tasks)
        self.workers = int(workers)
        self.functions = tuple(functions)  # the profiled task functions, as the trace names them
        self._frames: dict[str, _Frame] = {}
        self._stacks = self._aggregate(session.frame_records if session is not None else [])
        self.total = sum(t for _, t in self._stacks)  # seconds of the profiled tasks' time
        unsampled = sum(t for k, t in self._stacks if k[-1].endswith(UNSAMPLED_FILE + "\x000"))
        #: Share of that time in tasks no sample covered (shorter than a sampling period, or
        #: whose sampler got no core): it is shared out like the samples of other tasks of the
        #: same function, which ran the same code.
        self.estimated_share = self._share(unsampled)
        self._records = [(tuple(self._frame(s) for s in k), t) for k, t in self._share_out_unsampled(self._stacks)]
        #: Share left unattributed: tasks of functions none of whose tasks was sampled (in
        #: their function's total, in no line and no self time).
        self.unsampled_share = self._share(sum(t for s, t in self._records if s[-1].unsampled))

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_trace(cls, trace: Any) -> Profile:
        """The merged profile of every profiled task attempt in ``trace`` (empty if none was profiled)."""
        return cls.from_tasks(getattr(trace, "profiles", ()))

    @classmethod
    def from_tasks(cls, profiles: Iterable[Any]) -> Profile:
        """Merge task profiles (``TaskProfile`` rows: task_id, attempt, function, worker, data)."""
        rows = list(profiles)
        sessions = []
        for r in rows:
            try:
                sessions.append(loads(r.data))
            except (ValueError, OSError, KeyError, zlib.error):  # corrupt or foreign: skip it, keep the rest
                continue
        session = _combine(sessions) if sessions else None
        return cls(session, tasks=len({(r.task_id, r.attempt) for r in rows}), workers=len({r.worker for r in rows}),
                   functions=sorted({r.function for r in rows}))

    def _frame(self, info: str) -> _Frame:
        f = self._frames.get(info)
        if f is None:
            f = self._frames[info] = _Frame(info)
        return f

    @staticmethod
    def _aggregate(records: Iterable[tuple[list[str], float]]) -> list[tuple[tuple[str, ...], float]]:
        """Sum equal stacks; drop frames a library hid from tracebacks; order deterministically."""
        sums: dict[tuple[str, ...], float] = {}
        for stack, t in records:
            key = tuple(s for s in stack if f"{_ATTR}h1" not in s)
            if key:
                sums[key] = sums.get(key, 0.0) + t
        return sorted(sums.items())

    @staticmethod
    def _share_out_unsampled(stacks: list[tuple[tuple[str, ...], float]]) -> list[tuple[tuple[str, ...], float]]:
        """Spread each function's unsampled task time over the sampled stacks of that function, pro rata.

        Tasks of one function run the same code, so where a sampled task's time went is the
        best estimate for an unsampled one; a function with no sampled task keeps its
        ``[not sampled]`` stack. Deterministic: the same stacks always give the same result.
        """
        unsampled: dict[str, float] = {}
        sampled: dict[str, float] = {}
        for k, t in stacks:
            root = k[0].partition(_ATTR)[0]
            if len(k) == 2 and k[1].endswith(UNSAMPLED_FILE + "\x000"):
                unsampled[root] = unsampled.get(root, 0.0) + t
            else:
                sampled[root] = sampled.get(root, 0.0) + t
        if not unsampled:
            return stacks
        out = []
        for k, t in stacks:
            root = k[0].partition(_ATTR)[0]
            if root in sampled and root in unsampled:
                if len(k) == 2 and k[1].endswith(UNSAMPLED_FILE + "\x000"):
                    continue
                t *= 1.0 + unsampled[root] / sampled[root]
            out.append((k, t))
        return out

    # -- paths -------------------------------------------------------------------------------------
    def short_path(self, path: str) -> str:
        """``path`` relative to the ``sys.path`` entry that holds it (the deepest one), else its base name."""
        if path.startswith("<"):
            return path
        roots = self.session.sys_path if self.session is not None else []
        best = ""
        for r in roots:
            r = r.rstrip(os.sep)
            if r and path.startswith(r + os.sep) and len(r) > len(best):
                best = r
        return path[len(best) + 1:] if best else os.path.basename(path)

    def _kind(self, f: _Frame) -> str:
        return "native" if f.native else "unsampled" if f.unsampled else self._where(f.file)

    def _where(self, path: str) -> str:
        prefixes = self.session.sys_prefixes if self.session is not None else []
        if path.startswith("<") and not path.startswith("<ipython-input-"):
            return "library"
        return "library" if any(p and path.startswith(p) for p in prefixes) else "app"

    # -- views -------------------------------------------------------------------------------------
    def _share(self, t: float) -> float:
        return t / self.total if self.total > 0 else 0.0

    def hot_functions(self, limit: int | None = 10, min_share: float = 0.0) -> list[HotFunction]:
        """Python functions by self time (then total), largest first; ``limit=None`` for all."""
        self_t: dict[tuple, float] = {}
        native_t: dict[tuple, float] = {}
        total_t: dict[tuple, float] = {}
        for stack, t in self._records:
            py = [f for f in stack if not f.native and not f.unsampled]
            if not py:
                continue
            for key in {f.key for f in py}:  # once per sample, also for recursive calls
                total_t[key] = total_t.get(key, 0.0) + t
            if stack[-1].unsampled:
                continue
            leaf = py[-1]
            self_t[leaf.key] = self_t.get(leaf.key, 0.0) + t
            if stack[-1].native:
                native_t[leaf.key] = native_t.get(leaf.key, 0.0) + t
        rows = [HotFunction(name, self.short_path(file), first, self._share(self_t.get(k, 0.0)),
                            self._share(total_t[k]), self._share(native_t.get(k, 0.0)), self._where(file), file)
                for k in total_t for name, file, first in (k,)]
        rows.sort(key=lambda h: (-round(h.self_share, 6), -round(h.total_share, 6), h.function, h.file, h.line))
        rows = [h for h in rows if h.self_share >= min_share]
        return rows if limit is None else rows[:limit]

    def hot_lines(self, limit: int | None = 10) -> list[HotLine]:
        """Source lines by time (the innermost Python frame's line when sampled), largest first."""
        times: dict[tuple, list[float]] = {}
        for stack, t in self._records:
            py = [f for f in stack if not f.native]
            if not py or not py[-1].line or stack[-1].unsampled:
                continue
            leaf = py[-1]
            acc = times.setdefault((leaf.name, leaf.file, leaf.line), [0.0, 0.0])
            acc[0] += t
            if stack[-1].native:
                acc[1] += t
        rows = [HotLine(name, self.short_path(file), line, self._share(t), self._share(n),
                        linecache.getline(file, line).strip() if not file.startswith("<") or "ipython" in file
                        else "", file)
                for (name, file, line), (t, n) in times.items()]
        rows.sort(key=lambda h: (-round(h.share, 6), h.file, h.line, h.function))
        return rows if limit is None else rows[:limit]

    def tree(self) -> ProfileNode:
        """The merged call tree under a root named ``all tasks``; children largest first."""
        root: dict[str, Any] = {"t": 0.0, "self": 0.0, "kids": {}}
        for stack, t in self._records:
            node = root
            node["t"] += t
            for f in stack:
                node = node["kids"].setdefault(f.key, {"t": 0.0, "self": 0.0, "kids": {},
                                                       "kind": self._kind(f)})
                node["t"] += t
            node["self"] += t

        def build(key: tuple, n: dict) -> ProfileNode:
            kids = sorted(n["kids"].items(), key=lambda kv: (-round(kv[1]["t"], 9), kv[0]))
            name, file, first = key
            return ProfileNode(name, self.short_path(file), first, n["t"], n["self"],
                               tuple(build(k, v) for k, v in kids), n.get("kind", "root"), file)

        return build(("all tasks", "", 0), root)

    # -- persistence --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the merged session, stacks summed) that :meth:`from_dict` reads back."""
        session = None
        if self.session is not None:
            session = self.session.to_json()
            session["frame_records"] = [[list(k), t] for k, t in self._stacks]
        return {"format": FORMAT, "tasks": self.tasks, "workers": self.workers, "functions": list(self.functions),
                "session": session}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Profile:
        """Inverse of :meth:`to_dict`."""
        if d.get("format") != FORMAT:
            raise ValueError(f"profile format {d.get('format')!r}; this eugo_lab reads format {FORMAT}")
        session = None
        if d.get("session") is not None:
            from pyinstrument.session import Session

            session = Session.from_json(d["session"])
        return cls(session, d["tasks"], d["workers"], d.get("functions", ()))

    def __len__(self) -> int:
        return self.tasks

    def to_text(self) -> str:
        """The hottest functions and lines as text (:func:`eugo_lab.profile.text.profile_text`)."""
        from eugo_lab.profile.text import profile_text

        return profile_text(self)

    def to_html(self) -> str:
        """The tables and the icicle chart (:func:`eugo_lab.profile.html.profile_html`)."""
        from eugo_lab.profile.html import profile_html

        return profile_html(self)

    def __repr__(self) -> str:
        top = self.hot_functions(1)
        hot = f", hottest {top[0].function} ({top[0].self_share:.0%})" if top else ""
        return f"<Profile of {self.tasks} tasks on {self.workers} workers{hot}>"
