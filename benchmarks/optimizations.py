"""Automatic optimizations, measured: JIT on a loop stencil, the thread guard, call coalescing.

    python -m benchmarks.optimizations            # Markdown table on stdout (for RESULTS.md)
    python -m benchmarks.optimizations --quick    # fewer rounds (a smoke run)
    python -m benchmarks.optimizations --auto-cost  # only the automatic JIT's cost where nothing qualifies

Method (2 shared cores, CPU speed drifting by up to ~25%): the things compared alternate
round by round and every cell is a median over the rounds with its min-max.

- **JIT**: a 3-point stencil over 1e6 float64 as a Python loop, plain vs ``numba.njit``
  (``compile`` timed on its own, then the compiled call), in this process; then the same
  function through ``@hpc.remote(optimize=True)`` on 2 local workers, where the first call
  per worker is the trial and later calls run compiled (median task body from the trace).
- **Thread guard**: 2 local workers each running 100 small matmuls (128x128) per task, 8 tasks,
  with the guard (threads = cores / workers) and without (each worker's BLAS on every core,
  as an unguarded process starts it): wall time of the 8 tasks, pools started fresh each round.
- **Automatic JIT** (no annotation, :mod:`eugo_lab.jit.auto`): three loop-heavy functions of the
  courses (the stencil ``smooth``, course 3's ``norm_loop`` and ``histogram``) through the same
  wrapper the runtime puts around every task, in this process: after the calls that qualified it,
  its compile and its trial, plain vs automatic calls alternate round by round (median call;
  re-checked calls included as they come: calls 8 and 64 after the swap, then 1 in 256); results
  compared with ``np.array_equal``. Then a NumPy-vectorized function and a tiny one (neither
  qualifies), each with the wrapper vs without, alternated; and a cell where nothing qualifies
  (2000 tasks on 2 local workers: tiny, ``*args``, pandas, small NumPy, a C function), run with
  ``hpc.init(optimize=True)``, ``optimize=False`` and ``optimize=False`` again in rotating order,
  as the median of each round's ratio (target < 1.02; off again / off is its noise floor), on a fresh
  runtime and on warm workers, with each process's CPU (``--auto-cost``: this alone, more rounds).
- **Batching**: a tight loop of tiny ``.remote()`` calls, plain vs ``batch="auto"``, on the
  local pool and on Dask (whose per-task cost is ~2 ms): submit-to-all-results wall time; and
  ``hpc.map`` over the same items with the batch sizes it chose (from the trace's batch column).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import time

import numpy as np

from benchmarks.stencil import smooth
from eugo_lab import hpc
from eugo_lab.backends.local_process import usable_cores


def matmuls(seed):
    """100 small matmuls (128x128): the calls BLAS oversubscription slows down most (64x64 stay single-threaded)."""
    rng = np.random.default_rng(seed)
    a = rng.random((128, 128))
    b = rng.random((128, 128))
    for _ in range(100):
        a = (a @ b) / 128.0
    return float(a.sum())


def tiny(x):
    """A call of about a microsecond."""
    return x + 1


def _med(xs: list[float]) -> tuple[float, float, float]:
    return statistics.median(xs), min(xs), max(xs)


def _fmt(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def _cell(xs: list[float]) -> str:
    m, lo, hi = _med(xs)
    return f"{_fmt(m)} ({_fmt(lo)}-{_fmt(hi)})"


def bench_jit(rounds: int) -> list[tuple[str, str, str]]:
    """In-process plain vs compiled, and through the runtime with optimize=True."""
    a = np.random.default_rng(0).random(1_000_000)
    t0 = time.perf_counter()
    import numba

    import_s = time.perf_counter() - t0
    disp = numba.njit(smooth)
    t0 = time.perf_counter()
    disp.compile((numba.typeof(a),))
    compile_s = time.perf_counter() - t0
    plain, fast, first = [], [], []
    for _ in range(rounds):  # alternated: plain, compiled, plain, ...
        t0 = time.perf_counter()
        ref = smooth(a)
        plain.append(time.perf_counter() - t0)
        calls = []
        for _ in range(5):  # the first call pays page faults for its fresh 8 MB output; later ones reuse it
            t0 = time.perf_counter()
            out = disp(a)
            calls.append(time.perf_counter() - t0)
        first.append(calls[0])
        fast.append(statistics.median(calls[1:]))
        assert np.allclose(ref, out)
    ratio = statistics.median(plain) / statistics.median(fast)
    rows = [("JIT: stencil 1e6, plain Python loop", _cell(plain), "per call"),
            ("JIT: same, numba.njit (after compile)", _cell(fast), f"**{ratio:.0f}x** faster (target >= 100x)"),
            ("JIT: first compiled call (fresh output pages)", _cell(first), ""),
            ("JIT: numba import / compile", f"{_fmt(import_s)} / {_fmt(compile_s)}", "once per worker process")]
    hpc.init("local", workers=2)
    try:
        f = hpc.remote(optimize=True)(smooth)
        with hpc.trace() as region:
            hpc.get([f.remote(a) for _ in range(8)])
        from eugo_lab.jit.verdicts import verdicts_from_trace
        from eugo_lab.optimizations.report import build

        tr = region.trace
        t = tr.tasks
        body = (np.asarray(t["end"]) - np.asarray(t["start"])).tolist()
        trial_rows = {int(r) for r in tr.phases["row"]}
        later = [b for i, b in enumerate(body) if i not in trial_rows]
        v = verdicts_from_trace(tr)[0]
        rows.append(("JIT via optimize=True, 2 workers: trial task (plain + compile + check)",
                     _cell([b for i, b in enumerate(body) if i in trial_rows]), f"{v.compiles} compiles"))
        if later:
            rows.append(("JIT via optimize=True: later tasks (compiled)", _cell(later), "task body incl. argument"))
        rows.append(("report line", build(tr, None).find("smooth", "jit").precise, ""))
    finally:
        hpc.shutdown()
    return rows


def _matmul_wall(threads: int) -> float:
    hpc.init("local", workers=2, threads_per_worker=threads)
    try:
        f = hpc.remote(matmuls)
        hpc.get([f.remote(i) for i in range(2)])  # warm: NumPy imported, BLAS threads started
        t0 = time.perf_counter()
        hpc.get([f.remote(i) for i in range(8)])
        return time.perf_counter() - t0
    finally:
        hpc.shutdown()


def bench_threads(rounds: int) -> list[tuple[str, str, str]]:
    """Small matmuls in 2 workers, guard on (cores/2 threads) vs off (all cores per worker)."""
    cores = usable_cores()
    guarded, unguarded = [], []
    for r in range(rounds):
        order = [(guarded, max(1, cores // 2)), (unguarded, cores)]
        for out, n in order if r % 2 == 0 else reversed(order):
            out.append(_matmul_wall(n))
    ratio = statistics.median(unguarded) / statistics.median(guarded)
    return [(f"thread guard: 8 tasks x 100 matmuls 128x128, 2 workers, {max(1, cores // 2)} BLAS thread(s) each",
             _cell(guarded), f"guard on ({cores} cores / 2 workers)"),
            (f"same, {cores} BLAS threads per worker (no guard)", _cell(unguarded), f"**{ratio:.1f}x** slower")]


def norm_loop(x, y):
    """Course 3, lesson 2: the loop the vectorization exercise starts from."""
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = math.sqrt(x[i] * x[i] + y[i] * y[i])
    return out


def histogram(values, bins):
    """Course 3, lesson 3: the loop the JIT exercise compiles."""
    counts = np.zeros(bins, dtype=np.int64)
    for i in range(len(values)):
        counts[int(values[i] * bins)] += 1
    return counts


def vectorized_norm(x, y):
    """NumPy's C code already: the automatic JIT must leave it alone (and cost nothing)."""
    return np.sqrt(x * x + y * y)


def _alternate(a, b, rounds: int, calls: int = 1) -> tuple[list[float], list[float]]:
    """CPU seconds per call of ``a()`` and ``b()``, alternated round by round."""
    ta, tb = [], []
    for _ in range(rounds):
        for f, out in ((a, ta), (b, tb)):
            t0 = time.thread_time()
            for _ in range(calls):
                f()
            out.append((time.thread_time() - t0) / calls)
    return ta, tb


def bench_auto(rounds: int) -> list[tuple[str, str, str]]:
    """The JIT without annotation: >= 20x on loops after the first call, identical results; no cost elsewhere."""
    from eugo_lab.jit import auto

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=200_000), rng.normal(size=200_000)
    values = rng.random(200_000)
    cases = [("smooth (1e6 float64 stencil)", smooth, (rng.random(1_000_000),)),
             ("norm_loop (2e5 elements)", norm_loop, (x, y)),
             ("histogram (2e5 values, 20 bins)", histogram, (values, 20))]
    rows = []
    for name, fn, args in cases:
        w = auto.AutoJit(fn, f"bench:{fn.__name__}")
        first = w(*args)
        for _ in range(50):  # until its trial kept it (a few plain calls, the background compile, the trial)
            st = auto.state_of(w.key)
            if st is not None and any(s.status == auto.COMPILED for s in st.sigs.values()):
                break
            auto.wait_for_compiles()
            w(*args)
        same = all(np.array_equal(w(*args), fn(*args)) for _ in range(3)) and np.array_equal(first, fn(*args))
        plain, fast = _alternate(lambda fn=fn, args=args: fn(*args), lambda w=w, args=args: w(*args), rounds * 3)
        ratio = statistics.median(plain) / statistics.median(fast)
        st = auto.state_of(w.key)
        kept = st is not None and any(s.status == auto.COMPILED for s in st.sigs.values())
        # A loop the automatic JIT cannot prove exact for every input stays plain: say why instead of a target.
        why = "" if kept or st is None or not st.said else st.said[-1].split(" [", 1)[0].removeprefix("jit: ")
        rows.append((f"auto JIT: {name}: plain vs automatic (after the first call)",
                     f"{_cell(plain)} -> {_cell(fast)}",
                     (f"**{ratio:.0f}x** (target >= 20x)" if kept else f"{ratio:.1f}x, {why}")
                     + f"; results identical: {'yes' if same else 'NO'}"))
    # A cell's own functions that never qualify: called through the cell's namespace (a global lookup), as a
    # cell calls them; once not tried, the name is bound to the plain function again.
    for name, fn, args, calls in (("NumPy-vectorized norm", vectorized_norm, (x, y), 20),
                                  ("a tiny function (x + 1)", tiny, (3,), 20_000)):
        key, plain_ns, ns = fn.__name__, {fn.__name__: fn}, {}
        ns[key] = auto.CellFunction(fn, f"bench:{key}", ns)
        for _ in range(300):
            ns[key](*args)  # past its decision (not tried): the name is the plain function again
        plain, wrapped = _alternate(lambda p=plain_ns, k=key, a=args: p[k](*a), lambda n=ns, k=key, a=args: n[k](*a),
                                    rounds * 3, calls)
        ratio = statistics.median(wrapped) / statistics.median(plain)
        status = auto.state_of(f"bench:{fn.__name__}").status
        rows.append((f"auto JIT: {name}, a cell's function: wrapped vs JIT off ({status})",
                     f"{_cell(plain)} vs {_cell(wrapped)}", f"**{ratio:.3f}x** the time (target <= 1.05x)"))
    return rows + _auto_cell_cost(rounds * 2)


# A cell where the automatic JIT has nothing to compile: one kind of task each way a function cannot qualify.
_NOTHING_QUALIFIES = """
import math
import numpy as np
import pandas as pd

def tiny_{r}(x):
    return x + {r}

def first_of_{r}(*a):
    return a[0] + {r}

def frame_{r}(x):
    return int(pd.Series([x, {r}]).sum())

def small_numpy_{r}(x):
    return float(np.sqrt(x * x + {r}).sum())

sqrt_{r} = math.sqrt
"""
_KINDS = ("tiny", "first_of", "frame", "small_numpy", "sqrt")


def _warm(seconds: float) -> None:
    """Import what the cell's tasks import (pandas, NumPy) on a worker, outside the JIT (declared optimize=False)."""
    import time as t

    import pandas  # noqa: F401

    t.sleep(seconds)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, all threads) so far of process ``pid``.

    On Linux, the process's CPU clock (nanoseconds; ``clock_getcpuclockid``'s id, which
    ``time.clock_gettime`` reads for another process): psutil's times count 10 ms ticks, as much
    as the cost measured here.
    """
    if sys.platform == "linux":
        try:
            return time.clock_gettime(((~pid) << 3) | 2)  # CPUCLOCK_SCHED of the whole process
        except OSError:
            pass
    import psutil

    return sum(psutil.Process(pid).cpu_times()[:2])


def _nothing_qualifies(r: int, n: int) -> tuple[float, list[float]]:
    """Submit-to-results wall time of ``n`` tasks, a fifth of each kind, of functions the workers have never seen.

    Also the CPU the driver and each worker used meanwhile (steadier than the wall time on a shared machine).
    """
    from eugo_lab.hpc import session

    pids = [os.getpid(), *session.current().backend.worker_pids()]
    g: dict = {"__name__": "__main__"}
    exec(_NOTHING_QUALIFIES.format(r=r), g)  # fresh code per round: every round pays the JIT's first look again
    small = np.arange(100.0)
    fns = {k: hpc.remote(g[f"{k}_{r}"]) for k in _KINDS}
    calls = [(fns[k], small if k == "small_numpy" else float(i) if k == "sqrt" else i)
             for i in range(n // len(_KINDS)) for k in _KINDS]
    c0, t0 = [_cpu_seconds(p) for p in pids], time.perf_counter()
    hpc.get([f.remote(a) for f, a in calls])
    wall = time.perf_counter() - t0
    return wall, [_cpu_seconds(p) - c for p, c in zip(pids, c0)]


# Rounds of --auto-cost alone (each starts three runtimes, ~1.5 s): a cell's time varies by 10-20% from round
# to round on a shared 2-core machine, so telling 2% from nothing takes medians over dozens.
AUTO_COST_ROUNDS = 24
# The runtimes each round of _auto_cell_cost starts: JIT on, JIT off, and JIT off again (the noise floor:
# the same thing measured twice, whose ratio says how far from 1 the on / off ratio may stray by chance).
_SIDES = (("on", True), ("off", False), ("off again", False))


def _paired(xs: dict[str, list[float]], side: str) -> float:
    """The median over the rounds of each round's ``side`` / ``off``.

    Paired by round: the load other processes put on a shared machine drifts over minutes, and
    one round's three runtimes (~1.5 s) see about the same load.
    """
    return statistics.median(a / b for a, b in zip(xs[side], xs["off"]))


def _auto_cell_cost(rounds: int, n: int = 2000) -> list[tuple[str, str, str]]:
    """A cell where nothing qualifies, on 2 local workers: ``hpc.init(optimize=True)`` over ``optimize=False``.

    Per kind of cell, the median over ``rounds`` rounds of each round's ratio, each round starting the
    three runtimes of :data:`_SIDES` in a rotating order (each side comes first, second and last
    equally often):
    the first such cell on a fresh runtime (each worker imports the JIT's wrapper with its first
    task), and a later cell on warm workers (new code each round: the watching starts again).
    Both sides import pandas on every worker beforehand, with a function declared optimize=False.
    The hook is installed as in a notebook (``%load_ext eugo_lab`` imports it).
    """
    import eugo_lab.hpc.optimized  # noqa: F401 - hooks the automatic JIT into every call, as the magic does

    warm = hpc.remote(optimize=False)(_warm)
    fresh: dict[str, list[tuple[float, list[float]]]] = {name: [] for name, _ in _SIDES}
    later: dict[str, list[tuple[float, list[float]]]] = {name: [] for name, _ in _SIDES}
    for r in range(rounds):
        shift = r % len(_SIDES)
        order = _SIDES[shift:] + _SIDES[:shift]
        for i, (name, on) in enumerate(order if r % 2 == 0 else order[::-1]):
            hpc.init(workers=2, optimize=on)
            try:
                hpc.get([warm.remote(0.05) for _ in range(4)])  # both workers, as they would be after an import cell
                fresh[name].append(_nothing_qualifies(10 * r + i, n))
                later[name].append(_nothing_qualifies(100_000 + 10 * r + i, n))
            finally:
                hpc.shutdown()
    med = statistics.median
    rows = []
    for label, runs in (("the first cell on a fresh runtime", fresh), ("a later cell, new functions", later)):
        wall = {k: [w for w, _ in v] for k, v in runs.items()}
        cpu = {k: [sum(c) for _, c in v] for k, v in runs.items()}
        ratio, floor = _paired(wall, "on"), _paired(wall, "off again")
        # Per process, on minus off (medians): where a cost is, the driver or the workers.
        driver = med(c[0] for _, c in runs["on"]) - med(c[0] for _, c in runs["off"])
        workers = med(sum(c[1:]) for _, c in runs["on"]) - med(sum(c[1:]) for _, c in runs["off"])
        verdict = "under the target" if ratio < 1.02 else "not under the target"
        rows.append((f"auto JIT: a cell where nothing qualifies ({n} tasks: x + 1, *args, pandas, 100-element "
                     f"NumPy, math.sqrt; 2 workers), {label}: optimize=True / optimize=False",
                     f"off {_cell(wall['off'])} vs on {_cell(wall['on'])}",
                     f"**{ratio:.3f}** wall (target < 1.02: {verdict}; off again / off: {floor:.3f}); "
                     f"CPU of driver and workers {_paired(cpu, 'on'):.3f} (off again / off: "
                     f"{_paired(cpu, 'off again'):.3f}), on - off: driver {driver * 1e3:+.1f} ms, "
                     f"workers {workers * 1e3:+.1f} ms"))
    return rows


def _loop_wall(fn, n: int) -> float:
    t0 = time.perf_counter()
    hpc.get([fn.remote(i) for i in range(n)])
    return time.perf_counter() - t0


def bench_batching(rounds: int, engines: list[str]) -> list[tuple[str, str, str]]:
    """Tight loops of tiny .remote() calls, plain vs batch='auto'; hpc.map's batch sizes."""
    rows = []
    for engine in engines:
        n = 5000 if engine == "local" else 1000
        hpc.init(engine, workers=2)
        try:
            plain_fn = hpc.remote(tiny)
            hpc.get([plain_fn.remote(0) for _ in range(20)])  # warm the workers
            plain, auto, tasks = [], [], []
            for r in range(rounds):
                auto_fn = hpc.remote(batch="auto")(tiny)  # fresh each round: it measures itself again
                runs = [("plain", plain_fn), ("auto", auto_fn)]
                for label, fn in runs if r % 2 == 0 else reversed(runs):
                    (plain if label == "plain" else auto).append(_loop_wall(fn, n))
                tasks.append(auto_fn._coalescer.stats().backend_tasks)
            ratio = statistics.median(plain) / statistics.median(auto)
            rows.append((f"{engine}: {n} tiny .remote() calls, plain", _cell(plain), f"{n} backend tasks"))
            rows.append((f"{engine}: same with batch=\"auto\"", _cell(auto),
                         f"**{ratio:.1f}x**; {int(statistics.median(tasks))} backend tasks (median)"))
            with hpc.trace() as region:
                t0 = time.perf_counter()
                hpc.get(hpc.map(plain_fn, range(n)))
                wall = time.perf_counter() - t0
            from eugo_lab.optimizations.report import map_batches

            m = map_batches(region.trace)[0]
            rows.append((f"{engine}: hpc.map over the same {n} items", _fmt(wall),
                         f"{m.numbers['batches']} batches, largest {m.numbers['largest_batch']} items"))
        finally:
            hpc.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark and print the Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds instead of 5")
    ap.add_argument("--auto-cost", action="store_true",
                    help="only the automatic JIT's cost on a cell where nothing qualifies (its ratio on / off), "
                         f"{AUTO_COST_ROUNDS} rounds (--quick: {AUTO_COST_ROUNDS // 4})")
    ap.add_argument("--engines", default="local,dask", help="engines for the batching rows (default local,dask)")
    args = ap.parse_args(argv)
    rounds = 2 if args.quick else 5
    if args.auto_cost:
        # Its own rounds: the ratio's target (2%) is a fraction of the round-to-round spread of a cell's time.
        rounds = AUTO_COST_ROUNDS // 4 if args.quick else AUTO_COST_ROUNDS
        rows = _auto_cell_cost(rounds)
    else:
        rows = bench_jit(rounds) + bench_auto(rounds) + bench_threads(rounds)
        rows += bench_batching(rounds, args.engines.split(","))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"## Automatic optimizations: {when} (`python -m benchmarks.optimizations`, {rounds} rounds)\n")
    print(f"{usable_cores()} cores, load average {load}, Python {sys.version.split()[0]}, NumPy {np.__version__}. "
          "Cells: median (min-max) over the rounds; compared things alternate round by round.\n")
    print("| what | measured | note |\n|---|---|---|")
    for what, measured, note in rows:
        print(f"| {what} | {measured} | {note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
