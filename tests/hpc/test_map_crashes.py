"""An ``hpc.map`` item that kills its worker, or outgrows its memory limit, costs only itself.

Each item is its own task, as for ``.remote()``: when the worker running a batch dies, the items
that finished keep their results and never run again, the item that was running is the one that
crashed (its ``retries`` count for it alone) and the items not started yet run without using a
retry. Every run of an item leaves a line in its own file, so the tests count runs, never time.
"""

from __future__ import annotations

import os
import time

import pytest
from _crashes import runs
from _memory import grow_forever

from eugo_lab import hpc

N = 8
CRASHER = 3


def _dies_once(arg: tuple[str, int, int, int]) -> int:
    """Item ``crasher`` ends its worker process on its first run, item ``raiser`` raises on its first run.

    Every run leaves a line in the item's file.
    """
    folder, i, crasher, raiser = arg
    path = os.path.join(folder, str(i))
    with open(path, "a") as fh:
        fh.write("x\n")
    with open(path) as fh:
        runs = len(fh.readlines())
    # Every item lasts 20 ms, the one that raises too: each is then a group of its own on the worker (groups
    # grow only after items shorter than 2 ms, and a fast raise let the next two items share one).
    time.sleep(0.02)
    if i == crasher and runs == 1:
        os._exit(1)
    if i == raiser and runs == 1:
        raise ConnectionError(f"item {i}: transient")
    return i * i


def _large_dies_once(arg: tuple[str, int, int]) -> bytes:
    """Like :func:`_dies_once`, returning 100 kB: more than a finished group sends ahead of its batch's end."""
    folder, i, crasher = arg
    _dies_once((folder, i, crasher, -1))
    return bytes([i]) * 100_000


def _grows_if_chosen(arg: tuple[str, int, int]) -> int:
    """Item ``hog`` grows until its memory limit stops it; the others leave a line in their file and return."""
    folder, i, hog = arg
    with open(os.path.join(folder, str(i)), "a") as fh:
        fh.write("x\n")
    if i == hog:
        grow_forever()
    time.sleep(0.02)
    return i * i


def _tiny_dies_once(arg: tuple[str, int, int]) -> int:
    """A microsecond item; item ``crasher`` ends its worker the first time (its marker file says which)."""
    folder, i, crasher = arg
    if i == crasher:
        marker = os.path.join(folder, "crashed")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
    return i * i



def test_a_worker_dying_in_a_batch_reruns_only_the_item_that_killed_it(local2, tmp_path):
    folder = str(tmp_path)
    dies = hpc.remote(_dies_once).options(retries=1)
    with hpc.trace() as t:
        result = hpc.map(dies, [(folder, i, CRASHER, -1) for i in range(N)], batch=N)
        assert hpc.get(result, timeout=120) == [i * i for i in range(N)]
    assert [f.status for f in result] == ["finished"] * N
    # The items before it finished and kept their results; the ones after it had not started: once each.
    assert runs(folder) == {i: 2 if i == CRASHER else 1 for i in range(N)}
    df = t.to_dataframe()
    crashed = df[df["status"] == "crashed"]
    assert list(crashed["task_id"]) == [result[CRASHER].task_id]
    assert list(crashed["attempt"]) == [1]
    ok = df[df["status"] == "ok"]
    assert sorted(ok["task_id"]) == sorted(f.task_id for f in result)  # one ok row per item
    assert list(ok.loc[ok["task_id"] == result[CRASHER].task_id, "attempt"]) == [2]


def test_an_item_that_raised_before_the_death_keeps_its_own_retry(local2, tmp_path):
    folder = str(tmp_path)
    dies = hpc.remote(_dies_once).options(retries=1, retry_exceptions=(ConnectionError,))
    result = hpc.map(dies, [(folder, i, CRASHER, CRASHER - 2) for i in range(N)], batch=N)
    assert hpc.get(result, timeout=120) == [i * i for i in range(N)]
    assert runs(folder) == {i: 2 if i in (CRASHER - 2, CRASHER) else 1 for i in range(N)}


def test_without_retries_only_the_item_that_killed_its_worker_fails(local2, tmp_path):
    folder = str(tmp_path)
    dies = hpc.remote(_dies_once).options(retries=0)
    result = hpc.map(dies, [(folder, i, CRASHER, -1) for i in range(N)], batch=N)
    hpc.wait(result, num_returns=N, timeout=120)
    assert [f.status for f in result] == ["finished"] * CRASHER + ["error"] + ["finished"] * (N - CRASHER - 1)
    for i, f in enumerate(result):
        if i != CRASHER:
            assert hpc.get(f) == i * i
    with pytest.raises(hpc.WorkerCrashedError, match=rf"item {CRASHER} of hpc.map\(_dies_once, ...\)") as info:
        hpc.get(result[CRASHER])
    assert f"task {result[CRASHER].task_id}" in str(info.value)
    with pytest.raises(hpc.WorkerCrashedError):  # the whole map's values: its one failed item's error
        hpc.get(result)
    assert runs(folder) == {i: 1 for i in range(N)}


def test_items_with_large_results_that_finished_before_the_death_run_again(local2, tmp_path):
    # As hpc.map's docstring says: large results travel only with their batch's end, so the items
    # before the crash lost theirs with the worker and run again, without using a retry.
    folder = str(tmp_path)
    dies = hpc.remote(_large_dies_once).options(retries=0)
    result = hpc.map(dies, [(folder, i, CRASHER) for i in range(N)], batch=N)
    hpc.wait(result, num_returns=N, timeout=120)
    with pytest.raises(hpc.WorkerCrashedError, match=rf"item {CRASHER} of hpc.map"):
        hpc.get(result[CRASHER])
    assert [hpc.get(f) for i, f in enumerate(result) if i != CRASHER] == \
        [bytes([i]) * 100_000 for i in range(N) if i != CRASHER]
    assert runs(folder) == {i: 2 if i < CRASHER else 1 for i in range(N)}


def test_an_item_over_its_memory_limit_fails_alone(local2, tmp_path):
    folder = str(tmp_path)
    hog = 2
    grows = hpc.remote(_grows_if_chosen).options(memory="200MB", retries=2)
    result = hpc.map(grows, [(folder, i, hog) for i in range(N)], batch=N)
    hpc.wait(result, num_returns=N, timeout=120)
    with pytest.raises(hpc.WorkerMemoryError, match=rf"item {hog} of hpc.map\(_grows_if_chosen, ...\).*not retried"):
        hpc.get(result[hog])
    assert [hpc.get(f) for i, f in enumerate(result) if i != hog] == [i * i for i in range(N) if i != hog]
    # Never retried (it would grow the same way again), and no other item ran twice.
    assert runs(folder) == {i: 1 for i in range(N)}


def test_a_worker_dying_among_tiny_items_still_gives_every_result(local2, tmp_path):
    # Tiny items run in groups on the worker; the group the worker died in runs again, one item a group.
    n = 20_000
    folder = str(tmp_path)
    # (optimize=False: the automatic JIT marks its verdict as a phase, and items that mark phases run one a group)
    dies = hpc.remote(_tiny_dies_once, optimize=False).options(retries=0)
    with hpc.trace() as t:
        result = hpc.map(dies, [(folder, i, n // 2) for i in range(n)], batch=n)
        assert hpc.get(result, timeout=120) == [i * i for i in range(n)]
    assert os.path.exists(os.path.join(folder, "crashed"))
    df = t.to_dataframe()
    assert (df["status"] == "crashed").sum() == 1
    ok = df[df["status"] == "ok"]
    assert len(ok) == n and ok["task_id"].nunique() == n  # every item once, whichever group it ran in
