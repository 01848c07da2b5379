"""Smaller copies of the notebook's own engine, for ``%%eugo --compare``/``--scaling`` on a Dask or Ray cell.

A cell written with an engine's own API runs on the notebook's cluster, which the notebook
sized. To measure it on fewer (or more) task slots, the same cell is run again on a cluster of
the same engine with that many slots, recorded the same way:

- Dask (:class:`DaskAtSize`): a temporary ``LocalCluster`` of the same kind as the notebook's
  (worker processes or in-process workers, the same threads per worker where the count allows,
  the same memory limit), with a ``Client`` made current for the re-run (``get_client()``,
  ``dask.compute`` and ``Client.current()`` find it; the cell runner points the notebook's names
  for its client at it). Only a cluster whose workers all run on this machine is copied: a
  ``LocalCluster`` here is no baseline for a remote one.
- Ray (:class:`RayAtSize`): the same Ray, with all but ``n`` of its CPUs held by a placement group
  for the re-run, so at most ``n`` one-CPU tasks run at once; the objects the notebook put in
  earlier cells stay valid. A task that asks for no CPU or for more than ``n`` cannot be held
  to ``n`` CPUs: its submission raises :class:`NotComparable`.

Anything that would make the comparison untrue raises :class:`NotComparable` with what
happened and what to do; the cell runner shows it as a usage error.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

from eugo_lab.native.dask_recording import DaskRecording
from eugo_lab.native.errors import NotComparable
from eugo_lab.native.ray_recording import RayRecording

__all__ = ["DaskAtSize", "NotComparable", "RayAtSize", "dask_shape", "dask_slots", "ray_slots"]

# A placement group whose CPUs are still held by earlier work: how long to wait for it before refusing.
_RESERVE_TIMEOUT_S = 30.0


# -- Dask ---------------------------------------------------------------------------------------------
def _local_hosts() -> set[str]:
    """The names and addresses this machine's own workers report as their host."""
    from distributed.utils import get_ip

    hosts = {"127.0.0.1", "::1", "localhost", socket.gethostname()}
    for probe in (get_ip, lambda: socket.gethostbyname(socket.gethostname())):
        try:
            hosts.add(probe())
        except OSError:
            pass
    return hosts


def dask_slots(client: Any) -> int:
    """Task slots (worker threads) of ``client``'s cluster: what its trace calls workers."""
    return max(sum(int(w.get("nthreads", 1)) for w in client.scheduler_info().get("workers", {}).values()), 1)


def dask_shape(client: Any) -> dict[str, Any]:
    """What a copy of ``client``'s cluster keeps: worker processes or not, threads per worker, memory limit.

    Raises :class:`NotComparable` for a cluster with workers on another machine or with no worker.
    """
    workers = list(client.scheduler_info().get("workers", {}).values())
    if not workers:
        raise NotComparable("your Dask cluster has no worker yet, so there is nothing to compare against; wait for "
                            "its workers (client.wait_for_workers(2)) and run the cell again")
    remote = sorted({str(w.get("host", "?")) for w in workers} - _local_hosts())
    if remote:
        raise NotComparable(f"your Dask cluster has workers on {', '.join(remote)}, and %%eugo can only make a "
                            "comparison cluster on this machine, which would not be the same hardware; measure it "
                            "by running the cell on clusters of each size yourself")
    threads = sorted({int(w.get("nthreads", 1)) for w in workers})
    limits = sorted({int(w.get("memory_limit", 0) or 0) for w in workers})
    return {"processes": not all(str(a).startswith("inproc://") for a in client.scheduler_info()["workers"]),
            "threads": threads[-1], "memory_limit": limits[-1] or "auto"}


def _top_modules() -> list[str]:
    """``client.run`` target: the top-level packages a worker has imported (its warm state)."""
    return sorted({name.split(".")[0] for name in list(sys.modules) if not name.startswith("_")})


def _import_all(names: list[str]) -> int:
    """``client.run`` target: import ``names`` on a fresh worker, as the notebook's workers already have them."""
    import importlib

    done = 0
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
            done += 1
        except Exception:  # noqa: BLE001 - a module a worker cannot import here is simply left out
            pass
    return done


class DaskAtSize:
    """A temporary ``LocalCluster`` with ``slots`` task slots shaped like ``client``'s, and its recording.

    Use as a context manager: ``with DaskAtSize(client, 1) as at: at.recording.start() ...``;
    the cluster is closed on exit. Its workers import what the notebook's workers have imported
    before the cell runs, so neither run pays for imports the other did not.
    """

    def __init__(self, client: Any, slots: int) -> None:
        self.original = client
        self.slots = slots
        self.shape = dask_shape(client)
        self.cluster: Any = None
        self.client: Any = None
        self._current: Any = None

    def __enter__(self) -> DaskAtSize:
        import distributed

        t = self.shape["threads"]
        # The notebook's threads per worker where the count is a multiple of it, else one thread per worker.
        workers, threads = (self.slots // t, t) if self.slots % t == 0 else (self.slots, 1)
        # Worker processes listen on loopback only; in-process workers take an inproc:// address of their own.
        where = {"host": "127.0.0.1"} if self.shape["processes"] else {}
        self.cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=threads,
                                                processes=self.shape["processes"],
                                                memory_limit=self.shape["memory_limit"], dashboard_address=None,
                                                **where)
        try:
            self.client = distributed.Client(self.cluster, set_as_default=False)
            self.client.wait_for_workers(workers)
            if self.shape["processes"]:
                warm = self.original.run(_top_modules)
                self.client.run(_import_all, sorted(set().union(*warm.values())))
            self._current = self.client.as_current()
            self._current.__enter__()  # get_client(), dask.compute and Client.current() find it in the re-run
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def recording(self) -> DaskRecording:
        """A recording of the cell's tasks on this cluster (Dask calls on another client are counted apart)."""
        return DaskRecording(self.client)

    def __exit__(self, *exc: Any) -> None:
        if self._current is not None:
            self._current.__exit__(None, None, None)
            self._current = None
        for thing in (self.client, self.cluster):
            if thing is not None:
                thing.close()
        self.client = self.cluster = None


# -- Ray ----------------------------------------------------------------------------------------------
def ray_slots() -> int:
    """CPUs of the running Ray: what its trace calls workers."""
    import ray

    return int(ray.cluster_resources().get("CPU", 0)) or 1


class RayAtSize:
    """The notebook's Ray with all but ``slots`` CPUs held by a placement group, and its recording.

    Use as a context manager; the placement group is removed on exit.
    """

    def __init__(self, slots: int) -> None:
        total = ray_slots()
        if slots > total:
            raise NotComparable(f"your Ray has {total} CPU{'s' if total != 1 else ''}, so the cell cannot be run on "
                                f"{slots}; start Ray with more (ray.init(num_cpus={slots})) or ask for at most {total}")
        self.slots = slots
        self.total = total
        self.group: Any = None

    def __enter__(self) -> RayAtSize:
        import ray
        from ray.util.placement_group import placement_group

        held = self.total - self.slots
        if held:
            self.group = placement_group([{"CPU": 1}] * held, strategy="PACK")
            ready, _ = ray.wait([self.group.ready()], timeout=_RESERVE_TIMEOUT_S)
            if not ready:
                self.__exit__(None, None, None)
                raise NotComparable(f"{held} of your Ray's CPUs could not be set aside within "
                                    f"{_RESERVE_TIMEOUT_S:.0f} s: earlier tasks or actors still hold them; let them "
                                    "finish (or ray.kill the actors) and run the cell again")
        return self

    def recording(self) -> RayRecording:
        """A recording that calls the trace's workers ``slots`` and refuses tasks it cannot hold to them."""
        return RayRecording(slots=self.slots, cpu_cap=float(self.slots))

    def __exit__(self, *exc: Any) -> None:
        if self.group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.group)
            self.group = None
