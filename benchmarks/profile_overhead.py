"""What profiling costs CPU-bound tasks: the same batch of tasks profiled and not, in alternated pairs.

    python -m benchmarks.profile_overhead [--pairs 20] [--quick] [--sampler thread|pyinstrument] [--json PATH]

Each pair runs one batch of 8 CPU-bound tasks on a 2-worker local pool under ``hpc.trace()``
(off) and one under ``hpc.profile()`` (on), in alternating order (off-on, on-off, ...), so
the VM's speed drift (~25% minute to minute here) hits both sides alike. Per batch we read,
from the trace, the tasks' CPU time as their worker measured it (``process_time``: the
sampler thread's own CPU and the GIL hand-overs it forces count too) and their body wall
time, plus the batch's wall clock on the driver. The overhead is the median over pairs of
on/off; the total ratio (sum on / sum off) is printed beside it. Target: under 1.05x on
CPU-bound tasks.

A last run profiles neither side (an A/A control): its ratios are the noise floor of the
machine, the smallest overhead this method can resolve.

Workloads (each task ~60-100 ms on this VM): ``loop`` (pure-Python arithmetic and a builtin
call per iteration), ``calls`` (a Python function call per iteration: the worst case for
``sys.setprofile``-based samplers) and ``numpy`` (vectorised work that releases the GIL).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from eugo_lab import hpc


def loop(n: int) -> int:
    """Pure-Python arithmetic with one builtin call per iteration."""
    total = 0
    for i in range(n):
        total += abs(i % 7 - 3)
    return total


def _double(x: int) -> int:
    return x + x


def calls(n: int) -> int:
    """One Python-level function call per iteration."""
    total = 0
    for i in range(n):
        total += _double(i)
    return total


def numpy_work(n: int) -> float:
    """Vectorised NumPy work (its loops release the GIL)."""
    import numpy as np

    a = np.arange(n, dtype=np.float64)
    s = 0.0
    for _ in range(20):
        s += float(np.sqrt(a * a + 1.0).sum())
    return s


WORKLOADS = {"loop": (loop, 400_000), "calls": (calls, 400_000), "numpy": (numpy_work, 200_000)}
TASKS = 8


def _batch(fn: Any, n: int, profiled: bool, sampler: str, interval: float | None) -> dict[str, float]:
    t0 = time.perf_counter()
    if profiled:
        kw = {} if interval is None else {"interval": interval}
        with hpc.profile(sampler=sampler, **kw) as region:
            hpc.get([fn.remote(n) for _ in range(TASKS)])
        trace = region.trace
    else:
        with hpc.trace() as region:
            hpc.get([fn.remote(n) for _ in range(TASKS)])
        trace = region.trace
    wall = time.perf_counter() - t0
    t = trace.tasks
    return {"cpu": float(t["cpu"].sum()), "body": float((t["end"] - t["start"]).sum()), "wall": wall,
            "profiles": len(trace.profiles)}


def measure(workload: str, pairs: int, sampler: str = "thread", interval: float | None = None,
            control: bool = False) -> dict[str, Any]:
    """On/off ratios of ``workload`` over ``pairs`` alternated pairs (the runtime must be started).

    ``control``: both sides unprofiled (an A/A run): the ratios it gives are this machine's noise floor.
    """
    fn_py, n = WORKLOADS[workload]
    fn = hpc.remote(fn_py)
    _batch(fn, n, False, sampler, interval)  # warm-up: workers, function shipped, pyinstrument imported
    _batch(fn, n, True, sampler, interval)
    ratios: dict[str, list[float]] = {"cpu": [], "body": [], "wall": []}
    sums = {"on": {"cpu": 0.0, "body": 0.0, "wall": 0.0}, "off": {"cpu": 0.0, "body": 0.0, "wall": 0.0}}
    for i in range(pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        got = {p: _batch(fn, n, p and not control, sampler, interval) for p in order}
        assert got[True]["profiles"] == (0 if control else TASKS) and got[False]["profiles"] == 0
        for k in ratios:
            ratios[k].append(got[True][k] / got[False][k])
            sums["on"][k] += got[True][k]
            sums["off"][k] += got[False][k]
    return {"workload": workload + (" (A/A control)" if control else ""), "sampler": sampler, "interval": interval,
            "pairs": pairs, "tasks_per_batch": TASKS,
            "median_ratio": {k: statistics.median(v) for k, v in ratios.items()},
            "total_ratio": {k: sums["on"][k] / sums["off"][k] for k in ratios},
            "task_cpu_off_s": sums["off"]["cpu"] / pairs / TASKS}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print one line per workload; exit 1 if a CPU-bound median is at or over 1.05x."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="3 pairs, loop only (a smoke test)")
    ap.add_argument("--sampler", default="thread", choices=["thread", "pyinstrument"])
    ap.add_argument("--workloads", default="loop,calls,numpy")
    ap.add_argument("--interval", type=float, help="sampling interval in seconds (default: hpc.profile's)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    pairs = 3 if args.quick else args.pairs
    names = ["loop"] if args.quick else [w for w in args.workloads.split(",") if w]
    runs = [(name, False) for name in names] + ([] if args.quick else [("loop", True)])
    hpc.init(backend="local", workers=2)
    results = []
    try:
        for name, control in runs:
            r = measure(name, pairs, args.sampler, args.interval, control)
            results.append(r)
            m, t = r["median_ratio"], r["total_ratio"]
            label = f"{r['workload']:6s} sampler={args.sampler} interval={args.interval or 'default'}"
            print(f"{label}: task CPU on/off median {m['cpu']:.3f}x (total {t['cpu']:.3f}x), "
                  f"task wall {m['body']:.3f}x, batch wall {m['wall']:.3f}x; {pairs} pairs of {TASKS} tasks, "
                  f"{r['task_cpu_off_s'] * 1e3:.0f} ms CPU per task", flush=True)
    finally:
        hpc.shutdown()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    over = [r["workload"] for r in results if r["workload"] in ("loop", "calls") and r["median_ratio"]["cpu"] >= 1.05]
    return 1 if over and not args.quick and args.sampler == "thread" else 0


if __name__ == "__main__":
    sys.exit(main())
