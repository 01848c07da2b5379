"""What ``%%eugo``'s display costs: the same cell body run as ``%%eugo`` and under ``hpc.trace()`` alone.

    python -m benchmarks.display [--tasks 20000] [--rounds 10]   # prints one JSON object

Both run in one terminal IPython shell (``InteractiveShell.instance()``, display mode
``text``) on a warm 2-worker local pool, in alternated order per round (eugo-trace,
trace-eugo, ...) so this shared VM's speed drift hits both alike. The body submits
``tasks`` tiny tasks one call each and gets them; ``%%eugo`` adds what it shows: the
analysis, the summary and the printed text. Target (``benchmarks.run``): ``%%eugo`` costs
at most 10% + 50 ms over ``hpc.trace()`` alone, over the totals of all rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time

SETUP = """
from eugo_lab import hpc
hpc.init(backend="local", workers=2)

@hpc.remote
def tiny(x):
    return x + 1

_ = hpc.get([tiny.remote(i) for i in range(500)])
"""
BODY = "_ = hpc.get([tiny.remote(i) for i in range({n})])"


def measure(n: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per cell, ``{"eugo": [...], "trace": [...]}``, one of each per round (after one warm-up each)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "eugo_lab")
    shell.run_cell(SETUP)
    body = BODY.format(n=n)
    traced = "with hpc.trace():\n    " + body

    def eugo() -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # the printed summary is part of the cost, not the log
            shell.run_cell_magic("eugo", "", body)

    def trace() -> None:
        shell.run_cell(traced)

    cells = {"eugo": eugo, "trace": trace}
    out: dict[str, list[float]] = {"eugo": [], "trace": []}
    eugo(), trace()  # warm-up: first use imports the analysis and the renderers
    try:
        for r in range(rounds):
            for kind in (("eugo", "trace") if r % 2 == 0 else ("trace", "eugo")):
                t = time.perf_counter()
                cells[kind]()
                out[kind].append(time.perf_counter() - t)
    finally:
        shell.run_cell("hpc.shutdown()")
    return out


def display_overhead(n: int, rounds: int, env: dict) -> dict[str, list[float]]:
    """:func:`measure` in a fresh interpreter (its own runtime and shell, nothing left in this one)."""
    env = dict(env, EUGO_LAB_DISPLAY="text")
    out = subprocess.run([sys.executable, "-m", "benchmarks.display", "--tasks", str(n), "--rounds", str(rounds)],
                         env=env, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    os.environ.setdefault("EUGO_LAB_DISPLAY", "text")
    res = measure(args.tasks, args.rounds)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
