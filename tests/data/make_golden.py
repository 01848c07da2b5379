"""Regenerate the golden analysis traces and their expected report text.

Run from the repository root: ``python tests/data/make_golden.py``. The real traces are
re-recorded (so their numbers change): review the new ``.txt`` files before committing.
``python tests/data/make_golden.py --synthetic`` rewrites only the synthetic ones (and the
real traces' ``.txt`` from their saved ``.json``, which does not change their numbers).
Worker hosts and pids are scrubbed before saving.
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.dirname(os.path.dirname(HERE))]

from trace_builder import TraceBuilder  # noqa: E402

from eugo_lab import hpc  # noqa: E402
from eugo_lab.analysis import analyze  # noqa: E402
from eugo_lab.tracing.trace import Trace  # noqa: E402


def synthetic_mixed() -> Trace:
    """4 workers: 40 tiny tasks, then 8 'load' tasks of which one straggles, and an I/O-bound 'fetch'."""
    b = TraceBuilder(workers=4, cores=4)
    t = 0.0
    for k in range(40):
        w = k % 4
        r = 0.004 * (k // 4)
        b.task("tiny", worker=w, ready=r, start=r + 0.0015, end=r + 0.002, received=r + 0.0035, deser=0.0002,
               ser=0.0002)
    t = 0.05
    for k in range(8):
        w = k % 4
        s = t + 0.2 * (k // 4)
        b.task("load", worker=w, ready=t, start=s, end=s + (1.5 if k == 7 else 0.2), cpu=0.18)
    b.task("fetch", worker=0, ready=t, start=0.45, end=1.2, cpu=0.05, bytes_in=5_000_000)
    b.block(0.0, 0.045, futures=40, source="/tmp/ipykernel_4242/123456.py:3")
    b.block(0.05, 1.8, futures=9, source="/tmp/ipykernel_4242/123456.py:9")
    return b.build(end=1.82)


CELL = "/tmp/ipykernel_4242/2718.py"


def partial_blocking(n_serial: int = 6, n_fan: int = 14, alone: float = 0.2, together: float = 0.25) -> Trace:
    """The issue's cell: get() inside a loop for the first 6 tasks (cell line 4), then 14 more fanned out.

    Each task takes ``alone`` seconds when it runs by itself and ``together`` side by side
    (contention), with 10 ms to dispatch and 2 ms to return; the final get() (line 6) waits for the 14.
    """
    b = TraceBuilder(workers=2, cores=2)
    t = 0.0
    for _ in range(n_serial):
        b.task("simulate", worker=0, submit=t, ready=t, start=t + 0.01, end=t + 0.01 + alone,
               received=t + 0.012 + alone)
        b.block(t + 0.001, t + 0.0125 + alone, futures=1, source=f"{CELL}:4")
        t += 0.013 + alone
    sub = t
    free = [t, t]
    for k in range(n_fan):
        w = 0 if free[0] <= free[1] else 1
        ready = sub + 0.001 * k
        start = max(free[w], ready) + 0.01
        b.task("simulate", worker=w, submit=ready, ready=ready, start=start, end=start + together,
               received=start + together + 0.002)
        free[w] = start + together
    b.block(sub + 0.001 * n_fan, max(free) + 0.002, futures=n_fan, source=f"{CELL}:6")
    return b.build()


@hpc.remote
def nap(seconds: float) -> None:
    time.sleep(seconds)


def real(blocking: bool) -> Trace:
    hpc.init(backend="local", workers=2)
    try:
        hpc.get([nap.remote(0.001) for _ in range(4)])
        with hpc.trace() as t:
            if blocking:
                for _ in range(6):
                    hpc.get(nap.remote(0.03))
            else:
                hpc.get([nap.remote(0.05) for _ in range(12)])
        return scrub(t.trace)
    finally:
        hpc.shutdown()


def scrub(t: Trace) -> Trace:
    d = t.to_dict()
    d["workers"] = {k: ["host", 0] for k in d["workers"]}
    d["sources"] = ["/src/" + os.path.basename(s) for s in d["sources"]]
    return Trace.from_dict(d)


def main() -> None:
    real_ones = sys.argv[1:] != ["--synthetic"]  # --synthetic: rewrite only the synthetic goldens (no re-recording)
    goldens = [("golden_mixed", synthetic_mixed()), ("golden_partial_blocking", partial_blocking())]
    if real_ones:
        goldens += [("golden_real_map", real(False)), ("golden_real_blocking", real(True))]
    else:
        goldens += [(n, None) for n in ("golden_real_map", "golden_real_blocking")]
    for name, trace in goldens:  # type: ignore[assignment]
        if trace is not None:
            trace.save(os.path.join(HERE, f"{name}.json"))
        text = analyze(Trace.load(os.path.join(HERE, f"{name}.json"))).to_text()
        with open(os.path.join(HERE, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        print(f"== {name}\n{text}\n")


if __name__ == "__main__":
    main()
