"""One adapter per engine, all with the same verbs, so every scenario treats them alike.

Verbs: ``start``/``stop``; ``each`` (one call per task, all submitted, then gathered);
``batched`` (the engine's best batched path for many tiny items); ``by_value`` and
``via_put`` (a large object handed to k tasks, copied per call or stored once);
``one_at_a_time`` (the 1-worker baseline of the CPU scenario, see scenarios.cpu_speedup).
``start`` goes from nothing to the first trivial result, importing the engine itself: the
startup and memory scenarios time it in a fresh interpreter (see block.py).

Every engine runs 2 workers (processes, one thread each) on 127.0.0.1 only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from benchmarks import tasks

WORKERS = 2


class Engine:
    """Base adapter; ``tiny_cap`` limits one-call-per-task counts for slow schedulers."""

    name = "?"
    tiny_cap: int | None = None   # per-task cost is reported, so fewer tasks stay comparable
    has_put = False
    map_large = False  # also runs the 1,000,000-item batched scenario (the chunked-map peers of hpc.map)

    def start(self) -> None: ...
    def stop(self) -> None: ...

    def each(self, fn: Callable, args: list) -> list:
        raise NotImplementedError

    def batched(self, fn: Callable, items: list) -> list:
        raise NotImplementedError

    def by_value(self, fn: Callable, obj: Any, k: int) -> list:
        return self.each(fn, [obj] * k)

    def via_put(self, fn: Callable, obj: Any, k: int) -> list:
        raise NotImplementedError

    def start_map(self, fn: Callable, items: list) -> Callable[[], list]:
        """Start the batched path over ``items`` without waiting; the returned function gathers the results."""
        raise NotImplementedError

    def one_at_a_time(self, fn: Callable, args: list) -> list:
        return [self.each(fn, [a])[0] for a in args]


def chunks(items: list, size: int) -> list[list]:
    """Consecutive slices of ``size`` items (the last may be shorter)."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def default_chunk(n: int) -> int:
    """The chunk size we give pools without auto-batching: 8 chunks per worker (like Dask bags)."""
    return max(1, n // (WORKERS * 8))


def map_chunk(n: int) -> int:
    """``chunksize`` for a process pool's ``map`` (loky, ProcessPoolExecutor): 16 chunks per worker.

    Tuned for the peers, not for us: the usual recipe, n / (4 * workers), measured the same
    at 100,000 no-op items but 15-25% slower at 1,000,000 (both pools, alternated, 3 sweeps):
    with only 8 chunks the driver's pickling of the first chunk and unpickling of the last
    are not overlapped with the workers. n / (16 * workers) was the fastest of 4..32.
    """
    return max(1, n // (WORKERS * 16))


# -- Eugo Lab ----------------------------------------------------------------------------------
class EugoLab(Engine):
    """Eugo Lab's local backend; ``traced`` wraps every measured call in ``hpc.trace()``."""

    has_put = True
    map_large = True

    def __init__(self, traced: bool = True, name: str = "eugo_lab"):
        self.traced = traced
        self.name = name

    def start(self) -> None:
        from eugo_lab import hpc

        self.hpc = hpc
        hpc.init(backend="local", workers=WORKERS)
        hpc.get(hpc.remote(tasks.noop).remote(0))

    def stop(self) -> None:
        self.hpc.shutdown()

    def _region(self):
        import contextlib

        return self.hpc.trace() if self.traced else contextlib.nullcontext()

    def each(self, fn, args):
        f = self.hpc.remote(fn)
        with self._region():
            return self.hpc.get([f.remote(a) for a in args])

    def batched(self, fn, items):
        with self._region():
            return self.hpc.get(self.hpc.map(fn, items))

    def start_map(self, fn, items):
        result = self.hpc.map(fn, items)
        return lambda: self.hpc.get(result)

    def via_put(self, fn, obj, k):
        f = self.hpc.remote(fn)
        with self._region():
            ref = self.hpc.put(obj)
            return self.hpc.get([f.remote(ref) for _ in range(k)])


# -- the standard library and loky/joblib -------------------------------------------------------
class EugoLabFirstRemote(EugoLab):
    """The path a learner takes: no ``hpc.init()``, the first ``.remote()`` starts the default pool.

    Start-up only (``startup_only``): the scenarios after it would measure the same pool as
    ``eugo_lab``. The default pool has one worker per usable core: ``WORKERS`` on the 2-core
    machines the targets are set for.
    """

    startup_only = True

    def __init__(self) -> None:
        super().__init__(traced=False, name="eugo_lab_first_remote")

    def start(self) -> None:
        from eugo_lab import hpc

        self.hpc = hpc
        hpc.get(hpc.remote(tasks.noop).remote(0))


class StdPool(Engine):
    """``concurrent.futures.ProcessPoolExecutor`` (fork on Linux, the default)."""

    name = "ProcessPoolExecutor"
    map_large = True

    def start(self) -> None:
        import concurrent.futures as cf  # here, not at the top: the startup clock is running

        self.ex = cf.ProcessPoolExecutor(WORKERS)
        self.ex.submit(tasks.noop, 0).result()

    def stop(self) -> None:
        self.ex.shutdown(wait=True)

    def each(self, fn, args):
        return [f.result() for f in [self.ex.submit(fn, a) for a in args]]

    def batched(self, fn, items):
        return list(self.ex.map(fn, items, chunksize=map_chunk(len(items))))

    def start_map(self, fn, items):
        results = self.ex.map(fn, items, chunksize=map_chunk(len(items)))  # submits every chunk now
        return lambda: list(results)


class Loky(StdPool):
    """loky's reusable executor (spawn-like workers, cloudpickle)."""

    name = "loky"

    def start(self) -> None:
        from loky import get_reusable_executor

        self.ex = get_reusable_executor(max_workers=WORKERS, timeout=600)
        self.ex.submit(tasks.noop, 0).result()


class Joblib(Engine):
    """joblib.Parallel on its default loky backend, one ``Parallel(...)`` per call as users write it.

    Its "put" is automatic memmapping of arrays over 1 MB (the default); by value turns it off.
    joblib keeps the loky workers between calls, so only the first call pays for the pool.
    """

    name = "joblib"
    has_put = True

    def start(self) -> None:
        import joblib

        self.joblib = joblib
        joblib.Parallel(n_jobs=WORKERS)(joblib.delayed(tasks.noop)(0) for _ in range(2))

    def stop(self) -> None:
        from joblib.externals.loky import get_reusable_executor

        get_reusable_executor().shutdown(wait=True, kill_workers=True)

    def _run(self, fn, args, **kw):
        d = self.joblib.delayed(fn)
        return self.joblib.Parallel(n_jobs=WORKERS, **kw)(d(a) for a in args)

    def each(self, fn, args):
        return self._run(fn, args, batch_size=1)

    def batched(self, fn, items):
        return self._run(fn, items, batch_size="auto")

    def by_value(self, fn, obj, k):
        return self._run(fn, [obj] * k, max_nbytes=None)

    def via_put(self, fn, obj, k):
        return self._run(fn, [obj] * k)


# -- Dask, Ray, ipyparallel ----------------------------------------------------------------------
class Dask(Engine):
    """Dask distributed ``LocalCluster``: 2 worker processes x 1 thread, loopback, no dashboard."""

    name = "dask"
    tiny_cap = 2_000
    has_put = True

    def start(self) -> None:
        from dask.distributed import Client, LocalCluster

        self.cluster = LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, host="127.0.0.1",
                                    dashboard_address=None, silence_logs=40)
        self.client = Client(self.cluster)
        self.client.submit(tasks.noop, 0, pure=False).result()

    def stop(self) -> None:
        self.client.close()
        self.cluster.close()

    def each(self, fn, args):
        return self.client.gather([self.client.submit(fn, a, pure=False) for a in args])

    def batched(self, fn, items):
        # client.map(fn, 100_000 items) would be 100,000 scheduler tasks: batch by hand.
        parts = self.client.map(tasks.run_batch, chunks(items, default_chunk(len(items))), pure=False)
        return [x for part in self.client.gather(parts) for x in part]

    def by_value(self, fn, obj, k):
        import warnings

        with warnings.catch_warnings():  # "Sending large graph": yes, that is this path
            warnings.simplefilter("ignore", UserWarning)
            return self.each(fn, [obj] * k)

    def via_put(self, fn, obj, k):
        [ref] = self.client.scatter([obj], broadcast=False, hash=False)
        return self.client.gather([self.client.submit(fn, ref, pure=False) for _ in range(k)])


class Ray(Engine):
    """Ray local: ``ray.init(num_cpus=2)`` on 127.0.0.1, no dashboard, no usage stats."""

    name = "ray"
    tiny_cap = 2_000
    has_put = True

    def start(self) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        self.ray = ray
        ray.init(num_cpus=WORKERS, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False, configure_logging=False)
        self._remote: dict = {}
        self.ray.get(self._r(tasks.noop).remote(0))

    def _r(self, fn):
        if fn not in self._remote:
            self._remote[fn] = self.ray.remote(fn)
        return self._remote[fn]

    def stop(self) -> None:
        self.ray.shutdown()

    def each(self, fn, args):
        f = self._r(fn)
        return self.ray.get([f.remote(a) for a in args])

    def batched(self, fn, items):
        f = self._r(tasks.run_batch)
        return [x for part in self.ray.get([f.remote(c) for c in chunks(items, 100)]) for x in part]

    def via_put(self, fn, obj, k):
        f = self._r(fn)
        ref = self.ray.put(obj)
        return self.ray.get([f.remote(ref) for _ in range(k)])


class IPyParallel(Engine):
    """ipyparallel: a controller and 2 engines started with ``ipyparallel.Cluster`` on 127.0.0.1."""

    name = "ipyparallel"
    tiny_cap = 1_000   # ~5-7 ms per task here
    has_put = True

    def start(self) -> None:
        import ipyparallel as ipp

        self.ipp = ipp
        self.cluster = ipp.Cluster(n=WORKERS, controller_ip="127.0.0.1", engine_launcher_class="local",
                                   log_level=40)
        self.rc = self.cluster.start_and_connect_sync()
        self.rc.wait_for_engines(WORKERS, timeout=120)
        self.lview = self.rc.load_balanced_view()
        self.dview = self.rc[:]
        self.lview.apply_sync(tasks.noop, 0)

    def stop(self) -> None:
        self.rc.close()
        self.cluster.stop_cluster_sync()

    def each(self, fn, args):
        return [r.get() for r in [self.lview.apply_async(fn, a) for a in args]]

    def batched(self, fn, items):
        return self.lview.map_sync(fn, items, chunksize=default_chunk(len(items)))

    def via_put(self, fn, obj, k):
        self.dview.push({"_bench_obj": obj}, block=True)   # once per engine
        return self.each(fn, [self.ipp.Reference("_bench_obj")] * k)


ENGINES: dict[str, tuple[type[Engine], str]] = {
    "eugo_lab": (EugoLab, "eugo_lab"), "eugo_lab_first_remote": (EugoLabFirstRemote, "eugo_lab"),
    "ProcessPoolExecutor": (StdPool, "concurrent"), "loky": (Loky, "loky"),
    "joblib": (Joblib, "joblib"), "dask": (Dask, "distributed"), "ray": (Ray, "ray"),
    "ipyparallel": (IPyParallel, "ipyparallel"),
}


def available() -> list[str]:
    """Names of the engines whose packages are installed (found, not imported: Ray takes seconds)."""
    import importlib.util

    out = []
    for name, (_, mod) in ENGINES.items():
        if importlib.util.find_spec(mod) is None:
            print(f"[bench] {name}: not installed, skipped")
        else:
            out.append(name)
    return out
