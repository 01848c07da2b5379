"""The Attempt's reading of the learner's namespace: a value left by an earlier cell is not this cell's answer."""

from __future__ import annotations

import pytest

from eugo_lab.exercises.base import Attempt, NotYet, bound_names


def _attempt(before: dict, after: dict, assigned: frozenset[str] = frozenset()) -> Attempt:
    return Attempt("sizing", trace=None, namespace=after, before=before, assigned=assigned)


def test_a_value_left_by_an_earlier_cell_is_not_the_answer():
    with pytest.raises(NotYet, match="did not define `workers`"):
        _attempt({"workers": 12}, {"workers": 12}).require("workers")


def test_a_rerun_that_assigns_the_same_small_int_counts():
    # CPython shares small ints: a re-run cell computing the same worker count binds the very same object.
    a = _attempt({"workers": 12}, {"workers": 12}, bound_names("workers = 6 * 2\n"))
    assert a.require("workers") == 12


def test_bound_names():
    src = "import numpy as np\nfrom os import path\nfor i, (a, b) in enumerate([]): pass\ndef f(): y = 1\nz += 1\n"
    assert {"np", "path", "i", "a", "b", "f", "y", "z"} <= bound_names(src)
    assert bound_names("this is not python") == frozenset()
