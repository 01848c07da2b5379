"""A ``functools.lru_cache`` or ``functools.cache`` helper defined in a notebook cell travels with its task."""

from __future__ import annotations

import functools
import pickle

from eugo_lab import hpc
from eugo_lab.contract.serialization import dumps_function

CELL = """
import functools

@functools.lru_cache(maxsize=128)
def slow_square(n):
    return n * n

@functools.cache
def offset():
    return 1

def task(x):
    return slow_square(x) + offset()
"""


def _cell() -> dict:
    ns: dict = {"__name__": "__main__"}  # what a notebook cell's functions carry: sent by value
    exec(CELL, ns)
    return ns


def test_a_task_that_calls_a_cached_helper_of_a_cell_runs_on_workers(local2):
    task = _cell()["task"]
    assert hpc.get(hpc.remote(task).remote(3), timeout=60) == 10
    assert hpc.get(hpc.map(task, range(5)), timeout=60) == [1, 2, 5, 10, 17]


def test_a_cached_function_of_a_cell_is_itself_a_task(local2):
    slow_square = _cell()["slow_square"]
    assert hpc.get(hpc.map(slow_square, range(4), batch=2), timeout=60) == [0, 1, 4, 9]


def test_the_cache_keeps_its_parameters_and_an_importable_one_goes_by_name():
    rebuilt = pickle.loads(dumps_function(_cell()["slow_square"], function="slow_square"))
    assert rebuilt(4) == 16 and rebuilt.cache_parameters() == {"maxsize": 128, "typed": False}
    assert pickle.loads(dumps_function(_module_cached, function="_module_cached")) is _module_cached


@functools.lru_cache(maxsize=4)
def _module_cached(n: int) -> int:
    return n
