"""How close is a finding's "predicted wall time after the fix" to the wall time of the fixed code?

    python -m benchmarks.whatif [--rounds N]

For each mistake (a get() in a loop, tiny tasks one by one, the same big object sent by
value, results taken in submission order, inputs built in the submitting loop) this runs
the mistaken cell, reads the finding's ``wall_after``, runs the fixed cell, and reports
the error of the prediction: ``(predicted - measured) / measured``. Tasks sleep,
so two cores are enough and the VM's CPU speed drift does not enter; mistake and fix are
run back to back, in alternating order each round, and the table gives the median and the
worst error over the rounds (paste it into ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from eugo_lab import hpc
from eugo_lab.analysis import analyze
from eugo_lab.tracing.trace import Trace

WORKERS = 2


@hpc.remote
def nap(seconds: float) -> float:
    """Sleep ``seconds`` (a task whose duration does not depend on the CPU's speed)."""
    time.sleep(seconds)
    return seconds


@hpc.remote
def tiny(x: int) -> int:
    """A task of microseconds: the per-task overhead is all there is."""
    return x + 1


@hpc.remote
def lookup(table: list, seconds: float) -> int:
    """A task that reads a large Python object (pickled in full: lists are not out-of-band buffers), then sleeps."""
    time.sleep(seconds)
    return len(table)


def traced(body: Callable[[], object]) -> Trace:
    """The trace of ``body()`` run under ``hpc.trace()``."""
    with hpc.trace() as t:
        body()
    return t.trace


# -- the mistakes and their fixes ---------------------------------------------------------------------
def blocking_mistake() -> None:
    """6 tasks waited on one by one in the loop, then 14 fanned out (the issue's cell)."""
    for _ in range(6):
        hpc.get(nap.remote(0.1))
    hpc.get([nap.remote(0.1) for _ in range(14)])


def blocking_fix() -> None:
    """All 20 submitted first, one get()."""
    hpc.get([nap.remote(0.1) for _ in range(20)])


def batching_mistake() -> None:
    """100000 tasks of microseconds, one .remote() each."""
    hpc.get([tiny.remote(i) for i in range(100000)])


def batching_fix(size: int) -> Callable[[], None]:
    """The same items through hpc.map at the batch size the finding suggested."""
    def run() -> None:
        hpc.get(hpc.map(tiny, range(100000), batch=size))
    return run


# A lookup table of a million ints: ~5 MB pickled, tens of ms to pickle and unpickle. NumPy
# arrays would not do here: the local pool ships them out of band, which bytes_in does not count.
TABLE: list = []


def put_mistake() -> None:
    """The same table passed by value to 12 tasks."""
    hpc.get([lookup.remote(TABLE, 0.03) for _ in range(12)])


def put_fix() -> None:
    """The table stored once with hpc.put; the tasks get a reference."""
    ref = hpc.put(TABLE)
    hpc.get([lookup.remote(ref, 0.03) for _ in range(12)])


def order_mistake() -> None:
    """One slow task first, then 7 quick ones; results taken in submission order, 50 ms of handling each."""
    futures = [nap.remote(0.5)] + [nap.remote(0.05) for _ in range(7)]
    for f in futures:
        hpc.get(f)
        time.sleep(0.05)  # the driver's handling of one result


def order_fix() -> None:
    """The same, taking results as they finish."""
    futures = [nap.remote(0.5)] + [nap.remote(0.05) for _ in range(7)]
    for f in hpc.as_completed(futures):
        hpc.get(f)
        time.sleep(0.05)


def build_input(i: int) -> int:
    """Building one task's input on the driver (100 ms)."""
    time.sleep(0.1)
    return i


@hpc.remote
def fit(x: int) -> int:
    """The task's own work (20 ms)."""
    time.sleep(0.02)
    return x


@hpc.remote
def fit_own(i: int) -> int:
    """The task building its own input (100 ms), then its work (20 ms)."""
    time.sleep(0.12)
    return i


def submission_mistake() -> None:
    """Each input built in the submitting loop."""
    hpc.get([fit.remote(build_input(i)) for i in range(12)])


def submission_fix() -> None:
    """Each task builds its own input."""
    hpc.get([fit_own.remote(i) for i in range(12)])


@dataclass
class Sample:
    """One round of one case: the finding's prediction and the fixed code's measured wall time."""

    case: str
    before: float
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        """Relative error of the prediction: positive when the fixed code ran faster than predicted."""
        return (self.predicted - self.measured) / self.measured


_LAST_FIX: dict[str, str] = {}  # per case, the fix text the last round's finding named


def measure(case: str, code: str, mistake: Callable[[], None], fix: Callable[[str], Callable[[], None]],
            flip: bool) -> Sample | None:
    """Run the mistake and its fix back to back (the fix first when ``flip``, once a fix is known)."""
    fixed_first = None
    if flip and case in _LAST_FIX:
        fixed_first = traced(fix(_LAST_FIX[case]))
    wrong = traced(mistake)
    finding = analyze(wrong).finding(code)
    if finding is None or finding.wall_after is None:
        return None
    _LAST_FIX[case] = finding.fix
    right = fixed_first if fixed_first is not None else traced(fix(finding.fix))
    return Sample(case, wrong.wall_time, finding.wall_after, right.wall_time)


def _batch_size(fix: str) -> int:
    """The suggested batch size, from the finding's fix text ("batch tiny() 150 items per task ...")."""
    return int(fix.split("() ")[1].split(" ")[0])


CASES = [
    ("blocking: get() in a loop for 6 of 20 tasks", "blocking", blocking_mistake, lambda _fix: blocking_fix),
    ("batching: 100000 tiny tasks", "tasks-too-small", batching_mistake, lambda fix: batching_fix(_batch_size(fix))),
    ("put: a 5 MB table to 12 tasks", "repeated-argument", put_mistake, lambda _fix: put_fix),
    ("submission order: a slow first task", "submission-order", order_mistake, lambda _fix: order_fix),
    ("slow submission: inputs built in the loop", "slow-submission", submission_mistake,
     lambda _fix: submission_fix),
]


def run(rounds: int = 5) -> list[Sample]:
    """Every case ``rounds`` times on a warm 2-worker local pool."""
    TABLE[:] = range(1_000_000)
    hpc.init(backend="local", workers=WORKERS)
    try:
        # Warm: workers started and every function loaded on each worker (the first call ships it).
        hpc.get([nap.remote(0.001) for _ in range(8)] + [tiny.remote(0) for _ in range(8)]
                + [lookup.remote([], 0.0) for _ in range(8)] + hpc.map(tiny, range(64), batch=8)
                + [fit.remote(0) for _ in range(4)] + [fit_own.remote(0) for _ in range(4)])
        out = []
        for k in range(rounds):
            for case, code, mistake, fix in CASES:
                s = measure(case, code, mistake, fix, flip=bool(k % 2))
                if s is not None:
                    out.append(s)
        return out
    finally:
        hpc.shutdown()


# The target: a finding's predicted wall time after the fix within 50% of the fixed code's, as the
# median over rounds. A wrong model is off by 2x or more; a shared VM strays by tens of percent.
BOUND = 0.5


def table(samples: list[Sample]) -> str:
    """Markdown: per case, the median wall times, the median and worst relative error, and PASS/MISS."""
    lines = ["| case | rounds | mistake (median) | predicted after fix | measured after fix | median error | "
             "worst error | within 50% |", "|---|---|---|---|---|---|---|---|"]
    for case, *_ in CASES:
        ss = [s for s in samples if s.case == case]
        if not ss:
            lines.append(f"| {case} | 0 | finding not raised | | | | | MISS |")
            continue
        worst = max((s.error for s in ss), key=abs)
        median = statistics.median(s.error for s in ss)
        lines.append(f"| {case} | {len(ss)} | {statistics.median(s.before for s in ss):.3f} s | "
                     f"{statistics.median(s.predicted for s in ss):.3f} s | "
                     f"{statistics.median(s.measured for s in ss):.3f} s | "
                     f"{median:+.1%} | {worst:+.1%} | {'PASS' if abs(median) <= BOUND else 'MISS'} |")
    return "\n".join(lines)


def main() -> None:
    """Command line: run the cases and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    print(table(run(args.rounds)))


if __name__ == "__main__":
    main()
