"""What ``%%eugo -w N``, ``--compare`` and ``--scaling`` keep when they restart the runtime.

A cell that needs another worker count (or another engine) starts a new runtime. It starts it
with every option the running one was given (``hpc.init(memory_limit=..., cancel_grace=...,
gpus=..., threads_per_worker=..., optimize=False, price_per_worker_hour=..., address=...)``): a
memory limit that silently went away with ``--compare`` would make the cell measure something else
than the learner set up.
An option the new engine does not take is refused by name, before anything runs.
"""

from __future__ import annotations

from typing import Any

from eugo_lab.cellrun.options import OptionError

# Where the old engine ran, not how: another engine (-b) starts where it starts by default.
_PLACE = ("address", "cluster")


def restart_options(rt: Any, backend: str, workers: int | None) -> dict[str, Any]:
    """``hpc.init`` keyword arguments that restart ``rt`` (or ``None``: nothing ran) on ``backend`` unchanged.

    ``workers`` is the worker count the restart asks for; ``optimize`` is the runtime's automatic JIT
    switch. Raises :class:`OptionError` naming the options ``backend`` cannot take, or for a worker
    count asked of a cluster this process did not start.
    """
    if rt is None:
        return {}
    carried = {k: v for k, v in rt.options.items() if k != "workers" and v is not None}
    place = [k for k in _PLACE if k in carried]
    if place and backend == rt.backend_name and workers is not None:
        where = f"the cluster at {carried['address']}" if "address" in carried else "the cluster passed to hpc.init"
        raise OptionError(
            f"-w/--compare/--scaling need {workers} worker(s), and the runtime runs on {where}, which this "
            "kernel did not start and cannot resize. Run the cell without -w/--compare/--scaling, size the "
            "cluster itself, or call hpc.init() without an address for a local one")
    if backend != rt.backend_name:
        carried = {k: v for k, v in carried.items() if k not in _PLACE}
        if carried:
            from eugo_lab import backends

            accepted = backends.option_names(backend)
            lost = [k for k in carried if accepted is not None and k not in accepted]
            if lost:
                given = ", ".join(f"{k}={carried[k]!r}" for k in lost)
                raise OptionError(
                    f"-b {backend} would restart the runtime without {given}: hpc.init gave the "
                    f"{rt.backend_name} engine these, and the {backend} engine does not take them. Start the "
                    f"engine you want with hpc.init(backend={backend!r}, ...) and the options it takes, then run "
                    f"the cell without -b (or call hpc.shutdown() first to start {backend} with its defaults)")
    if not rt.auto_optimize:
        carried["optimize"] = False
    price = getattr(rt, "price_per_worker_hour", None)
    if price is not None:  # the runtime's own rate, on any engine: %eugo status bills the new runtime the same
        carried["price_per_worker_hour"] = price
    return carried
