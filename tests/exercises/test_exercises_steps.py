"""The shared verdict steps (``eugo_lab.exercises.steps``) on small stand-in traces: what each says, and when.

A sentence about work done "here in the notebook" must follow the runtime's record of what ran in
the notebook's process; with no record, or a record where the function never ran, it is not said.
"""

from __future__ import annotations

import numpy as np
import pytest

from eugo_lab.exercises import steps
from eugo_lab.exercises.base import Attempt, NotYet
from eugo_lab.exercises.derivation import Derivation
from eugo_lab.tracing.driver_calls import META_KEY


class Ran:
    """A stand-in trace: ``{function: tasks}`` and, when given, the record of calls in the notebook."""

    def __init__(self, tasks: dict[str, int], here: dict[str, int] | None = None) -> None:
        self.counts = tasks
        self.meta = {} if here is None else {META_KEY: here}
        self.functions_shipped = ()

    def task_counts(self) -> dict[str, int]:
        return dict(self.counts)

    def first_attempts(self, function: str | None = None) -> np.ndarray:
        return np.ones(self.counts.get(function, 0) if function else sum(self.counts.values()), dtype=bool)


def attempt(tasks: dict[str, int], here: dict[str, int] | None = None) -> Attempt:
    return Attempt("partitions", Ran(tasks, here), {})


def said(step, *args) -> str:
    with pytest.raises(NotYet) as err:
        step(*args)
    return str(err.value)


def test_no_task_of_the_function_says_the_notebook_only_as_the_record_shows():
    assert "load ran 16 times here in the notebook" in said(steps.tasks_ran, attempt({}, {"load": 16}), "load",
                                                             "the total")
    # nothing ran anywhere: what the cell assigned was made in the notebook's process
    assert said(steps.tasks_ran, attempt({}, {}), "load", "the total") == (
        "no task ran in this cell, so the total came from the notebook, not from load tasks.")
    # tasks of another function ran (hand-made batches of another name): no claim about the notebook
    text = said(steps.tasks_ran, attempt({"chunk": 4}, {}), "load", "the total")
    assert "notebook" not in text and "only tasks of chunk" in text
    assert steps.tasks_ran(attempt({"load": 3}), "load", "the total") == 3


def test_a_decoy_beside_the_value_is_called_computed_here_only_when_it_was():
    wrong = Derivation(False, "`total` was not computed from the tasks' results")
    here = said(steps.from_tasks, attempt({"load": 2}, {"load": 5}), wrong, "load")
    assert "load ran 5 times here in the notebook beside the tasks" in here
    typed = said(steps.from_tasks, attempt({"load": 2}, {}), wrong, "load")
    unwatched = said(steps.from_tasks, attempt({"load": 2}), wrong, "load")
    assert "notebook" not in typed and typed == unwatched
    steps.from_tasks(attempt({"load": 2}), Derivation(True), "load")  # the value came from the tasks: no step


def test_every_call_a_task_and_the_functions_here():
    text = said(steps.every_call_a_task, attempt({"f": 1}, {"f": 3}), "f", 1, 4, " on the cluster")
    assert text == "only 1 of the 4 f calls ran as tasks on the cluster; f ran 3 times here in the notebook."
    assert "notebook" not in said(steps.every_call_a_task, attempt({"f": 1}, {}), "f", 1, 4)
    a = attempt({}, {"gain": 2000, "score": 1, "helper": 0})
    assert steps.functions_here(a, ("gain", "score")) == "gain ran 2,000 times and score 1 time here in the notebook"
    assert steps.functions_here(attempt({})) == ""


def test_a_wrong_result_names_the_value_and_the_fix():
    assert said(steps.right_result, False, "total", "the sum over all rows", "cover every row once") == (
        "`total` is not the sum over all rows: cover every row once.")
    steps.right_result(True, "total", "the sum over all rows")


def test_values_never_taken_are_called_computed_here_only_when_they_were():
    here = said(steps.taken, attempt({"score": 20}, {"score": 20}), "score", "total", 20, 0)
    assert here == ("`total` equals what the 20 score tasks returned, but the cell took only 0 values of theirs "
                    "with get(), and score ran 20 times here in the notebook: the value was computed here beside "
                    "the tasks.")
    assert "notebook" not in said(steps.taken, attempt({"score": 20}, {}), "score", "total", 20, 0)
    steps.taken(attempt({"score": 20}), "score", "total", 20, 20)


def test_a_local_variable_sharing_a_globals_name_is_no_reference_to_it():
    from eugo_lab.exercises.measure import code_references

    def bill(kwh):
        out = kwh.copy()  # a local `out`, while the namespace has another `out`
        out[out > 10] = 1.0
        return out

    def uses(kwh):
        return out(kwh)  # noqa: F821 - the namespace's `out`, read as a global

    namespace = {"out": object(), "bill": bill, "uses": uses}
    assert code_references(bill, {"out"}, namespace) == set()
    assert code_references(uses, {"out"}, namespace) == {"out"}
