"""One engine, one round, in a fresh interpreter: startup, memory, then every in-process scenario.

    python -m benchmarks.block ENGINE SIZES_JSON FLIP

run.py spawns this per engine and round. The first line the child prints (``BENCH_PROBE``)
holds the wall-clock times at which the engine's start began (``t_start``: this harness is
up and has imported the adapters, nothing of the engine yet) and at which the first trivial
result arrived (``t``), and the RSS/USS of the whole process tree at that moment. The
start-up is ``t - t_start``, clocked in this one process: spawn-to-probe minus a separately
spawned ``bare`` harness (kept as ``from_spawn``) measures the same span but adds the jitter
of two interpreter starts, tens of ms on a loaded 2-core VM, as much as a whole
ProcessPoolExecutor start-up.
Then the scenarios run and ``BENCH_RESULT`` carries their samples. Starting each engine
once per round, in its own interpreter, keeps engines from disturbing each other (only one
is ever alive) and pays Ray's and ipyparallel's ~7-20 s start once, not twice.
"""

import json
import sys
import time


def probe(t_result: float) -> dict:
    """Memory of this interpreter plus every descendant (the engine's whole tree), and their pids."""
    import psutil

    me = psutil.Process()
    procs = [me] + me.children(recursive=True)
    rss = uss = 0
    for p in procs:
        try:
            m = p.memory_full_info()
            rss, uss = rss + m.rss, uss + m.uss
        except psutil.Error:
            pass
    return {"t": t_result, "rss": rss, "uss": uss, "procs": len(procs), "pids": [p.pid for p in procs[1:]]}


def main() -> None:
    name, sizes, flip = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
    from benchmarks.engines import ENGINES

    if name == "bare":  # the baseline: this harness with no engine (see scenarios.bare_start)
        print("BENCH_PROBE " + json.dumps({"t": time.time()}), flush=True)
        return

    import os

    from benchmarks.tasks import GATE_ENV

    # Before the engine starts, so its workers inherit it (see scenarios.pending_memory).
    os.environ[GATE_ENV] = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"eugo-bench-gate-{os.getpid()}")
    t_start = time.time()
    eng = ENGINES[name][0]()
    eng.start()
    t = time.time()
    print("BENCH_PROBE " + json.dumps({**probe(t), "t_start": t_start}), flush=True)
    if getattr(eng, "startup_only", False):
        eng.stop()
        print("BENCH_RESULT {}", flush=True)
        return

    from benchmarks import scenarios as sc

    raw: dict[str, list] = {}
    try:
        raw["tiny"] = [sc.tiny(eng, sizes["tiny"])]
        raw["batched"] = [sc.batched(eng, sizes["map_items"])]
        if eng.map_large:
            raw["batched large"] = [sc.batched(eng, sizes["map_items_large"])]
            raw["pending"] = [sc.pending_memory(eng, sizes["map_items_large"])]
        raw["cpu"] = [sc.cpu_speedup(eng, sizes["cpu_tasks"], sizes["cpu_iters"], flip)]
        for how, s in sc.array_to_tasks(eng, sizes["mb"]).items():
            raw[f"array {how}"] = [s]
        if name == "eugo_lab":
            for k, xs in sc.tracing_cost(sizes["tiny"], sizes["map_items"], sizes["trace_pairs"], flip).items():
                raw[f"tracing {k}"] = xs
    finally:
        eng.stop()
    print("BENCH_RESULT " + json.dumps(raw), flush=True)


if __name__ == "__main__":
    main()
