"""Does the live view slow the work? 10,000 tiny tasks under ``%%eugo`` with and without ``--no-live``.

Runs a real kernel (nbclient plays the browser and receives every comm message), with
the live Bokeh timeline switched on as in JupyterLab (``EUGO_LAB_DISPLAY=lab``; the
page cannot load BokehJS here, but the kernel builds and streams the timeline all the
same). Live and ``--no-live`` cells alternate, the order flipping each round, because this
VM's CPU speed drifts; we quote medians of the cell's traced wall time and their ratio.
Target: live / no-live <= 1.05.

    PYTHONPATH=. python benchmarks/bench_live_widget.py [--tasks 10000] [--rounds 5] [--mode remote|map]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]

SETUP = """%load_ext eugo_lab
from eugo_lab import hpc
hpc.init(backend="local", workers=2)

@hpc.remote
def tiny(x):
    return x + 1

hpc.get([tiny.remote(i) for i in range(200)])  # warm the workers
walls = {"live": [], "no-live": []}"""


def cell(kind: str, tasks: int, mode: str) -> str:
    flag = " --no-live" if kind == "no-live" else ""
    work = (f"hpc.get([tiny.remote(i) for i in range({tasks})])" if mode == "remote"
            else f"hpc.get(hpc.map(tiny, range({tasks})))")
    return f"%%eugo -w 2{flag}\n_ = {work}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mode", choices=("remote", "map"), default="remote")
    args = ap.parse_args()

    cells = [SETUP]
    for r in range(args.rounds):
        order = ("live", "no-live") if r % 2 == 0 else ("no-live", "live")
        for kind in order:
            cells.append(cell(kind, args.tasks, args.mode))
            cells.append(f"walls[{kind!r}].append(hpc.last_trace().wall_time)")
    cells.append("import json; print(json.dumps(walls))\n%eugo stop")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               EUGO_LAB_DISPLAY="lab", EUGO_LAB_BOKEH_URL="/eugo/bokeh/")
    with tempfile.TemporaryDirectory() as tmp:
        client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp}})
        client.execute(env=env)
    out = nb.cells[-1].outputs[0]["text"]
    walls = json.loads(out)
    live, base = statistics.median(walls["live"]), statistics.median(walls["no-live"])
    msgs = sum(len(c.outputs) for c in nb.cells)
    print(f"{args.tasks} tasks ({args.mode}), {args.rounds} rounds: live median {live:.3f} s, "
          f"no-live median {base:.3f} s, ratio {live / base:.3f} (target <= 1.05); outputs kept: {msgs}")
    print("live:", [round(x, 3) for x in walls["live"]], "no-live:", [round(x, 3) for x in walls["no-live"]])
    sys.exit(0)


if __name__ == "__main__":
    main()
