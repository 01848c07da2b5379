"""A worker death inside an ``hpc.map`` batch, checked the same way on every engine.

Every run of an item leaves a line in its own file, so the check counts runs, never time.
"""

from __future__ import annotations

import os

import pytest

N = 6
CRASHER = 2


def dies_if_chosen(arg: tuple[str, int, int]) -> int:
    """Item ``crasher`` ends its worker process on every run; the others leave a line in their file and return."""
    folder, i, crasher = arg
    with open(os.path.join(folder, str(i)), "a") as fh:
        fh.write("x\n")
    if i == crasher:
        os._exit(1)
    return i * i


def runs(folder: str) -> dict[int, int]:
    """How many times each item ran (lines in its file)."""
    out = {}
    for name in os.listdir(folder):
        if name.isdigit():
            with open(os.path.join(folder, name)) as fh:
                out[int(name)] = len(fh.readlines())
    return out


def check_a_worker_death_in_a_map_batch_costs_only_its_item(hpc, folder: str) -> None:  # the eugo_lab.hpc module
    """A batch of 6 whose item 2 kills its worker every time, with ``retries=1``: only item 2 fails.

    An engine that cannot say how far the batch got sends each item again as a batch of its own (the items
    before the death run twice, their results lost with the worker); the local pool keeps what finished.
    Either way the crasher runs once in the batch and twice alone (its own attempt and its one retry), and
    every other item gives its value.
    """
    fn = hpc.remote(dies_if_chosen).options(retries=1)
    result = hpc.map(fn, [(folder, i, CRASHER) for i in range(N)], batch=N)
    hpc.wait(result, num_returns=N, timeout=240)
    assert [f.status for f in result] == ["finished"] * CRASHER + ["error"] + ["finished"] * (N - CRASHER - 1)
    with pytest.raises(hpc.WorkerCrashedError, match=rf"item {CRASHER} of hpc.map\(dies_if_chosen, ...\)"):
        hpc.get(result[CRASHER])
    assert [hpc.get(f) for i, f in enumerate(result) if i != CRASHER] == [i * i for i in range(N) if i != CRASHER]
    ran = runs(folder)
    assert ran[CRASHER] == 3, ran
    assert all(1 <= ran[i] <= 2 for i in range(N) if i != CRASHER), ran  # never retried for another's death
