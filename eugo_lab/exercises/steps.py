"""The verdict steps most checkers share, each with one wording: a wrong result, work done in the notebook, decoys.

A checker calls these in its own order; each raises :class:`~eugo_lab.exercises.base.NotYet`
with its mistake key when the run fails the step, and returns quietly otherwise:

- :func:`right_result` - the graded value is not the right one (mistake ``results``);
- :func:`task_function` - which traced function does the taught function's work (itself, or a
  function of the cell whose tasks call it: a hand-made batch, a wrapper task);
- :func:`lesson_function` - the tasks ran a function of the lesson's name whose code is not the lesson's
  (``changed``): the lesson's function must do the work unchanged;
- :func:`tasks_ran` - no task of the taught function ran (``local``);
- :func:`every_call_a_task` - some of the calls that should be tasks did not run as tasks (``local``);
- :func:`from_tasks` - the value is not what the tasks returned: a decoy beside it (``not-from-tasks``);
- :func:`taken` - the tasks' values were never taken with get() (``not-taken``);
- :func:`fetched` - the value equals the tasks' results but is not the very objects get() or
  result() handed over: the notebook made it again (the mistake the exercise names);
- :func:`stepped_from_fetched` - the same for a value the notebook's own step makes from each result
  (``handle(r)``): each item is what a call of the step returned, given an object get() handed over.

A sentence that says work was done "here in the notebook" is said only when the runtime's
record shows the function ran in the notebook's process (:func:`eugo_lab.exercises.measure.driver_calls`),
with its count, or (:func:`tasks_ran`) when no task at all ran, so what the cell assigned can only
have been made in the notebook's process. An honest cell that calls its task function only through a helper, a wrapper
around ``hpc.map`` or hand-made batches ran none of it in the notebook, so it is never told so; a
run without that record (a trace not watched) is never told so either.
"""

from __future__ import annotations

import dis
import inspect
from typing import Any

from eugo_lab.exercises import measure
from eugo_lab.exercises.base import Attempt, NotYet
from eugo_lab.tracing.driver_calls import VALUES_KEY
from eugo_lab.tracing.recorder import LABELS_KEY
from eugo_lab.tracing.returned import identifiable

_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
_SAME_OP = {"LOAD_METHOD": "LOAD_ATTR"}


def instructions(code: Any) -> list[tuple[str, Any]]:
    """``code``'s instructions as (operation, argument value), nested code included.

    Line numbers, comments and the docstring are not instructions, so a function laid out or
    documented otherwise reads the same.
    """
    out: list[tuple[str, Any]] = []
    for ins in dis.get_instructions(code):
        if hasattr(ins.argval, "co_code"):
            out.extend(instructions(ins.argval))
        elif ins.opcode in _JUMPS:  # a target's offset moves with the cache entries below, not with the code
            out.append((ins.opname, None))
        else:
            # Python 3.11 loads a method of a name imported in the same compiled cell with LOAD_ATTR, and of any
            # other with LOAD_METHOD: the same call, whichever cell imported NumPy.
            out.append((_SAME_OP.get(ins.opname, ins.opname), ins.argval))
    return out


def _code_of(fn: Any) -> Any:
    """The code object of ``fn``: a plain function, or one wrapped by ``hpc.remote`` (``__wrapped__``)."""
    return getattr(getattr(fn, "__wrapped__", fn), "__code__", None)


def source_code(source: str) -> Any:
    """The code of the one function defined in ``source`` (decorators included in the text are fine), never run."""
    module = compile(source, "<lesson>", "exec")
    return next(c for c in module.co_consts if hasattr(c, "co_code"))


def same_code(fn: Any, source: str) -> bool:
    """``fn`` (a remote function or a plain one) runs the function ``source`` defines, whatever its layout.

    Compared by compiled instructions and arguments, never by name: a function of the same name that computes
    something else, or takes another argument, is not the same.
    """
    code, want = _code_of(fn), source_code(source)
    return (code is not None and code.co_varnames[:code.co_argcount] == want.co_varnames[:want.co_argcount]
            and instructions(code) == instructions(want))


def _arguments(fn: Any) -> str:
    """``fn``'s parameter names in words (``start, stop and value``), for a verdict that holds no code."""
    try:
        names = list(inspect.signature(getattr(fn, "__wrapped__", fn)).parameters)
    except (TypeError, ValueError):
        return "other arguments"
    if not names:
        return "no arguments"
    return "the arguments " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0])


def _calls(a: Attempt, task: str, ran: str, function: str) -> bool:
    """The ``task`` tasks' function ``ran`` (the notebook's of that name) calls ``function``: in its code or pickle."""
    if any(name == function for f in a.trace.functions_shipped if f.function in (task, ran) for name, _ in f.captured):
        return True
    doer = function_named(a.namespace, ran)
    return doer is not None and function in measure.code_references(doer, {function}, a.namespace)


def lesson_function(a: Attempt, task: str, function: str, source: str, mistake: str = "changed") -> None:
    """Raise ``not yet`` unless the ``task`` tasks did their work with the lesson's ``function`` (``source``) unchanged.

    The function checked is the one the tasks ran: the name the trace gives them, through the
    renames it records (``options(name=)``); when that is the cell's own function (a batch of
    ``function`` calls) or the tasks were named after ``function`` but ran another, the
    notebook's ``function`` itself, which that function must call. Identity by code, not by name:
    a ``work`` that returns values computed in the notebook is not the lesson's ``work``.
    """
    ran = (a.trace.meta.get(LABELS_KEY) or {}).get(task, task)  # the function the tasks really ran
    if ran != function and not _calls(a, task, ran, function):
        raise NotYet(f"`{function}` is not what the tasks ran: the {task} tasks ran {ran}, which neither is the "
                     f"lesson's {function} nor calls it; the check needs the lesson's {function} to do the work.",
                     mistake=mistake)
    fn = a.namespace.get(function)
    if fn is None or not callable(fn):
        fn = function_named(a.namespace, function)
    if fn is None:
        raise NotYet(f"`{function}` is not defined in the notebook, so the check cannot tell that the tasks ran the "
                     f"lesson's {function}.", mistake=mistake)
    if same_code(fn, source):
        return
    want, got = _arguments(source_code_function(source)), _arguments(fn)
    how = (f"it takes {got} where the lesson's takes {want}" if got != want else
           "its code computes something other than the lesson's")
    raise NotYet(f"`{function}` is not the lesson's function: {how}. The check grades how the lesson's {function} "
                 "was split into tasks, so it must stay as the lesson wrote it and do the work in the tasks, not "
                 "return values computed here in the notebook.", mistake=mistake)


def source_code_function(source: str) -> Any:
    """A function made from the code of ``source``'s function (for its signature only: never called)."""
    import types

    return types.FunctionType(source_code(source), {})


def driver_calls(a: Attempt, function: str) -> int:
    """How many times ``function`` ran in the notebook's process during the cell (0 when not recorded)."""
    return measure.driver_calls(a.trace, function) or 0


def ran_here(a: Attempt, function: str) -> str:
    """``score ran 3,000 times here in the notebook``, from the runtime's record; ``""`` when it did not run here."""
    n = driver_calls(a, function)
    if not n:
        return ""
    return f"{function} ran {n:,} time{'s' if n != 1 else ''} here in the notebook"


def function_named(namespace: dict[str, Any], function: str) -> Any:
    """The cell's callable whose tasks carry the name ``function`` in the trace, or None."""
    for value in namespace.values():
        name = getattr(value, "function_name", None) or getattr(value, "__qualname__", None)
        if callable(value) and name == function:
            return value
    return None


def does_work_of(a: Attempt, function: str, step: str) -> bool:
    """``function`` is the lesson's ``step`` (or it, renamed) or calls it (its code, a helper's, its pickle's)."""
    if measure.runs_function(a.trace, function, step):  # itself, or itself renamed with options(name=)
        return True
    if any(name == step for f in a.trace.functions_shipped if f.function == function for name, _ in f.captured):
        return True
    fn = function_named(a.namespace, function)
    return fn is not None and step in measure.code_references(fn, {step}, a.namespace)


def task_function(a: Attempt, step: str) -> str:
    """The traced function whose tasks do ``step``'s work (``step`` itself when none does).

    ``step`` when its tasks ran, else the cell's function with the most tasks that calls it
    (hand-made batches, a task wrapping it). Technique, not name: a cell that sends the work as
    batches of its own passes on the same criteria.
    """
    counts = a.trace.task_counts()
    if counts.get(step):
        return step
    doers = [f for f, k in counts.items() if k and does_work_of(a, f, step)]
    return max(doers, key=lambda f: (counts[f], f)) if doers else step


def functions_here(a: Attempt, functions: tuple[str, ...] | None = None) -> str:
    """``gain ran 2,000 times and score 1 time here in the notebook``, from the runtime's record; ``""``: none ran.

    ``functions``: only those (in that order); None: every function of the cell the record holds.
    """
    record = a.trace.meta.get(measure.DRIVER_CALLS) or {}
    names = sorted(record) if functions is None else list(functions)
    ran = [(name, int(record.get(name, 0))) for name in names if record.get(name)]
    if not ran:
        return ""
    said = [f"{name} ran {n:,} time{'s' if n != 1 else ''}" if i == 0 else f"{name} {n:,} time{'s' if n != 1 else ''}"
            for i, (name, n) in enumerate(ran)]
    return (", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else said[0]) + " here in the notebook"


def right_result(ok: bool, name: str, should_be: str, fix: str = "", mistake: str = "results") -> None:
    """Raise ``not yet`` when ``ok`` is false: `` `name` is not should_be`` and what to change (``fix``)."""
    if not ok:
        raise NotYet(f"`{name}` is not {should_be}{': ' + fix if fix else ''}.", mistake=mistake)


def tasks_ran(a: Attempt, function: str, what: str, mistake: str = "local") -> int:
    """The number of ``function``'s tasks; ``not yet`` when none ran (``what``: the graded work, "the means").

    The message says the work ran in the notebook only when ``function`` ran there (with its count)
    or when no task at all ran; when tasks of other functions ran, it names them and claims nothing more.
    """
    n = measure.tasks(a.trace, function)
    if n:
        return n
    here = ran_here(a, function)
    if here:
        raise NotYet(f"no {function} task ran on a worker: {here}, so {what} came from the notebook, not from tasks.",
                     mistake=mistake)
    others = sorted(f for f, k in a.trace.task_counts().items() if k)
    if not others:  # nothing ran anywhere else: what the cell assigned, the notebook made
        raise NotYet(f"no task ran in this cell, so {what} came from the notebook, not from {function} tasks.",
                     mistake=mistake)
    raise NotYet(f"no {function} task ran in this cell (only tasks of {', '.join(others)}), so {what} did not come "
                 f"from {function} tasks.", mistake=mistake)


def every_call_a_task(a: Attempt, function: str, ran: int, wanted: int, where: str = "",
                      mistake: str = "local") -> None:
    """``not yet`` when only ``ran`` of ``wanted`` calls of ``function`` ran as tasks (``where``: " on the cluster").

    Says the others ran in the notebook only when the record shows ``function`` ran there.
    """
    if ran >= wanted:
        return
    here = ran_here(a, function)
    raise NotYet(f"only {ran} of the {wanted} {function} calls ran as tasks{where}"
                 + (f"; {here}." if here else ": the others did not run as tasks."), mistake=mistake)


def from_tasks(a: Attempt, came: Any, function: str, mistake: str = "not-from-tasks") -> None:
    """``not yet`` when ``came`` (a :class:`~eugo_lab.exercises.derivation.Derivation`) failed: a decoy beside it.

    Says the value came from the notebook only when ``function`` ran there beside its tasks.
    """
    if came:
        return
    here = ran_here(a, function)
    if here:
        raise NotYet(f"{came.why}: {here} beside the tasks, so the value came from the notebook, not from "
                     "the tasks' results.", mistake=mistake)
    raise NotYet(f"{came.why}: the graded value must be what this cell's tasks returned.", mistake=mistake)


def not_handed_in(a: Attempt, function: str, values: Any, name: str, mistake: str = "given") -> None:
    """``not yet`` when the graded ``values`` are numbers the notebook had sent ``function``'s tasks as arguments.

    A cell that works the answer out here and passes it to tasks that only hand it back (``return
    answer``, ``return seed, answer``, a dict of answers looked up by the task) gets values that do
    come from the tasks' results. The runtime notes the numbers every submission sends by value
    (:mod:`eugo_lab.contract.given`); a third of the graded values or more being such numbers is that
    shortcut (a task's own work lands on a number it was sent only by rare chance). For exercises
    whose tasks compute numbers that are none of their inputs (a mean, a count, a peak of data read
    through a future or a store).
    """
    sent = a.given
    items = _items(values)
    if sent is None or not items:
        return
    k = sum(1 for v in items if sent.sent(function, v))
    if k and 3 * k >= len(items):
        raise NotYet(f"{k} of the {len(items)} values in `{name}` are numbers the notebook had sent the {function} "
                     "tasks as arguments: they were worked out here in the notebook, and the tasks only handed them "
                     f"back. Send each {function} task only its inputs and let it compute its value.",
                     mistake=mistake)


def taken(a: Attempt, function: str, name: str, tasks: int, got: int | None = None,
          mistake: str = "not-taken") -> None:
    """``not yet`` when the cell took fewer than ``tasks`` values with get() (``got``: counted by the checker).

    ``name``: the graded variable. Equal to the tasks' results without taking them, the value was
    made another way: in the notebook when the record shows ``function`` ran there.
    """
    got = measure.values_taken(a.trace) if got is None else got
    if got >= tasks:
        return
    head = (f"`{name}` equals what the {measure.plural(tasks, function + ' task')} returned, but the cell took "
            f"only {measure.plural(got, 'value')} of theirs with get()")
    here = ran_here(a, function)
    if here:
        raise NotYet(f"{head}, and {here}: the value was computed here beside the tasks.", mistake=mistake)
    raise NotYet(f"{head}, so the value did not come from their results.", mistake=mistake)


def _items(value: Any) -> list[Any] | None:
    """The objects of a graded value to check one by one: a list's or tuple's items, a dict's values, else itself.

    None for a value whose items are not objects of their own (an array: its numbers are made on reading).
    """
    t = type(value)
    if t is list or t is tuple:
        return list(value)
    if t is dict:
        return list(value.values())
    if hasattr(value, "__array__") or hasattr(value, "iloc"):
        return None
    return [value]


def fetched(a: Attempt, value: Any, function: str, name: str, mistake: str = "decoy") -> None:
    """``not yet`` when ``value`` (or each item) is not an object get()/result() handed over from ``function``'s tasks.

    Identity, not equality: a cell that takes the tasks' values and then computes the graded value
    again in the notebook (inline, in a helper of another name, with NumPy) holds equal values that
    are other objects. Checked on the runtime's record of the run (:class:`~eugo_lab.tracing.returned.Handed`):
    items that identity cannot tell apart (small ints, ``None``: CPython shares them) are not checked,
    and nothing is said when the run has no record, or when it forgot values over its cap and an item
    was not found (it may have been among those). A value a task of another function returned is
    named as such. Call it after the value was found equal to the tasks' results.
    """
    handed = getattr(a.trace, "handed", None)
    objs = _items(value)
    if handed is None or objs is None:
        return
    checked = [o for o in objs if identifiable(o)]
    if not checked:
        return
    functions = {r.task_id: r.function for r in a.trace.results()}
    made: list[Any] = []
    elsewhere: dict[str, int] = {}
    for o in checked:
        task = handed.task_of(o)
        if task is None:
            made.append(o)
        elif functions.get(task, function) != function:  # a task id the trace does not name: a batch's item
            elsewhere[functions[task]] = elsewhere.get(functions[task], 0) + 1
    here = ran_here(a, function)
    also = f"; {here}" if here else ""
    one = len(objs) == 1 and type(value) not in (list, tuple, dict)
    if made and not handed.dropped:
        if one:
            raise NotYet(f"`{name}` holds the right value, but it is not the value get() or result() handed over "
                         f"from the {function} task: it is an equal value the notebook made itself (computed again, or "
                         f"kept from before){also}, so "
                         f"`{name}` is not what the task returned. Keep the value get() returns.", mistake=mistake)
        raise NotYet(f"`{name}` holds the right values, but {len(made)} of the {len(checked)} items checked are not "
                     f"values a get() or result() of this cell handed over from the {function} tasks: they are "
                     f"equal values the notebook made itself (computed again, or kept from before){also}, so `{name}` "
                     "is not what the tasks returned. "
                     "Keep the values get() returns.", mistake=mistake)
    if elsewhere:
        said = " and ".join(f"{n} of its items {'is' if n == 1 else 'are'} what {fn} tasks returned"
                            for fn, n in sorted(elsewhere.items()))
        raise NotYet(f"`{name}` holds the right values, but {said}, not {function} tasks, so `{name}` is not what "
                     f"the {function} tasks returned.", mistake=mistake)


def stepped_from_fetched(a: Attempt, value: Any, function: str, step: str, name: str, mistake: str = "decoy") -> None:
    """``not yet`` unless each item of ``value`` is what a call of ``step`` returned for a value the tasks handed over.

    For an exercise whose graded value the notebook computes from each result with its own step
    (``handled.append(handle(r))``): each item must be the object a call of ``step`` in the
    driver returned (kept by value while the cell ran: the exercise names ``step`` in its
    ``values_of``), and that call must have been given an object a get() or result() of the cell
    handed over from ``function``'s tasks (:class:`~eugo_lab.tracing.returned.Handed`). Items
    identity cannot tell apart are not checked; a run without either record, or one that forgot
    values over its caps, is told nothing it did not check.
    """
    handed = getattr(a.trace, "handed", None)
    record = a.trace.live.get(VALUES_KEY)
    objs = _items(value)
    if handed is None or record is None or objs is None:
        return
    checked = [o for o in objs if identifiable(o)]
    if not checked:
        return
    returned = {id(ret): (ret, args) for args, ret in record["calls"].get(step, [])}
    functions = {r.task_id: r.function for r in a.trace.results()}
    not_returned: list[Any] = []
    fed_otherwise: list[Any] = []
    for o in checked:
        hit = returned.get(id(o))
        if hit is None or hit[0] is not o:
            not_returned.append(o)
            continue
        tasks = [handed.task_of(arg) for arg in hit[1]]
        if not any(t is not None and functions.get(t, function) == function for t in tasks):
            fed_otherwise.append(o)
    n = len(checked)
    if not_returned and not record["dropped"]:
        raise NotYet(f"`{name}` holds the right answers, but {len(not_returned)} of the {n} items checked are not "
                     f"values {step} returned in this cell: the notebook made them another way, not by {step} from "
                     f"the values get() handed over from the {function} tasks. Keep what {step} returns for each "
                     "value get() gives you.", mistake=mistake)
    if fed_otherwise and not handed.dropped:
        raise NotYet(f"`{name}` holds what {step} returned, but {len(fed_otherwise)} of the {n} calls behind it were "
                     f"given other values than the objects a get() or result() of this cell handed over from the "
                     f"{function} tasks: {step} must handle the values the tasks returned.",
                     mistake=mistake)


# -- the checker's own inputs -----------------------------------------------------------------------------------


def plain_function(fn: Any) -> Any:
    """The plain Python function under ``fn`` (an ``@hpc.remote`` function's wrapped one), else ``fn``."""
    return getattr(fn, "__wrapped__", fn)


def called_on_own_input(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, BaseException | None]:
    """``(what the plain function under fn returned, None)`` or ``(None, what it raised)``, called here, now.

    The "own the input" step: a result judged only on inputs the learner chose (the exercise's, which a
    cell can answer from the notebook and hand back through a function that computes nothing) says
    nothing about the function. The checker calls the plain function itself, in the kernel, on inputs of
    its own that the cell never saw, and compares with its own reference. The arguments are the
    checker's (pass copies: the call may change them in place); what the call prints is swallowed, so the
    verdict stays the only output.
    """
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return plain_function(fn)(*args, **kwargs), None
        except Exception as e:  # noqa: BLE001 - the learner's function: what it raised is the verdict's
            return None, e
