"""``%%eugo`` on a cell written with an engine's own API: which engine, and running it recorded.

A cell that calls Dask's ``client.submit``/``client.map``/``gather``/``dask.compute`` on the
notebook's own ``distributed.Client``, or Ray's ``f.remote()``/``ray.get``/``ray.wait``/``ray.put``,
never touches the ``hpc`` runtime. When such an engine is running and the cell does not name
``hpc``, the cell is run as it is, on that engine, while :mod:`eugo_lab.native` records it;
the summary, timeline and findings are then built from that trace exactly as for an ``hpc``
cell (:func:`eugo_lab.cellrun.runner.run_cell`).

``--compare`` and ``--scaling`` run the cell again on copies of the engine with fewer (or more)
task slots before the main run on the notebook's own cluster, so the speedups are measured
(:mod:`eugo_lab.cellrun.native_compare` says what can be copied and refuses the rest). Options that
would change how the main run goes (``-w``, ``--profile``, ``--optimize``, ``--gpu on``) are refused
for such a cell, with what to do instead: the cluster is the notebook's, sized where it was created.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from eugo_lab.cellrun import native_compare, report
from eugo_lab.cellrun.execute import CompiledCell, execute
from eugo_lab.cellrun.live import LiveFeed
from eugo_lab.cellrun.live_state import LiveState
from eugo_lab.cellrun.options import CellOptions
from eugo_lab.render import display, html

log = logging.getLogger("eugo_lab")

# The cell names the hpc runtime (or the package): it is an hpc cell, recorded by the runtime as always.
_USES_HPC = re.compile(r"\b(?:hpc|eugo_lab)\b")


def uses_hpc(cell: str) -> bool:
    """Whether the cell uses ``eugo_lab``'s runtime: it names ``hpc`` or any part of ``eugo_lab`` but its exercises.

    Read from the cell's code (IPython syntax turned into Python first), so a comment or a string that
    mentions it does not count, and ``from eugo_lab import exercises`` (what a Dask or Ray exercise cell
    takes its inputs with) does not either; a cell that cannot be parsed falls back to the words themselves.
    """
    import ast

    try:
        from IPython.core.inputtransformer2 import TransformerManager

        tree = ast.parse(TransformerManager().transform_cell(cell))
    except (SyntaxError, ValueError, ImportError):
        return bool(_USES_HPC.search(cell))

    def runtime_module(name: str) -> bool:
        return (name == "eugo_lab" or name.startswith("eugo_lab.")) and not name.startswith("eugo_lab.exercises")

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "hpc":
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "eugo_lab" \
                and node.attr != "exercises":
            return True
        if isinstance(node, ast.ImportFrom) and node.module is not None and (
                (node.module == "eugo_lab" and any(a.name != "exercises" for a in node.names))
                or (node.module != "eugo_lab" and runtime_module(node.module))):
            return True
        if isinstance(node, ast.Import) and any(runtime_module(a.name) for a in node.names if a.name != "eugo_lab"):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "run_line_magic", "run_cell_magic") and node.args and isinstance(node.args[-1], ast.Constant) \
                and isinstance(node.args[-1].value, str) and uses_hpc(node.args[-1].value):
            return True  # %time hpc.get(x): the magic's own code
    return False


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
    if opts.address is not None or uses_hpc(cell):
        return None
    own = native_compare.refuse_own_cluster(cell, opts)
    if own is not None:
        _refuse(own)
    from eugo_lab.native.ray_recording import RayRecording, ray_running

    wants_ray = opts.backend == "ray" or (opts.backend is None and bool(_NAMES_RAY.search(cell)))
    if wants_ray and ray_running():
        _check_options(opts, "Ray", "ray.init(num_cpus=2)")
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
    asked = [name for name, on in (("-w/--workers", opts.workers is not None), ("--profile", opts.profile),
                                   ("--optimize", opts.optimize), ("--gpu on", opts.gpu == "on")) if on]
    if asked:
        _refuse(f"%%eugo: {', '.join(asked)} cannot be used on a cell that runs on your own {engine} cluster: the "
                f"cluster and its tasks are yours, so %%eugo records them as they are. Size the cluster where you "
                f"create it (e.g. {sized}); the options that apply are --compare, --scaling, --save, --export "
                "and --no-live.")


class _Poller:
    """Asks the engine for its tasks' records about twice a second while the cell runs, so the live view sees tasks end.

    Dask: the workers' logs. Ray: its profile events, each read taking a second of its own.
    """

    # One client.run round trip per poll: twice a second is smooth enough to watch and costs the cluster nothing
    # next to its tasks (the view itself redraws ~10 times a second from what was filed).
    INTERVAL_S = 0.5

    def __init__(self, recording: Any) -> None:
        self._recording = recording
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eugo-native-poll", daemon=True)

    def start(self) -> _Poller:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL_S):
            try:
                self._recording.poll()
            except Exception:  # the view stops updating; the cell and its trace do not
                log.exception("the live view could not read the engine's records of its tasks; the cell keeps running")
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _record_once(shell: Any, compiled: CompiledCell, opts: CellOptions, recording: Any, live: bool,
                 out_mode: str) -> tuple[Any, BaseException | None, Any, bool]:
    """Run the cell once under ``recording`` (live view if asked); returns (value, error, trace, timeline_shown)."""
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    view = feed = poller = None
    if live and out_mode in ("lab", "kernel") and hasattr(recording, "with_live_view"):
        # Built before the recording starts: importing Bokeh takes a second that is not the cell's.
        from eugo_lab.render import live as live_view

        choice = live_view.choose(out_mode)
        if choice.hint is not None:
            display.publish(choice.hint, html.hint_html(choice.hint))
        if choice.counters:
            lanes = recording.with_live_view()
            bokeh_url = display.bokeh_root_url() if choice.timeline else None
            view = live_view.LiveView(lanes, time.time(), bokeh_url=bokeh_url).show()
    recording.start()
    if view is not None:
        view.t0 = t0 = time.time()
        feed = LiveFeed(recording.live, view, LiveState(t0, recording.workers), recording.unfinished).start()
        poller = _Poller(recording).start()
    value: Any = None
    error: BaseException | None = None
    try:
        value = execute(shell, compiled)
    except BaseException as exc:  # noqa: BLE001 - re-raised after the partial summary, as for an hpc cell
        error = exc
    finally:
        # The cell's end is stamped before the poller stops: its last read of the engine (a second, for Ray's
        # events) is the recording's time, not the cell's.
        ended = time.time()
        if poller is not None:
            poller.stop()
        if feed is not None:
            feed.stop()
    trace = recording.stop(meta=opts.meta(), ended=ended)
    if feed is not None:  # the last rows come from the Trace, as for an hpc cell
        feed.finish(trace, error=None if error is None else type(error).__name__)
    return value, error, trace, view is not None and view.timeline_shown


def _compare(shell: Any, cell: str, compiled: CompiledCell, opts: CellOptions, recording: Any,
             out_mode: str) -> tuple[list[report.Run], Any, BaseException | None]:
    """``--compare``/``--scaling``: the comparison runs on copies of the engine; returns (runs, value, error).

    A run that could not be true (:class:`~eugo_lab.native.baseline.NotComparable`, raised before it
    or by a submission the copy cannot hold) is refused as IPython's ``UsageError``.
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    from eugo_lab.native.baseline import NotComparable

    flag = "--compare" if opts.compare else "--scaling"
    try:
        p = native_compare.plan(cell, opts, recording, shell.user_ns)
    except NotComparable as exc:
        _refuse(f"%%eugo {flag}: {exc}")
    runs: list[report.Run] = []
    value: Any = None
    error: BaseException | None = None
    for n in p.others:
        if out_mode != "text":
            display.publish(f"%%eugo: running on {p.where(n)} for comparison")
        try:
            with native_compare.sized(p, n, shell.user_ns) as rec:
                value, error, trace, _ = _record_once(shell, compiled, opts, rec, live=False, out_mode=out_mode)
        except NotComparable as exc:
            _refuse(f"%%eugo {flag}: {exc}")
        if isinstance(error, NotComparable):  # a submission the copy could not hold to its slots
            _refuse(f"%%eugo {flag}: {error}")
        others = getattr(getattr(rec, "driver", None), "other_client_calls", 0)
        if others:
            _refuse(f"%%eugo {flag}: while it ran on {p.where(n)}, the cell still sent {others} call"
                    f"{'s' if others != 1 else ''} to another Dask client (one it reaches through an object or a "
                    "closure, not a notebook variable), so that run was not measured alone and the main run was not "
                    "started. Use your client through a notebook variable (client.submit) or get_client() in the "
                    "cell.")
        runs.append(report.Run(int(trace.n_workers), trace))
        if error is not None:
            break
    return runs, value, error


def record_quietly(shell: Any, compiled: CompiledCell, opts: CellOptions,
                   recording: Any) -> tuple[BaseException | None, Any]:
    """Run the compiled cell once on the notebook's own engine under ``recording``, showing nothing; ``(error, trace)``.

    The hidden second case of an exercise written in the engine's own API
    (:func:`eugo_lab.cellrun.runner.run_quietly`): no live view, no summary, and ``hpc.last_trace()``
    stays the main run's. The recording is a fresh one, so the trace holds this run's tasks only.
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    _, error, trace, _ = _record_once(shell, compiled, opts, recording, live=False, out_mode="text")
    return error, trace


def run_native_cell(shell: Any, compiled: CompiledCell, opts: CellOptions, recording: Any,
                    after: Callable[[report.CellSummary, BaseException | None, str], None] | None = None,
                    cell: str = "") -> Any:
    """Run the compiled cell on the notebook's own engine under ``recording``; show its summary; return its value.

    The live view's rows are filed by a poller as the engine reports its tasks: Dask's workers'
    logs twice a second, Ray's profile events (which arrive about a second after each task). With
    ``--compare``/``--scaling`` (``cell``: its source, read for what a re-run cannot redirect) the
    comparison runs come first, on copies of the engine, and the main run last, as for an hpc cell.
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    from eugo_lab.hpc import api as hpc_api

    out_mode = display.mode(shell)
    runs: list[report.Run] = []
    value: Any = None
    error: BaseException | None = None
    shown = False
    if opts.compare or opts.scaling:
        runs, value, error = _compare(shell, cell, compiled, opts, recording, out_mode)
    if error is None:
        value, error, trace, shown = _record_once(shell, compiled, opts, recording, live=opts.live,
                                                  out_mode=out_mode)
        runs.append(report.Run(int(trace.n_workers), trace))
    hpc_api.set_last_trace(runs[-1].trace)  # %eugo trace and hpc.last_trace() read it, whoever recorded it
    summary = report.summarize_cell(runs, error=error, opts=opts, shown=shown, namespace=shell.user_ns)
    report.show(summary, out_mode)
    if after is not None:
        after(summary, error, out_mode)
    if error is not None:
        raise error
    return value
