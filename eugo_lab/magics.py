"""IPython magics: ``%%eugo`` runs a cell distributed and shows it live; ``%eugo`` manages the runtime.

Thin by design: parse and validate the line, then call :mod:`eugo_lab.cellrun` (running),
:mod:`eugo_lab.glossary` (vocabulary) and :mod:`eugo_lab.render` (displays). Arguments are
never evaluated (no ``{var}`` expansion, no ``eval``).

Load with ``%load_ext eugo_lab``. Only IPython is needed here: the live view's widgets (the
``lab`` extra) are optional, see :func:`eugo_lab.render.live.choose`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

try:
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
    from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
except ImportError as exc:  # IPython is not a core dependency: the magic only exists inside IPython anyway
    raise ImportError("eugo_lab.magics is the %%eugo magic for IPython and Jupyter, and IPython is not installed; "
                      "pip install ipykernel (or \"eugo-lab[lab]\" for JupyterLab and the live view)") from exc

from eugo_lab.cellrun import options as opt
from eugo_lab.contract.base import address_forms

SUBCOMMANDS = ("status", "stop", "glossary", "trace", "exercises", "hint", "guess", "checklist")


def options_help() -> str:
    """The one line of valid options a misused ``%%eugo`` shows (the engines as their descriptors name them now)."""
    return (f"-w/--workers N, -b/--backend {'|'.join(opt.known_backends())}, --address ADDR, --gpu auto|on|off, "
            "--optimize, --no-optimize, --compare, --scaling 1,2,4, --no-live, --profile, --save NAME, "
            "--export PATH, "
            "--exercise ID, --solution (see %%eugo?)")


def _backend_help() -> str:
    """``engine: local (default), dask, ray or threads``: the engines known when the magic is defined."""
    names = [f"{n} (default)" if n == "local" else n for n in opt.known_backends()]
    return "engine: " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0])


@magics_class
class EugoMagics(Magics):
    """``%%eugo`` and ``%eugo``."""

    @no_var_expand
    @magic_arguments()
    @argument("-w", "--workers", metavar="N", help="how many workers (default: the running runtime's, or the cores)")
    @argument("-b", "--backend", metavar="NAME", help=_backend_help())
    @argument("--address", metavar="ADDR", help=f"scheduler to connect to: {address_forms()}")
    @argument("--gpu", default=None, metavar="auto|on|off",
              help="NumPy on the GPU per operation: auto (the default where a GPU is), on, off")
    @argument("--optimize", action="store_true",
              help="JIT Python loops over arrays (Numba, result checked); report what the runtime did")
    @argument("--no-optimize", action="store_true",
              help="no automatic JIT in this cell: every function runs as plain Python")
    @argument("--compare", action="store_true", help="also run the cell on 1 worker and report the measured speedup")
    @argument("--scaling", metavar="1,2,4", help="run at each worker count; plot speedup vs ideal and simulated")
    @argument("--no-live", action="store_true", help="no live view: show the summary at the end only")
    @argument("--profile", action="store_true", help="sample every task on every worker; show the hottest "
              "functions and lines and an icicle view after the summary")
    @argument("--save", metavar="NAME", help="store the Trace in the variable NAME")
    @argument("--export", metavar="PATH", help="write a Perfetto/Chrome trace JSON to PATH")
    @argument("--exercise", metavar="ID", help="check the run as exercise ID after the summary and save the "
              "verdict to your progress (%%eugo exercises lists them)")
    @argument("--solution", action="store_true", help="with --exercise: the cell is the lesson's reference "
              "solution; graded and shown, never saved to your progress")
    @cell_magic
    def eugo(self, line: str, cell: str | None = None) -> Any:
        """Run the cell on workers, watch its tasks live, and get a summary with next steps.

        Example::

            %%eugo -w 4 --compare
            @hpc.remote
            def simulate(seed):
                return monte_carlo(seed)

            results = hpc.get([simulate.remote(s) for s in range(100)])

        The timeline shows one lane per worker (a bar per task, coloured by function) and
        a driver lane where get() blocked. After the cell: speedup, efficiency and findings,
        each with a next step and a glossary term (``%eugo glossary TERM``).
        ``hpc.last_trace()`` returns the cell's Trace. With ``--exercise ID`` the run is then
        checked against that exercise (``exercise ID: passed`` or ``not yet`` and what to do next);
        ``--exercise ID --solution`` marks the lesson's reference solution: graded the same way,
        never saved to your progress.
        """
        __tracebackhide__ = True  # IPython hides this frame in tracebacks
        from eugo_lab.cellrun.runner import run_cell

        try:
            args = parse_argstring(self.eugo, line)
        except UsageError as exc:
            raise UsageError(f"%%eugo: {exc}; valid options: {options_help()}") from None
        try:
            options = opt.build(workers=args.workers, backend=args.backend, address=args.address, gpu=args.gpu,
                                optimize=args.optimize, no_optimize=args.no_optimize, compare=args.compare,
                                scaling=args.scaling,
                                no_live=args.no_live, save=args.save, export=args.export, profile=args.profile)
            solution = opt.parse_solution(args.solution, args.exercise)
        except opt.OptionError as exc:
            raise UsageError(str(exc)) from None
        if args.exercise is not None:
            from eugo_lab.cellrun.exercise import run_exercise_cell
            from eugo_lab.exercises import UnknownExerciseError, catalog

            try:
                ex = catalog.get(args.exercise)
            except UnknownExerciseError as exc:
                raise UsageError(f"%%eugo --exercise: {exc}") from None
            run = functools.partial(run_exercise_cell, self.shell, cell or "", options, ex, solution=solution)
        else:
            run = functools.partial(run_cell, self.shell, cell or "", options)
        try:
            return run()
        except opt.OptionError as exc:  # a restart for -w/--compare/--scaling that would lose the runtime's options
            raise UsageError(str(exc)) from None

    @no_var_expand
    @line_magic("eugo")
    def eugo_line(self, line: str) -> Any:
        """Manage the runtime and look things up.

        ``%eugo status [--price P]``  backend, workers, running tasks, idle time, cost so far and its rate
        ``%eugo stop``                stop the runtime and its workers
        ``%eugo glossary [TERM]``     what a term means (no TERM: list the terms)
        ``%eugo trace``               summary of the last traced cell
        ``%eugo exercises``           every exercise, its lesson and your status (passed / not yet / not tried)
        ``%eugo hint [ID]``           the next hint for your last attempt at ID (no ID: the last exercise cell
                                      graded here): what to change, in words; a second call: the code
        ``%eugo guess NAME VALUE``    record your prediction before a measurement (``2x``, ``0.5 s``,
                                      ``300 ms``, ``40%``, ``12 MB``); the measurement prints it beside the result
        ``%eugo checklist NAME``      an interactive checklist (readiness, tuning, cost, ml); ``--fn F --args A
                                      --trace T`` name the notebook's variables its Measure buttons use
        """
        from eugo_lab.render import display, html, text

        words = line.split()
        sub = words[0] if words else ""
        rest = words[1:]
        mode = display.mode(self.shell)

        def show(plain: str, precise: str, rich: str | None) -> None:
            if mode == "text":
                print(precise)
            else:
                display.publish(plain, rich)

        if sub == "status":
            price = _price(rest)
            from eugo_lab.cellrun.status import status
            from eugo_lab.hpc import session

            try:
                st = status(session.current(start=False), price=price)
            except ValueError as exc:  # a malformed EUGO_LAB_PRICE_PER_WORKER_HOUR: say which and how to fix it
                raise UsageError(f"%eugo status: {exc}") from None
            show(text.status_text(st), text.status_text(st, precise=True), html.status_html(st))
        elif sub == "stop":
            if rest:
                raise UsageError(f"%eugo stop takes no arguments, got {' '.join(rest)!r}")
            from eugo_lab import hpc

            was = hpc.is_initialized()
            hpc.shutdown()
            msg = "eugo: runtime stopped; its workers are gone" if was else "eugo: no runtime was running"
            show(msg, msg, None)
        elif sub == "glossary":
            from eugo_lab import glossary

            if not rest:
                listing = "Glossary terms: " + ", ".join(glossary.terms())
                show(listing, listing, None)
                return
            try:
                entry = glossary.lookup(" ".join(rest))
            except glossary.UnknownTermError as exc:
                raise UsageError(str(exc)) from None
            show(entry.to_text(), entry.to_text(), entry._repr_html_())
        elif sub == "trace":
            if rest:
                raise UsageError(f"%eugo trace takes no arguments, got {' '.join(rest)!r}")
            from eugo_lab import hpc
            from eugo_lab.cellrun import report

            tr = hpc.last_trace()
            if tr is None:
                msg = "eugo: no trace yet; run a %%eugo cell or a 'with hpc.trace():' block first"
                show(msg, msg, None)
                return
            summary = report.latest()  # the cell's own, of that trace: its --compare runs and optimizations
            if summary is None:  # a 'with hpc.trace():' region
                summary = report.summarize([report.Run(tr.n_workers, tr)], error=None, options=dict(tr.meta))
                summary.optimizations = hpc.last_optimizations()
            else:  # the live timeline that stood in for the static one belongs to the cell's output
                summary = dataclasses.replace(summary, live_timeline_shown=False)
            show(text.summary_text(summary), text.summary_text(summary, precise=True), html.summary_html(summary))
        elif sub == "exercises":
            if rest:
                raise UsageError(f"%eugo exercises takes no arguments, got {' '.join(rest)!r}")
            from eugo_lab.exercises import listing

            found = listing.rows()
            plain = listing.listing_text(found)
            show(plain, plain, listing.listing_html(found))
        elif sub == "hint":
            if len(rest) > 1:
                raise UsageError(f"%eugo hint takes one exercise id at most, got {' '.join(rest)!r}")
            from eugo_lab import progress
            from eugo_lab.exercises import UnknownExerciseError, hints

            try:
                shown = hints.take(rest[0] if rest else None)
            except (UnknownExerciseError, hints.HintError) as exc:
                raise UsageError(f"%eugo hint: {exc}") from None
            except (OSError, progress.ProgressError) as exc:
                raise UsageError(f"%eugo hint: the progress store cannot be used: {exc}") from None
            show(shown.to_text(), shown.to_text(), shown.to_html())
        elif sub == "guess":
            from eugo_lab import guesses

            if len(rest) < 2:
                raise UsageError(f"%eugo guess needs a name and a value, e.g. %eugo guess batch-speedup 2x; the "
                                 f"value is {guesses.ACCEPTED} (got {' '.join(rest)!r})")
            try:
                guess, saved = guesses.record(rest[0], " ".join(rest[1:]), guesses.lesson_of_kernel(self.shell.user_ns))
            except guesses.GuessError as exc:
                raise UsageError(f"%eugo guess: {exc}") from None
            where = "saved with your progress" if saved else "kept in this kernel (it does not know its notebook)"
            msg = (f"your prediction ({guess.name}): {guess.text}, {where}; the measurement below prints it "
                   "beside what it measured")
            show(msg, msg, None)
        elif sub == "checklist":
            from eugo_lab.checklists import ChecklistError, view

            try:
                checklist = view.from_line(rest, self.shell.user_ns)
            except ChecklistError as exc:
                raise UsageError(f"%eugo checklist: {exc}") from None
            if mode == "text":
                print(checklist.to_text(precise=True))
                return None
            return checklist  # displayed by IPython as the widget, with a deterministic text/plain
        else:
            raise UsageError(f"%eugo needs a subcommand: {', '.join(SUBCOMMANDS)} (got {sub!r}); "
                             "use %%eugo (two %) to run a cell")


def _price(words: list[str]) -> float | None:
    if not words:
        return None  # the runtime's own rate (hpc.init, the settings variable), or no bill on your own machine
    if len(words) == 2 and words[0] == "--price":
        try:
            value = float(words[1])
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
        raise UsageError(f"--price must be a number >= 0 (per worker-hour), got {words[1]!r}")
    raise UsageError(f"%eugo status takes only --price P (per worker-hour), got {' '.join(words)!r}")


def load(ipython: Any) -> None:
    """Register the magics on ``ipython`` (called by ``%load_ext eugo_lab``)."""
    ipython.register_magics(EugoMagics)
