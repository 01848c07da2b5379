"""Where the GPU starts to win: measured crossovers (CuPy, CUDA events) against the cost model's predictions.

For each case (an add, exp, a sum and square matmuls; operands on the host, or already on
the device) the sizes grow by sqrt(2) steps; NumPy's time (best of 3, host timer) and the
GPU's (best of 3, CUDA events, host->device copies of host operands included) are taken at
each size, and the crossover is the first size from which the GPU stays faster. The
predicted crossover is :func:`eugo_lab.offload.cost.break_even` for this host's measured
profile and the device's calibrated profile (and its published one).

    python -m benchmarks.gpu_crossover                 # on a GPU machine: Markdown for RESULTS.md
    python -m benchmarks.gpu_crossover --predict-only  # anywhere: the model's table for H100 and T4

Exits 2 with a message when there is no GPU (and --predict-only was not given).
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from eugo_lab.hardware.cpu import describe_cpu
from eugo_lab.hardware.gpus import detect_gpus
from eugo_lab.offload import cost, profiles


@dataclass(frozen=True)
class Case:
    """One row of the table."""

    label: str
    kind: str
    dtype: str
    resident: bool
    work: str = "cheap"


CASES = (
    Case("a + b", "elementwise", "float32", False),
    Case("a + b", "elementwise", "float32", True),
    Case("exp(a)", "elementwise", "float32", False, "special"),
    Case("a.sum()", "reduction", "float64", False),
    Case("a.sum()", "reduction", "float64", True),
    Case("a @ b (n x n)", "matmul", "float32", False),
    Case("a @ b (n x n)", "matmul", "float64", False),
)


def sizes(kind: str, limit_bytes: float = 2e8) -> list[int]:
    """Sizes to try: vector lengths 2^10 .. (limit), or matrix orders 16 .. 4096, by sqrt(2) steps."""
    lo, hi = (16, 4096) if kind == "matmul" else (1024, int(limit_bytes / 8))
    out, x = [], float(lo)
    while x <= hi:
        out.append(int(x))
        x *= math.sqrt(2)
    return out


def _operands(case: Case, n: int) -> list[np.ndarray]:
    # Values do not change these timings; np.full is ~10x faster to make than random numbers.
    shape = (n, n) if case.kind == "matmul" else (n,)
    count = 1 if case.kind == "reduction" or case.work == "special" else 2
    return [np.full(shape, 0.5, dtype=case.dtype) for _ in range(count)]


def _np_fn(case: Case, xp: object):  # the operation in the array module xp
    if case.kind == "matmul":
        return lambda a, b: xp.matmul(a, b)
    if case.kind == "reduction":
        return lambda a: xp.sum(a)
    if case.work == "special":
        return lambda a: xp.exp(a)
    return lambda a, b: xp.add(a, b)


def _best(fn, repeat: int = 3) -> float:
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def cpu_time(case: Case, n: int) -> float:
    """NumPy's time for the case at size ``n`` (best of 3, host timer)."""
    ops = _operands(case, n)
    fn = _np_fn(case, np)
    fn(*ops)
    return _best(lambda: fn(*ops))


def gpu_time(case: Case, n: int, cp: object) -> float:
    """CuPy's time at size ``n`` by CUDA events, copying host operands first unless the case is resident."""
    host = _operands(case, n)
    fn = _np_fn(case, cp)
    dev = [cp.asarray(h) for h in host]  # type: ignore[attr-defined]
    fn(*dev)
    cp.cuda.Device().synchronize()  # type: ignore[attr-defined]
    best = math.inf
    for _ in range(3):
        start, end = cp.cuda.Event(), cp.cuda.Event()  # type: ignore[attr-defined]
        start.record()
        args = dev if case.resident else [cp.asarray(h) for h in host]  # type: ignore[attr-defined]
        fn(*args)
        end.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end) / 1e3)  # type: ignore[attr-defined]
    return best


#: The GPU counts as having won once it is faster at this many sizes in a row (no need to go on).
WINS_IN_A_ROW = 4


def measured_crossover(case: Case, cp: object, deadline: float) -> int | None:
    """The first size from which the GPU stays faster (``None``: never in range, or out of time)."""
    wins: list[tuple[int, bool]] = []
    for n in sizes(case.kind):
        if time.monotonic() > deadline:
            break
        wins.append((n, gpu_time(case, n, cp) < cpu_time(case, n)))
        if len(wins) >= WINS_IN_A_ROW and all(w for _, w in wins[-WINS_IN_A_ROW:]):
            break
    for i, (n, _) in enumerate(wins):
        if all(w for _, w in wins[i:]):
            return n
    return None


def agree(case: Case, measured: int | None, predicted: int | None, factor: float = 2.0) -> bool:
    """Measured and predicted crossovers within ``factor``; "never" agrees with a size past half the range."""
    top = sizes(case.kind)[-1]
    if measured is None and predicted is None:
        return True
    if measured is None:
        return predicted is not None and predicted * factor >= top
    if predicted is None:
        return measured * factor >= top
    return 1 / factor <= predicted / measured <= factor


def predicted_crossover(case: Case, host: profiles.HostProfile, device: profiles.DeviceProfile) -> int | None:
    """The cost model's break-even size for the case."""
    return cost.break_even(case.kind, host, device, case.dtype, case.resident, case.work)


def _fmt(n: int | None, kind: str) -> str:
    if n is None:
        return "never"
    return f"{n} x {n}" if kind == "matmul" else f"{n:,}"


def _data(case: Case) -> str:
    return "on device" if case.resident else "on host"


def predict_only_table() -> str:
    """The model's crossovers for this host on the published H100 and T4 profiles (no GPU needed)."""
    host = profiles.host_profile()
    h100, t4 = profiles.published("h100"), profiles.published("t4")
    lines = [f"Predicted crossovers (cost model only; no measurement on a GPU) for this host: {describe_cpu()}", "",
             "| operation | dtype | operands | H100 (published) | T4 (published) |", "|---|---|---|---|---|"]
    for c in CASES:
        lines.append(f"| {c.label} | {c.dtype} | {_data(c)} | {_fmt(predicted_crossover(c, host, h100), c.kind)} "
                     f"| {_fmt(predicted_crossover(c, host, t4), c.kind)} |")
    return "\n".join(lines)


def measured_table(budget_s: float = 90.0) -> tuple[str, list[tuple[Case, int | None, int | None]]]:
    """Measured vs predicted crossovers on this machine's GPU; also returns the raw rows."""
    from eugo_lab.offload.calibrate import calibrate
    from eugo_lab.offload.devices import CupyDevice, import_cupy

    cp = import_cupy()
    det = detect_gpus()
    base = profiles.profile_for_name(det.gpus[0].name)
    dev = CupyDevice(base)
    cal = calibrate(dev, base)
    host = profiles.host_profile()
    deadline = time.monotonic() + budget_s
    rows = []
    lines = [f"GPU crossovers on {dev.name} (CuPy {cp.__version__}, CUDA events) vs {describe_cpu()}, "
             f"{datetime.date.today().isoformat()}", "",
             f"Calibrated: link {cal.link_bw / 1e9:.1f} GB/s, launch {cal.launch_s * 1e6:.1f} us, memory "
             f"{cal.mem_bw / 1e12:.2f} TB/s, FP32 {cal.fp32 / 1e12:.1f} TFLOPS, FP64 {cal.fp64 / 1e12:.1f} TFLOPS", "",
             "| operation | dtype | operands | measured | predicted (calibrated) | predicted (published) | ratio |",
             "|---|---|---|---|---|---|---|"]
    for c in CASES:
        m = measured_crossover(c, cp, deadline)
        p = predicted_crossover(c, host, cal)
        pub = predicted_crossover(c, host, base)
        ratio = (f"{p / m:.2f}" if m and p else "-") + ("" if agree(c, m, p) else " (off by more than 2x)")
        rows.append((c, m, p))
        lines.append(f"| {c.label} | {c.dtype} | {_data(c)} | {_fmt(m, c.kind)} | {_fmt(p, c.kind)} | "
                     f"{_fmt(pub, c.kind)} | {ratio} |")
    if time.monotonic() > deadline:
        lines.append("")
        lines.append(f"(stopped early: the {budget_s:.0f} s budget ran out; later rows are partial)")
    return "\n".join(lines), rows


def main(argv: list[str] | None = None) -> int:
    """Print the Markdown table; exit 2 (with a message) when there is no GPU unless --predict-only."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predict-only", action="store_true", help="no GPU needed: the model's table for H100 and T4")
    ap.add_argument("--budget", type=float, default=90.0, help="seconds for all measurements (default 90)")
    args = ap.parse_args(argv)
    if args.predict_only:
        print(predict_only_table())
        return 0
    det = detect_gpus()
    if not det.usable:
        print(f"gpu_crossover: cannot measure: {det.describe()}\n"
              "Run on a machine with an NVIDIA GPU after `pip install -e \".[gpu]\"`, or use --predict-only.",
              file=sys.stderr)
        return 2
    table, _ = measured_table(args.budget)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
