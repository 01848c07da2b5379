"""``retries`` / ``retry_exceptions`` mean the same for ``hpc.map`` items and coalesced calls as for ``.remote()``.

An item (or a coalesced call) that raises a named exception is retried on its own; the items of
its batch that succeeded keep their results and never run again.
"""

from __future__ import annotations

import os

import pytest

from eugo_lab import hpc
from eugo_lab.hpc import coalesce

N = 300


def _flaky_once(arg: tuple[str, int]) -> int:
    """Fails the first time it sees an odd item, succeeds after; every run leaves a line in the item's file."""
    folder, i = arg
    path = os.path.join(folder, str(i))
    with open(path, "a") as fh:
        fh.write("x\n")
    with open(path) as fh:
        runs = len(fh.readlines())
    if i % 2 and runs == 1:
        raise ConnectionError(f"item {i}: transient")
    return i * i


def _runs(folder: str) -> dict[int, int]:
    out = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as fh:
            out[int(name)] = len(fh.readlines())
    return out


def _expected_runs() -> dict[int, int]:
    # odd items: one failure, one success; even items: once, never again
    return {i: 2 if i % 2 else 1 for i in range(N)}


@pytest.mark.parametrize("batch", [1, 7, "auto"])
def test_map_retries_each_failed_item_and_never_reruns_the_others(local2, tmp_path, batch):
    flaky = hpc.remote(_flaky_once).options(retries=2, retry_exceptions=(ConnectionError,))
    folder = str(tmp_path)
    result = hpc.map(flaky, [(folder, i) for i in range(N)], batch=batch)
    assert hpc.get(result, timeout=120) == [i * i for i in range(N)]
    assert [f.status for f in result] == ["finished"] * N
    assert hpc.get(result[1]) == 1  # an item's own future reads its retried value too
    assert _runs(folder) == _expected_runs()


def test_map_without_retry_exceptions_fails_an_item_after_one_attempt(local2, tmp_path):
    flaky = hpc.remote(_flaky_once).options(retries=3)
    folder = str(tmp_path)
    result = hpc.map(flaky, [(folder, i) for i in range(20)], batch=5)
    with pytest.raises(ConnectionError, match="item 1: transient"):
        hpc.get(result, timeout=60)
    assert _runs(folder) == {i: 1 for i in range(20)}


def test_map_item_fails_once_its_retries_are_spent(local2, tmp_path):
    always = hpc.remote(_always_fails_odd).options(retries=2, retry_exceptions=(ConnectionError,))
    folder = str(tmp_path)
    result = hpc.map(always, [(folder, i) for i in range(10)], batch=4)
    assert not hpc.wait(result, num_returns=10, timeout=60)[1]  # every item ended (its retries spent)
    with pytest.raises(ConnectionError, match="attempt 3 of 3"):
        hpc.get(result[3], timeout=60)
    assert hpc.get(result[2]) == 4
    assert _runs(folder) == {i: 3 if i % 2 else 1 for i in range(10)}


def _always_fails_odd(arg: tuple[str, int]) -> int:
    folder, i = arg
    with open(os.path.join(folder, str(i)), "a") as fh:
        fh.write("x\n")
    if i % 2:
        raise ConnectionError(f"item {i} always fails")
    return i * i


def test_coalesced_calls_are_retried_one_by_one(local2, tmp_path, monkeypatch):
    # Every call counts as tiny, so the calls go in batches whatever this machine's speed.
    monkeypatch.setattr(coalesce, "TINY_SECONDS", 1e6)
    flaky = hpc.remote(_flaky_once).options(retries=2, retry_exceptions=(ConnectionError,), batch="auto")
    folder = str(tmp_path)
    futures = [flaky.remote((folder, i)) for i in range(N)]
    assert hpc.get(futures, timeout=120) == [i * i for i in range(N)]
    assert _runs(folder) == _expected_runs()
    stats = [s for s in coalesce.all_stats() if s.function == "_flaky_once"]
    assert stats and stats[0].batches > 0  # the calls really went in batches


def _fails_then_waits(arg: tuple[str, int]) -> int:
    """First attempt: fails; the retry waits until the test cancels the map (a file that never appears)."""
    folder, i = arg
    path = os.path.join(folder, str(i))
    with open(path, "a") as fh:
        fh.write("x\n")
    with open(path) as fh:
        if len(fh.readlines()) == 1:
            raise ConnectionError(f"item {i}: transient")
    import time

    while not os.path.exists(os.path.join(folder, "never")):
        time.sleep(0.01)
    return i


def test_cancelling_a_map_ends_the_items_being_retried(local2, tmp_path):
    import time

    flaky = hpc.remote(_fails_then_waits).options(retries=2, retry_exceptions=(ConnectionError,))
    folder = str(tmp_path)
    result = hpc.map(flaky, [(folder, i) for i in range(6)], batch=3)
    deadline = time.monotonic() + 60
    while sum(_runs(folder).values()) < 7 and time.monotonic() < deadline:  # a retry (2nd run) has started
        time.sleep(0.05)
    assert sum(_runs(folder).values()) >= 7
    assert hpc.cancel(result) == 6
    done, pending = hpc.wait(result, num_returns=6, timeout=30)
    assert len(done) == 6 and not pending
    with pytest.raises(hpc.TaskCancelledError):
        hpc.get(result, timeout=10)
    assert all(f.cancelled() for f in result)
