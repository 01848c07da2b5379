"""Which of a cell's functions ran in the notebook's process: the monitor, and its record in a graded cell's trace.

The unit tests compile code under a file name of their own (what IPython does with a cell) and count
calls with :class:`~eugo_lab.tracing.driver_calls.DriverCalls`; the cell tests run ``%%eugo --exercise``
in an IPython shell and read the record the trace's ``meta`` carries. Counts, never times: nothing
here depends on the machine's speed.
"""

from __future__ import annotations

import sys
import threading

import pytest
from _clusters import worker_env
from _exercise_cells import run_exercise

from eugo_lab.contract import phases
from eugo_lab.exercises import measure
from eugo_lab.hpc import api
from eugo_lab.tracing.driver_calls import DriverCalls, unwatched

CELL_FILE = "<eugo test cell>"
SOURCE = """
def score(x):
    return x * 2

def helper(xs):
    return [score(x) for x in xs]
"""


def cell_functions() -> dict:
    """``score`` and ``helper``, compiled as if a notebook cell had defined them."""
    ns: dict = {}
    exec(compile(SOURCE, CELL_FILE, "exec"), ns)
    return ns


def test_counts_the_cells_functions_and_what_they_call():
    ns = cell_functions()
    with DriverCalls({CELL_FILE}) as calls:
        ns["helper"](range(7))
        ns["score"](1)
        sorted([3, 1, 2])  # not the cell's code: not counted
    assert calls.calls == {"helper": 1, "score": 8}


def test_calls_kept_by_value_hold_the_objects_given_and_returned():
    ns: dict = {}
    exec(compile("def handle(r):\n    r = r + 1  # rebinds its parameter: the object it was given is kept\n"
                 "    return r\n\ndef other(x):\n    return handle(x)\n", CELL_FILE, "exec"), ns)
    given = [float(i) + 0.5 for i in range(3)]
    with DriverCalls({CELL_FILE}, values_of=("handle",)) as calls:
        out = [ns["other"](g) for g in given]
    kept = calls.values
    assert set(kept) == {"handle"} and calls.calls == {"handle": 3, "other": 3}
    assert [args[0] is g for (args, _), g in zip(kept["handle"], given)] == [True] * 3
    assert [ret is o for (_, ret), o in zip(kept["handle"], out)] == [True] * 3
    assert calls.values_dropped == 0


def test_calls_kept_by_value_are_capped(monkeypatch):
    from eugo_lab.tracing import driver_calls

    monkeypatch.setattr(driver_calls, "MAX_CALLS_KEPT", 2)
    ns = cell_functions()
    with DriverCalls({CELL_FILE}, values_of=("score",)) as calls:
        ns["helper"](range(5))
    assert len(calls.values["score"]) == 2 and calls.values_dropped == 3 and calls.calls["score"] == 5


def test_a_task_body_on_a_thread_of_this_process_does_not_count():
    ns = cell_functions()

    def task_thread() -> None:  # what the threads engine's execute() does around a task's body
        phases.begin_task()
        try:
            ns["helper"](range(5))
        finally:
            phases.end_task()
        ns["score"](0)  # the same thread outside a task: the notebook's own work

    with DriverCalls({CELL_FILE}) as calls:
        t = threading.Thread(target=task_thread)
        t.start()
        t.join()
    assert calls.calls == {"score": 1}


def test_the_hook_goes_away_when_the_block_raises_and_a_previous_profiler_comes_back():
    ns = cell_functions()
    seen: list[str] = []

    def earlier(frame, event, arg):  # a profiler the notebook had before the cell
        if event == "call":
            seen.append(frame.f_code.co_name)

    sys.setprofile(earlier)
    try:
        with pytest.raises(KeyboardInterrupt), DriverCalls({CELL_FILE}) as calls:
            ns["score"](1)
            raise KeyboardInterrupt
        assert sys.getprofile() is earlier
        ns["helper"](range(2))
    finally:
        sys.setprofile(None)
    assert calls.calls == {"score": 1}  # nothing counted after the block
    assert "helper" in seen


def test_a_thread_the_cell_started_counts_and_drops_the_hook_after_the_block():
    ns = cell_functions()
    go, done = threading.Event(), threading.Event()
    after: list = []

    def worker() -> None:
        ns["score"](1)
        go.wait(30)
        ns["score"](2)  # after the block: not counted, and the hook leaves this thread
        after.append(sys.getprofile())
        done.set()

    with DriverCalls({CELL_FILE}) as calls:
        t = threading.Thread(target=worker)
        t.start()
        while not t.is_alive():
            pass
    go.set()
    done.wait(30)
    t.join()
    assert calls.calls == {"score": 1}
    assert after == [None]


def test_a_call_through_a_stand_in_counts_once_even_when_the_code_does_not_run():
    ns = cell_functions()

    class StandIn:  # a JIT's wrapper: __wrapped__ names the function, __call__ may run a compiled version
        def __init__(self, fn, plain):
            self.__wrapped__, self.plain = fn, plain

        def __call__(self, *args):
            return self.__wrapped__(*args) if self.plain else args[0] * 2

    plain, compiled = StandIn(ns["score"], True), StandIn(ns["score"], False)
    with DriverCalls({CELL_FILE}, wrappers={StandIn.__call__.__code__}) as calls:
        for _ in range(3):
            plain(1)
        for _ in range(2):
            compiled(1)
    assert calls.calls == {"score": 5}


def test_the_runtimes_entry_points_run_unhooked_and_give_the_hook_back():
    # The runtime's submission path is call-heavy: hooked, it runs several times slower, which a run then measures.
    from eugo_lab import hpc
    from eugo_lab.hpc.remote_function import RemoteFunction

    seen: list = []

    @unwatched
    def entry():
        seen.append(sys.getprofile())

    with DriverCalls({CELL_FILE}):
        hook = sys.getprofile()
        entry()
        assert sys.getprofile() is hook
    entry()  # no hook installed: the plain call
    assert seen == [None, None]
    for fn in (RemoteFunction.remote, RemoteFunction.map, hpc.get, hpc.wait, hpc.put, hpc.map):
        assert getattr(fn, "__wrapped__", None) is not None, fn


SETUP = """
from eugo_lab import hpc

@hpc.remote
def score(x):
    return x * 3 + 1
"""


def _driver_calls_of_graded_cell(cell: str, line: str, *functions: str) -> dict[str, int]:
    """Run ``cell`` as the batching exercise; the calls of each of ``functions`` its trace saw in the notebook."""
    run_exercise("batching", cell, SETUP, line=line)
    trace = api.last_trace()
    return {fn: measure.driver_calls(trace, fn) for fn in functions}


@pytest.mark.parametrize("line", ["-w 2 --no-live", "-b threads -w 2 --no-live"])
def test_a_graded_cell_records_where_its_functions_ran(line):
    # The graded value scored in a loop in the notebook, a decoy task of the right name beside it.
    shortcut = ("decoy = score.remote(0)\n"
                "def by_hand(xs):\n    return [score(x) for x in xs]\n"
                "results = by_hand(range(40))\nhpc.get(decoy)\n")
    assert _driver_calls_of_graded_cell(shortcut, line, "score", "by_hand") == {"score": 40, "by_hand": 1}
    # Honest: its own function around hpc.map, and hand-made batches; every call of score ran in a task.
    honest = ("def score_all(xs):\n    return list(hpc.map(score, xs, batch=10))\n"
              "def batch(xs):\n    return [score(x) for x in xs]\n"
              "firsts = score_all(range(40))\n"
              "chunks = [list(range(i, i + 10)) for i in range(0, 40, 10)]\n"
              "rest = hpc.get([hpc.remote(batch).remote(c) for c in chunks])\n")
    assert _driver_calls_of_graded_cell(honest, line, "score", "score_all") == {"score": 0, "score_all": 1}
    assert sys.getprofile() is None


def test_an_unwatched_trace_knows_nothing():
    from eugo_lab import hpc

    hpc.init(backend="threads", workers=1)
    with hpc.trace() as t:
        pass
    assert measure.driver_calls(t.trace, "score") is None


# Someone else's withdrawn asynchronous exception (PyThreadState_SetAsyncExc(id, NULL), as timeout helpers
# do) leaves CPython 3.11 marking one pending with no thread to take it; under the hook's sys.setprofile
# every function entry then spins on that mark forever. The hook clears the mark first.
STUCK_MARK = """
import ctypes, threading
from eugo_lab.tracing.driver_calls import DriverCalls
parked = threading.Event()
t = threading.Thread(target=parked.wait, daemon=True)
t.start()
ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(KeyError))
ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), None)  # withdrawn: the mark stays
def work():
    return 7
with DriverCalls([__file__], [work.__code__]) as calls:
    value = work()
print(value, calls.calls, flush=True)
"""


def test_a_mark_of_a_withdrawn_async_exception_does_not_hang_the_hook(tmp_path):
    import subprocess

    script = tmp_path / "stuck.py"
    script.write_text(STUCK_MARK)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env=worker_env())
    assert out.stdout.split(None, 1) == ["7", "{'work': 1}\n"], out.stderr[-2000:]
