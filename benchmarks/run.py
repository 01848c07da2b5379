"""Side-by-side benchmarks: Eugo Lab's local pool against peers, measured in one run.

Each scenario alternates engines round by round (this VM's CPU speed drifts by up to ~25%
minute to minute, so interleaving keeps the comparison fair) and reports the median and
min/max of the rounds, plus ratios against the best peer. Output: a Markdown table on
stdout and ``benchmarks/results/latest.json`` with versions, machine and date.

    python -m benchmarks.run            # full: 3 rounds, full sizes
    python -m benchmarks.run --quick    # CI: 1 round, small sizes, checks that it runs
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from eugo_lab import hpc

WORKERS = 2
RESULTS = Path(__file__).parent / "results"


def noop(x):
    return x


def array_sum(a):
    return float(a[::4096].sum())


# -- scenarios: each returns {engine: seconds} for one round -----------------------------------

def tiny_tasks(n: int) -> dict[str, Callable[[], float]]:
    """n no-op tasks, one call per task, submitted then gathered (pools already warm)."""
    def eugo() -> float:
        f = hpc.remote(noop)
        t = time.perf_counter()
        hpc.get([f.remote(i) for i in range(n)])
        return time.perf_counter() - t

    def eugo_traced() -> float:
        f = hpc.remote(noop)
        t = time.perf_counter()
        with hpc.trace():
            hpc.get([f.remote(i) for i in range(n)])
        return time.perf_counter() - t

    def ppe() -> float:
        t = time.perf_counter()
        futs = [_ppe.submit(noop, i) for i in range(n)]
        [f.result() for f in futs]
        return time.perf_counter() - t

    engines = {"eugo_lab": eugo, "eugo_lab (traced)": eugo_traced, "ProcessPoolExecutor": ppe}
    try:
        from loky import get_reusable_executor

        loky_ex = get_reusable_executor(max_workers=WORKERS)
        loky_ex.submit(noop, 0).result()

        def loky() -> float:
            t = time.perf_counter()
            futs = [loky_ex.submit(noop, i) for i in range(n)]
            [f.result() for f in futs]
            return time.perf_counter() - t

        engines["loky"] = loky
    except ImportError:
        pass
    return engines


def batched(n: int) -> dict[str, Callable[[], float]]:
    """n tiny items through each engine's best batched path."""
    def eugo() -> float:
        t = time.perf_counter()
        hpc.get(hpc.map(noop, range(n)))
        return time.perf_counter() - t

    def ppe() -> float:
        t = time.perf_counter()
        list(_ppe.map(noop, range(n), chunksize=max(1, n // (WORKERS * 8))))
        return time.perf_counter() - t

    return {"eugo_lab hpc.map": eugo, "ProcessPoolExecutor.map": ppe}


def put_array(mb: int) -> dict[str, Callable[[], float]]:
    """A NumPy array of ``mb`` MB handed to 8 tasks: through put, and by value."""
    a = np.ones(mb * 1_000_000 // 8)
    f = hpc.remote(array_sum)

    def eugo_put() -> float:
        t = time.perf_counter()
        ref = hpc.put(a)
        hpc.get([f.remote(ref) for _ in range(8)])
        return time.perf_counter() - t

    def eugo_value() -> float:
        t = time.perf_counter()
        hpc.get([f.remote(a) for _ in range(8)])
        return time.perf_counter() - t

    def ppe_value() -> float:
        t = time.perf_counter()
        [x.result() for x in [_ppe.submit(array_sum, a) for _ in range(8)]]
        return time.perf_counter() - t

    return {"eugo_lab put": eugo_put, "eugo_lab by value": eugo_value, "ProcessPoolExecutor by value": ppe_value}


STARTUP_SNIPPETS = {
    "eugo_lab": "from eugo_lab import hpc\nf = hpc.remote(abs)\nassert hpc.get(f.remote(-1)) == 1",
    "ProcessPoolExecutor": ("import concurrent.futures as cf\nif __name__ == '__main__':\n"
                            "    with cf.ProcessPoolExecutor(2) as ex:\n"
                            "        assert ex.submit(abs, -1).result() == 1"),
}


def startup() -> dict[str, Callable[[], float]]:
    """Nothing -> first trivial result, in a fresh interpreter (interpreter start subtracted)."""
    def measure(code: str) -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - t

    def engine(code: str) -> Callable[[], float]:
        return lambda: measure(code) - measure("pass")

    return {name: engine(code) for name, code in STARTUP_SNIPPETS.items()}


# -- driver ----------------------------------------------------------------------------------------

def run_scenario(name: str, engines: dict[str, Callable[[], float]], rounds: int, per: int | None) -> dict:
    samples: dict[str, list[float]] = {e: [] for e in engines}
    for r in range(rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))  # alternate
        for e in order:
            samples[e].append(engines[e]())
    rows = {}
    for e, xs in samples.items():
        med = statistics.median(xs)
        rows[e] = {"median_s": med, "min_s": min(xs), "max_s": max(xs),
                   "per_item_us": med / per * 1e6 if per else None}
    return {"scenario": name, "items": per, "engines": rows}


def markdown(results: list[dict]) -> str:
    lines = ["| scenario | engine | median | min-max | per item | vs first |", "|---|---|---|---|---|---|"]
    for res in results:
        first = None
        for e, row in res["engines"].items():
            first = first or row["median_s"]
            per = f"{row['per_item_us']:.1f} us" if row["per_item_us"] else ""
            spread = f"{row['min_s']:.3f}-{row['max_s']:.3f}"
            lines.append(f"| {res['scenario']} | {e} | {row['median_s']:.3f} s | {spread} | "
                         f"{per} | {row['median_s'] / first:.2f}x |")
    return "\n".join(lines)


_ppe: cf.ProcessPoolExecutor


def main() -> None:
    global _ppe
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 round, small sizes (CI: checks that it runs)")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    n_tiny, n_map, mb = (500, 5_000, 10) if args.quick else (10_000, 100_000, 100)

    hpc.init(workers=WORKERS)
    hpc.get(hpc.remote(noop).remote(0))
    _ppe = cf.ProcessPoolExecutor(WORKERS)
    _ppe.submit(noop, 0).result()
    results = [
        run_scenario("startup", startup(), rounds, None),
        run_scenario(f"{n_tiny} tiny tasks", tiny_tasks(n_tiny), rounds, n_tiny),
        run_scenario(f"{n_map} items batched", batched(n_map), rounds, n_map),
        run_scenario(f"{mb} MB array to 8 tasks", put_array(mb), rounds, None),
    ]
    _ppe.shutdown()
    hpc.shutdown()
    table = markdown(results)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "quick": args.quick, "rounds": rounds,
           "machine": {"platform": platform.platform(), "python": platform.python_version(), "cores": os.cpu_count()},
           "results": results}
    (RESULTS / ("quick.json" if args.quick else "latest.json")).write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
