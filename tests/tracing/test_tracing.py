"""Recording: regions, subscribers, columnar memory, JSON/Perfetto/pandas exports."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
from trace_builder import TraceBuilder

from eugo_lab import hpc
from eugo_lab.contract.row import TaskStats, pack_tail
from eugo_lab.tracing import BlockEvent, Recorder, TaskEvent
from eugo_lab.tracing.trace import SCHEMA_VERSION, Trace


@hpc.remote
def work(x):
    with hpc.phase("compute"):
        time.sleep(0.01)
    return x


def _stats(start: float, body: float, phases=None, ends=None):
    return TaskStats(start, body, body / 2, 0.001, 0.002, 100, 50, phases, ends, None)


def _fast(rec: Recorder, tid: int, worker: int, received: float, start: float, end: float) -> None:
    """A plain task as the runtime's hot path records it: the worker packed the row's tail."""
    tail = pack_tail(start, end, 0.1, 0.0, 0.0, 0.0, 10, 20)
    rec.record_attempt(tid, 1, "f", worker, 0, -1, 1.0, 1.0, received,
                       TaskStats(start, end - start, 0.1, 0.0, 0.0, 10, 20, None, None, tail))


def test_recorder_is_inactive_without_regions_or_subscribers():
    rec = Recorder()
    assert not rec.active
    mark = rec.open_region()
    assert rec.active
    rec.close_region(mark, {"backend": "test", "workers": 1})
    assert not rec.active
    unsubscribe = rec.subscribe(lambda e: None)
    assert rec.active
    unsubscribe()
    assert not rec.active


def test_regions_slice_their_own_rows_and_nest():
    rec = Recorder()
    outer = rec.open_region()
    rec.record_task(task_id=1, attempt=1, function="f", worker=0, status=0, batch=-1, submit=10.0, ready=10.0,
                    received=11.5, stats=_stats(10.1, 1.0, phases=[("read", 0.0, 0.5, 0.1)]))
    inner = rec.open_region()
    rec.record_task(task_id=2, attempt=1, function="g", worker=1, status=1, batch=-1, submit=10.0, ready=10.0,
                    received=12.0, stats=_stats(10.2, 1.5))
    rec.record_block("get", 10.0, 12.0, 2, "cell.py:3")
    t_inner = rec.close_region(inner, {"backend": "test", "workers": 2})
    t_outer = rec.close_region(outer, {"backend": "test", "workers": 2})
    assert list(t_inner.tasks["task_id"]) == [2]
    assert list(t_outer.tasks["task_id"]) == [1, 2]
    assert t_outer.functions[t_outer.tasks["function"][1]] == "g"
    # start is the body's start: the worker's wall clock plus the argument unpickling time
    assert t_outer.tasks["start"][0] == pytest.approx(10.101)
    assert t_outer.tasks["end"][0] == pytest.approx(11.101)
    assert list(t_outer.phases["row"]) == [0]
    assert t_outer.phases["start"][0] == pytest.approx(10.101)
    assert len(t_inner.phases["row"]) == 0
    assert t_outer.blocks["futures"].tolist() == [2]
    with pytest.raises(ValueError):
        t_outer.tasks["start"][0] = 0.0  # immutable


def test_batch_items_become_one_row_each():
    rec = Recorder()
    mark = rec.open_region()
    rec.record_task(task_id=7, attempt=1, function="f", worker=0, status=0, batch=7, submit=1.0, ready=1.0,
                    received=2.0, stats=_stats(1.0, 0.3, ends=[0.1, 0.2, 0.3]), item_ids=[11, 12, 13],
                    item_status=[0, 1, 0])
    t = rec.close_region(mark, {"workers": 1})
    assert t.tasks["task_id"].tolist() == [11, 12, 13]
    assert t.tasks["status"].tolist() == [0, 1, 0]
    assert np.allclose(t.tasks["end"] - t.tasks["start"], [0.1, 0.1, 0.1])
    assert t.tasks["batch"].tolist() == [7, 7, 7]


def test_subscribers_receive_task_and_block_events():
    rec = Recorder()
    events = []
    rec.subscribe(events.append)
    rec.record_task(task_id=1, attempt=2, function="f", worker=3, status=2, batch=-1, submit=1.0, ready=1.0,
                    received=2.0, stats=None)
    rec.record_block("wait", 1.0, 2.0, 4, "x.py:1")
    assert isinstance(events[0], TaskEvent) and events[0].status == "crashed" and events[0].attempt == 2
    assert isinstance(events[1], BlockEvent) and events[1].futures == 4


def test_a_million_task_rows_stay_compact():
    rec = Recorder()
    mark = rec.open_region()
    n = 1_000_000
    ends = (np.arange(1, n + 1) * 1e-6).tolist()
    rec.record_task(task_id=1, attempt=1, function="f", worker=0, status=0, batch=1, submit=0.0, ready=0.0,
                    received=2.0, stats=_stats(0.0, 1.0, ends=ends), item_ids=list(range(n)))
    live_bytes = rec.nbytes
    assert live_bytes / n <= 200  # columnar: ~128 bytes a row, far from a Python object per field
    t = rec.close_region(mark, {"workers": 1})
    assert len(t) == n
    assert sum(a.nbytes for a in t.tasks.values()) < 200 * 2**20


def test_real_trace_exports(local2, tmp_path):
    with hpc.trace() as t:
        hpc.get([work.remote(i) for i in range(6)])
    trace = t.trace
    assert hpc.last_trace() is trace
    assert repr(trace) == "<Trace 6 task rows, 1 functions, backend=local, workers=2>"

    df = trace.to_dataframe()
    assert len(df) == 6 and set(df["worker"]) <= {0, 1}
    assert (df["start"] >= df["submit"] - 0.05).all() and (df["end"] <= df["received"] + 0.05).all()
    assert (df["cpu"] <= df["duration"] + 0.01).all()

    path = tmp_path / "trace.json"
    trace.save(str(path))
    back = Trace.load(str(path))
    assert back.to_dataframe().equals(df)
    assert back.phases_dataframe().equals(trace.phases_dataframe())

    chrome = trace.to_chrome_trace(str(tmp_path / "perfetto.json"))
    slices = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
    assert sum(e["cat"] == "ok" for e in slices) == 6
    assert sum(e["cat"] == "phase" for e in slices) == 6
    assert sum(e["cat"] == "blocking" for e in slices) == 1
    assert json.loads((tmp_path / "perfetto.json").read_text())["traceEvents"]


def test_loading_another_schema_version_is_a_clear_error(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(ValueError, match="schema_version .*Upgrade eugo_lab, or re-record"):
        Trace.load(str(path))


def test_no_recording_outside_regions(local2):
    rt = hpc.api.session.current()
    hpc.get([work.remote(i) for i in range(3)])
    assert rt.recorder.rows_recorded == 0


def test_clocks_of_other_hosts_are_aligned_to_the_driver():
    import socket

    rec = Recorder()
    rec.worker_seen(0, socket.gethostname(), 1)
    rec.worker_seen(1, "other-host", 2)
    mark = rec.open_region()
    # Worker 1's clock runs 5 s ahead: its task "starts" 5 s after the driver received the result.
    for tid, worker, start in ((1, 0, 100.1), (2, 1, 105.1)):
        rec.record_task(task_id=tid, attempt=1, function="f", worker=worker, status=0, batch=-1, submit=100.0,
                        ready=100.0, received=100.5, stats=TaskStats(start, 0.2, 0.2, 0.0, 0.0, 1, 1, None, None, None))
    t = rec.close_region(mark, {"workers": 2})
    starts = t.tasks["start"].tolist()
    assert starts[0] == pytest.approx(100.1)  # same host: untouched
    assert 100.0 <= starts[1] <= 100.3 and t.tasks["end"][1] - starts[1] == pytest.approx(0.2)


@hpc.remote
def nap(seconds, *_inputs):
    time.sleep(seconds)
    return seconds


def test_dependencies_are_recorded_and_give_the_exact_critical_path(local2, tmp_path):
    from eugo_lab.analysis import critical_path

    with hpc.trace() as t:
        a = nap.remote(0.2)
        b = nap.remote(0.2, a)
        c = nap.remote(0.2, b, a)
        side = nap.remote(0.3)
        hpc.get([c, side])
    trace = t.trace
    edges = sorted(zip(trace.deps["task"].tolist(), trace.deps["on"].tolist()))
    assert edges == sorted([(b.task_id, a.task_id), (c.task_id, b.task_id), (c.task_id, a.task_id)])
    cp = critical_path(trace)
    assert cp.exact and cp.task_ids == (a.task_id, b.task_id, c.task_id)
    path = tmp_path / "deps.json"
    trace.save(str(path))
    again = Trace.load(str(path))
    assert again.deps["task"].tolist() == trace.deps["task"].tolist()
    assert critical_path(again).task_ids == cp.task_ids


def test_a_trace_saved_without_dependency_edges_still_loads():
    rec = Recorder()
    mark = rec.open_region()
    rec.record_task(task_id=1, attempt=1, function="f", worker=0, status=0, batch=-1, submit=1.0, ready=1.0,
                    received=1.2, stats=_stats(1.0, 0.1))
    doc = rec.close_region(mark, {"workers": 1}).to_dict()
    del doc["deps"]
    del doc["meta"]["deps_recorded"]
    t = Trace.from_dict(doc)
    assert len(t.deps["task"]) == 0 and len(t) == 1


def test_rows_from_every_path_keep_their_order_and_phase_rows():
    rec = Recorder()
    rec.worker_seen(0, "", 1)
    rec.worker_seen(1, "", 2)
    rec.function_code("f")
    outer = rec.open_region()
    # fast rows (as the runtime appends them), then a task with phases, a map batch, more fast rows
    for tid in (1, 2):
        _fast(rec, tid, 0, 1.3, 1.1, 1.2)
    assert len(rec._pending) == 2  # they took the fast path
    rec.record_task(task_id=3, attempt=1, function="g", worker=1, status=0, batch=-1, submit=1.0, ready=1.0,
                    received=2.0, stats=_stats(1.0, 0.5, phases=[("read", 0.0, 0.2, 0.0)]))
    cursor, _ = rec.read_since(None)
    ends = np.array([0.1, 0.2], dtype=np.float64).tobytes()  # what workers send
    rec.record_task(task_id=9, attempt=1, function="f", worker=0, status=0, batch=9, submit=1.0, ready=1.0,
                    received=2.0, stats=_stats(1.0, 0.2, ends=ends), item_ids=range(4, 6))
    inner = rec.open_region()
    _fast(rec, 6, 1, 1.7, 1.5, 1.6)
    cursor, chunk = rec.read_since(cursor)
    assert chunk.tasks["task_id"].tolist() == [4, 5, 6]
    t_inner = rec.close_region(inner, {"workers": 2})
    t = rec.close_region(outer, {"workers": 2})
    assert t_inner.tasks["task_id"].tolist() == [6]
    assert t.tasks["task_id"].tolist() == [1, 2, 3, 4, 5, 6]
    assert t.tasks["batch"].tolist() == [-1, -1, -1, 9, 9, -1]
    assert np.allclose(t.tasks["end"][3:5] - t.tasks["start"][3:5], [0.1, 0.1])
    assert t.phases["row"].tolist() == [2]  # the phase still points at task 3's row
    assert t.functions[t.tasks["function"][2]] == "g"
    assert not t.tasks["task_id"].flags.writeable


def test_map_rows_carry_the_remote_functions_name(local2):
    def square(x):
        return x * x

    named = hpc.remote(square, name="squares")
    with hpc.trace() as t:
        hpc.get(hpc.map(named, range(50)))
    assert set(t.trace.to_dataframe()["function"]) == {"squares"}


def test_the_region_object_works_wherever_a_trace_does(local2):
    from eugo_lab import analysis

    with hpc.trace() as t:
        with pytest.raises(TypeError, match="after the 'with hpc.trace\\(\\)' block ends"):
            len(t)
        hpc.get([work.remote(i) for i in range(6)])
    assert len(t) == len(t.trace) == 6
    assert str(analysis.analyze(t)) == str(analysis.analyze(t.trace))
    assert [r.wall_time for r in analysis.simulate(t, workers=[1, 2])] == \
        [r.wall_time for r in analysis.simulate(t.trace, workers=[1, 2])]
    assert len(analysis.critical_path(t)) == len(analysis.critical_path(t.trace))


def test_bytes_in_counts_large_arrays_sent_by_value_through_shared_memory(local2):
    from eugo_lab import analysis

    big = np.ones(1_000_000)  # 8 MB: over the pool's 1 MiB threshold, so it travels out of band

    @hpc.remote
    def total(a):
        return float(a.sum())

    with hpc.trace() as t:
        assert hpc.get([total.remote(big) for _ in range(6)]) == [1e6] * 6
    assert t.tasks["bytes_in"].min() >= big.nbytes  # the array, not just the ~100-byte pickle around it
    terms = [f.term for f in analysis.analyze(t).findings]
    assert "Serialization" in terms, terms  # the same large argument sent 6 times: put() it once


def test_the_phases_frame_holds_the_tasks_own_phases_and_the_runtimes_markers_only_on_request():
    b = TraceBuilder(workers=1)
    row = b.task(worker=0, start=0.0, end=1.0)
    b.phase(row, "read", 0.0, 0.4, 0.1)
    b.phase(row, "jit: not tried: its time is in C code", 0.4, 0.4, 0.0)
    t = b.build(end=1.0)
    assert t.phases_dataframe()["phase"].tolist() == ["read"]
    assert t.phases_dataframe(markers=True)["phase"].tolist() == ["read", "jit: not tried: its time is in C code"]


def test_every_way_of_waiting_for_a_future_is_a_recorded_wait(local2):
    """result() and exception() block like get(): a cell that waits through them is seen waiting."""

    @hpc.remote
    def nap(x):
        time.sleep(0.05)
        return x

    with hpc.trace() as t:
        assert nap.remote(1).exception() is None
        assert nap.remote(2).result() == 2
        assert hpc.get(nap.remote(3)) == 3
    kinds = [t.block_kinds[k] for k in t.blocks["kind"]]
    assert kinds == ["get", "get", "get"], kinds
    spans = [e - s for s, e in zip(t.blocks["start"], t.blocks["end"])]
    assert all(span > 0 for span in spans), spans


def test_each_wait_names_the_one_future_it_was_on(local2, tmp_path):
    """get()/result()/a wait() on one future/as_completed/a done() loop record the task they waited on or took."""

    @hpc.remote
    def nap(ms):
        time.sleep(ms / 1000)
        return ms

    @hpc.remote
    def until(path):
        while not os.path.exists(path):
            time.sleep(0.001)
        return path

    go = str(tmp_path / "go")
    with hpc.trace() as t:
        a, b, c = nap.remote(60), nap.remote(60), nap.remote(60)
        hpc.get(a)
        b.result()
        hpc.wait([c])
        d = until.remote(go)
        assert not d.done()  # it waits for the file: the loop below starts on a pending future
        open(go, "w").close()
        while not d.done():  # the driver held by d alone: a wait on it
            pass
        many = [nap.remote(30), nap.remote(60)]
        hpc.wait(many, num_returns=2)  # several futures: no one task
        yielded = [f.task_id for f in hpc.as_completed([nap.remote(40)])]
    rows = [(t.block_kinds[k], int(task)) for k, task in zip(t.blocks["kind"], t.blocks["task"])]
    assert rows[:4] == [("get", a.task_id), ("get", b.task_id), ("wait", c.task_id), ("done", d.task_id)], rows
    assert ("wait", -1) in rows and ("as_completed", yielded[0]) in rows, rows
    assert t.blocks_dataframe()["task"].tolist() == [task for _, task in rows]


def test_done_calls_on_futures_in_turn_record_no_wait(local2):
    """A loop that polls several futures in turn waits on none of them in particular: nothing is recorded for it."""

    @hpc.remote
    def nap(ms):
        time.sleep(ms / 1000)
        return ms

    with hpc.trace() as t:
        pending = [nap.remote(40), nap.remote(40)]
        polls = 0
        while not all(f.done() for f in pending) and polls < 10_000_000:
            polls += 1
    kinds = [t.block_kinds[k] for k in t.blocks["kind"]]
    # all() stops at the first pending future, so the second is asked only once the first is done: on one
    # future in a row, then the other, each recorded at most once, never one wait per call.
    assert kinds.count("done") <= 2 and len(kinds) == kinds.count("done"), kinds


def test_a_trace_saved_before_blocks_named_their_task_reads_minus_one():
    rec = Recorder()
    mark = rec.open_region()
    rec.record_block("get", 1.0, 1.1, 1, "cell:3", task=7)
    doc = rec.close_region(mark, {"workers": 1}).to_dict()
    assert Trace.from_dict(doc).blocks["task"].tolist() == [7]
    del doc["blocks"]["task"]
    assert Trace.from_dict(doc).blocks["task"].tolist() == [-1]
