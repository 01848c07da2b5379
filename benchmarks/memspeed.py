"""Data at memory speed: large results, large arguments by value and ``put``, Eugo Lab against its peers.

Four scenarios, each engine with 2 worker processes, in one run:

- ``results``: ``k`` tasks each returning a 16 MB array, gathered (every engine);
- ``1 GiB result``: one task returning a 1 GiB array (every engine; ``--big-mb`` shrinks it on a small machine);
- ``by value``: one 64 MB array passed by value to 10 tasks (joblib as users call it: it memory-maps
  arrays over 1 MB by itself; Ray stores arguments over 100 KiB in its object store by itself);
- ``put``: a 100 MB array stored once (``hpc.put``, ``ray.put``, ``client.scatter``; joblib's automatic
  memory-mapping) and read by 8 tasks.

Each engine runs in a fresh interpreter (a child of this one) per round, so memory one engine
holds never slows another; rounds alternate the engine order (this shared VM's speed drifts),
and each cell is the median over rounds. The targets compare engines of the same run:

- 16 MB results: Eugo Lab no slower than the best peer;
- 1 GiB result: Eugo Lab no slower than Ray;
- by value: Eugo Lab within 1.5x of joblib.

    python -m benchmarks.memspeed              # 3 rounds, full sizes (~5 min on 2 cores)
    python -m benchmarks.memspeed --quick      # 1 round, small sizes: checks that it all runs

Writes ``benchmarks/results/memspeed.json`` (``memspeed-quick.json``) and prints the table and PASS/MISS.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import engines as eng_mod
from benchmarks import tasks
from benchmarks.scenarios import bench_env

RESULTS = Path(__file__).parent / "results"
MB = 1 << 20
# The peers, in the order of the first round; eugo_lab first (untraced: what the targets are about),
# and traced (what a %%eugo cell runs) for information.
ENGINES = ["eugo_lab", "eugo_lab traced", "ray", "dask", "joblib", "ProcessPoolExecutor"]
# put: engines whose API has it (ProcessPoolExecutor has none; joblib's is its automatic memory-mapping,
# which is also what it does by value unless told not to).
HAS_PUT = {"eugo_lab", "eugo_lab traced", "ray", "dask", "joblib"}
BY_VALUE_TARGET = 1.5


def _adapter(name: str) -> eng_mod.Engine:
    if name.startswith("eugo_lab"):
        return eng_mod.EugoLab(traced=name.endswith("traced"), name=name)
    return eng_mod.ENGINES[name][0]()


def _by_value(engine: eng_mod.Engine, obj, k: int) -> list:
    """The array to ``k`` tasks as a user writes it: one call per task with the array itself."""
    if isinstance(engine, eng_mod.Joblib):  # joblib's default memory-maps it (its own automatic path)
        return engine._run(tasks.touch_pages, [obj] * k)
    return engine.each(tasks.touch_pages, [obj] * k)


def engine_block(name: str, sizes: dict) -> dict[str, float]:
    """Run every scenario once on engine ``name`` (in this interpreter); seconds per scenario."""
    import numpy as np

    engine = _adapter(name)
    engine.start()
    out: dict[str, float] = {}
    try:
        # Warm-up: every task function once, so imports (NumPy on the workers) are not timed.
        engine.each(tasks.filled, [(8, 0), (8, 1)])
        engine.each(tasks.touch_pages, [np.ones(1024), np.ones(1024)])

        specs = [(sizes["result_mb"] * MB, i) for i in range(sizes["results"])]
        t0 = time.perf_counter()
        got = engine.each(tasks.filled, specs)
        out["results"] = time.perf_counter() - t0
        assert len(got) == len(specs) and got[-1][0] == len(specs) - 1
        del got
        gc.collect()

        t0 = time.perf_counter()
        [big] = engine.each(tasks.filled, [(sizes["big_mb"] * MB, 3)])
        out["big result"] = time.perf_counter() - t0
        assert big.nbytes == sizes["big_mb"] * MB and big[-1] == 3.0
        del big
        gc.collect()

        # Whole numbers as float64: their sums are exact in any order, so every engine's answer must be the
        # same bits whatever the alignment of the array it rebuilt (NumPy sums unaligned arrays in another order).
        arr = np.random.default_rng(0).integers(0, 1000, sizes["arg_mb"] * MB // 8).astype(np.float64)
        want = tasks.touch_pages(arr)
        t0 = time.perf_counter()
        got = _by_value(engine, arr, sizes["arg_tasks"])
        out["by value"] = time.perf_counter() - t0
        assert got == [want] * sizes["arg_tasks"]
        del arr
        gc.collect()

        if name in HAS_PUT:
            arr = np.random.default_rng(1).integers(0, 1000, sizes["put_mb"] * MB // 8).astype(np.float64)
            want = tasks.touch_pages(arr)
            t0 = time.perf_counter()
            got = engine.via_put(tasks.touch_pages, arr, sizes["put_tasks"])
            out["put"] = time.perf_counter() - t0
            assert got == [want] * sizes["put_tasks"]
    finally:
        engine.stop()
    return out


def _child(name: str, sizes: dict, timeout: float) -> dict[str, float] | None:
    """One engine block in a fresh interpreter; None if it failed (its error is printed)."""
    cmd = [sys.executable, "-m", "benchmarks.memspeed", "--child", name, "--sizes", json.dumps(sizes)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=bench_env(),
                           cwd=str(Path(__file__).parent.parent))
    except subprocess.TimeoutExpired:
        print(f"[memspeed] {name}: timed out after {timeout:.0f} s", flush=True)
        return None
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        print(f"[memspeed] {name} failed (exit {p.returncode}):\n{p.stderr[-2000:]}", flush=True)
        return None
    return json.loads(lines[-1])


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} s ({min(xs):.3f}-{max(xs):.3f})" if xs else "-"


def summarize(raw: dict[str, dict[str, list[float]]], sizes: dict) -> tuple[str, list[str]]:
    """The Markdown table (median, min-max, ratio to eugo_lab) and the PASS/MISS lines."""
    titles = {"results": f"{sizes['results']} results of {sizes['result_mb']} MB",
              "big result": f"one result of {sizes['big_mb']} MB",
              "by value": f"{sizes['arg_mb']} MB array by value to {sizes['arg_tasks']} tasks",
              "put": f"put of {sizes['put_mb']} MB, read by {sizes['put_tasks']} tasks"}
    lines = ["| scenario | engine | median (min-max) | vs eugo_lab |", "|---|---|---|---|"]
    med = {s: {e: statistics.median(xs) for e, xs in by.items() if xs} for s, by in raw.items()}
    for s, title in titles.items():
        base = med.get(s, {}).get("eugo_lab")
        for e, xs in raw.get(s, {}).items():
            if not xs:
                continue
            ratio = f"{statistics.median(xs) / base:.2f}x" if base else ""
            lines.append(f"| {title} | {e} | {_fmt(xs)} | {ratio} |")
    verdicts = []

    def verdict(label: str, ours: float | None, limit: float | None, what: str) -> None:
        if ours is None or limit is None:
            verdicts.append(f"SKIP {label}: not measured")
            return
        ok = ours <= limit
        verdicts.append(f"{'PASS' if ok else 'MISS'} {label}: eugo_lab {ours:.3f} s, limit {limit:.3f} s ({what}); "
                        f"ratio {ours / limit:.2f}")

    r = med.get("results", {})
    peers = {e: v for e, v in r.items() if not e.startswith("eugo_lab")}
    best = min(peers, key=peers.get) if peers else None
    verdict(titles["results"] + " no slower than the best peer", r.get("eugo_lab"),
            peers.get(best) if best else None, f"best peer {best}")
    b = med.get("big result", {})
    verdict(titles["big result"] + " no slower than Ray", b.get("eugo_lab"), b.get("ray"), "ray")
    v = med.get("by value", {})
    verdict(titles["by value"] + f" within {BY_VALUE_TARGET}x of joblib", v.get("eugo_lab"),
            v["joblib"] * BY_VALUE_TARGET if "joblib" in v else None, f"{BY_VALUE_TARGET} x joblib")
    p = med.get("put", {})
    if "eugo_lab" in p and "ray" in p:
        verdicts.append(f"INFO {titles['put']}: eugo_lab {p['eugo_lab']:.3f} s, ray {p['ray']:.3f} s "
                        f"({p['eugo_lab'] / p['ray']:.2f}x)")
    return "\n".join(lines), verdicts


def main() -> None:
    """Parse arguments; run the rounds (parent) or one engine block (child)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 round, small sizes")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--big-mb", type=int, default=None, help="size of the one large result (default 1024)")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(engine_block(a.child, json.loads(a.sizes))), flush=True)
        return
    sizes = dict(results=16, result_mb=16, big_mb=1024, arg_mb=64, arg_tasks=10, put_mb=100, put_tasks=8)
    if a.quick:
        sizes = dict(results=4, result_mb=4, big_mb=64, arg_mb=8, arg_tasks=4, put_mb=10, put_tasks=4)
    if a.big_mb:
        sizes["big_mb"] = a.big_mb
    rounds = a.rounds or (1 if a.quick else 3)
    names = [e for e in a.engines.split(",") if e]
    raw: dict[str, dict[str, list[float]]] = {}
    load = [os.getloadavg()]
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            got = _child(name, sizes, timeout=600)
            if got is None:  # Ray's start-up gives up after 30 s on a loaded machine: one more try
                got = _child(name, sizes, timeout=600)
            print(f"[memspeed] round {r + 1}/{rounds}: {name} {time.perf_counter() - t0:.1f} s "
                  f"{'' if got is None else {k: round(v, 3) for k, v in got.items()}}", flush=True)
            for k, v in (got or {}).items():
                raw.setdefault(k, {}).setdefault(name, []).append(v)
        load.append(os.getloadavg())
    table, verdicts = summarize(raw, sizes)
    print()
    print(table)
    print()
    for line in verdicts:
        print(line)
    loads = [tuple(round(x, 2) for x in avg) for avg in load]
    print(f"\nload average (1, 5, 15 min) before and after each round: {loads}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("memspeed-quick.json" if a.quick else "memspeed.json")
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "sizes": sizes,
                               "rounds": rounds, "raw": raw, "verdicts": verdicts, "load": load,
                               "cores": os.cpu_count()}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
