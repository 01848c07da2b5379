"""``%%eugo --compare``/``--scaling`` on cells written with Dask's own API, on real LocalClusters on loopback.

The comparison runs happen on temporary clusters of the same kind; every verdict here is a recorded
fact (which cluster ran the tasks, how many lanes, whether tasks overlapped, the speedup computed from
the recorded wall times), never a speed threshold.
"""

from __future__ import annotations

import math

import pytest
from IPython.core.error import UsageError

from eugo_lab import hpc
from eugo_lab.cellrun import native_compare
from eugo_lab.cellrun.options import CellOptions

distributed = pytest.importorskip("distributed")

SETUP = """
import time
import numpy as np
from distributed import get_client

def nap(x):
    time.sleep(0.04)
    return x

data = np.ones(50_000)
"""


pytestmark = pytest.mark.usefixtures("resource_tracker_running")  # Dask clusters start it


@pytest.fixture(scope="module")
def client(ip):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    c = distributed.Client(cluster)  # the notebook's default client
    ip.user_ns["client"] = c
    ip.user_ns["cluster"] = cluster
    ip.run_cell(SETUP)
    yield c
    for name in ("client", "cluster", "held"):
        ip.user_ns.pop(name, None)
    c.close()
    cluster.close()
    hpc.shutdown()


def _overlap(trace) -> bool:
    """Whether any two recorded tasks of ``trace`` ran at the same time."""
    spans = sorted(zip(trace.tasks["start"], trace.tasks["end"]))
    return any(b[0] < a[1] - 1e-9 for a, b in zip(spans, spans[1:]))


def test_compare_reruns_the_cell_on_a_one_worker_copy_and_measures_the_speedup(ip, client, capsys):
    ip.run_cell_magic("eugo", "--compare --save t", "out = client.gather(client.map(nap, range(6), pure=False))\n")
    text = capsys.readouterr().out
    from eugo_lab.cellrun.report import latest

    summary = latest()
    assert summary is not None and summary.trace is ip.user_ns["t"]
    base, main = (r.trace for r in summary.runs)
    assert [r.workers for r in summary.runs] == [1, 2]
    assert len(base) == len(main) == 6 and base.n_workers == 1 and main.n_workers == 2
    assert set(base.tasks["worker"]) == {0} and not _overlap(base)  # the copy had one slot: one task at a time
    assert summary.measured[0] == (1, 1.0)
    assert math.isclose(summary.measured[1][1], base.wall_time / main.wall_time)
    assert math.isclose(summary.report.measured_speedup, base.wall_time / main.wall_time)
    assert "measured against 1 worker" in text and "runs at workers: 1, 2" in text
    # the notebook's names and its default client are its own again
    assert ip.user_ns["client"] is client and ip.user_ns["cluster"] is client.cluster
    assert distributed.default_client() is client
    assert ip.user_ns["out"] == list(range(6))


def test_scaling_reaches_the_copy_through_get_client(ip, client, capsys):
    cell = "c = get_client()\nout = c.gather(c.map(nap, range(4), pure=False))\n"
    ip.run_cell_magic("eugo", "--scaling 1,2,3 --save t", cell)
    from eugo_lab.cellrun.report import latest

    summary = latest()
    assert summary is not None and summary.trace is ip.user_ns["t"]
    assert [r.workers for r in summary.runs] == [1, 3, 2]  # the notebook's own cluster (2) runs last, as main
    assert [len(r.trace) for r in summary.runs] == [4, 4, 4]
    assert summary.runs[1].trace.n_workers == 3
    assert "runs at workers: 1, 3, 2" in capsys.readouterr().out
    assert ip.user_ns["c"] is client  # the main run's get_client() is the notebook's client again


def test_a_cluster_of_processes_is_copied_as_processes(ip, client, capsys):
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    other = distributed.Client(cluster)
    ip.user_ns["client"] = other
    try:
        ip.run_cell_magic("eugo", "--compare --save t",
                          "out = client.gather([client.submit(np.sum, data, pure=False) for _ in range(3)])\n")
        from eugo_lab.cellrun.report import latest

        summary = latest()
        assert summary is not None and summary.trace is ip.user_ns["t"]
        base, main = (r.trace for r in summary.runs)
        # by value to worker processes: the same bytes sent with every task, in both runs
        assert list(base.tasks["bytes_in"]) == list(main.tasks["bytes_in"]) == [data_bytes(ip)] * 3
        assert ip.user_ns["client"] is other
    finally:
        ip.user_ns["client"] = client
        other.close()
        cluster.close()
    capsys.readouterr()


def data_bytes(ip) -> int:
    return int(ip.user_ns["data"].nbytes)


def test_a_cell_that_makes_its_own_cluster_is_refused_with_what_to_do(ip, client):
    cell = "from distributed import LocalCluster, Client\nown = Client(LocalCluster(n_workers=2))\nown.close()\n"
    with pytest.raises(UsageError, match=r"creates its own Dask cluster \(Client\(\.\.\.\) on line 3\).*"
                                         r"Create the client in an earlier cell"):
        ip.run_cell_magic("eugo", "--compare", cell)
    assert "own" not in ip.user_ns  # refused before anything ran


def test_ray_init_in_the_cell_is_refused_without_any_engine():
    msg = native_compare.refuse_own_cluster("import ray\nray.init()\n", CellOptions(scaling=(1, 2)))
    assert msg is not None and "ray.init on line 3" in msg and "earlier cell" in msg
    assert native_compare.refuse_own_cluster("import ray\nray.init()\n", CellOptions()) is None


def test_futures_from_an_earlier_cell_are_refused_by_name(ip, client):
    ip.run_cell("held = client.scatter(data)\ndef reads_held(i):\n    return client.submit(np.sum, held)\n")
    for cell, name in (("out = client.submit(np.sum, held).result()\n", "held"),
                       ("out = reads_held(0).result()\n", "held")):
        with pytest.raises(UsageError, match=f"the cell reads {name}, which holds futures on your cluster"):
            ip.run_cell_magic("eugo", "--compare", cell)


def test_work_sent_to_the_notebooks_client_through_a_closure_is_refused(ip, client):
    ip.run_cell("def make(c):\n    return lambda i: c.submit(nap, i, pure=False)\nsend = make(client)\n")
    with pytest.raises(UsageError, match="still sent 2 calls to another Dask client"):
        ip.run_cell_magic("eugo", "--compare", "out = [send(i).result() for i in range(2)]\n")
    assert ip.user_ns["client"] is client


def test_workers_stays_refused(ip, client):
    with pytest.raises(UsageError, match="-w/--workers cannot be used.*--compare, --scaling"):
        ip.run_cell_magic("eugo", "-w 1", "client.gather(client.map(nap, range(2)))\n")


def test_an_error_in_the_comparison_run_is_the_cells_error(ip, client, capsys):
    cell = "def boom(x):\n    raise ValueError('bad item')\nout = client.submit(boom, 1).result()\n"
    with pytest.raises(ValueError, match="bad item"):
        ip.run_cell_magic("eugo", "--compare --save t", cell)
    assert ip.user_ns["t"].n_workers == 1  # the summary is of the run that failed: the comparison's
    assert ip.user_ns["client"] is client
    capsys.readouterr()


def test_a_cluster_made_beside_ipython_syntax_is_found_on_its_notebook_line():
    # line 1 is the %%eugo line; %time and !cmd are made Python first, so the cell still parses
    assert native_compare.cluster_made_in("%time x = 1\n!echo hi\nown = Client(LocalCluster())\n") == ("Client", 4)
    assert native_compare.cluster_made_in("out = client.gather(client.map(f, range(3)))\n") is None
    assert native_compare.cluster_made_in("import httpx\nc = httpx.Client()\n") is None  # no Dask module
    assert native_compare.cluster_made_in("import dask.distributed\nc = dask.distributed.Client()\n") == ("Client", 3)
