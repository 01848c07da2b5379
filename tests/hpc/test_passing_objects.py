"""Objects and functions as people pass them: bound methods, generators, stored arrays, open files, errors."""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np
import pytest

from eugo_lab import hpc
from eugo_lab.backends._worker import _read_only_write
from eugo_lab.contract.serialization import dumps_args, dumps_function, dumps_value
from eugo_lab.hpc import remote_function


def test_a_generator_function_is_refused_at_decoration_saying_what_to_do():
    with pytest.raises(TypeError, match=r"gen\(\): it is a generator function.* Return a list instead"):
        @hpc.remote
        def gen(n):
            yield from range(n)


def test_an_async_function_is_refused_at_decoration():
    with pytest.raises(TypeError, match=r"it is an async function.* Make it a plain def"):
        @hpc.remote(retries=0)
        async def fetch(url):
            return url


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def increment(self) -> int:
        self.n += 1
        return self.n

    @classmethod
    def make(cls) -> Counter:
        return cls()


def test_a_bound_method_warns_once_that_each_worker_changes_its_own_copy():
    remote_function._warned_methods.clear()
    c = Counter()
    with pytest.warns(UserWarning, match=r"Counter.increment, a method bound to one object: .* the object in the "
                                         r"notebook never changes.* Return the new state"):
        hpc.remote(c.increment)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hpc.remote(Counter().increment)  # the same method again: said once
        hpc.remote(Counter.make)  # a class method holds no object's state: nothing to say


def test_an_open_file_is_refused_by_every_route_with_the_same_advice(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("hello")
    with open(path) as fh:
        with pytest.raises(hpc.SerializationError, match=r"argument 0 of read\(\).*open file .*data.txt.* is not "
                                                         r"sent to workers.*pass its path and open it in the task"):
            dumps_args((fh,), {}, function="read")

        def uses_global():
            return fh.read()

        with pytest.raises(hpc.SerializationError, match=r"uses the variable 'fh'.*open file.*pass its path"):
            dumps_function(uses_global, function="uses_global")
        with pytest.raises(TypeError, match="open file"):
            dumps_value(fh)  # a task returning an open file: the worker reports it as unpicklable


def test_a_write_into_a_read_only_argument_says_stored_arrays_are_read_only():
    a = np.zeros(3)
    a.flags.writeable = False
    with pytest.raises(ValueError) as info:
        a[0] = 1
    exc = info.value
    err = _read_only_write(exc, "scale", (a,), {})
    assert type(err) is ValueError and err.__traceback__ is not None
    assert "scale() wrote into an array it was given read-only" in str(err)
    assert "Return the new values instead" in str(err)
    # A writeable argument: the message is NumPy's own (some other array was read-only).
    assert _read_only_write(exc, "scale", (np.zeros(3),), {}) is exc
    other = ValueError("invalid literal")
    assert _read_only_write(other, "scale", (a,), {}) is other


def write_first(a):
    a[0] = 1.0
    return a


def fail_once():
    raise KeyError("missing")


@pytest.fixture
def local1():
    hpc.init(backend="local", workers=1)
    yield hpc
    hpc.shutdown()


def test_a_task_writing_into_an_hpc_put_array_is_told_to_return_values_instead(local1):
    ref = hpc.put(np.zeros(4))
    with pytest.raises(ValueError, match=r"write_first\(\) wrote into an array it was given read-only. Arrays "
                                         r"stored with hpc.put\(\)"):
        hpc.get(hpc.remote(write_first).remote(ref))


def test_an_hpc_map_item_writing_into_a_stored_array_gets_the_same_explanation(local1):
    ref = hpc.put(np.zeros(4))
    futures = hpc.map(write_first, [ref, ref], batch=2)
    with pytest.raises(ValueError, match=r"write_first\(\) wrote into an array it was given read-only"):
        hpc.get(futures)


def test_an_exception_that_is_never_retried_does_not_count_attempts(local1):
    with pytest.raises(KeyError) as info:
        hpc.get(hpc.remote(fail_once).remote())
    assert "task fail_once() failed (on worker 0)" in str(info.value)
    assert "attempt" not in str(info.value)
    retried = hpc.remote(fail_once, retries=1, retry_exceptions=(KeyError,))
    with pytest.raises(KeyError, match=r"attempt 2 of 2 on worker 0"):
        hpc.get(retried.remote())


def stubborn_nap():
    while True:
        try:
            time.sleep(10)
        except BaseException:  # noqa: BLE001 - stays in the runtime's table until its grace runs out
            pass


def test_tasks_waited_on_then_cancelled_are_not_reported_as_never_waited_on():
    # An Interrupt inside get() cancels what get() was waiting on; a task slow to stop stays in the runtime's
    # table until its worker is killed (cancel_grace), which is when the trace closes here.
    hpc.init(backend="local", workers=1, cancel_grace=60)
    try:
        with hpc.trace(settle=0) as t:
            f = hpc.remote(stubborn_nap).remote()
            with pytest.raises(hpc.GetTimeoutError):
                hpc.get(f, timeout=0.2)
            hpc.cancel(f)
        assert "unwaited_tasks" not in t.trace.meta, t.trace.meta
    finally:
        hpc.shutdown()


def test_an_argument_is_sized_by_what_it_travels_as_never_by_what_it_says():
    """``wire_bytes``: the pickle and its buffers, whatever ``nbytes`` or ``__sizeof__`` an object reports."""
    import sys

    from eugo_lab.contract.serialization import wire_bytes

    class Small:  # a wrapper that says it is tiny
        nbytes = 64

        def __init__(self, a):
            self.a = a

        def __sizeof__(self):
            return 64

    a = np.ones(1_000_000)
    assert wire_bytes(a) == a.nbytes
    assert wire_bytes(Small(a)) >= a.nbytes and sys.getsizeof(Small(a)) < 100
    assert 8_000 < wire_bytes([1.5] * 1000) < 10_000
    assert wire_bytes(threading.Lock()) == 0  # no pickler takes it: nothing to count


def test_an_attribute_named_like_a_global_is_not_a_captured_global():
    """``gains[picks].mean()`` spells ``mean``; with a global ``mean`` beside it, only ``gains`` travels."""
    from eugo_lab.contract.serialization import captured_sizes

    namespace = {"np": np, "gains": np.ones(1000), "mean": np.ones(5000)}
    exec("def channel_mean(seed):\n"
         "    return float(gains[np.arange(seed)].mean())\n"
         "def nested(x):\n"
         "    def inner():\n"
         "        return mean.sum()\n"
         "    return inner()\n", namespace)
    assert [name for name, _ in captured_sizes(namespace["channel_mean"], 10**9)] == ["gains"]
    assert [name for name, _ in captured_sizes(namespace["nested"], 10**9)] == ["mean"]  # a nested function's too
