"""Large results of the local pool travel through shared memory, bit-identical, and are freed exactly once.

A result with a buffer of ``shm_store.OOB_BYTES`` or more is written by the worker into the
pool's store (``/dev/shm``) and only its name goes through the pipe: the worker is free for its
next task before the driver reads anything (checked by the order of events, not by time), and
the file goes when its future is released, when its task was cancelled, when its worker dies
before announcing it, and at shutdown.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest
from _waiting import wait_for_file

from eugo_lab import hpc
from eugo_lab.backends import shm_store
from eugo_lab.contract.serialization import dumps_value_oob
from eugo_lab.hpc import session

MB = 1 << 20


class Tagged(np.ndarray):
    """An ndarray subclass (pickled by its own ``__reduce__``): it must come back as itself."""


def _expected(kind: str):
    """The value a task returns for ``kind``: built the same way on the worker and here."""
    rng = np.random.default_rng(7)
    big = rng.random(MB // 4)  # 2 MiB of float64
    if kind == "float64":
        return big
    if kind == "float32-2d":
        return rng.random((512, 1024), dtype=np.float32)
    if kind == "int8":
        return rng.integers(-128, 127, size=3 * MB, dtype=np.int8)
    if kind == "uint16-3d":
        return rng.integers(0, 65535, size=(64, 128, 128), dtype=np.uint16)
    if kind == "big-endian":
        return rng.integers(0, 1 << 30, size=MB, dtype=np.int64).astype(">i4")
    if kind == "complex128":
        return (rng.random(MB // 8) + 1j * rng.random(MB // 8)).astype(np.complex128)
    if kind == "bool":
        return rng.random(2 * MB) > 0.5
    if kind == "datetime64":
        return np.arange(MB // 4).astype("datetime64[s]")
    if kind == "structured":
        a = np.zeros(MB // 8, dtype=[("x", "<f8"), ("n", "<i4"), ("tag", "S4")])
        a["x"], a["n"], a["tag"] = rng.random(len(a)), np.arange(len(a)), b"ab"
        return a
    if kind == "fortran":
        return np.asfortranarray(rng.random((1024, 512)))
    if kind == "non-contiguous":
        return rng.random((2048, 512))[::2, ::3]
    if kind == "transposed":
        return rng.random((512, 1024)).T[:, 1:]
    if kind == "0-d":
        return np.array(3.25)
    if kind == "empty":
        return np.empty((0, 8))
    if kind == "subclass":
        return big.view(Tagged)
    if kind == "masked":
        return np.ma.masked_array(big, mask=big > 0.5)
    if kind == "dict-of-arrays":
        return {"a": big, "b": [big[:10], rng.random(MB // 2)], "name": "x"}
    if kind == "bytes":
        return bytes(rng.integers(0, 255, 3 * MB, dtype=np.uint8))
    if kind == "bytearray":
        return bytearray(rng.integers(0, 255, 3 * MB, dtype=np.uint8))
    raise ValueError(kind)


KINDS = ["float64", "float32-2d", "int8", "uint16-3d", "big-endian", "complex128", "bool", "datetime64",
         "structured", "fortran", "non-contiguous", "transposed", "0-d", "empty", "subclass", "masked",
         "dict-of-arrays", "bytes", "bytearray"]


OUT_OF_BAND = {"float64", "float32-2d", "int8", "uint16-3d", "big-endian", "complex128", "bool", "structured",
               "fortran", "non-contiguous", "transposed", "dict-of-arrays", "bytes", "bytearray"}


@hpc.remote
def make(kind: str):
    return _expected(kind)


@hpc.remote
def checksum(a) -> tuple:
    a[0] = -1.0  # its own copy: a private mapping, nobody else sees the write
    return float(a[1:].sum()), a.flags.writeable


@hpc.remote
def big_array(n_mb: int, tag: float = 0.0):
    return np.full(n_mb * MB // 8, tag)


@hpc.remote
def touch(path: str) -> str:
    with open(path, "w") as fh:
        fh.write("ran")
    return path


@hpc.remote
def stubborn_big(marker: str):
    """Catches its cancellation, then returns a large result anyway (which nobody will read)."""
    with open(marker + ".started", "w") as fh:
        fh.write("started")
    try:
        time.sleep(30)
    except hpc.TaskCancelled:
        with open(marker, "w") as fh:
            fh.write("cancelled")
        return np.ones(4 * MB // 8)
    return None


def _same(got, want) -> None:
    """Bit-identical: the same type, dtype, shape, memory order and bytes (arrays, containers, bytes)."""
    assert type(got) is type(want)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.flags.c_contiguous == np.ascontiguousarray(want).flags.c_contiguous or want.flags.f_contiguous
        assert got.flags.f_contiguous == want.flags.f_contiguous or not want.flags.f_contiguous
        assert got.flags.writeable and got.flags.aligned
        if isinstance(want, np.ma.MaskedArray):
            assert np.array_equal(got.mask, want.mask)
            got, want = got.data, want.data
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            _same(got[k], want[k])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want


def _store() -> str:
    return session.current().backend._store_dir


def _results_in_store() -> list[str]:
    return sorted(n for n in os.listdir(_store()) if n.startswith(("res-", "out-")))


def _wait_store_empty(timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        left = _results_in_store()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


@pytest.fixture(scope="module")
def pool():
    hpc.init(backend="local", workers=2)
    yield hpc
    hpc.shutdown()


@pytest.mark.parametrize("kind", KINDS)
def test_results_come_back_bit_identical(pool, kind):
    want = _expected(kind)
    with hpc.trace() as trace:
        fut = make.remote(kind)
        got = hpc.get(fut)
    _same(got, want)
    # What the result weighs, by the route it took: its pickle plus its buffers (in band or out).
    inband = len(pickle.dumps(want, 5))
    [bytes_out] = trace.to_dataframe()["bytes_out"].tolist()
    assert abs(bytes_out - inband) <= 64 * len(shm_store._LEN.pack(0)) + 256, (bytes_out, inband)
    # The route: the store whenever pickle protocol 5 lets a large buffer out of band (NumPy keeps datetimes
    # and subclasses in band; a non-contiguous array is made contiguous first), else the pipe.
    _, out_of_band = dumps_value_oob(want, shm_store.OOB_BYTES)
    assert len(_results_in_store()) == (1 if out_of_band else 0)
    if kind in OUT_OF_BAND:
        assert out_of_band
    del fut
    assert _wait_store_empty() == []


@hpc.remote
def where(a) -> tuple:
    """Where an array argument lies: its aligned flag and its address modulo 64, and its strided sum."""
    return a.flags.aligned, a.ctypes.data % 64, float(a[::512].sum())


def test_results_puts_and_large_arguments_lie_on_64_byte_boundaries(pool):
    # An array at an odd offset of a mapping is unaligned: slower, and NumPy sums it in another order
    # (buffered), so the last bits of a float sum would differ from the same sum on the driver.
    arr = np.random.default_rng(1).random(3 * MB)
    want = (True, 0, float(arr[::512].sum()))
    assert hpc.get(where.remote(hpc.put(arr))) == want
    assert hpc.get(where.remote(arr)) == want  # by value: through shared memory too
    got = hpc.get(make.remote("float64"))
    assert got.ctypes.data % 64 == 0


def test_each_get_is_its_own_writable_copy(pool):
    fut = big_array.remote(4, 2.0)
    a, b = hpc.get(fut), hpc.get(fut)
    a[:] = 9.0
    assert b[0] == 2.0 and hpc.get(fut)[-1] == 2.0  # a write into one value never shows in another
    del a, b, fut
    assert _wait_store_empty() == []


def test_a_dependent_task_reads_the_result_where_it_lies(pool):
    src = big_array.remote(4, 1.0)
    total, writable = hpc.get(checksum.remote(src))
    assert writable and total == 4 * MB // 8 - 1
    assert hpc.get(src)[0] == 1.0  # the dependent's write stayed its own
    del src
    assert _wait_store_empty() == []


def test_map_items_with_large_results(pool):
    values = hpc.get(hpc.map(_expected, ["float64", "fortran", "bytes"]))
    for got, kind in zip(values, ["float64", "fortran", "bytes"]):
        _same(got, _expected(kind))
    del values
    assert _wait_store_empty() == []


def test_a_released_future_frees_its_result_without_a_get(pool):
    fut = big_array.remote(8)
    hpc.wait([fut])
    assert len(_results_in_store()) == 1
    del fut
    assert _wait_store_empty() == []


def test_a_large_released_result_is_freed_by_the_background_deleter(pool):
    fut = big_array.remote(shm_store.UNLINK_LATER_BYTES // MB)  # deleted off the caller's thread
    assert hpc.get(fut)[-1] == 0.0
    del fut
    assert _wait_store_empty() == []


def test_a_result_that_arrives_after_its_cancel_is_freed(pool, tmp_path):
    marker = tmp_path / "cancelled"
    fut = stubborn_big.remote(str(marker))
    wait_for_file(f"{marker}.started", "started")  # running (a queued task would be dropped, never run)
    fut.cancel()
    wait_for_file(marker, "cancelled")
    assert _wait_store_empty() == []


def test_a_dead_workers_unannounced_results_are_swept(pool):
    backend = session.current().backend
    hpc.get([big_array.remote(0) for _ in range(2)])  # both workers up
    pid = backend.worker_pids()[0]
    # What a worker leaves when it dies between writing a result and sending its name.
    orphan = os.path.join(_store(), f"{shm_store.RESULT_PREFIX}{pid}-999")
    with open(orphan, "wb") as fh:
        fh.write(b"x" * 1024)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(orphan) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(orphan)


def test_the_worker_takes_its_next_task_before_the_driver_reads_a_large_result(tmp_path):
    """Event order: the driver's reading is held until the next task has run (or 10 s passed).

    Through the pipe, the worker blocks writing a 16 MB result that nobody reads, so its next
    task cannot start: the marker never appears while the read is held.
    """
    hpc.init(backend="local", workers=1)
    try:
        backend = session.current().backend
        # The worker is up and has said hello. touch() has not run yet: a function the pool knows nothing
        # about gets one task prefetched behind a running one (known-fast ones get more, slow ones none).
        hpc.get(big_array.remote(0))
        marker = tmp_path / "next-task-ran"
        order: list[str] = []
        real_read = backend._read
        held = threading.Event()

        def read(w):
            if not held.is_set():
                held.set()
                deadline = time.monotonic() + 10
                while not marker.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
                order.append("next task ran" if marker.exists() else "nothing ran")
                order.append("driver reads")
            real_read(w)

        backend._read = read
        big = big_array.remote(16)
        nxt = touch.remote(str(marker))
        assert hpc.get(nxt) == str(marker)
        assert hpc.get(big).nbytes == 16 * MB
        assert order == ["next task ran", "driver reads"]
    finally:
        hpc.shutdown()


def test_shutdown_removes_results_still_held():
    hpc.init(backend="local", workers=1)
    fut = big_array.remote(4)
    hpc.wait([fut])
    store = _store()
    assert len(os.listdir(store)) == 1
    hpc.shutdown()
    assert not os.path.exists(store)
    with pytest.raises(hpc.BackendError, match="freed when its runtime shut down"):
        hpc.get(fut)
    del fut  # its owner's late release finds nothing to delete, and says nothing
    gc.collect()


# -- large arguments by value: one shared copy for the pending tasks sent the same array ------------------
@hpc.remote
def wait_then_sum(a, gate: str) -> float:
    """Sum the argument once ``gate`` exists (keeps the calls pending together); writes into its own copy."""
    while not os.path.exists(gate):
        time.sleep(0.01)
    total = float(a[1:].sum())
    a[1:] = -1.0  # copy-on-write: the other tasks and the caller never see it
    return total


def test_one_array_by_value_to_several_tasks_is_copied_once(pool, tmp_path):
    backend = session.current().backend
    gate = str(tmp_path / "go")
    # 64 MB: each later call compares it for several ms, so every call keeps its driver span (> SPAN_MIN_S).
    arr = np.random.default_rng(3).random(8 * MB)
    want = float(arr[1:].sum())
    with hpc.trace() as trace:
        futures = [wait_then_sum.remote(arr, gate) for _ in range(6)]
        assert backend._arguments.pending() == 1  # six pending tasks, one copy in the store
        arr[5] = 1e6  # changed after those calls: the next call gets the new bytes, in a copy of its own
        changed = wait_then_sum.remote(arr, gate)
        assert backend._arguments.pending() == 2
        open(gate, "w").close()
        got = hpc.get(futures + [changed])
    assert got[:6] == [want] * 6 and got[6] == float(arr[1:].sum()) != want
    assert arr[1] != -1.0
    # Each task was still sent the array by value (what the trace and the findings count) ...
    df = trace.to_dataframe().sort_values("task_id")
    assert (df["bytes_in"] >= arr.nbytes).all()
    # ... while the driver's spans count what it copied: the array twice, the other calls a small pickle.
    spans = trace.driver_spans
    copied = sorted(int(b) for k, b in zip(spans["kind"], spans["bytes"]) if k == 0)
    assert [b >= arr.nbytes for b in copied].count(True) == 2
    assert all(b < 10_000 for b in copied[:-2])
    from eugo_lab import analysis

    finding = analysis.analyze(trace).finding("repeated-argument")
    assert finding is not None and finding.evidence["copies"] == 2
    assert "copied it into shared memory twice" in finding.verdict and "hpc.put" in finding.advice
    assert backend._arguments.pending() == 0
    assert [n for n in os.listdir(_store()) if n.startswith("args-")] == []


def test_results_held_by_the_notebook_hold_no_open_files(pool):
    # Python's mmap keeps a descriptor per mapping: 1,000 results held would reach a kernel's usual limit.
    hpc.get([big_array.remote(0) for _ in range(4)])  # the pool is whole (a worker replaced earlier has its pipes)
    before = len(os.listdir("/proc/self/fd"))
    held = hpc.get([big_array.remote(2, float(i)) for i in range(60)])
    assert [a[0] for a in held] == [float(i) for i in range(60)]
    opened = len(os.listdir("/proc/self/fd")) - before
    assert opened < 20, f"{opened} files opened for 60 results held"
    del held
    assert _wait_store_empty() == []
