"""The summary of one ``%%eugo`` cell: its traces, the analysis report and the measured scaling.

The main run's trace is analysed once (:func:`eugo_lab.analysis.analyze`, with the cell's
1-worker run as baseline when there is one): the summary and an exercise's verdict read
that same :class:`~eugo_lab.analysis.Report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eugo_lab.contract import cellrecord
from eugo_lab.hpc.unwaited import future_names
from eugo_lab.render import display
from eugo_lab.render.html import summary_html
from eugo_lab.render.text import summary_text
from eugo_lab.renderable import Rendered

if TYPE_CHECKING:
    from eugo_lab.analysis.report import Report
    from eugo_lab.cellrun.options import CellOptions


@dataclass(frozen=True)
class Run:
    """One execution of the cell at a worker count."""

    workers: int
    trace: Any


@dataclass
class CellSummary(Rendered):
    """Everything the final display of a ``%%eugo`` cell shows (``to_text()``/``to_html()`` draw it)."""

    backend: str
    workers: int
    n_tasks: int  # tasks (hpc.map items), not attempts: a retried task counts once
    functions: dict[str, int]
    failed: int
    retried: int
    cancelled: int
    blocks: int
    error: str | None
    report: Report
    runs: list[Run]
    measured: list[tuple[int, float]]  # (workers, speedup vs the smallest count run), when several runs
    simulated: list[tuple[int, float]]  # (workers, predicted speedup) from simulate()
    options: dict[str, Any]
    live_timeline_shown: bool = False
    saved_as: str | None = None
    exported_to: str | None = None
    offload: Any = None  # --gpu auto|on: the cell's eugo_lab.offload Ledger (per-operation report), else None
    optimizations: Any = None  # --optimize: the cell's eugo_lab.optimizations.report.OptimizationReport, else None
    gpu_tasks: dict[int, int] = field(default_factory=dict)  # {device: tasks that held it} (gpus= tasks)
    gpus_detected: bool = True  # False: those devices were named with no GPU found behind them
    # -- tasks the cell submitted and never waited on (eugo_lab.hpc.unwaited) --
    unwaited: int = 0  # tasks (map items) still unfinished when the cell's code ended
    still_running: int = 0  # ...of which still unfinished when the trace closed (counted in n_tasks too)
    unwaited_names: list[str] = field(default_factory=list)  # the cell's variables holding their futures
    # -- the driver's time (eugo_lab.analysis.breakdown.DriverTime): leads the summary when it was most of the cell
    driver: Any = None
    # -- a cell recorded from Dask's or Ray's own events: what that engine does not report, said instead of guessed
    not_recorded: list[str] = field(default_factory=list)  # trace.meta["not_recorded"], one sentence each
    failures_reported: bool = True  # False: the engine does not say whether a task failed (Ray's timeline)

    def not_recorded_words(self) -> str | None:
        """``not recorded by ray: CPU time per task; ...`` (the part of each sentence before its colon), or None."""
        if not self.not_recorded:
            return None
        return f"not recorded by {self.backend}: " + "; ".join(s.split(":")[0] for s in self.not_recorded)

    def unwaited_text(self, precise: bool) -> str | None:
        """What to say about tasks the cell never waited on (None: it waited for all).

        ``precise=False`` words only what the code decides (how many it never waited on), not
        whether they finished within the trace's grace wait (timing), so ``text/plain`` stays deterministic.
        """
        if not self.unwaited:
            return None
        n = self.unwaited
        tasks = f"{n} task{'' if n == 1 else 's'}"
        call = (", ".join(f"hpc.get({name})" for name in self.unwaited_names) if self.unwaited_names
                else "hpc.get() on its future" if n == 1 else "hpc.get() on their futures")
        use = f"call {call} to use {'its result' if n == 1 else 'their results'}"
        if not precise:
            return f"never waited on in the cell: {tasks}; {use}"
        if self.still_running:
            k = self.still_running
            return (f"{k} task{'' if k == 1 else 's'} still running when the cell ended (never waited on): {use}; "
                    "the timeline and findings cover only what finished")
        return (f"{tasks} never waited on in the cell; the trace waited for {'it' if n == 1 else 'them'} to "
                f"finish, so {'it is' if n == 1 else 'they are'} included: {use}")

    @property
    def trace(self) -> Any:
        """The main run's trace (the last run)."""
        return self.runs[-1].trace

    def to_text(self, precise: bool = False) -> str:
        """The deterministic summary (``text/plain``); ``precise`` adds timings and findings (a terminal shows it)."""
        return summary_text(self, precise)

    def to_html(self) -> str:
        """The rich summary: measured numbers, the static timeline unless the live one was shown, findings."""
        return summary_html(self)


def summarize(runs: list[Run], *, error: BaseException | None, options: dict[str, Any],
              live_timeline_shown: bool = False, saved_as: str | None = None,
              exported_to: str | None = None, namespace: dict[str, Any] | None = None) -> CellSummary:
    """Assemble the summary of a cell from its runs (the last run is the main one).

    ``namespace``: the user's variables, to name the futures of tasks the cell never waited on.
    """
    import numpy as np

    from eugo_lab.analysis import analyze, simulate  # imported by the first cell, not by %load_ext
    from eugo_lab.analysis.breakdown import driver_time

    main = runs[-1].trace
    t = main.tasks
    attempts = np.asarray(t["attempt"])
    ended = main.status_counts()
    # A trace row is one attempt; a task retried after a crash has two. Count tasks (first
    # attempts), as the live counters do, so "8 tasks, retried 1" is not "9 tasks".
    functions = {name: n for name, n in main.task_counts().items() if n}
    running = {str(k): int(v) for k, v in dict(main.meta.get("running_at_end") or {}).items()}
    for name, n in running.items():  # submitted in the cell, not back yet: still the cell's tasks
        functions[name] = functions.get(name, 0) + n
    # One speedup story: with a 1-worker run among the cell's runs, the report's speedup is measured against it.
    one = [r for r in runs[:-1] if r.workers == 1]
    baseline = one[0].trace if one and error is None and runs[-1].workers > 1 else None
    report = analyze(main, baseline=baseline)
    measured: list[tuple[int, float]] = []
    simulated: list[tuple[int, float]] = []
    if len(runs) > 1 and error is None:
        base = min(runs, key=lambda r: r.workers)
        base_time = base.trace.wall_time * base.workers  # as if run on 1 worker (exact when the base is 1)
        measured = [(r.workers, base_time / r.trace.wall_time if r.trace.wall_time > 0 else 0.0) for r in runs]
        simulated = [(int(row.workers), float(row.speedup)) for row in simulate(main, [r.workers for r in runs])]
    return CellSummary(
        backend=str(main.meta.get("backend", "?")), workers=main.n_workers,
        n_tasks=int(np.count_nonzero(main.first_attempts())) + sum(running.values()),
        functions=dict(sorted(functions.items())), failed=ended["error"] + ended["crashed"],
        cancelled=ended["cancelled"],
        retried=int(np.count_nonzero(attempts > 1)), blocks=len(main.blocks["kind"]),
        error=None if error is None else type(error).__name__, report=report, runs=list(runs),
        measured=measured, simulated=simulated, options=dict(options), live_timeline_shown=live_timeline_shown,
        saved_as=saved_as, exported_to=exported_to, gpu_tasks=main.gpu_tasks() if hasattr(main, "gpu_tasks") else {},
        gpus_detected=main.meta.get("gpus_detected", True) is not False,
        unwaited=int(main.meta.get("unwaited_tasks", 0) or 0), still_running=sum(running.values()),
        unwaited_names=future_names(namespace, main.meta), driver=driver_time(main),
        not_recorded=[str(x) for x in main.meta.get("not_recorded") or ()],
        failures_reported=not main.meta.get("failures_unreported", False),
    )


def summarize_cell(runs: list[Run], *, error: BaseException | None, opts: CellOptions, shown: bool,
                   namespace: dict[str, Any]) -> CellSummary:
    """The summary of a ``%%eugo`` cell run with ``opts``, after keeping its main run's trace as asked.

    ``--save NAME`` puts the trace in ``namespace`` (the notebook's variables) and ``--export FILE``
    writes it as a Chrome trace; ``shown``: the live timeline was shown.
    """
    trace = runs[-1].trace
    if opts.save:
        namespace[opts.save] = trace
    if opts.export:
        trace.to_chrome_trace(opts.export)
    return summarize(runs, error=error, options=opts.meta(), live_timeline_shown=shown, saved_as=opts.save,
                     exported_to=opts.export, namespace=namespace)


def show(summary: CellSummary, out_mode: str) -> None:
    """Remember ``summary`` as the latest cell's and show it: as text for ``out_mode`` "text", else rich."""
    remember(summary)  # %eugo trace shows this summary again, not a re-analysis of the main run alone
    if out_mode == "text":
        print(summary.to_text(precise=True))
    else:
        display.show(summary)


# The latest cell's summary, in its cell record: ``%eugo trace`` shows it again rather than re-analysing its trace
# alone, which lost the cell's 1-worker runs (a measured speedup became an estimate) and its optimizations. It
# follows the record's trace: a region after the cell (whose trace becomes the latest) empties it.
SUMMARY = cellrecord.register(cellrecord.Slot("summary", "the CellSummary of the latest %%eugo cell's main run",
                                              follows_trace=True))


def remember(summary: CellSummary) -> None:
    """Keep ``summary`` as the latest cell's (called once per ``%%eugo`` cell, after it is shown)."""
    cellrecord.contribute(SUMMARY, summary)


def latest() -> CellSummary | None:
    """The summary of the latest cell, if the latest trace is its main run's (None: a region's, or none)."""
    return cellrecord.read(SUMMARY)
