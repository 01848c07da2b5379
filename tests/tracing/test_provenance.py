"""Provenance in the trace: what tasks returned, what their functions carried, what workers saw.

Graders use these facts to tell a value derived from the tasks' work from one computed in the
driver beside a decoy call; every fact here comes from the trace, never from a process counter.
"""

from __future__ import annotations

import gc
import math
import os

import numpy as np
import pandas as pd
import pytest
from tasks import square

from eugo_lab import hpc
from eugo_lab.analysis import analyze
from eugo_lab.contract import digest as digest_mod
from eugo_lab.tracing import Trace
from eugo_lab.tracing.digest import Digest, digest

# A notebook cell's functions are pickled by value (their module cannot be imported on a worker):
# these are made the same way, so what they capture travels inside their payload.
_CELL = '''
import numpy as np
BIG = np.arange(5_000_000 // 8, dtype="float64")  # 5 MB

def reads_global(i):
    return float(BIG[i])

def reads_argument(a, i):
    return float(a[i])

def chunk_sum(chunk):
    return int(sum(chunk))

def chunk_len(chunk):
    return len(chunk)
'''


@pytest.fixture(scope="module")
def cell() -> dict:
    ns: dict = {"__name__": "eugo_cell_provenance"}
    exec(compile(_CELL, "<cell>", "exec"), ns)
    return ns


# -- digest(): equality semantics, no runtime ---------------------------------------------------------
def test_digest_is_exact_for_ints_floats_arrays_and_pandas():
    assert digest(3) == digest(3) and digest(3) != digest(4) and digest(3).value == 3
    assert digest(0.1 + 0.2) != digest(0.3) and digest(0.5) == digest(0.5)
    assert digest(3) != digest(3.0) != digest(np.float64(3.0))
    assert digest(float("nan")) == digest(float("nan"))  # the hash, not NaN's ==, decides
    a = np.arange(12, dtype="int64").reshape(3, 4)
    assert digest(a) == digest(a.copy()) == digest(np.asfortranarray(a))  # data in C order: views agree
    assert digest(a) != digest(a.astype("int32")) and digest(a) != digest(a.reshape(4, 3))
    d = digest(a)
    assert (d.type, d.shape, d.nbytes, d.length) == ("numpy.ndarray", (3, 4), 96, 3)
    df = pd.DataFrame({"x": [1, 2, 3], "y": [0.5, 1.5, 2.5]})
    assert digest(df) == digest(df.copy()) and digest(df).type == "pandas.DataFrame"
    assert digest(df) != digest(df.assign(y=[0.5, 1.5, 2.0])) and digest(df) != digest(df.rename(columns={"x": "z"}))
    assert digest(df["x"]) == digest(pd.Series([1, 2, 3], name="x"))
    big = np.zeros(1_000_000)
    assert digest(big).sampled and digest(big) == digest(big.copy()) and digest(big) != digest(np.zeros(999_999))
    assert Digest.from_list(d.to_list()) == d and d.matches(a.copy())


# -- results on the real local pool ------------------------------------------------------------------------
def _frame(columns):
    import pandas as pd

    return pd.DataFrame(columns)


def test_results_digest_each_task_and_each_scalar_item_of_a_map(local2):
    arr = hpc.remote(np.ones)
    frame = hpc.remote(_frame)
    with hpc.trace() as t:
        singles = hpc.get([square.remote(i) for i in range(4)])
        a = hpc.get(arr.remote(100_000))  # 800 KB: digested on the worker
        df = hpc.get(frame.remote({"x": [1, 2]}))
        mapped = hpc.get(hpc.map(square, range(30)))
    res = t.trace.results("square")
    assert [r.digest.value for r in res] == singles + mapped
    assert [r.task_id for r in res] == sorted(r.task_id for r in res)
    assert all(r.digest == digest(v) for r, v in zip(res, singles + mapped))
    (ra,) = t.trace.results("ones")
    assert ra.digest == digest(a) and ra.digest.shape == (100_000,) and ra.digest.sampled
    assert t.trace.results("_frame")[0].digest == digest(df)
    again = Trace.from_dict(t.trace.to_dict())
    assert again.results() == t.trace.results() and again.results()[0].digest.value == 0


def test_a_task_renamed_with_options_keeps_the_function_it_ran(local2):
    from eugo_lab.exercises import measure
    from eugo_lab.tracing.recorder import LABELS_KEY

    with hpc.trace() as t:
        one = hpc.get(square.options(name="sq_task").remote(3))
        many = hpc.get(hpc.map(square.options(name="sq_map"), range(5)))
        plain = hpc.get(square.remote(4))
    assert (one, many, plain) == (9, [0, 1, 4, 9, 16], 16)
    # The trace names tasks by their label; its meta says which function each label ran.
    assert t.trace.task_counts()["sq_task"] == 1 and t.trace.task_counts()["square"] == 1
    assert t.trace.meta[LABELS_KEY] == {"sq_task": "square", "sq_map": "square"}
    assert measure.runs_function(t.trace, "sq_task", "square") and measure.runs_function(t.trace, "sq_map", "square")
    assert measure.runs_function(t.trace, "square", "square")
    assert not measure.runs_function(t.trace, "sq_task", "cube")
    assert not measure.runs_function(t.trace, "cube", "square")
    assert Trace.from_dict(t.trace.to_dict()).meta[LABELS_KEY] == {"sq_task": "square", "sq_map": "square"}
    with hpc.trace() as later:  # a new recording starts with no labels
        hpc.get(square.remote(2))
    assert later.trace.meta[LABELS_KEY] == {}


def test_tasks_run_in_the_notebooks_process_are_told_by_their_workers_pid(local2):
    import socket

    from eugo_lab.exercises import measure

    me = (socket.gethostname(), os.getpid())
    with hpc.trace() as pool:
        hpc.get([square.remote(i) for i in range(3)])
    assert measure.tasks_in_process(pool.trace, "square", *me) == 0  # worker processes
    hpc.shutdown()
    hpc.init(backend="threads", workers=2)
    try:
        with hpc.trace() as threads:
            hpc.get([square.remote(i) for i in range(3)])
        assert measure.tasks_in_process(threads.trace, "square", *me) == 3  # threads of this process
        assert measure.tasks_in_process(threads.trace, "square", me[0], me[1] + 1) == 0
    finally:
        hpc.shutdown()
        hpc.init(backend="local", workers=2)  # what the fixture shuts down


def test_a_decoy_is_told_from_an_honest_run_by_the_trace_alone(local2, cell):
    data = list(range(1000))
    chunks = [data[i:i + 100] for i in range(0, 1000, 100)]
    honest_fn, decoy_fn = hpc.remote(cell["chunk_sum"]), hpc.remote(cell["chunk_len"])
    with hpc.trace() as honest:
        total = sum(hpc.get([honest_fn.remote(c) for c in chunks]))
    with hpc.trace() as decoy:
        hpc.get([decoy_fn.remote(c) for c in chunks])  # the taught API runs, and returns something else
        decoy_total = sum(data)  # computed in the driver
    assert total == decoy_total

    def derived(trace: Trace, value: int) -> bool:  # what a grader's combine=sum helper does
        return digest(sum(r.digest.value for r in trace.results())) == digest(value)

    assert derived(honest.trace, total) and not derived(decoy.trace, decoy_total)


# -- what the function carried -----------------------------------------------------------------------------
def test_a_function_reading_a_5mb_global_shows_its_captured_bytes_and_the_finding(local2, cell):
    fn = hpc.remote(cell["reads_global"])
    with hpc.trace() as t:
        hpc.get([fn.remote(i) for i in range(6)])
    (shipped,) = [f for f in t.trace.functions_shipped if f.function == "reads_global"]
    assert shipped.captured[0] == ("BIG", 5_000_000) and shipped.captured_bytes >= 5_000_000
    assert shipped.payload_bytes > 5_000_000 and 1 <= shipped.sends <= 2  # once per worker that ran one
    assert t.trace.bytes_shipped >= shipped.payload_bytes * shipped.sends
    assert int(t.trace.tasks["bytes_in"].sum()) < 10_000  # the arguments never showed it
    (finding,) = [f for f in analyze(t.trace).findings if f.code == "captured-object"]
    assert "'BIG'" in finding.verdict and "(5 MB)" in finding.verdict and "hpc.put" in finding.advice
    assert finding.evidence["saved_bytes"] == 5_000_000 * (shipped.sends - 1) and finding.saves is not None
    with hpc.trace() as again:  # the workers hold it now: nothing shipped, no finding
        hpc.get([fn.remote(i) for i in range(2)])
    assert not [f for f in again.trace.functions_shipped if f.function == "reads_global"]
    assert not [f for f in analyze(again.trace).findings if f.code == "captured-object"]


def test_a_partials_bound_argument_is_counted_like_a_captured_global(local2, cell):
    # hpc.map(partial(f, big), items): big travels inside the function's pickle, never as an argument.
    import functools

    with hpc.trace() as t:
        hpc.get(hpc.map(functools.partial(cell["reads_argument"], cell["BIG"]), range(400)))
        gc.collect()  # nothing holds the partial's record now: the region must still see what it shipped
    (shipped,) = [f for f in t.trace.functions_shipped if f.function == "partial"]
    assert shipped.captured[0] == ("bound argument 'a'", 5_000_000) and shipped.captured_bytes >= 5_000_000
    assert t.trace.bytes_shipped >= 5_000_000 * shipped.sends
    found = [f for f in analyze(t.trace).findings if f.code == "captured-object"]
    if shipped.sends > 1:  # sent once (one worker ran every batch), a put would save nothing
        assert "bound argument 'a'" in found[0].verdict and "functools.partial" in found[0].advice


def test_the_same_work_through_hpc_put_carries_nothing_and_the_worker_saw_the_ref(local2, cell):
    fn = hpc.remote(cell["reads_argument"])
    with hpc.trace() as t:
        ref = hpc.put(cell["BIG"])
        hpc.get([fn.remote(ref, i) for i in range(6)])
    (shipped,) = [f for f in t.trace.functions_shipped if f.function == "reads_argument"]
    assert shipped.captured_bytes < 1000 and shipped.payload_bytes < 5000
    assert not [f for f in analyze(t.trace).findings if f.code == "captured-object"]
    assert t.trace.puts["ref"].tolist() == [ref.ref_id] and t.trace.puts["bytes"][0] >= 5_000_000
    assert t.trace.resolved_refs("reads_argument") == {ref.ref_id}


# -- puts and refused requests come from the trace --------------------------------------------------------
def test_puts_and_refused_requests_belong_to_their_own_region(local2):
    gpu_square = square.options(gpus=1)
    with hpc.trace() as first:
        hpc.put(1)
        hpc.put(2)
        with pytest.raises(hpc.ResourceRequestError):
            hpc.get(gpu_square.remote(3))
    with hpc.trace() as second:
        hpc.put(3)
    assert len(first.trace.puts["ref"]) == 2 and len(first.trace.refused) == 1
    assert first.trace.refused[0].request == {"GPU": 1} and first.trace.refused[0].function == "square"
    assert len(second.trace.puts["ref"]) == 1 and second.trace.refused == ()
    again = Trace.from_dict(first.trace.to_dict())
    assert again.refused == first.trace.refused and again.puts["ref"].tolist() == first.trace.puts["ref"].tolist()
    from eugo_lab.contract import errors, refs

    assert not hasattr(refs, "refs_made") and not hasattr(errors, "requests_refused")


# -- facts from inside the task --------------------------------------------------------------------------
def _numpy_dot(n):
    import numpy as np

    a = np.ones((n, n))
    return float((a @ a)[0, 0])


def test_blas_threads_are_recorded_by_the_worker(local2):
    fn = hpc.remote(_numpy_dot)
    hpc.get(fn.remote(4))  # NumPy loaded in the workers (the first traced body would see none yet)
    hpc.get([fn.remote(4) for _ in range(4)])
    with hpc.trace() as t:
        hpc.get([fn.remote(64) for _ in range(4)])
    threads = t.trace.blas_threads("_numpy_dot")
    assert len(threads) == 4
    # The thread guard gives each of the 2 workers cores / 2 threads (at least 1).
    assert set(threads.values()) == {max(1, (os.cpu_count() or 2) // 2)}


def _held():
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


@pytest.mark.skipif(any(os.path.exists(f"/dev/nvidia{i}") for i in range(16)), reason="this machine has a GPU")
def test_a_named_gpu_on_a_machine_without_one_is_recorded_as_no_device():
    hpc.init(workers=2, gpus=[0])
    try:
        with hpc.trace() as t:
            assert hpc.get(hpc.remote(_held).options(gpus=1).remote()) == "0"  # the engine assigned device 0
        assert t.trace.gpu_tasks() == {0: 1}
        assert list(t.trace.gpu_devices().values()) == [-1]  # ...and the worker found none
    finally:
        hpc.shutdown()


def test_an_untraced_task_sends_no_facts():
    from eugo_lab.backends._worker import execute
    from eugo_lab.contract.serialization import dumps_args

    args, _, _ = dumps_args((3,), {}, function="square")
    assert execute(abs, "abs", args)[3].facts is None
    facts = execute(abs, "abs", args, probe=True)[3].facts
    assert facts is not None and facts[0] is None  # a small result: digested on the driver


def test_digest_module_imports_nothing_heavy():
    assert not any(math.isnan(x) for x in (digest_mod.FULL_HASH_BYTES, digest_mod.SAMPLE_BLOCK))
    import subprocess
    import sys

    code = "import sys, eugo_lab.contract.digest; print('numpy' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# -- Dask on a real loopback cluster: digests and function payloads ----------------------------------------
def test_dask_records_results_and_ships_the_payload_with_every_task(cell):
    pytest.importorskip("distributed")
    from _clusters import dask_cli_cluster

    with dask_cli_cluster(n_workers=1) as c:
        hpc.init(address=c.address)
        try:
            fn = hpc.remote(cell["reads_global"])
            with hpc.trace() as t:
                values = hpc.get([fn.remote(i) for i in range(3)])
            assert [r.digest for r in t.trace.results("reads_global")] == [digest(v) for v in values]
            (shipped,) = [f for f in t.trace.functions_shipped if f.function == "reads_global"]
            # The payload is an argument of each Dask task: it travels with every one, not once per worker.
            assert shipped.sends == 3 and shipped.captured[0] == ("BIG", 5_000_000)
            assert any(f.code == "captured-object" for f in analyze(t.trace).findings)
        finally:
            hpc.shutdown()


def test_a_notebook_function_reading_a_global_array_is_measured_through_the_runtimes_wrappers(monkeypatch):
    # In a %%eugo cell the record carries a wrapper (the automatic JIT trial) around the function: the
    # globals measured must be those of the function inside, or the captured-object finding never fires.
    from _exercise_cells import shell

    from eugo_lab.analysis import analyze

    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip = shell()
    ip.run_cell("import numpy as np\nfrom eugo_lab import hpc\nbig = np.arange(1_000_000, dtype='float64')\n"
                "@hpc.remote\ndef part_sum(i):\n    return float(big[i::4].sum())\n").raise_error()
    ip.run_cell_magic("eugo", "-w 2 --no-live", "total = sum(hpc.get([part_sum.remote(i) for i in range(4)]))")
    trace = ip.user_ns["hpc"].last_trace()
    (shipped,) = [f for f in trace.functions_shipped if f.function == "part_sum"]
    assert shipped.captured[0] == ("big", shipped.captured_bytes) and shipped.captured_bytes >= 8_000_000
    assert "captured-object" in analyze(trace).codes()


def test_a_frame_and_its_pickled_copy_have_one_digest_and_another_index_does_not():
    import pickle

    import pandas as pd

    from eugo_lab.tracing.digest import digest

    df = pd.DataFrame({"a": [1, 2, 3], "b": [1.5, 2.5, 3.5]})  # a RangeIndex: another index type once pickled
    assert digest(df) == digest(pickle.loads(pickle.dumps(df)))
    assert digest(df["b"]) == digest(pickle.loads(pickle.dumps(df["b"])))
    assert digest(df) != digest(df.set_axis([5, 6, 7]))


def test_each_hpc_map_call_is_noted_with_when_it_returned(local2):
    import time

    before = time.time()
    with hpc.trace() as t:
        hpc.get(hpc.map(square, range(30)))
        hpc.get(hpc.map(square.options(name="sq2"), range(3)))
    calls = t.trace.meta["map_calls"]
    assert [name for name, _ in calls] == ["square", "sq2"]
    assert before <= calls[0][1] <= calls[1][1] <= time.time()
