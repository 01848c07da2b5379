"""``%%eugo`` on a cell written with an engine's own API: which engine, and running it recorded.

A cell that calls Dask's ``client.submit``/``client.map``/``gather``/``dask.compute`` on the
notebook's own ``distributed.Client``, or Ray's ``f.remote()``/``ray.get``/``ray.wait``/``ray.put``,
never touches the ``hpc`` runtime. When such an engine is running and the cell does not name
``hpc``, the cell is run as it is, on that engine, while :mod:`eugo_lab.native` records it;
the summary, timeline and findings are then built from that trace exactly as for an ``hpc``
cell (:func:`eugo_lab.cellrun.runner.run_cell`).

Options that would change how the cell runs (``-w``, ``--compare``, ``--scaling``, ``--profile``,
``--optimize``, ``--gpu on``) are refused for such a cell, with what to do instead: the cluster is
the notebook's, sized where it was created.
"""

from __future__ import annotations

import re
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


_NAMES_RAY = re.compile(r"\bray\b")


def engine_of(cell: str, opts: CellOptions) -> Any | None:
    """The recording for a cell written with an engine's own API (not started yet), or None for an ``hpc`` cell.

    Dask: the notebook's default ``distributed.Client`` is running (``-b dask`` or no ``-b``).
    Ray: Ray is initialised in this process and the cell names ``ray`` (or ``-b ray``). With both,
    ``-b`` decides, else a cell that names ``ray`` is Ray's. Refuses (IPython's ``UsageError``)
    ``-b ray`` on a cell that has no running Ray to record.
    """
    if opts.address is not None or _USES_HPC.search(cell):
        return None
    from eugo_lab.native.ray_recording import RayRecording, ray_running

    wants_ray = opts.backend == "ray" or (opts.backend is None and bool(_NAMES_RAY.search(cell)))
    if wants_ray and ray_running():
        _check_options(opts, "Ray")
        return RayRecording()
    if opts.backend == "ray":
        _refuse("%%eugo -b ray: the cell does not use eugo_lab.hpc and Ray is not initialised, so there is nothing "
                "to record. Call ray.init() in an earlier cell (or use hpc with %%eugo -b ray to let eugo_lab start "
                "Ray itself).")
    if opts.backend in (None, "dask"):
        from eugo_lab.native.dask_recording import DaskRecording, default_client

        client = default_client()
        if client is not None:
            _check_options(opts, "Dask", "LocalCluster(n_workers=2)")
            return DaskRecording(client)
    return None


def _check_options(opts: CellOptions, engine: str, sized: str) -> None:
    """Refuse the options that would change how a cell on the notebook's own cluster runs."""
    asked = [name for name, on in (("-w/--workers", opts.workers is not None), ("--compare", opts.compare),
                                   ("--scaling", bool(opts.scaling)), ("--profile", opts.profile),
                                   ("--optimize", opts.optimize), ("--gpu on", opts.gpu == "on")) if on]
    if asked:
        _refuse(f"%%eugo: {', '.join(asked)} cannot be used on a cell that runs on your own {engine} cluster: the "
                f"cluster and its tasks are yours, so %%eugo records them as they are. Size the cluster where you "
                f"create it (e.g. {sized}); the options that apply are --save, --export, "
                "--no-live and --exercise.")


def run_native_cell(shell: Any, compiled: CompiledCell, opts: CellOptions, recording: Any,
                    after: Callable[[report.CellSummary, BaseException | None, str], None] | None = None) -> Any:
    """Run the compiled cell on the notebook's own engine under ``recording``; show its summary; return its value."""
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    from eugo_lab.hpc import api as hpc_api

    out_mode = display.mode(shell)
    recording.start()
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
