"""The JIT verdicts of a traced run, read back from the trial phases the workers recorded, in plain words.

Driver side and pure: :func:`verdicts_from_trace` merges each function's trials across the
workers into one :class:`FunctionVerdict`; :func:`explain` says what a decline code means and
what would help. The phase names themselves are written by :mod:`eugo_lab.jit.checked`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.contract.phases import JIT_COMPILE_PHASE
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
                "usually integer overflow (Numba uses 64-bit ints) or float32/float64 mixing: use float64 arrays; "
                "values a unit in the last place apart come from a math function that rounds differently compiled: "
                "x ** 0.5 is compiled as a square root, so write math.sqrt(x)"),
    "not-faster": ("the compiled version was not faster by the 1.5x a swap needs",
                   "where the profile shows its time in Python bytecode, call it on larger inputs; where the time is "
                   "in NumPy's C code, a JIT has nothing to remove"),
    "no-result": ("it returns None and wrote into none of its arguments, so there was nothing to check the compiled "
                  "version against", "return the result, or write it into an array argument"),
    "differs-later": ("a later call's compiled result differed from the plain one (the re-check of a sampled call); "
                      "that call got the plain result, and the plain version runs from then on",
                      "usually integer overflow: Python's integers never overflow, Numba's 64-bit ones do; "
                      "use float64, or keep this function plain with optimize=False"),
    "not-proven": ("its compiled code may not compute what Python computes for every input (read from the code "
                   "Numba compiled for these argument types), so the automatic JIT does not use it",
                   "use float64 for values that grow (Python's ints never overflow, Numba's 64-bit ones wrap), "
                   "or optimize=True to compile it anyway after a check on its first call"),
    "result-type": ("its result is a NumPy scalar on some paths and a Python number (or another NumPy type) on "
                    "others; compiled code returns one type for all, and the two compute differently (np.float64(x) "
                    "/ 0 is inf, x / 0 raises ZeroDivisionError), so it is not compiled, even with optimize=True",
                    "return one type on every path: start the variable as the type it will hold (np.float64(0.0)), "
                    "or return float(...)"),
    "plain-error": ("the plain call raised, so there was nothing to check against", "fix the error first"),
    # -- not tried by the automatic JIT (eugo_lab.jit.auto) --
    "in-c": ("its time is in C code (NumPy) or waiting, not in Python bytecode: a JIT removes the interpreter, "
             "not C code", "nothing: it already runs compiled code"),
    "short-calls": ("each call is too short for a compiled call to win over its own dispatch",
                    "nothing, or move the loop that calls it into the function"),
    "not-python": ("it is not a Python function", "nothing"),
    "library": ("it calls a library Numba cannot compile (pandas, torch, json...)",
                "keep that library outside the loop: pass its data in as NumPy arrays (df.to_numpy())"),
    "not-plain": ("it is not a plain function Numba compiles", "a plain def with positional parameters"),
    "effects": ("it has effects beyond its arguments and result, which a trial would repeat",
                "keep printing and global writes outside the loop function"),
    "arguments": ("its arguments are not NumPy arrays and numbers", "pass NumPy arrays (np.asarray(x))"),
    "compiling": ("its time is in Python bytecode, so it is being compiled in the background; the run ended "
                  "before a call could check the compiled version", "nothing: its next call runs the check"),
    "too-little-cpu": ("it has not yet spent enough CPU in plain Python for a compile to pay back",
                       "nothing: it is tried once it has"),
    "never-sampled": ("never sampled: the sampler that tells Python bytecode from C code caught none of its calls, "
                      "so the JIT had nothing to judge it by", "nothing: longer calls are caught"),
    "opted-out": ("optimize=False", ""),
}


def explain(code: str) -> tuple[str, str]:
    """``(what happened, what would help)`` for a decline code (``"differs"``...), in plain words."""
    return _EXPLAIN.get(code, _EXPLAIN["compile-error"])


# A not-proven verdict's advice, by what its reason says (the first match wins): the advice must be about the
# reason given, not the overflow advice for every decline.
_NOT_PROVEN_ADVICE: tuple[tuple[tuple[str, ...], str], ...] = (
    (("NumPy 2 raises OverflowError",), "use a constant within the array dtype's range, or give the array a dtype "
                                        "that holds the value (a.astype(np.int64))"),
    (("holds an", "holds a ", "NumPy scalar on some paths"), "start each variable with the type it will hold "
                                                              "(0.0, not 0) and return one type on every path"),
    (("starts from a value",), "start the counter from a smaller value, or count in a float64"),
    (("outgrow 64 bits", "beyond 2**53"),
     "use float64 for values that grow (Python's ints never overflow, Numba's 64-bit ones wrap)"),
    (("math.", "np.", "() is not one of the calls", "() of a float", "int() of"),
     "keep that call out of the loop, or use one proven to match (math.sqrt of a value that is never negative, "
     "abs, min, max, np.sqrt)"),
    (("float32",), "use float64 arrays (or np.float32 on every value, and return it)"),
    (("global array",), "pass the array as an argument"),
    (("by a computed value", "zero divisor"), "divide by a non-zero constant, or by Python floats"),
    (("`**`",), "write math.sqrt(x) for x ** 0.5, x * x for x ** 2"),
    (("int8", "int16", "int32", "uint8", "uint16", "uint32"),
     "store the result straight into an array of the same dtype, or use int64 arrays"),
)


# What a reason says when the result's type differs by path (eugo_lab.jit.exact.ResultTypeVaries): optimize=True
# declines those too, so their advice does not offer it.
_RESULT_TYPE_KEYS = ("NumPy scalar on some paths", "may hold NumPy scalars")


def advice_for(code: str, detail: str) -> str:
    """What would help, for a decline ``code`` with its ``detail``: for not-proven code, advice about its reason."""
    helps = explain(code)[1]
    if code != "not-proven":
        return helps
    tail = "or optimize=True to compile it anyway after a check on its first call"
    if any(k in detail for k in _RESULT_TYPE_KEYS):
        return explain("result-type")[1]  # optimize=True does not compile those either
    for keys, advice in _NOT_PROVEN_ADVICE:
        if any(k in detail for k in keys):
            return f"{advice}; {tail}"
    return f"write the loop over float64 or int64 arrays with plain arithmetic; {tail}"


@dataclass(frozen=True)
class FunctionVerdict:
    """The verdicts of one function across the workers of a traced run, merged for the report."""

    function: str
    status: str  # compiled | declined | not tried | mixed (compiled on some workers, not on others)
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
    # Compiled for some calls only: (code, detail) of why calls with other argument types or integer sizes ran
    # plain (the automatic JIT keeps one verdict per signature: a huge Python int is proven apart from a small one).
    partial: tuple[str, str] | None = None

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


def partial_of(verdicts: list[tuple[str, str, str]]) -> tuple[str, str] | None:
    """Why some calls ran plain while a compiled version still ran the others, from one process's verdicts in order.

    Each argument signature (types, dtypes, integer size classes) gets its own verdict: a later
    decline for other arguments does not undo an earlier compile, nor an earlier decline a later
    one. Only a re-check that found a difference (``differs-later``) sends every call back to plain.
    None: every call ran as the latest verdict says.
    """
    alive, declined = False, None
    for status, code, detail in verdicts:
        if status == VERDICT_COMPILED:
            alive = True
        elif code == "differs-later":
            alive, declined = False, None
        elif code != "compiling":  # (said while the compile ran: replaced by the trial's verdict)
            declined = (code, detail)
    return declined if alive else None


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
        elif name == JIT_COMPILE_PHASE:
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
    start_col = t["start"]
    for r, d in sorted(rows.items(), key=lambda rd: float(start_col[rd[0]])):
        if "verdict" in d:
            d["at"] = float(start_col[r])
            by_fn.setdefault(trace.functions[int(fn_col[r])], []).append((int(worker_col[r]), d))
    # What a worker does now is its latest verdict (a compiled function a re-check later sent back to plain:
    # declined); the trial's times come from its rows that have them.
    partial: dict[str, tuple[str, str]] = {}
    for fname, trials in by_fn.items():
        latest: dict[int, dict] = {}
        compiled_of: dict[int, dict] = {}
        seen: dict[int, list] = {}
        for w, d in trials:
            merged = dict(latest.get(w) or {})
            merged.update(d)
            latest[w] = merged
            seen.setdefault(w, []).append(d["verdict"])
            if d["verdict"][0] == VERDICT_COMPILED:
                compiled_of[w] = merged
        for w, said in seen.items():
            why = partial_of(said)
            if why is not None:  # still compiled for some calls: report that, and why the others ran plain
                latest[w] = {**latest[w], **compiled_of[w], "verdict": compiled_of[w]["verdict"]}
                partial.setdefault(fname, why)
        by_fn[fname] = list(latest.items())
    # Calls after the swap: tasks of a compiled function that carry no trial phases ran the compiled version.
    # Their CPU time, as the trial measured (the trace's cpu column: the task's own CPU seconds).
    start, end = t["start"], t["end"]
    cpu_col = t["cpu"] if "cpu" in t else None
    # Only the calls a worker ran after its compiled verdict (the automatic JIT's plain calls before its trial
    # carry no phases either).
    since = {(f, w): d["at"] for f, trials in by_fn.items() for w, d in trials if d["verdict"][0] == VERDICT_COMPILED}
    later: dict[str, list[float]] = {}
    # Only the tasks of compiled functions can be later calls: a cell of 20,000 tasks of other
    # functions is not walked task by task.
    compiled = {f for f, _ in since}
    compiled_codes = [i for i, f in enumerate(trace.functions) if f in compiled]
    for r in np.flatnonzero(np.isin(fn_col, compiled_codes)).tolist() if compiled_codes else ():
        fname = trace.functions[int(fn_col[r])]
        at = since.get((fname, int(worker_col[r])))
        if r not in rows and at is not None and float(start[r]) > at:
            took = float(cpu_col[r]) if cpu_col is not None else float(end[r] - start[r])
            later.setdefault(fname, []).append(took)
    out = []
    for fname, trials in sorted(by_fn.items()):
        statuses = {d["verdict"][0] for _, d in trials}
        status = statuses.pop() if len(statuses) == 1 else "mixed"
        declined = [d["verdict"] for _, d in trials if d["verdict"][0] != VERDICT_COMPILED]
        # A compiled verdict's detail: what was checked and the SIMD verdict (eugo_lab.jit.checked.compiled_detail)
        code, detail = (declined[0][1], declined[0][2]) if declined else ("", trials[0][1]["verdict"][2])
        out.append(FunctionVerdict(
            fname, status, code, detail, workers=len({w for w, _ in trials}),
            compiles=sum(1 for _, d in trials if "compile" in d),
            plain_s=_median([d.get("t_plain", d.get("plain")) for _, d in trials]),
            compile_s=_median([d.get("t_compile", d.get("compile")) for _, d in trials]),
            compiled_s=_median([d.get("t_compiled", d.get("compiled")) for _, d in trials]),
            cached=all(d.get("cached") for _, d in trials),
            later_s=_median(later.get(fname, [])) if status == VERDICT_COMPILED else None,
            later_calls=len(later.get(fname, [])) if status == VERDICT_COMPILED else 0,
            partial=partial.get(fname),
        ))
    return out
