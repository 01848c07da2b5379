"""``%%eugo --compare``/``--scaling`` on a cell written with Dask's or Ray's own API: what can be measured, and where.

The main run is always the notebook's own cluster, as it is (``-w`` stays refused: the
notebook sized it). Each other count is a run of the same cell on a copy of that engine with
that many task slots (:mod:`eugo_lab.native.baseline`), recorded the same way, so the summary's
speedups are measured, not estimated. A Dask cell reaches the copy through its names: for the
re-run, every notebook variable bound to the notebook's client (or its cluster object) is
pointed at the copy's, and the copy's client is made current (``get_client()``, ``dask.compute``).

What cannot be redirected is refused before anything runs, with why and what to do:

- a cell that creates its own cluster (``Client(...)``, ``LocalCluster(...)``, ``ray.init(...)``):
  a re-run would build its own cluster again; create it in an earlier cell;
- a Dask cell that reads futures made in an earlier cell (by name, or through a function of the
  notebook that reads them): they live on the notebook's cluster, which the copy cannot reach.

A Dask comparison run that still sent work to another client (one the cell reaches through an
object or a closure) is refused after it ran: its time was not the copy's alone.
"""

from __future__ import annotations

import ast
import contextlib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from eugo_lab.cellrun.options import CellOptions

# Calls that make a cluster of their own: Dask's Client and its cluster classes (distributed's and the
# deployment packages'), Ray's init. A dotted call counts only on a Dask module (httpx.Client is no cluster).
_DASK_MAKERS = frozenset({"Client", "LocalCluster", "SpecCluster", "SSHCluster", "SLURMCluster", "PBSCluster",
                          "SGECluster", "LSFCluster", "HTCondorCluster", "OARCluster", "MoabCluster", "KubeCluster",
                          "GatewayCluster", "EC2Cluster", "ECSCluster", "FargateCluster", "YarnCluster"})
_DASK_MODULES = frozenset({"distributed", "dask", "dask_jobqueue", "dask_kubernetes", "dask_gateway",
                           "dask_cloudprovider", "dask_yarn"})


def _parse(cell: str) -> ast.Module | None:
    """The cell's syntax tree, IPython's syntax (``%magic``, ``!cmd``) made Python first; None if it does not parse."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(cell))
    except SyntaxError:  # compile_cell reports the error itself, with the cell's line numbers
        return None


def _call_name(node: ast.Call) -> str:
    """``LocalCluster`` for ``LocalCluster(...)``/``distributed.LocalCluster(...)``; ``ray.init`` for Ray's."""
    f = node.func
    if isinstance(f, ast.Attribute):
        base = f.value
        while isinstance(base, ast.Attribute):  # dask.distributed.Client: the module it starts from
            base = base.value
        if isinstance(base, ast.Name) and base.id == "ray":
            return f"ray.{f.attr}"
        return f.attr if isinstance(base, ast.Name) and base.id in _DASK_MODULES else ""
    return f.id if isinstance(f, ast.Name) else ""


def cluster_made_in(cell: str) -> tuple[str, int] | None:
    """``(call, line)`` of the first call in ``cell`` that makes a Dask client/cluster or starts Ray, else None.

    Lines count as the notebook shows them (line 1 is the ``%%eugo`` line).
    """
    tree = _parse(cell)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in _DASK_MAKERS or name == "ray.init":
                return name, node.lineno + 1
    return None


def refuse_own_cluster(cell: str, opts: CellOptions) -> str | None:
    """The refusal for ``--compare``/``--scaling`` on a cell that makes its own cluster, else None."""
    if not (opts.compare or opts.scaling):
        return None
    made = cluster_made_in(cell)
    if made is None:
        return None
    call, line = made
    flag = "--compare" if opts.compare else "--scaling"
    if call == "ray.init":
        return (f"%%eugo {flag}: this cell starts Ray itself (ray.init on line {line}), so it cannot be re-run on "
                "fewer CPUs: each run would start its own Ray. Call ray.init(num_cpus=2) in an earlier cell and "
                f"keep only the work in this one; then {flag} re-runs it on part of that Ray's CPUs.")
    return (f"%%eugo {flag}: this cell creates its own Dask cluster ({call}(...) on line {line}), so it cannot be "
            "re-run on 1 worker: each run would make its own cluster again. Create the client in an earlier cell "
            f"(client = Client(LocalCluster(n_workers=2))) and keep only the work in this one; then {flag} re-runs "
            "it on a temporary LocalCluster of each size.")


def counts(opts: CellOptions, slots: int) -> list[int]:
    """The comparison runs' task slots, in order; the main run (the notebook's cluster, ``slots``) is not in it."""
    if opts.scaling:
        return [n for n in opts.scaling if n != slots]
    return [1] if opts.compare and slots != 1 else []


def _read_names(cell: str, ns: dict[str, Any]) -> dict[str, None]:
    """Names the cell reads, and the globals read by the notebook's functions it names (one level), in order."""
    tree = _parse(cell)
    if tree is None:
        return {}
    names = dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    for name in list(names):
        fn = ns.get(name)
        if isinstance(fn, types.FunctionType) and fn.__globals__ is ns:
            names.update(dict.fromkeys(fn.__code__.co_names))
    return names


def held_futures(cell: str, ns: dict[str, Any]) -> list[str]:
    """Notebook variables the cell reads (itself or through its functions) that hold Dask futures."""
    from distributed.client import futures_of

    out = []
    for name in _read_names(cell, ns):
        value = ns.get(name)
        if value is None or isinstance(value, (types.ModuleType, types.FunctionType, type)):
            continue
        try:
            if futures_of(value):
                out.append(name)
        except Exception:  # noqa: BLE001 - an object futures_of cannot walk holds none it can see
            continue
    return out


@dataclass
class Plan:
    """The comparison runs of one native cell: the engine, the notebook's slots and the counts to run at."""

    engine: str  # "dask" or "ray"
    slots: int
    others: list[int]
    client: Any = None  # Dask: the notebook's client

    def where(self, n: int) -> str:
        """Where a comparison run happens, for the line shown before it."""
        workers = f"{n} worker{'s' if n != 1 else ''}"
        if self.engine == "dask":
            return f"{workers} (a temporary LocalCluster like yours)"
        return f"{workers} ({n} of your Ray's {self.slots} CPUs)"


def plan(cell: str, opts: CellOptions, recording: Any, ns: dict[str, Any]) -> Plan:
    """The comparison runs for a native cell; raises :class:`NotComparable` when they could not be true."""
    from eugo_lab.native.baseline import NotComparable, dask_shape, dask_slots, ray_slots

    client = getattr(recording, "client", None)
    if client is None:
        total = ray_slots()
        return Plan("ray", total, counts(opts, total))
    dask_shape(client)  # a cluster with workers elsewhere, or none, is refused here
    held = held_futures(cell, ns)
    if held:
        flag = "--compare" if opts.compare else "--scaling"
        raise NotComparable(f"the cell reads {', '.join(held)}, which hold{'s' if len(held) == 1 else ''} futures on "
                            "your cluster from an earlier cell, and a comparison cluster cannot reach them. Scatter "
                            f"or submit that data inside this cell (it is then part of what {flag} measures), or run "
                            f"the cell without {flag}.")
    slots = dask_slots(client)
    return Plan("dask", slots, counts(opts, slots), client)


@contextlib.contextmanager
def sized(p: Plan, n: int, ns: dict[str, Any]) -> Iterator[Any]:
    """A copy of the engine with ``n`` slots, the notebook's names pointed at it; yields its recording."""
    from eugo_lab.native.baseline import DaskAtSize, RayAtSize

    if p.engine == "ray":
        with RayAtSize(n) as at:
            yield at.recording()
        return
    with DaskAtSize(p.client, n) as at, _rebound(ns, {id(p.client): at.client, id(p.client.cluster): at.cluster}):
        yield at.recording()


@contextlib.contextmanager
def _rebound(ns: dict[str, Any], swap: dict[int, Any]) -> Iterator[None]:
    """Point every variable of ``ns`` bound to a swapped object at its replacement; put them back after."""
    swap.pop(id(None), None)  # a client made from an address has no cluster object
    old = {name: value for name, value in ns.items() if id(value) in swap and not name.startswith("_")}
    ns.update({name: swap[id(value)] for name, value in old.items()})
    try:
        yield
    finally:
        for name, value in old.items():
            if id(ns.get(name)) in {id(v) for v in swap.values()}:  # the cell did not rebind it itself
                ns[name] = value
