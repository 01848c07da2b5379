"""Profiling on Dask and Ray: the samples travel back with each task's stats, no engine change needed."""

from __future__ import annotations

from multiprocessing import resource_tracker

import pytest
from _clusters import ray_cli_cluster
from test_profile import N, check_known_workload, outer, spin

from eugo_lab import hpc

pytestmark = pytest.mark.slow
WORKERS = 2


@pytest.fixture(scope="module", params=["dask", "ray"])
def engine(request):
    """The engine started once (as in test_contract); yields a function attaching a runtime to it."""
    if request.param == "dask":
        from eugo_lab.backends.dask import DaskBackend

        resource_tracker.ensure_running()  # a per-interpreter helper, not a leak of one test
        engine = DaskBackend(workers=WORKERS, dashboard=False)
        engine.start()
        yield lambda: hpc.init(cluster=engine._local)
        hpc.shutdown()
        engine.shutdown()
    else:
        from eugo_lab.backends.ray import RayBackend

        with ray_cli_cluster(num_cpus=WORKERS) as address:
            connection = RayBackend(address=address)
            connection.start()
            yield lambda: hpc.init(backend="ray")
            hpc.shutdown()
            connection.shutdown()


def test_names_the_hot_function_and_line(engine):
    engine()
    f = hpc.remote(outer)
    # Warm both workers (Ray starts its worker processes lazily): every task must then be sampled.
    hpc.get([f.remote(1000) for _ in range(2 * WORKERS)])
    with hpc.profile() as region:
        assert hpc.get([f.remote(N) for _ in range(8)]) == [spin(N) + 1] * 8
    check_known_workload(region.report, workers=len({p.worker for p in region.trace.profiles}))
    assert region.report.workers == WORKERS, region.trace.profiles  # the merge spans both workers
    with hpc.trace() as t:  # and off again: no profile travels
        hpc.get(f.remote(10))
    assert t.trace.profiles == ()
