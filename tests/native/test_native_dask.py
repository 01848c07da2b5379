"""``%%eugo`` on cells written with Dask's own API, on a real LocalCluster on loopback.

Each known mistake is written twice, in Dask's API and in ``eugo_lab.hpc``: both must raise the
same finding, the Dask one with Dask's idiom in its advice; a clean Dask cell raises none of them.
The cluster is in-process (``processes=False``), two single-threaded workers.
"""

from __future__ import annotations

import contextlib

import pytest
from IPython.core.error import UsageError

from eugo_lab import hpc
from eugo_lab.analysis import analyze
from eugo_lab.analysis.findings import Code

distributed = pytest.importorskip("distributed")

SETUP = """
import time
import numpy as np
from distributed import as_completed, wait
from eugo_lab import hpc

def nap(x):
    time.sleep(0.05)
    return x

def inc(x):
    return x + 1

def total(data, i):
    return float(data[i])

def spin(x):
    t = time.thread_time()
    while time.thread_time() - t < 0.08:
        pass
    return x

nap_r, inc_r, total_r, spin_r = (hpc.remote(f) for f in (nap, inc, total, spin))
data = np.ones(300_000)  # 2.4 MB
"""

# (mistake, the Dask cell, its hpc twin, the finding, words its Dask advice must use)
CASES = [
    ("result in a loop",
     "out = []\nfor i in range(6):\n    out.append(client.submit(nap, i, pure=False).result())\n",
     "out = []\nfor i in range(6):\n    out.append(hpc.get(nap_r.remote(i)))\n",
     Code.BLOCKING, "client.gather(futures)"),
    ("a task per tiny item",
     "out = client.gather(client.map(inc, range(200)))\n",
     "out = hpc.get([inc_r.remote(i) for i in range(200)])\n",
     Code.TASKS_TOO_SMALL, "partition_size="),
    ("a large array to every task",
     "out = client.gather([client.submit(total, data, i) for i in range(6)])\n",
     "out = hpc.get([total_r.remote(data, i) for i in range(6)])\n",
     Code.REPEATED_ARGUMENT, "client.scatter(data, broadcast=True)"),
    ("sleeping tasks",
     "out = client.gather(client.map(nap, range(12), pure=False))\n",
     "out = hpc.get([nap_r.remote(i) for i in range(12)])\n",
     Code.IO_BOUND, "threads_per_worker"),
]
MISTAKES = {c[3] for c in CASES}


pytestmark = pytest.mark.usefixtures("resource_tracker_running")  # Dask clusters start it


@pytest.fixture(scope="module")
def client(ip):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    c = distributed.Client(cluster)  # the notebook's default client
    ip.user_ns["client"] = c
    ip.run_cell(SETUP)
    yield c
    c.close()
    cluster.close()
    hpc.shutdown()


def _run(ip, line, cell, capsys):
    ip.run_cell_magic("eugo", line, cell)
    out = capsys.readouterr().out
    trace = ip.user_ns["t"]
    return trace, analyze(trace).findings, out


@contextlib.contextmanager
def _worker_processes(ip):
    """The cell's ``client`` on a cluster of worker processes (arguments are pickled and sent to them)."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)  # the default client while it is open
    before = ip.user_ns["client"]
    ip.user_ns["client"] = c
    try:
        yield c
    finally:
        ip.user_ns["client"] = before
        c.close()
        cluster.close()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_mistake_raises_its_hpc_twins_finding_in_dasks_words(ip, client, capsys, case):
    _, dask_cell, hpc_cell, code, idiom = case
    if code == Code.REPEATED_ARGUMENT:  # in-process workers take the driver's objects: nothing is sent
        with _worker_processes(ip):
            trace, found, out = _run(ip, "--save t", dask_cell, capsys)
    else:
        trace, found, out = _run(ip, "--save t", dask_cell, capsys)
    assert trace.meta["api"] == "dask" and trace.meta["backend"] == "dask"
    assert trace.n_workers == 2 and len(trace) > 0
    mine = [f for f in found if f.code == code]
    assert mine, [f.to_text() for f in found]
    assert idiom in mine[0].advice
    assert "hpc." not in mine[0].advice + mine[0].fix, mine[0].advice
    assert idiom in out  # the summary the cell printed says it too
    _, twin, _ = _run(ip, "-w 2 --save t", hpc_cell, capsys)
    assert code in {f.code for f in twin}, [f.to_text() for f in twin]


def test_in_process_workers_are_sent_no_arguments(ip, client, capsys):
    """LocalCluster(processes=False): a large array passed to every task is shared, not copied, so no
    finding says it was sent 6 times, and none advises client.scatter (which made such a cell slower)."""
    trace, found, out = _run(ip, "--save t", CASES[2][1], capsys)
    assert len(trace) == 6 and (trace.tasks["bytes_in"] == 0).all()
    assert Code.REPEATED_ARGUMENT not in {f.code for f in found}, [f.to_text() for f in found]
    assert "client.scatter" not in out


def test_a_clean_cell_raises_none_of_them(ip, client, capsys):
    trace, found, _ = _run(ip, "--save t", "out = client.gather(client.map(spin, range(6)))\n", capsys)
    assert len(trace) == 6
    assert not MISTAKES & {f.code for f in found}, [f.to_text() for f in found]


def test_dasks_own_finalize_tasks_are_marked_and_never_advised_on(ip, client, capsys):
    """compute() on a collection adds a finalize- task that gathers its result: Dask's bookkeeping, recorded as
    the engine's own (twenty of them, tiny, looked like tasks too small to a detector that could not tell)."""
    cell = ("import dask.bag as db\n"
            "out = [db.from_sequence([i], npartitions=1).sum().compute() for i in range(20)]\n")
    trace, found, out = _run(ip, "--save t", cell, capsys)
    assert ip.user_ns["out"] == list(range(20))
    own = trace.meta["engine_functions"]
    assert own and all(name.startswith("finalize") for name in own), own
    assert sum(trace.task_counts()[name] for name in own) == 20
    assert not [f for f in found if "finalize" in f.to_text()], [f.to_text() for f in found]
    assert not [line for line in out.splitlines() if "finalize" in line and "functions:" not in line], out


def test_the_drivers_time_in_client_submit_is_submitting_never_serializing(ip, client, capsys):
    """Dask hashes a submitted array to name its task inside client.submit: the driver's breakdown shows that
    time as submitting (it read as the driver's own work), and nothing as pickling, which Dask does later."""
    trace, found, _ = _run(ip, "--save t", "out = client.gather([client.submit(total, data, i) for i in range(6)])\n",
                           capsys)
    b = trace.driver_breakdown()
    assert b["submitting"] > 0 and b["serializing"] == 0
    assert trace.meta["serializing_timed"] is False
    slow = [f for f in found if f.code == Code.SLOW_SUBMISSION]
    assert all(f.evidence["cause"] == "pickling" for f in slow)  # 2.4 MB each: not timed, so by size


def test_a_value_passed_on_through_the_driver_is_a_recorded_chain(ip, client, capsys):
    # Each step needs the previous .result(): recorded as such, never advised as a get() to move.
    cell = "x = 0\nfor i in range(6):\n    x = client.submit(inc, x, pure=False).result()\n"
    trace, found, _ = _run(ip, "--save t", cell, capsys)
    assert ip.user_ns["x"] == 6
    d = trace.driver_deps
    assert sorted(zip(d["task"].tolist(), d["on"].tolist())) == [(k, k - 1) for k in range(1, 6)]
    assert Code.BLOCKING not in {f.code for f in found}
    assert all("client.gather(futures)" not in f.advice for f in found)


def test_the_trace_holds_what_dask_reported(ip, client, capsys):
    cell = ("big = client.scatter(data, broadcast=True)\n"
            "futs = [client.submit(total, big, i) for i in range(4)]\n"
            "done = [f.result() for f in as_completed(futs)]\n"
            "wait(futs)\n")
    trace, _, _ = _run(ip, "--save t", cell, capsys)
    t = trace.tasks
    assert sorted(trace.functions) == ["total"] and len(trace) == 4
    assert set(t["worker"].tolist()) <= {0, 1}
    assert (t["start"] <= t["end"]).all() and (t["submit"] <= t["start"]).all() and (t["end"] <= t["received"]).all()
    assert (t["bytes_in"] < 1000).all()  # only the index: the array travelled as a scattered dependency
    assert (t["bytes_out"] > 0).all() and (t["cpu"] >= 0).all()
    assert len(trace.puts["ref"]) == 1 and trace.puts["bytes"][0] >= 2_400_000
    kinds = {trace.block_kinds[k] for k in trace.blocks["kind"]}
    assert kinds == {"as_completed", "get", "wait"}  # f.result() is a get, even of a finished future
    # each wait is the notebook's line (line 1 is the %%eugo line), never a frame inside Dask or eugo_lab
    assert {s.rsplit(":", 1)[1] for s in trace.sources} == {"4", "5"}, trace.sources
    assert trace.meta["not_recorded"]  # what Dask does not report is said


def test_options_that_would_change_the_cluster_are_refused(ip, client):
    for line in ("-w 4", "--profile", "--optimize"):  # --compare/--scaling: tests/native/test_native_compare.py
        with pytest.raises(UsageError, match="your own Dask cluster"):
            ip.run_cell_magic("eugo", line, "client.gather(client.map(inc, range(3)))\n")


def test_ray_without_ray_initialised_is_refused(ip):
    with pytest.raises(UsageError, match="Ray is not initialised"):
        ip.run_cell_magic("eugo", "-b ray", "import math\nx = math.sqrt(4)\n")


def test_a_notebook_shows_the_summary_with_its_timeline_and_a_deterministic_text(ip, client, monkeypatch):
    from IPython.utils.capture import capture_output

    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    monkeypatch.delenv("EUGO_LAB_BOKEH_URL", raising=False)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "", "out = client.gather(client.map(nap, range(4), pure=False))\n")
    found = [o.data for o in cap.outputs if "eugo-summary" in o.data.get("text/html", "")]
    assert len(found) == 1
    assert "eugo-timeline" in found[0]["text/html"]  # the static timeline: a Dask cell has no live one
    plain = found[0]["text/plain"]
    assert "dask" in plain and "4 tasks" in plain, plain
    assert "inproc://" not in plain and "tcp://" not in plain  # no addresses in the deterministic text
    # what Dask does not report is said (its first words), and the failures it does report are counted
    assert "  not recorded by dask: (un)pickling time per task; " in plain and "failed: 0, retried: 0" in plain
    assert "not recorded by dask</td>" in found[0]["text/html"]


def test_a_dask_cell_is_drawn_live_each_task_once(ip, client, monkeypatch):
    from IPython.utils.capture import capture_output

    from eugo_lab.render import live

    monkeypatch.setenv("EUGO_LAB_DISPLAY", "lab")  # the Bokeh timeline built and streamed, no browser
    monkeypatch.setenv("EUGO_LAB_BOKEH_URL", "/eugo/bokeh/")
    snaps, original = [], live.LiveView.update
    views = []

    def update(self, chunk, snapshot):
        views.append(self)
        snaps.append(snapshot)
        original(self, chunk, snapshot)

    monkeypatch.setattr(live.LiveView, "update", update)
    n = 12
    with capture_output():  # the cell outlasts its tasks by 1.2 s: the poller files them while it runs
        ip.run_cell_magic("eugo", "--save t", f"out = client.gather(client.map(nap, range({n}), pure=False))\n"
                          "time.sleep(1.2)\n")
    assert any(not s.finished and s.done for s in snaps), [(s.done, s.running, s.pending) for s in snaps]
    last = snaps[-1]
    assert last.finished and last.done == n
    assert sum(views[-1].sources["tasks"].data["tasks"]) == n  # each task drawn once, live or at the end
