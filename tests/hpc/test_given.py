"""What the notebook hands its tasks by value (``eugo_lab.contract.given``), noted on every path while collecting."""

from __future__ import annotations

import numpy as np

from eugo_lab import hpc
from eugo_lab.contract import given
from eugo_lab.contract.digest import digest


def test_numbers_in_arguments_and_one_level_into_containers_are_noted():
    g = given.Given()
    g.add("f", [1.5, np.float64(2.5), [3.5, (4.5,)], {"k": 5.5}, True, "6.5", np.ones(3), None])
    want = {digest(v) for v in (1.5, np.float64(2.5), 3.5, 5.5)}
    assert g.digests["f"] == want  # not a bool, a string, an array, nor what sits two containers deep


def test_nothing_is_noted_outside_collecting(local2):
    @hpc.remote
    def echo(x):
        return x

    hpc.get(echo.remote(1.25))  # outside: nothing to note, nowhere to note it
    with given.collecting() as sent:
        hpc.get([echo.remote(2.25), echo.remote(x=3.25)])
        hpc.get(hpc.map(echo, [4.25, 5.25]))
        hpc.get(hpc.map(echo, [(6.25, "a")]))
    hpc.get(echo.remote(7.25))
    assert sent.digests["echo"] == {digest(v) for v in (2.25, 3.25, 4.25, 5.25, 6.25)}


def test_a_task_that_returns_a_number_it_was_sent_is_counted(local2):
    @hpc.remote
    def back(data, answer):
        return answer

    @hpc.remote
    def mean(data, seed):
        return float(np.random.default_rng(seed).choice(data, 10).mean())

    data = hpc.put(np.arange(100.0))
    with given.collecting() as sent, hpc.trace() as t:
        hpc.get([back.remote(data, 0.5 + k) for k in range(3)])
        hpc.get([mean.remote(data, k) for k in range(3)])
    backs = [r.digest.value for r in t.trace.results("back")]
    means = [r.digest.value for r in t.trace.results("mean")]
    assert all(sent.sent("back", v) for v in backs) and backs == [0.5, 1.5, 2.5]
    assert not any(sent.sent("mean", v) for v in means)  # the seed is sent, the mean is computed
    assert not sent.sent("mean", True) and not sent.sent("nobody", 0.5)
