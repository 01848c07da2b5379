"""The measurements. Each function records raw samples; report.py turns them into tables.

A sample is a dict: ``wall`` (perf_counter seconds), ``cpu`` (the driver's process_time
seconds, all its threads) and scenario-specific extras. Wall clock drifts ~25% on this
shared 2-core VM, so engines alternate round by round (run.py) and the driver's CPU time
is kept beside the wall time: it shows what an engine costs even when the clock is noisy.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks import tasks
from benchmarks.engines import WORKERS, Engine, EugoLab

ROOT = Path(__file__).resolve().parents[1]


def timed(fn: Callable[[], Any]) -> tuple[Any, dict]:
    """Run ``fn`` once; return its result and a sample with wall and driver CPU seconds."""
    c, t = time.process_time(), time.perf_counter()
    out = fn()
    return out, {"wall": time.perf_counter() - t, "cpu": time.process_time() - c}


# -- in-process scenarios: one engine started, run in turn by run.py ----------------------------
def tiny(eng: Engine, n: int) -> dict:
    """``n`` no-op tasks, one call each, all submitted then gathered."""
    n = min(n, eng.tiny_cap or n)
    args = list(range(n))
    out, s = timed(lambda: eng.each(tasks.noop, args))
    assert out == args, f"{eng.name}: wrong results"
    return {**s, "items": n}


def batched(eng: Engine, n: int) -> dict:
    """``n`` tiny items through the engine's best batched path."""
    items = list(range(n))
    out, s = timed(lambda: eng.batched(tasks.noop, items))
    assert list(out) == items, f"{eng.name}: wrong results"
    return {**s, "items": n}


def pending_memory(eng: Engine, n: int, settle: float = 0.2) -> dict:
    """Driver memory an ``n``-item batched map holds while its items are pending.

    The items wait on a gate file (:func:`tasks.gated`), so none finishes while
    ``tracemalloc`` (every thread's Python and NumPy allocations) measures what the map's
    call left allocated, ``settle`` seconds later (the engines' feeder threads have pickled
    what they pickle ahead by then). Then the gate opens and the results are checked.
    ``wall``: how long the call took to return.
    """
    import tracemalloc

    gate = Path(os.environ[tasks.GATE_ENV])
    items = list(range(n))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        t = time.perf_counter()
        gather = eng.start_map(tasks.gated, items)
        wall = time.perf_counter() - t
        time.sleep(settle)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        gate.touch()
    try:
        out = gather()
    finally:
        gate.unlink(missing_ok=True)
    assert list(out) == items, f"{eng.name}: wrong results"
    return {"wall": wall, "items": n, "bytes_per_item": held / n}


def cpu_speedup(eng: Engine, n_tasks: int, iters: int, flip: bool) -> dict:
    """``n_tasks`` CPU-bound tasks on 1 worker vs 2 workers.

    "1 worker" runs the tasks one at a time on the same pool (each submitted when the
    previous one returned): exactly one worker busy, without restarting the engine (a Ray
    or ipyparallel restart costs 8-25 s per round).

    - ``speedup_wall`` = t1 / t2, as measured.
    - ``speedup_cpu``: cores' worth of task CPU delivered per second of the 2-worker run,
      with time stolen by other processes taken out (physical limit 2.0). Inside a task,
      wall - CPU (process_time) is time it was runnable while another process on this
      shared VM held the core; the run's wall time is corrected to
      t2 - max_w(sum of task wall on worker w) + max_w(sum of task CPU on worker w), and
      speedup_cpu = sum of task CPU / corrected t2. Dispatch and idle gaps stay in. (The
      1-worker run's CPU is not used: hypervisor steal inflates CPU time too, and it
      drifts between the two runs.)
    - ``stolen_2w``: fraction of in-task wall time stolen in the 2-worker run.
    """
    args = [iters] * n_tasks
    res: dict = {}
    for mode in (("two", "one") if flip else ("one", "two")):
        run = eng.one_at_a_time if mode == "one" else eng.each
        out, s = timed(lambda run=run: run(tasks.burn, args))
        per_wall: dict[int, float] = {}
        per_cpu: dict[int, float] = {}
        for c, w, pid in out:
            per_wall[pid] = per_wall.get(pid, 0.0) + w
            per_cpu[pid] = per_cpu.get(pid, 0.0) + c
        res[mode] = {**s, "task_cpu": sum(per_cpu.values()), "task_wall": sum(per_wall.values()),
                     "corrected": s["wall"] - max(per_wall.values()) + max(per_cpu.values()),
                     "workers_used": len(per_wall)}
    one, two = res["one"], res["two"]
    return {"wall": two["wall"], "cpu": two["cpu"], "wall_1w": one["wall"],
            "speedup_wall": one["wall"] / two["wall"], "speedup_cpu": two["task_cpu"] / two["corrected"],
            "stolen_2w": 1 - two["task_cpu"] / two["task_wall"],
            "task_cpu_1w": one["task_cpu"], "task_cpu_2w": two["task_cpu"], "task_wall_2w": two["task_wall"],
            "wall_2w_corrected": two["corrected"], "workers_used_2w": two["workers_used"]}


def array_to_tasks(eng: Engine, mb: int, k: int = 8) -> dict[str, dict]:
    """A ``mb`` MB array to ``k`` tasks: by value, and through put/scatter where the engine has one."""
    a = np.ones(mb * 1_000_000 // 8)
    want = tasks.array_sum(a)
    out = {}
    for how in ("by value", "put"):
        if how == "put" and not eng.has_put:
            continue
        run = eng.by_value if how == "by value" else eng.via_put
        res, s = timed(lambda run=run: run(tasks.array_sum, a, k))
        assert list(res) == [want] * k, f"{eng.name}: wrong results"
        out[how] = s
    return out


def tracing_cost(n: int, n_map: int, pairs: int, flip: bool) -> dict[str, list[dict]]:
    """Eugo Lab with tracing on vs off, alternating within the round (pools already warm)."""
    on, off = EugoLab(traced=True), EugoLab(traced=False)
    from eugo_lab import hpc

    on.hpc = off.hpc = hpc
    out: dict[str, list[dict]] = {k: [] for k in ("each on", "each off", "map on", "map off")}
    for p in range(pairs):
        order = (on, off) if (p % 2 == 0) != flip else (off, on)
        for eng in order:
            tag = "on" if eng.traced else "off"
            out[f"each {tag}"].append(tiny(eng, n))
            out[f"map {tag}"].append(batched(eng, n_map))
    return out


# -- fresh interpreters: one engine block per round, bare start, import time ---------------------
def bare_start(env: dict) -> float:
    """Seconds from spawning the block harness to its probe with no engine (subtracted in ``from_spawn``).

    The same ``python -m benchmarks.block`` command, its imports included, so only the
    engine's own start remains in the difference.
    """
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "benchmarks.block", "bare", "{}", "0"], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=60)
    line = next(x for x in out.stdout.splitlines() if x.startswith("BENCH_PROBE "))
    return json.loads(line.split(" ", 1)[1])["t"] - t0


def engine_block(name: str, sizes: dict, flip: bool, env: dict, bare: float, timeout: float = 900
                 ) -> tuple[dict, dict, list[str]]:
    """Run benchmarks.block for one engine in a fresh interpreter.

    Returns (startup sample with memory, scenario samples, processes of its tree still
    alive afterwards: those are killed by pid, they are ours, and reported).
    """
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "benchmarks.block", name, json.dumps(sizes), "1" if flip else "0"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    lines = {x.split(" ", 1)[0]: x.split(" ", 1)[1] for x in out.stdout.splitlines() if x.startswith("BENCH_")}
    if out.returncode != 0 or "BENCH_RESULT" not in lines:
        raise RuntimeError(f"{name} block failed (rc {out.returncode}): {out.stderr[-2500:]}")
    probe = json.loads(lines["BENCH_PROBE"])
    # Start-up as clocked inside the block (see block.py); from_spawn is the older, noisier measure.
    startup = {"wall": probe["t"] - probe["t_start"], "from_spawn": probe["t"] - t0 - bare, "bare": bare,
               "rss": probe["rss"], "uss": probe["uss"], "procs": probe["procs"]}
    return startup, json.loads(lines["BENCH_RESULT"]), _reap(probe["pids"])


def _reap(pids: list[int], timeout: float = 10) -> list[str]:
    """Pids of an engine's tree still alive ``timeout`` s after its interpreter exited: kill and name them."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for pid in pids:
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.Error:
                pass
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    left = []
    for p in alive:
        try:
            left.append(f"{p.pid} {' '.join(p.cmdline())[:100]}")
            p.kill()
        except psutil.Error:
            pass
    return left


def import_time(env: dict, repeats: int) -> dict[str, list[float]]:
    """``import eugo_lab`` and the full API (``from eugo_lab import hpc; hpc.remote``), fresh interpreters."""
    code = ("import time; t = time.perf_counter(); import eugo_lab; a = time.perf_counter()\n"
            "from eugo_lab import hpc; hpc.remote; hpc.get; b = time.perf_counter()\n"
            "print(a - t, b - t)")
    res: dict[str, list[float]] = {"import eugo_lab": [], "from eugo_lab import hpc; hpc.remote": []}
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                             check=True, timeout=60)
        a, b = map(float, out.stdout.split())
        res["import eugo_lab"].append(a)
        res["from eugo_lab import hpc; hpc.remote"].append(b)
    return res


# -- live widget: a headless kernel driven through jupyter_client -------------------------------
KERNEL_SETUP = """%load_ext eugo_lab
from eugo_lab import hpc
hpc.init(backend="local", workers=2)

@hpc.remote
def tiny(x):
    return x + 1

hpc.get([tiny.remote(i) for i in range(200)])  # warm the workers
"""


# The kernel process's CPU seconds, all threads, read inside the kernel: clock_gettime's
# process clock has nanosecond resolution where psutil's cpu_times counts 10 ms ticks.
CPU_NOW = "__import__('time').process_time()"


def live_widget(n: int, rounds: int, env: dict, display: str = "kernel") -> dict[str, list[dict]]:
    """``%%eugo`` (live view) vs ``%%eugo --no-live`` cells of ``n`` tiny tasks, alternating.

    Per cell we keep the traced wall time of its work (``hpc.last_trace().wall_time``), the
    round trip of the execute request (what the user waits for, summary included),
    ``kcpu``, the kernel process's CPU seconds for the cell (every thread: the cell, the
    runtime's I/O thread, the live view's writer thread, ZMQ; read in the kernel just before
    and just after), and ``feed_cpu``, the CPU the live feed's own updates took
    (``eugo_lab.cellrun.live.last_stats()``; 0 with ``--no-live``). Wall clock on this shared
    VM drifts by tens of percent; CPU time of the one process the live view runs in is the
    steadier measure of what the view costs.

    ``display="kernel"``: no Jupyter server, so the live view runs its counters path;
    ``"lab"`` makes the kernel believe our server extension is there (``EUGO_LAB_DISPLAY``,
    ``EUGO_LAB_BOKEH_URL``), so the Bokeh timeline is built and streamed too (its comm
    messages go to IOPub with no browser to draw them). Every iopub message is read, as a
    front end would.
    """
    from jupyter_client.manager import start_new_kernel

    if display == "lab":
        env = dict(env, EUGO_LAB_DISPLAY="lab", EUGO_LAB_BOKEH_URL="/eugo/bokeh/")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT))
    out: dict[str, list[dict]] = {"live": [], "no-live": []}
    try:
        def run(code: str, **kw: Any) -> dict:
            reply = kc.execute_interactive(code, timeout=600, output_hook=lambda msg: None, **kw)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"kernel cell failed: {reply['content']}")
            return reply["content"]

        run(KERNEL_SETUP)
        for flag in ("", " --no-live"):  # warm-up, not measured: first use imports the live view and report
            run(f"%%eugo -w 2{flag}\n_ = hpc.get([tiny.remote(i) for i in range({min(n, 1000)})])")
        for r in range(rounds):
            for kind in (("live", "no-live") if r % 2 == 0 else ("no-live", "live")):
                flag = " --no-live" if kind == "no-live" else ""
                c = run("pass", user_expressions={"c": CPU_NOW})["user_expressions"]["c"]["data"]["text/plain"]
                t = time.perf_counter()
                run(f"%%eugo -w 2{flag}\n_ = hpc.get([tiny.remote(i) for i in range({n})])")
                cell = time.perf_counter() - t
                exprs = run("pass", user_expressions={
                    "c": CPU_NOW,
                    "w": "hpc.last_trace().wall_time",
                    "f": "__import__('eugo_lab.cellrun.live', fromlist=['_']).last_stats().get('cpu', 0.0)",
                })["user_expressions"]
                kcpu = float(exprs["c"]["data"]["text/plain"]) - float(c)
                out[kind].append({"wall": float(exprs["w"]["data"]["text/plain"]), "cell": cell, "kcpu": kcpu,
                                  "feed_cpu": float(exprs["f"]["data"]["text/plain"])})
        run("%eugo stop")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    return out


# -- simulator accuracy ------------------------------------------------------------------------
def simulator(workloads: dict[str, list], rounds: int) -> dict:
    """Trace a workload at 1 and 2 workers; compare ``simulate()`` predictions with measured walls.

    ``workloads`` maps a name to ("nap" or "burn", list of arguments). Predictions come from
    each trace for both worker counts (so 1 -> 2 and 2 -> 1 are both checked).
    """
    from eugo_lab import analysis, hpc

    res: dict = {}
    for name, (kind, args) in workloads.items():
        fn = tasks.nap if kind == "nap" else tasks.burn
        rows = []
        for r in range(rounds):
            for w in ((1, WORKERS) if r % 2 == 0 else (WORKERS, 1)):
                hpc.init(backend="local", workers=w)
                try:
                    f = hpc.remote(fn)
                    hpc.get([f.remote(args[0]) for _ in range(w)])  # warm
                    with hpc.trace() as t:
                        hpc.get([f.remote(a) for a in args])
                    sim = {row.workers: row.wall_time for row in analysis.simulate(t.trace, workers=[1, WORKERS])}
                    rows.append({"traced_on": w, "measured": t.trace.wall_time, "predicted": sim})
                finally:
                    hpc.shutdown()
        res[name] = rows
    return res


def median(xs: list[float]) -> float:
    """Median (statistics.median, named here so report.py and run.py agree)."""
    return statistics.median(xs)


def bench_env() -> dict:
    """Environment for child interpreters and engine workers: the repo first on PYTHONPATH."""
    path = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), RAY_USAGE_STATS_ENABLED="0")


__all__ = ["tiny", "batched", "cpu_speedup", "array_to_tasks", "tracing_cost", "bare_start", "engine_block",
           "import_time", "live_widget", "simulator", "bench_env"]
