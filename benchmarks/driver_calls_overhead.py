"""What the graded cell's call monitor costs: the same ``%%eugo`` cells run with it and without, in alternated pairs.

    python -m benchmarks.driver_calls_overhead [--pairs 5]

``%%eugo --exercise`` records which of the cell's functions ran in the notebook's process
(:mod:`eugo_lab.tracing.driver_calls`). On Python 3.11 that is a ``sys.setprofile`` hook: a
Python call on every call the notebook's thread makes, so its cost grows with how many calls
the cell makes in the driver. The runtime's own entry points (``.remote()``, ``hpc.get``...)
run unhooked. Each pair runs one cell through the cell runner with the monitor (``watch=True``)
and without, in alternating order (the VM's speed drifts minute to minute); the ratio printed is
the median over pairs of on/off wall time.

Cells: 100,000 calls of a cell's own function (the worst case: every call is watched and
counted), 100,000 library calls (``json.dumps``: unwatched, each still pays the hook), and
2,000 tasks submitted and taken (the runtime's path, unhooked).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import time

SETUP = """
import json
from eugo_lab import hpc

@hpc.remote
def score(x):
    return x * 3 + 1

def helper(xs):
    return [score(x) for x in xs]
"""
CELLS = {
    "100,000 calls of the cell's functions + 500 tasks":
        "r = helper(range(100_000))\nt = hpc.get([score.remote(x) for x in range(500)])\n",
    "100,000 library calls + 500 tasks":
        "r = [json.dumps(x) for x in range(100_000)]\nt = hpc.get([score.remote(x) for x in range(500)])\n",
    "2,000 tasks submitted and taken": "t = hpc.get([score.remote(x) for x in range(2000)])\n",
}


def main() -> None:
    """Run the pairs and print one line per cell: median wall time off, on, and the median ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    os.environ["EUGO_LAB_DISPLAY"] = "text"
    from IPython.testing.globalipapp import start_ipython

    from eugo_lab.cellrun import options, runner

    ip = start_ipython()
    ip.run_line_magic("load_ext", "eugo_lab")
    ip.run_cell(SETUP).raise_error()
    opts = options.build(workers="2", no_live=True)

    def once(cell: str, watch: bool) -> float:
        with contextlib.redirect_stdout(io.StringIO()):
            t0 = time.perf_counter()
            runner.run_cell(ip, cell, opts, native_api=False, watch=watch)
            return time.perf_counter() - t0

    for name, cell in CELLS.items():
        once(cell, False)  # warm-up: imports, the pool's first tasks
        off, on, ratios = [], [], []
        for i in range(args.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {w: once(cell, w) for w in order}
            off.append(got[False])
            on.append(got[True])
            ratios.append(got[True] / got[False])
        print(f"{name}: off {statistics.median(off) * 1e3:.0f} ms, on {statistics.median(on) * 1e3:.0f} ms, "
              f"median ratio {statistics.median(ratios):.2f}x")
    ip.run_cell("hpc.shutdown()")


if __name__ == "__main__":
    main()
