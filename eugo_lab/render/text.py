"""Plain-text renderers.

``precise=False`` gives the deterministic form used as ``text/plain`` of every rich display:
counts, names and choices only (no timings, speedups, hosts, pids or addresses), so a
notebook checked with nbval compares equal run after run. ``precise=True`` adds the
measured numbers and findings (terminal IPython prints that form).
"""

from __future__ import annotations

from typing import Any

from eugo_lab.units import fmt_seconds, plural


def arrays_only(s: Any) -> bool:
    """A cell that ran GPU-offloaded array operations and no task: its offload report is its whole story."""
    return not s.n_tasks and getattr(s, "offload", None) is not None and bool(s.offload.rows)


def summary_text(s: Any, precise: bool = False) -> str:
    """The summary of a ``%%eugo`` cell (a :class:`~eugo_lab.cellrun.report.CellSummary`).

    A cell of array operations and no task (:func:`arrays_only`) leads with its offload report:
    no task counts, speedup, efficiency or parallelism findings, which would describe nothing it did.
    """
    only_arrays = arrays_only(s)
    if only_arrays:
        head = f"%%eugo: {plural(s.offload.n_ops(), 'array operation')}, no tasks"
    else:
        head = f"%%eugo: {plural(s.n_tasks, 'task')} on {plural(s.workers, 'worker')} (backend {s.backend})"
    if s.error:
        head += f", stopped by {s.error}"
    lines = [head]
    if s.functions:
        lines.append("  functions: " + ", ".join(f"{name} x{n}" for name, n in s.functions.items()))
    cancelled = f", cancelled: {s.cancelled}" if s.cancelled else ""
    if not only_arrays and not getattr(s, "failures_reported", True):
        lines.append(f"  failed / retried: not reported by {s.backend}, blocking waits: {s.blocks}")
    elif not only_arrays:
        lines.append(f"  failed: {s.failed}, retried: {s.retried}{cancelled}, blocking waits: {s.blocks}")
    unrecorded = s.not_recorded_words() if hasattr(s, "not_recorded_words") else None
    if unrecorded:
        lines.append(f"  {unrecorded}")
    if getattr(s, "gpu_tasks", None):
        lines.append(f"  gpu tasks: {gpu_words(s.gpu_tasks, precise, getattr(s, 'gpus_detected', True))}")
    unwaited = s.unwaited_text(precise) if hasattr(s, "unwaited_text") else None
    if unwaited:
        lines.append(f"  {unwaited}")
    opts = s.options
    api = s.trace.meta.get("api") if getattr(s, "trace", None) is not None else None
    if api in ("dask", "ray"):  # the engine ran the cell's own tasks: eugo_lab offloads and compiles only its own
        lines.append(f"  gpu offload and automatic JIT: not applied (the cell's tasks are {api.capitalize()}'s own)")
    else:
        note = f" ({opts['gpu_note']})" if opts.get("gpu_note") else ""
        jit = "on" if opts.get("optimize") else "off" if opts.get("no_optimize") else "automatic"
        if jit == "automatic" and getattr(getattr(s, "optimizations", None), "in_force", ""):
            jit = s.optimizations.in_force  # off for the runtime or while profiling (optimize=True functions named)
        lines.append(f"  gpu: {opts.get('gpu', 'auto')}{note}, optimize: {jit}")
    # -- GPU offload: the per-operation report, when the cell ran NumPy operations --
    if getattr(s, "offload", None) is not None and s.offload.rows:
        from eugo_lab.render.offload import offload_view

        lines.extend("  " + line for line in offload_view(s.offload).to_text(precise).splitlines())
    # -- automatic optimizations: what the runtime did for you --
    if getattr(s, "optimizations", None) is not None:
        from eugo_lab.render.optimizations import optimizations_view

        lines.extend("  " + line for line in optimizations_view(s.optimizations).to_text(precise).splitlines())
    if len(s.runs) > 1:
        lines.append("  runs at workers: " + ", ".join(str(r.workers) for r in s.runs))
    if s.saved_as:
        lines.append(f"  trace saved as: {s.saved_as}")
    if s.exported_to:
        lines.append("  Perfetto trace exported (open it at ui.perfetto.dev)")
    if not precise:
        lines.append("  (timings, speedup and findings: see the rich view, or hpc.last_trace())")
        return "\n".join(lines)
    r = s.report
    if only_arrays:
        lines.append(f"  wall time {fmt_seconds(r.wall_time)}")
        return "\n".join(lines)
    headline = getattr(r, "headline", None)
    if headline is not None:
        lines.insert(1, "  " + headline())
    lead = lead_line(s)
    if lead:
        lines.insert(1, "  " + lead)
    driver = getattr(s, "driver", None)
    if driver is not None and not driver.ran_in_parallel:
        speed = (f"tasks side by side {fmt_seconds(driver.side_by_side)} (too little for a speedup to mean "
                 "something)")
    else:
        speed = f"{speedup_words(r)}, efficiency {r.efficiency:.0%}"
    # threads: the serial estimate leaves out time waiting for the interpreter lock, so it is no longer task time
    work = "task time" if getattr(r, "estimate_basis", "task time") == "task time" else "CPU time and waits"
    lines.append(f"  wall time {fmt_seconds(r.wall_time)}, {work} {fmt_seconds(r.serial_time)}, {speed}")
    if driver is not None:
        lines.append(f"  driver: {driver_words(driver)}")
    for w, sp in s.measured:
        lines.append(f"  measured speedup on {plural(w, 'worker')}: {sp:.1f}x")
    for w, sp in s.simulated:
        lines.append(f"  simulated speedup on {plural(w, 'worker')}: {sp:.1f}x")
    for f in getattr(r, "findings", ()) or ():
        lines.append(f"  - {f.verdict} [glossary: {f.term}]")
        if getattr(f, "advice", None):
            lines.append(f"    next step: {f.advice}")
        saving = f.saving_text() if hasattr(f, "saving_text") else ""
        if saving:
            lines.append(f"    {saving}")
    return "\n".join(lines)


def driver_words(d: Any) -> str:
    """``serializing 350 ms, submitting 2 ms, blocked 200 ms, own work 260 ms`` (a ``DriverTime``)."""
    return ", ".join(f"{k} {fmt_seconds(v)}" for k, v in (("serializing", d.serializing), ("submitting", d.submitting),
                                                          ("blocked", d.blocked), ("own work", d.own_work)))


def lead_line(s: Any) -> str | None:
    """The summary's first line when most of the cell was the driver's (a ``DriverTime`` sentence), else None.

    Cells of GPU array operations (``s.offload``) or ``--optimize`` cells lead with those
    reports' own layout: this returns None for them, and their renderers decide what comes first.
    The automatic optimizations' lines, which every cell has, do not count as such a report.
    """
    offload = getattr(s, "offload", None) is not None and s.offload.rows
    if offload or (s.options or {}).get("optimize"):
        return None
    d = getattr(s, "driver", None)
    return d.sentence() if d is not None and d.driver_led else None


def gpu_words(gpu_tasks: dict[int, int], precise: bool = False, detected: bool = True) -> str:
    """``3 tasks held GPU 0, 2 tasks held GPU 1`` from ``{device: tasks}`` (``Trace.gpu_tasks()``).

    The deterministic form (``precise=False``) names the device only when there is one: how
    tasks split over several GPU workers depends on timing, their total does not.
    ``detected=False``: the devices were named with no GPU found behind them (the trace's
    ``meta["gpus_detected"]``), so the words say the tasks ran on the CPU.
    """
    if precise or len(gpu_tasks) == 1:
        words = ", ".join(f"{plural(n, 'task')} held GPU {d}" for d, n in sorted(gpu_tasks.items()))
    else:
        words = f"{plural(sum(gpu_tasks.values()), 'task')} held a GPU"
    if not detected:
        words += (" (a device named with gpus=, no GPU detected on this machine: they ran on the CPU)"
                  if len(gpu_tasks) == 1 else
                  " (devices named with gpus=, no GPU detected on this machine: they ran on the CPU)")
    return words


def speedup_words(r: Any) -> str:
    """``speedup 1.2x measured against 1 worker (task-time estimate 1.5x)``, or the estimate labelled as one."""
    measured = getattr(r, "measured_speedup", None)
    basis = getattr(r, "estimate_basis", "task time")  # "CPU time" on the threads engine (analysis.gil)
    if measured is not None:
        return (f"speedup {measured:.1f}x measured against 1 worker "
                f"({basis.replace(' ', '-')} estimate {r.estimated_speedup:.1f}x)")
    if hasattr(r, "estimated_speedup"):
        return f"speedup {r.speedup:.1f}x (estimated from {basis})"
    return f"speedup {r.speedup:.1f}x"


def status_text(st: Any, precise: bool = False) -> str:
    """``%eugo status`` (a :class:`~eugo_lab.cellrun.status.Status`)."""
    if not st.running_runtime:
        return "eugo: no runtime is running (the next %%eugo cell or .remote() call starts one)"
    head = f"eugo runtime: backend {st.backend}, {plural(st.workers, 'worker')}"
    if not precise:
        return head + " (live numbers in the rich view)"
    return (f"{head}\n  tasks running: {st.running}, queued: {st.queued}, submitted: {st.submitted}\n"
            f"  up {fmt_seconds(st.elapsed)}, idle {fmt_seconds(st.idle)}\n"
            f"  cost: {st.cost_words()}")
