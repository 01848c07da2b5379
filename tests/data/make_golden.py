"""Regenerate the golden analysis traces and their expected report text.

Run from the repository root: ``python tests/data/make_golden.py``. The real traces are
re-recorded (so their numbers change): review the new ``.txt`` files before committing.
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
    for name, trace in (("golden_mixed", synthetic_mixed()), ("golden_real_map", real(False)),
                        ("golden_real_blocking", real(True))):
        trace.save(os.path.join(HERE, f"{name}.json"))
        text = analyze(Trace.load(os.path.join(HERE, f"{name}.json"))).to_text()
        with open(os.path.join(HERE, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        print(f"== {name}\n{text}\n")


if __name__ == "__main__":
    main()
