"""What recording a Dask cell costs: 2,000 tiny tasks through Dask's own API, recorded and not, in alternated pairs.

    python -m benchmarks.native_dask_overhead [--pairs 10] [--tasks 2000] [--processes]

Each pair runs ``client.gather(client.map(inc, range(N), pure=False))`` on a 2-worker
``LocalCluster`` (single-threaded workers; in-process unless ``--processes``) once plain and
once inside :class:`eugo_lab.native.dask_recording.DaskRecording` (start, the cell, stop and
the Trace built: everything ``%%eugo`` adds to such a cell except drawing the summary), in
alternating order so the machine's speed drift hits both sides alike. Prints the median of
recorded/plain per pair and the total ratio. Target (issue: recording cost): at most 1.10x.
An A/A run (plain against plain) gives the noise floor of the machine.
"""

from __future__ import annotations

import argparse
import statistics
import time


def inc(x: int) -> int:
    """A task far smaller than Dask's per-task overhead: what the recording would slow down most."""
    return x + 1


def _once(client, n: int, recorded: bool) -> float:
    from eugo_lab.native.dask_recording import DaskRecording

    t0 = time.perf_counter()
    rec = DaskRecording(client).start() if recorded else None
    client.gather(client.map(inc, range(n), pure=False))
    if rec is not None:
        trace = rec.stop()
        assert len(trace) == n, len(trace)
    return time.perf_counter() - t0


def main() -> None:
    """Run the pairs and print the ratios."""
    import distributed

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--processes", action="store_true", help="workers in their own processes")
    args = ap.parse_args()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=args.processes,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        _once(client, args.tasks, False)  # warm: imports, the first plugin registration
        _once(client, args.tasks, True)
        for label, sides in (("recorded/plain", (True, False)), ("A/A plain/plain", (False, False))):
            ratios, on_total, off_total = [], 0.0, 0.0
            for i in range(args.pairs):
                order = sides if i % 2 == 0 else sides[::-1]
                times = {j: _once(client, args.tasks, order[j]) for j in (0, 1)}
                on = times[0] if order[0] == sides[0] else times[1]
                off = times[1] if order[0] == sides[0] else times[0]
                ratios.append(on / off)
                on_total += on
                off_total += off
            print(f"{label}: median {statistics.median(ratios):.3f}x, total {on_total / off_total:.3f}x "
                  f"({args.pairs} pairs of {args.tasks} tasks; plain median {off_total / args.pairs:.3f} s)")


if __name__ == "__main__":
    main()
