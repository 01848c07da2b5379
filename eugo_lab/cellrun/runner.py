"""``%%eugo`` end to end: options -> runtime -> run the cell traced (live) -> summary -> render.

Order of events for one cell:

1. compile the body (a syntax error stops here, before any worker starts);
2. for each worker count (one, or several for ``--compare``/``--scaling``; the main run is
   last): start or reuse the runtime, open ``hpc.trace()``, start the live view and its
   writer thread, run the body, stop the feed, close the trace. The live view needs the
   ``lab`` extra (:func:`eugo_lab.render.live.choose`); without it the body runs traced
   the same way, a one-line hint says (once per kernel) how to get it, and the final
   summary carries the static timeline;
3. save/export the main trace, build the summary (analyses), display it;
4. if the body raised, re-raise the original exception (shown once, by IPython, with the
   cell's line numbers) after the partial timeline and summary were shown.

The cell has one record (:mod:`eugo_lab.contract.cellrecord`), opened before step 1 and closed
after step 4, raised or not: its runs' regions record their traces there (the main run's last),
and the summary, the optimizations report, the offload ledger and an exercise's verdict are put
in it; every accessor of "the latest cell" (``hpc.last_trace()``, ``%eugo trace``...) reads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time
from collections.abc import Callable
from typing import Any

from eugo_lab import hpc
from eugo_lab.cellrun import monitor, profile_display, report
from eugo_lab.cellrun.carry import restart_options
from eugo_lab.cellrun.execute import CompiledCell, compile_cell, execute
from eugo_lab.cellrun.live import LiveFeed
from eugo_lab.cellrun.live_state import LiveState
from eugo_lab.cellrun.native import engine_of, record_quietly, run_native_cell
from eugo_lab.cellrun.optimize import CellOptimizer  # --optimize
from eugo_lab.cellrun.options import CellOptions
from eugo_lab.cellrun.status import unfinished_items
from eugo_lab.contract import cellrecord
from eugo_lab.hpc import profiling as prof_region
from eugo_lab.hpc import session
from eugo_lab.offload import cell as offload_cell  # --gpu: `import numpy` in the cell dispatches per op
from eugo_lab.render import display, html


def ensure_runtime(opts: CellOptions, workers: int | None) -> Any:
    """Reuse the running runtime if it matches the options, else (re)start one; returns it."""
    rt = session.current(start=False)
    backend = opts.backend or (rt.backend_name if rt is not None else "local")
    if rt is not None and rt.backend_name == backend and (workers is None or rt.backend.info().workers == workers) \
            and (opts.address is None or rt.options.get("address") == opts.address):
        return rt
    # Every option the running runtime was started with goes over to the new one (or is refused by name).
    kwargs = restart_options(rt, backend, workers)
    if opts.address is not None:
        kwargs["address"] = opts.address
        kwargs.pop("cluster", None)
    hpc.init(backend=backend, workers=workers, **kwargs)
    rt = session.current(start=False)
    if opts.address is not None:
        rt.options["address"] = opts.address  # type: ignore[union-attr]
    return rt


def _run_once(shell: Any, compiled: CompiledCell, opts: CellOptions, workers: int | None, live: bool,
              out_mode: str, profile: bool = False,
              optimizer: CellOptimizer | None = None,
              watch: bool = False, values_of: tuple[str, ...] = ()) -> tuple[Any, BaseException | None, Any, bool]:
    """Run the body once, traced (its tasks profiled if ``profile``); returns (value, error, trace, timeline_shown).

    ``watch``: record which of the cell's functions ran in the notebook's process (:mod:`eugo_lab.cellrun.monitor`);
    ``values_of``: with it, the functions whose calls there are kept by value too.
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    rt = ensure_runtime(opts, workers)
    n = int(rt.backend.info().workers)
    feed = view = None
    value = error = None
    if live and out_mode in ("lab", "kernel"):
        # Chosen and built before the trace opens: importing Bokeh takes a second that is not the cell's.
        from eugo_lab.render import live as live_view

        choice = live_view.choose(out_mode)
        if choice.hint is not None:  # the widgets are an extra: say once how to get them, then run all the same
            display.publish(choice.hint, html.hint_html(choice.hint))
        if choice.counters:
            bokeh_url = display.bokeh_root_url() if choice.timeline else None
            view = live_view.LiveView(n, time.time(), bokeh_url=bokeh_url).show()
    settings = prof_region.Settings() if profile else None  # --profile: only the main run is sampled
    with hpc.trace(meta={**opts.meta(), "cell_runs_at": n}) as region, prof_region.profiling(rt, settings):
        if view is not None:
            view.t0 = t0 = time.time()
            feed = LiveFeed(rt.recorder, view, LiveState(t0, n), lambda: unfinished_items(rt)).start()
        try:
            # --optimize: the runtime wraps the cell's functions in the JIT trial while the body runs
            with optimizer.running(rt, shell) if optimizer is not None else contextlib.nullcontext(), \
                    monitor.watching(shell, region, values_of) if watch else contextlib.nullcontext():
                value = offload_cell.run(shell, opts.gpu, execute, shell, compiled)  # --gpu off: just execute()
        except BaseException as exc:  # noqa: BLE001 - re-raised by run_cell after the partial summary
            error = exc
            if isinstance(exc, KeyboardInterrupt):
                # One Interrupt stops the whole cell, also tasks it submitted but never waited on.
                rt.cancel_all()
        finally:
            if feed is not None:
                feed.stop()
    if feed is not None:  # the last rows come from the Trace: reading and drawing them is not the cell's work
        feed.finish(region.trace, error=None if error is None else type(error).__name__)
    ledger = offload_cell.last_ledger()
    if view is not None and not len(region.trace) and ledger is not None and ledger.rows:
        view.close()  # array operations and no task: the cell leads with its offload report, no empty timeline
    return value, error, region.trace, view is not None and view.timeline_shown


#: The cell's Python source in its record, as compiled (IPython's syntax transformed once): a grader reads
#: the names it binds from it (:func:`cell_source`).
SOURCE = cellrecord.register(cellrecord.Slot("source", "the latest %%eugo cell's body as Python, as it was compiled"))


def cell_source() -> str:
    """The Python source of the ``%%eugo`` cell running now (or of the latest one), as it was compiled."""
    return cellrecord.read(SOURCE) or ""


def _with_gpu_mode(opts: CellOptions) -> CellOptions:
    """``opts`` with ``--gpu`` resolved (not given: auto where a GPU is, else off); ``on`` without a GPU raises."""
    gpu, gpu_note = offload_cell.default_mode(opts.gpu)
    if gpu_note:
        opts = dataclasses.replace(opts, extra_meta={**opts.extra_meta, "gpu_note": gpu_note})
    opts = dataclasses.replace(opts, gpu=gpu)
    offload_cell.check(opts.gpu)  # --gpu on without a GPU: a clear error before any worker starts
    return opts


def run_quietly(shell: Any, cell: str, opts: CellOptions,
                native_api: bool = False) -> tuple[BaseException | None, Any, cellrecord.CellRecord]:
    """Run ``cell`` once more on the running runtime, traced as its own run, showing nothing; ``(error, trace, rec)``.

    The same path as the cell's main run (its optimizations, ``--gpu`` mode, workers), without
    the live view, the summary or anything the cell prints (the second, hidden case of an
    exercise, :mod:`eugo_lab.cellrun.exercise`). ``hpc.last_trace()`` stays the main run's;
    ``rec`` is the run's own record, set aside (:func:`cellrecord.aside`): read it with
    :func:`cellrecord.reading` (the ``--gpu`` ledger and the predictions of this run, not the main run's).
    The caller owns the namespace the cell runs in. ``native_api``: as for :func:`run_cell`, a cell
    written in Dask's or Ray's own API is run on that engine and recorded from it, by a recording
    of its own (the main run's comparison runs, ``--compare``/``--scaling``, are not made again).
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    native = engine_of(cell, opts) if native_api else None
    if native is not None:
        compiled = compile_cell(shell, cell, None)
        with cellrecord.aside() as record, contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            return (*record_quietly(shell, compiled, opts, native), record)
    optimizer = CellOptimizer(opts)  # a fresh one: the main run's report is built and kept already
    compiled = compile_cell(shell, cell, optimizer.transform)
    opts = _with_gpu_mode(opts)
    sink = io.StringIO()
    # A record set aside: the run's trace and reports never become what the accessors call the latest.
    # Sampled as the main run is (--profile, --optimize): a checker that reads the profile grades this run's own.
    with cellrecord.aside() as record, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        _, error, trace, _ = _run_once(shell, compiled, opts, None, live=False, out_mode="text",
                                       profile=opts.profile or opts.optimize, optimizer=optimizer)
    return error, trace, record


def run_cell(shell: Any, cell: str, opts: CellOptions,
             after: Callable[[report.CellSummary, BaseException | None, str], None] | None = None,
             native_api: bool = True, watch: bool = False, values_of: tuple[str, ...] = ()) -> Any:
    """Run ``cell`` under ``%%eugo`` with validated ``opts``; returns the cell's final value.

    ``after(summary, error, out_mode)``: called with the cell's summary (the main run's trace
    and its one analysis) once it is shown and before the cell's own error is re-raised
    (``--exercise`` grades the run there, on the same Report). ``native_api``: a cell written with
    Dask's or Ray's own API is recorded from that engine; False records only the runtime's tasks
    (the course's exercises grade ``eugo_lab.hpc`` runs: a learner who called Ray directly is told
    the runtime ran nothing, not that the work ran in the notebook). ``watch``: the main run records which
    of the cell's functions ran in the notebook's process, in its trace's ``meta`` (``--exercise``), and keeps
    the calls of the functions named in ``values_of`` by value, in its trace's ``live`` facts.

    The cell's record is open while it runs, ``after`` included (a grader puts its verdict there).
    """
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    record = cellrecord.begin_cell()
    try:
        return _run_cell(shell, cell, opts, after, native_api, watch, values_of)
    finally:
        cellrecord.end(record)


def _run_cell(shell: Any, cell: str, opts: CellOptions,
              after: Callable[[report.CellSummary, BaseException | None, str], None] | None,
              native_api: bool, watch: bool, values_of: tuple[str, ...] = ()) -> Any:
    """:func:`run_cell`'s work, in the cell's open record."""
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    # The runtime's optimizations: automatic (the cell's own functions too) unless --no-optimize; --optimize: eager
    optimizer = CellOptimizer(opts)
    native = engine_of(cell, opts) if native_api else None  # a cell in Dask's or Ray's own API, on their engine
    compiled = compile_cell(shell, cell, None if native is not None else optimizer.transform)
    cellrecord.contribute(SOURCE, compiled.source)
    if native is not None:
        return run_native_cell(shell, compiled, opts, native, after, cell=cell)
    opts = _with_gpu_mode(opts)
    out_mode = display.mode(shell)
    rt = session.current(start=False)
    default = opts.workers
    if opts.compare and default is None:  # compare against the runtime's own size (started if needed)
        same = rt is not None and (opts.backend is None or rt.backend_name == opts.backend)
        default = int((rt if same else ensure_runtime(opts, None)).backend.info().workers)
    counts = opts.worker_counts(default)
    runs: list[report.Run] = []
    value: Any = None
    error: BaseException | None = None
    shown = False
    for i, n in enumerate(counts):
        main = i == len(counts) - 1
        if not main and out_mode != "text":
            display.publish(f"%%eugo: running on {n} worker{'s' if n != 1 else ''} for comparison")
        value, error, trace, shown = _run_once(shell, compiled, opts, n, live=main and opts.live, out_mode=out_mode,
                                               profile=main and (opts.profile or opts.optimize), optimizer=optimizer,
                                               watch=main and watch, values_of=values_of)
        runs.append(report.Run(int(trace.n_workers), trace))
        if error is not None:
            break
    main_trace = runs[-1].trace
    summary = report.summarize_cell(runs, error=error, opts=opts, shown=shown, namespace=shell.user_ns)
    summary.offload = offload_cell.last_ledger()  # --gpu: the per-operation report's section (None: off, no ops)
    # what the runtime did for you: --optimize, or on its own (also hpc.last_optimizations()); None: nothing ran
    summary.optimizations = optimizer.finish(session.current(start=False), main_trace)
    report.show(summary, out_mode)
    if opts.profile:  # -- %%eugo --profile: the merged profile of the main run, after the summary
        profile_display.show(main_trace, text_only=out_mode == "text")
    if after is not None:
        after(summary, error, out_mode)
    if error is not None:
        raise error
    return value
