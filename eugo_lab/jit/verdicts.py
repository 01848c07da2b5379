"""The JIT verdicts of a traced run, read back from the trial phases the workers recorded, in plain words.

Driver side and pure: :func:`verdicts_from_trace` merges each function's trials across the
workers into one :class:`FunctionVerdict`; :func:`explain` says what a decline code means and
what would help. The phase names themselves are written by :mod:`eugo_lab.jit.checked`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eugo_lab.jit.checked import PHASE_PREFIX, VERDICT_COMPILED, cached_times, parse_phase

# Decline codes -> (what happened, what would help), in the words the report uses.
_EXPLAIN: dict[str, tuple[str, str]] = {
    "numba-missing": ("Numba is not installed on the worker", 'pip install "eugo-lab[optimize]" on every worker'),
    "no-arrays": ("it was not called with NumPy arrays", "a JIT helps loops over NumPy arrays: pass arrays"),
    "lists": ("it was called with Python lists", "pass NumPy arrays (np.asarray(x)) instead of lists"),
    "too-short": ("one call takes under 1 ms, too short to pay back a 0.1-0.3 s compile",
                  "JIT the function that does the long loop, or batch the small calls"),
    "python-objects": ("it uses Python objects inside the loop, which Numba cannot compile",
                       "use only NumPy arrays and numbers in the function; keep dicts, classes and pandas outside"),
    "unknown-call": ("it calls something Numba does not know",
                     "call only NumPy and math functions inside the loop, or move that call out of it"),
    "type-unstable": ("a variable changes type inside the function",
                      "make the loop type-stable: start a variable with the type it will hold (0.0, not 0 or None) "
                      "and return the same type on every path"),
    "unsupported-call": ("it calls a function with argument types Numba does not support",
                         "pass arrays and numbers of one dtype; see Numba's list of supported NumPy functions"),
    "unsupported-feature": ("it uses a Python feature Numba does not compile (try/except, generators, with...)",
                            "keep the loop plain: for/while, arithmetic, array indexing"),
    "compile-error": ("Numba could not compile it",
                      "arrays not lists, type-stable loops, no Python objects in the loop"),
    "compiled-error": ("the compiled version raised where the plain one did not",
                       "check index bounds and dtypes; the plain version keeps running"),
    "differs": ("the compiled result differs from the plain one",
                "usually integer overflow (Numba uses 64-bit ints) or float32/float64 mixing: use float64 arrays"),
    "not-faster": ("the compiled version was not faster",
                   "its time is already in NumPy's C code: nothing for a JIT to speed up"),
    "plain-error": ("the plain call raised, so there was nothing to check against", "fix the error first"),
}


def explain(code: str) -> tuple[str, str]:
    """``(what happened, what would help)`` for a decline code (``"differs"``...), in plain words."""
    return _EXPLAIN.get(code, _EXPLAIN["compile-error"])


@dataclass(frozen=True)
class FunctionVerdict:
    """The verdicts of one function across the workers of a traced run, merged for the report."""

    function: str
    status: str  # compiled | declined | mixed (compiled on some workers, declined on others)
    code: str
    detail: str
    workers: int  # how many workers ran a trial
    compiles: int  # how many compiles (one per worker at most)
    plain_s: float | None  # median over trials
    compile_s: float | None
    compiled_s: float | None
    cached: bool = False  # every worker reused an earlier trial's verdict (same code, e.g. a cell re-run)
    later_s: float | None = None  # median task body of the calls that ran compiled (no trial), if any
    later_calls: int = 0

    @property
    def after_s(self) -> float | None:
        """One compiled call: the median of the calls that ran compiled after the swap, else the trial's run.

        The later calls are preferred: the trial's compiled run happens while other workers may be
        compiling on the same cores (10 ms against 1.3 ms later, measured on 2 cores).
        """
        return self.later_s if self.later_s is not None and self.later_calls else self.compiled_s

    @property
    def speedup(self) -> float | None:
        """Plain time over compiled time of one call, when both were measured."""
        after = self.after_s
        if self.plain_s and after:
            return self.plain_s / after
        return None


def _median(xs: list[float]) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def verdicts_from_trace(trace: Any) -> list[FunctionVerdict]:
    """The JIT verdicts recorded in ``trace``'s phases, one merged row per function, by name."""
    p = trace.phases
    names = trace.phase_names
    if not len(p["row"]):
        return []
    t = trace.tasks
    fn_col, worker_col = t["function"], t["worker"]
    rows: dict[int, dict[str, Any]] = {}
    for j in range(len(p["row"])):
        name = names[p["name"][j]]
        if not name.startswith(PHASE_PREFIX):
            continue
        r = int(p["row"][j])
        d = rows.setdefault(r, {})
        dur = float(p["end"][j] - p["start"][j])
        if name == PHASE_PREFIX + "plain run":
            d["plain"] = dur
        elif name == PHASE_PREFIX + "compile":
            d["compile"] = dur
        elif name == PHASE_PREFIX + "compiled run":
            d["compiled"] = dur
        else:
            parsed = parse_phase(name)
            if parsed is not None:
                d["verdict"] = parsed
                _, times, cached = cached_times(name)
                d["cached"] = cached  # an earlier trial's numbers, announced again: no compile this time
                for k, v in (times or {}).items():
                    d["t_" + k] = v  # the trial's own measures (CPU time of the calls) win over the spans
    by_fn: dict[str, list[tuple[int, dict]]] = {}
    for r, d in rows.items():
        if "verdict" in d:
            by_fn.setdefault(trace.functions[int(fn_col[r])], []).append((int(worker_col[r]), d))
    # Calls after the swap: tasks of a compiled function that carry no trial phases ran the compiled version.
    # Their CPU time, as the trial measured (the trace's cpu column: the task's own CPU seconds).
    start, end = t["start"], t["end"]
    cpu_col = t["cpu"] if "cpu" in t else None
    later: dict[str, list[float]] = {}
    for r in range(len(fn_col)):
        if r not in rows:
            took = float(cpu_col[r]) if cpu_col is not None else float(end[r] - start[r])
            later.setdefault(trace.functions[int(fn_col[r])], []).append(took)
    out = []
    for fname, trials in sorted(by_fn.items()):
        statuses = {d["verdict"][0] for _, d in trials}
        status = statuses.pop() if len(statuses) == 1 else "mixed"
        declined = [d["verdict"] for _, d in trials if d["verdict"][0] != VERDICT_COMPILED]
        code, detail = (declined[0][1], declined[0][2]) if declined else ("", "")
        out.append(FunctionVerdict(
            fname, status, code, detail, workers=len({w for w, _ in trials}),
            compiles=sum(1 for _, d in trials if "compile" in d),
            plain_s=_median([d.get("t_plain", d.get("plain")) for _, d in trials]),
            compile_s=_median([d.get("t_compile", d.get("compile")) for _, d in trials]),
            compiled_s=_median([d.get("t_compiled", d.get("compiled")) for _, d in trials]),
            cached=all(d.get("cached") for _, d in trials),
            later_s=_median(later.get(fname, [])) if status == VERDICT_COMPILED else None,
            later_calls=len(later.get(fname, [])) if status == VERDICT_COMPILED else 0,
        ))
    return out
