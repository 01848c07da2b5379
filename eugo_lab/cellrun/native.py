"""``%%eugo`` on a cell written with an engine's own API: which engine, and running it recorded.

A cell that calls Dask's ``client.submit``/``client.map``/``gather``/``dask.compute`` on the
notebook's own ``distributed.Client`` never touches the ``hpc`` runtime. When such a client is
running and the cell does not name ``hpc``, the cell is run as it is, on that client, while
:mod:`eugo_lab.native` records it; the summary, timeline and findings are then built from that
trace exactly as for an ``hpc`` cell (:func:`eugo_lab.cellrun.runner.run_cell`).

Options that would change how the cell runs (``-w``, ``--compare``, ``--scaling``, ``--profile``,
``--optimize``, ``--gpu on``) are refused for such a cell, with what to do instead: the cluster is
the notebook's, sized where it was created.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from eugo_lab.cellrun import report
from eugo_lab.cellrun.execute import CompiledCell, execute
from eugo_lab.cellrun.options import CellOptions
from eugo_lab.render import display

# The cell names the hpc runtime (or the package): it is an hpc cell, recorded by the runtime as always.
_USES_HPC = re.compile(r"\b(?:hpc|eugo_lab)\b")


def _refuse(message: str) -> None:
    from IPython.core.error import UsageError

    raise UsageError(message)


def _ray_running() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def engine_of(cell: str, opts: CellOptions) -> Any | None:
    """The engine client to record the cell from (a ``distributed.Client``), or None for an ``hpc`` cell.

    Refuses (IPython's ``UsageError``) a cell that asks for an engine by ``-b`` whose API the
    cell uses but that has nothing running to record.
    """
    if opts.address is not None or _USES_HPC.search(cell):
        return None
    if opts.backend in (None, "dask"):
        from eugo_lab.native.dask_recording import default_client

        client = default_client()
        if client is not None:
            _check_options(opts, "Dask")
            return client
    if opts.backend == "ray" and not _ray_running():
        _refuse("%%eugo -b ray: the cell does not use eugo_lab.hpc and Ray is not initialised, so there is nothing "
                "to record. Call ray.init() in an earlier cell (or use hpc with %%eugo -b ray to let eugo_lab start "
                "Ray itself).")
    if opts.backend == "ray":
        _refuse("%%eugo -b ray: recording a cell written with Ray's own API (ray.remote, ray.get) is not available "
                "yet; write the cell with eugo_lab.hpc and run it with %%eugo -b ray to see its timeline and findings.")
    return None


def _check_options(opts: CellOptions, engine: str) -> None:
    """Refuse the options that would change how a cell on the notebook's own cluster runs."""
    asked = [name for name, on in (("-w/--workers", opts.workers is not None), ("--compare", opts.compare),
                                   ("--scaling", bool(opts.scaling)), ("--profile", opts.profile),
                                   ("--optimize", opts.optimize), ("--gpu on", opts.gpu == "on")) if on]
    if asked:
        _refuse(f"%%eugo: {', '.join(asked)} cannot be used on a cell that runs on your own {engine} client: its "
                "cluster and its tasks are yours, so %%eugo records them as they are. Size the cluster where you "
                "create it (e.g. LocalCluster(n_workers=2)); the options that apply are --save, --export, "
                "--no-live and --exercise.")


def run_native_cell(shell: Any, compiled: CompiledCell, opts: CellOptions, client: Any,
                    after: Callable[[report.CellSummary, BaseException | None, str], None] | None = None) -> Any:
    """Run the compiled cell on the notebook's Dask ``client``, recorded; show its summary; return its value."""
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    from eugo_lab.hpc import api as hpc_api
    from eugo_lab.native.dask_recording import DaskRecording

    out_mode = display.mode(shell)
    recording = DaskRecording(client).start()
    value: Any = None
    error: BaseException | None = None
    try:
        value = execute(shell, compiled)
    except BaseException as exc:  # noqa: BLE001 - re-raised after the partial summary, as for an hpc cell
        error = exc
    trace = recording.stop(meta=opts.meta())
    hpc_api._set_last_trace(trace)  # %eugo trace and hpc.last_trace() read the cell's trace, whoever recorded it
    if opts.save:
        shell.user_ns[opts.save] = trace
    if opts.export:
        trace.to_chrome_trace(opts.export)
    summary = report.summarize([report.Run(int(trace.n_workers), trace)], error=error, options=opts.meta(),
                               saved_as=opts.save, exported_to=opts.export, namespace=shell.user_ns)
    if out_mode == "text":
        print(summary.to_text(precise=True))
    else:
        display.show(summary)
    if after is not None:
        after(summary, error, out_mode)
    if error is not None:
        raise error
    return value
