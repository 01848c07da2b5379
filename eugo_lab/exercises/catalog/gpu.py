"""Exercises of Course 2 (GPU acceleration): break-even, keeping data on the device, GPU requests, a grid-stride kernel.

Every check works on a machine without a GPU (the cost model's predictions for a named
profile, the refused request, Numba's CUDA simulator) and, where there is one, on what the
GPU did (the calibrated profile, the trace's gpu column, the kernel run on the device).

``gpu-break-even`` (lesson 1). Starter (graded ``not yet``: it prices ``x`` and ``y`` as
already on the device, so it finds the break-even without the transfer)::

    %%eugo --exercise gpu-break-even
    size = None
    for e in range(10, 31):
        n = 1 << e
        op = sample_operation("elementwise", n, work="special", name="power", resident=True)
        if predict(op, host, gpu).where == "gpu":
            size = n
            break

Reference: the same with ``resident=False``. Criteria: ``size`` is a whole number; the model
sends ``np.power(x, y)`` on ``size``-element float64 vectors in host memory to the GPU at
``size``; it did not at ``size // 2`` already (the smallest within a factor of two). On a GPU
the profile is the one calibrated on it, and the measured times at ``size`` are shown.

``gpu-transfer`` (lesson 2). Setup: ``signal``, 2 M float64 in ``[1, 100)`` made in an earlier
cell. Starter (``not yet``: ``signal`` is host memory the proxy does not track, so every
``np.log(signal)`` copies it to the device again)::

    %%eugo --exercise gpu-transfer --gpu auto
    import numpy as np
    w = np.log1p(signal)
    for step in range(STEPS):
        w = w * (1 + np.log(signal) - np.log(w)) / (1 + w)   # Newton's step for w * exp(w) = signal

Reference: ``s = np.asarray(signal)`` once, then ``s`` in the loop. Criteria: ``w * exp(w)``
equals ``signal``; every operation the loop repeats ran (without a GPU: is predicted to run) on
the device; the ledger's bytes moved per operation are under ``MAX_MOVED_SHARE`` of
``signal``'s size. The loop has a logarithm per step, so offload pays even on a host whose
memory is fast (a loop of adds and divides alone may rightly stay on such a host's CPU, and
then the check says so instead of crediting data that never left the host).

``gpu-request`` (lesson 3). Starter (``not yet``: no task asks for a GPU)::

    %%eugo --exercise gpu-request -w 2
    @hpc.remote
    def tile_energy(i): ...
    results = hpc.get([tile_energy.remote(i) for i in range(N_TILES)])

Reference: ``@hpc.remote(gpus=1)``, and ``except hpc.ResourceRequestError:`` the same calls
on ``tile_energy.options(gpus=0)``. Criteria: ``results`` right, ``N_TILES`` tasks ran; with
GPU workers, every task held a GPU (trace's gpu column); without, the request was made and
refused (``ResourceRequestError``) and the cell went on with CPU tasks.

``grid-stride`` (lesson 4). Starter (``not yet``: one element per thread)::

    %%eugo --exercise grid-stride
    @cuda.jit
    def square_kernel(x, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = x[i] * x[i]

Reference: ``for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):``. Criteria: launched
by the check on a grid of ``CHECK_BLOCKS`` x ``CHECK_THREADS`` threads over more elements than
that, every element of ``out`` is ``x * x``.
"""

from __future__ import annotations

import re
import types
from collections import Counter
from typing import Any

import numpy as np

from eugo_lab.exercises import measure
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.units import fmt_bytes

COURSE = "02-gpu-acceleration"


# -- gpu-break-even -------------------------------------------------------------------------------------
def power_op(n: int, resident: bool = False) -> Any:
    """``np.power(x, y)`` on ``n``-element float64 vectors (on the host unless ``resident``), as the model sees it."""
    from eugo_lab.offload.cost import sample_operation

    return sample_operation("elementwise", int(n), work="special", name="power", resident=resident)


def _measured_line(size: int, device: Any) -> str:
    """On a GPU: np.power timed at ``size`` on the CPU (host timer) and on the GPU (CUDA events, with the copies)."""
    import time

    from eugo_lab.offload.cost import fmt_time
    from eugo_lab.offload.dispatch import offload

    x = np.random.default_rng(0).random(size) + 0.5
    y = x[::-1].copy()
    t0 = time.perf_counter()
    np.power(x, y)
    cpu = time.perf_counter() - t0
    s = offload("on", device)
    with s.activate():
        xp = s.module(np)
        xp.power(xp.asarray(x), xp.asarray(y))  # warm-up: the first call compiles CuPy's kernel
    s.close()
    s = offload("on", device)
    with s.activate():
        xp = s.module(np)
        xp.power(xp.asarray(x), xp.asarray(y))
    ledger = s.close()
    gpu = sum(r.measured_s for r in ledger.ops)
    return f"measured at {size:,}: CPU {fmt_time(cpu)}, GPU {fmt_time(gpu)} with the copies to the device"


_BREAK_EVEN_SOLUTION = ("size = None\nfor e in range(10, 31):\n    n = 1 << e\n"
                        "    op = sample_operation(\"elementwise\", n, work=\"special\", name=\"power\", "
                        "resident=False)\n    if predict(op, host, gpu).where == \"gpu\":\n        size = n\n"
                        "        break")
BREAK_EVEN_HINTS = {
    DEFAULT: Hint("Step through the sizes from small to large, price np.power with x and y starting in host "
                  "memory (so the copy to the device is part of the price), and keep the first size the model "
                  "sends to the GPU.", _BREAK_EVEN_SOLUTION),
    "never": Hint("On this host the model never sends np.power to the GPU, so the right answer is no size at "
                  "all: leave `size` as None.", "size = None"),
    "none-found": Hint("Scan larger sizes, up to about a billion elements (2 to the 30th), and stop at the first "
                       "one the model sends to the GPU.", _BREAK_EVEN_SOLUTION),
    "not-a-number": Hint("`size` must be a whole number of elements (or None): the n of the loop where the model "
                         "first chose the GPU.", _BREAK_EVEN_SOLUTION),
    "resident": Hint("Price the operation with its inputs in host memory, not already on the device: the "
                     "operation's resident flag off, so the copy over the link is part of the price.",
                     _BREAK_EVEN_SOLUTION),
    "too-small": Hint("Look at larger sizes and stop at the first one where the model's choice is the GPU.",
                      _BREAK_EVEN_SOLUTION),
    "too-large": Hint("Go from small sizes to large ones and stop at the first the model sends to the GPU: "
                      "yours is past it.", _BREAK_EVEN_SOLUTION),
}


@exercise("gpu-break-even", lesson=f"{COURSE}/01-host-and-device-memory.ipynb", title="Find the break-even size",
          hints=BREAK_EVEN_HINTS)
def gpu_break_even(a: Attempt) -> Verdict:
    """Grade ``size``: the smallest power of two (or closer) where the model sends np.power on host data to the GPU."""
    from eugo_lab.offload.cell import choose_device, device_profile
    from eugo_lab.offload.cost import break_even, predict
    from eugo_lab.offload.profiles import host_profile

    size = a.require("size")
    host, gpu = host_profile(), device_profile()
    # Priced as the learner's operation is (power_op): np.power costs what this host measured for it.
    expected = break_even("elementwise", host, gpu, work="special", name="power")
    on_device = break_even("elementwise", host, gpu, work="special", resident=True, name="power")
    if expected is None:  # a host faster than this profile at every size: the right answer is "never"
        if size is None:
            return a.passed(f"the model never sends np.power on host data to {gpu.name}: None is right")
        return a.not_yet(f"on this host the model keeps np.power on the CPU at every size up to 2**34 elements, "
                         f"so no size is the break-even; your `size` is {size!r}.", mistake="never")
    if size is None:
        return a.not_yet("`size` is None: your loop found no size where the model chose the GPU, among the sizes "
                         "it tried.", mistake="none-found")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        return a.not_yet(f"`size` should be a number of elements (a whole number), got {size!r}.",
                         mistake="not-a-number")
    size = int(size)
    details = (f"model: {expected:,} elements from host memory, {on_device:,} already on the device" if on_device
               else f"model: {expected:,} elements from host memory",)
    est = predict(power_op(size), host, gpu)
    if est.where != "gpu":
        if on_device is not None and size >= on_device:
            return a.not_yet("at your size the model still keeps np.power on the CPU once x and y have to travel "
                             f"to the device ({est.why}): you found the size where it pays for data already on the "
                             "GPU, leaving out the copy over the link.", mistake="resident", details=details)
        return a.not_yet(f"at your size the model still keeps np.power on the CPU ({est.why}).",
                         mistake="too-small", details=details)
    if size >= 2 * expected:
        return a.not_yet("the GPU already wins at half your size: offload starts to pay earlier.",
                         mistake="too-large", details=details)
    device, _ = choose_device("auto")
    if device is not None:
        details += (_measured_line(size, device),)
    where = "calibrated on this GPU" if gpu.calibrated else "published figures, a prediction"
    return a.passed("the model sends np.power on host data to the GPU from your size on, and not at half of it",
                    f"device profile: {gpu.name}, {where}; host profile: measured on this machine",
                    details=details)


# -- gpu-transfer -----------------------------------------------------------------------------------------
#: Newton's method for w * exp(w) = signal from log1p(signal) converges (from below, quadratically) to
#: machine precision in about 6 steps for signal in [1, 100); 20 leaves no doubt.
STEPS = 20
#: Bytes moved per operation, as a share of ``signal``: the reference moves signal and the result once over
#: ~120 operations (about 2%); re-copying signal every step moves about a sixth of it per operation.
MAX_MOVED_SHARE = 0.1
#: The result the exercise asks for, by name.
RESULT = "w"


def _ledger_or_not_yet() -> Any:
    from eugo_lab.offload.cell import last_ledger

    ledger = last_ledger()
    if ledger is None or not ledger.ops:
        raise NotYet("the cell recorded no NumPy operations for the GPU report: it ran without GPU placement, so "
                     "no operation was placed and no byte counted.", mistake="no-ledger")
    return ledger


def _transfer_advice(ledger: Any, nbytes: int) -> tuple[str, str]:
    """The specific reason the bytes moved, the biggest cause the ledger shows, and its mistake key."""
    heavy = [r for r in ledger.ops if r.count > 1]
    recopied = [r for r in heavy if r.where == "gpu" and r.h2d_bytes / r.count >= nbytes / 2]
    if recopied:
        r = max(recopied, key=lambda r: r.h2d_bytes)
        return (f"`{r.op}` copied {fmt_bytes(r.h2d_bytes // r.count)} to the GPU on each of its {r.count} calls: "
                "one of its operands is a NumPy array from outside this cell (signal), and the proxy cannot keep a "
                "device copy of memory it does not track, so every operation that reads it copies it again.",
                "recopied")
    dragged = [r for r in heavy if r.where == "cpu" and r.d2h_bytes + r.h2d_bytes >= nbytes / 2]
    if dragged:
        r = max(dragged, key=lambda r: r.d2h_bytes + r.h2d_bytes)
        return (f"`{r.op}` ran on the CPU {r.count} times ({r.reason_bucketed}), and each time the arrays it "
                f"reads came back from the device ({fmt_bytes(r.d2h_bytes + r.h2d_bytes)} in all).", "dragged")
    fetched = [r for r in ledger.rows if r.is_transfer and r.why == "host needed" and r.count > 1]
    if fetched:
        r = max(fetched, key=lambda r: r.d2h_bytes)
        return (f"the host asked for a {fmt_bytes(r.d2h_bytes // r.count)} array {r.count} times (print, float(), "
                "a list, or a library that is not NumPy): each time it crossed the link.", "fetched")
    return ("the report's moved column shows where the bytes crossed the link, operation by operation.", "moved")


def _kept_on_cpu(ledger: Any, cpu_rows: list) -> tuple[str, str]:
    """Why the loop did not use the device: the repeated operations the model kept on the CPU, and their reasons."""
    r = max(cpu_rows, key=lambda r: r.count)
    n, total = sum(x.count for x in cpu_rows), sum(x.count for x in ledger.ops if x.count > 1)
    head = (f"the model kept {n} of the loop's {total} operations on the CPU, so no data was kept on the device: "
            f"the loop did not use the GPU (`{r.op}` x{r.count}: {r.reason_bucketed}).")
    if r.why == "transfer":
        return (head + " On this host, copying its operands to the device costs more than the CPU takes for the "
                "operation, so no first copy pays for itself while signal is copied again at every step.",
                "recopied")
    return (head + " On this host the model predicts NumPy is faster for these operations than "
            f"{ledger.device}, so there is no offload to keep here.", "cpu-wins")


_TRANSFER_SOLUTION = ("s = np.asarray(signal)        # hand signal to the proxy once: its device copy is reused\n"
                      "w = np.log1p(s)\nfor step in range(20):\n    w = w * (1 + np.log(s) - np.log(w)) / (1 + w)")
TRANSFER_HINTS = {
    DEFAULT: Hint("Hand signal to the GPU proxy once, at the top of the cell, and use that array in the loop: "
                  "the proxy keeps one device copy of what it tracks, so every step reuses it.", _TRANSFER_SOLUTION),
    "no-ledger": Hint("Run the exercise cell with GPU placement on (the --gpu auto option on the cell's first "
                      "line), so every NumPy operation is placed and its bytes counted.",
                      "%%eugo --exercise gpu-transfer --gpu auto -w 1\n" + _TRANSFER_SOLUTION),
    "no-signal": Hint("Run the cell above the exercise that makes `signal`, then the exercise cell again.",
                      "signal = np.random.default_rng(7).uniform(1.0, 100.0, 2_000_000)"),
    "result": Hint("Keep Newton's step as the starter has it, for all 20 steps, starting from the log of one "
                   "plus signal.", _TRANSFER_SOLUTION),
    "recopied": Hint("Bring signal in once, at the top of the cell, through NumPy's asarray (the proxy then "
                     "tracks it), and read that array in the loop instead of signal.", _TRANSFER_SOLUTION),
    "dragged": Hint("Do every step of the loop with operations the report shows on the GPU, and bring back only "
                    "a number when you need one, such as the largest error for a convergence check.",
                    "err = float(np.max(np.abs(w * np.exp(w) - s)))   # one number crosses the link"),
    "fetched": Hint("Keep the loop in NumPy operations and look at the result once, after the loop: printing, "
                    "converting to a float or a list, mid-loop, copies the array back each time.",
                    _TRANSFER_SOLUTION),
    "moved": Hint("Keep every array of the loop on the device and bring back only what you need after it; "
                  "start by handing signal to the proxy once.", _TRANSFER_SOLUTION),
    "no-loop": Hint("Keep the 20 Newton steps in a loop in this cell, so the same operations repeat on the "
                    "device copies.", _TRANSFER_SOLUTION),
    "copied": Hint("Compute the answer in the exercise cell itself: the Newton loop on the array you handed to "
                   "the proxy, its last step assigned to w.", _TRANSFER_SOLUTION),
    "cpu-wins": Hint("Nothing to change in the placement: on this host the model keeps these operations on the "
                     "CPU, rightly. Check that the cell is the loop of the starter with signal handed over once.",
                     _TRANSFER_SOLUTION),
}


@exercise("gpu-transfer", lesson=f"{COURSE}/02-automatic-gpu-offloading.ipynb", title="Keep the data on the device",
          hints=TRANSFER_HINTS)
def gpu_transfer(a: Attempt) -> Verdict:
    """Grade from the offload ledger: the right ``w``, the loop on the device, and few bytes moved per operation."""
    ledger = _ledger_or_not_yet()
    signal = np.asarray(a.namespace.get("signal"))
    if signal.ndim != 1 or signal.size == 0:
        return a.not_yet("`signal` is missing: the cell that makes it (above this exercise) has not run in this "
                         "kernel.", mistake="no-signal")
    w = np.asarray(a.require(RESULT), dtype=float)
    if w.shape != signal.shape or not measure.same_result(w * np.exp(w), signal):
        return a.not_yet(f"`{RESULT}` does not solve w * exp(w) = signal after the cell's steps: Newton's "
                         f"{STEPS} steps from the starter converge to it.", mistake="result")
    copied = measure.left_by_earlier_cell(a.namespace.get(RESULT), a.before, skip=(RESULT,))
    if copied is not None:
        return a.not_yet(f"`{RESULT}` is the array `{copied}` that an earlier cell computed, not the result of "
                         "this cell's Newton steps: what this cell's loop did on the device is not what it handed "
                         "in.", mistake="copied")
    n_ops = ledger.n_ops()
    per_op = ledger.moved / max(n_ops, 1)
    limit = MAX_MOVED_SHARE * signal.nbytes
    kind = "predicted for " + ledger.device if ledger.predictions_only else "measured on " + ledger.device
    details = (f"{fmt_bytes(ledger.moved)} moved over {n_ops} operations, {fmt_bytes(per_op)} each ({kind})",)
    if per_op >= limit:
        why, mistake = _transfer_advice(ledger, signal.nbytes)
        return a.not_yet(f"{fmt_bytes(per_op)} moved per operation, more than {MAX_MOVED_SHARE:.0%} of signal's "
                         f"{fmt_bytes(signal.nbytes)}.", why, mistake=mistake, details=details)
    loop = [r for r in ledger.ops if r.count > 1]
    cpu_rows = [r for r in loop if r.where != "gpu"]
    if not loop or cpu_rows:
        if not loop:
            return a.not_yet(f"no operation ran more than once: the {STEPS} Newton steps did not run as a loop in "
                             "this cell.", mistake="no-loop", details=details)
        why, mistake = _kept_on_cpu(ledger, cpu_rows)
        return a.not_yet(why, mistake=mistake, details=details)
    ran = "would run on" if ledger.predictions_only else "ran on"
    where = "a prediction for a named GPU profile: no GPU here" if ledger.predictions_only else "measured on the GPU"
    return a.passed(f"{RESULT} solves w * exp(w) = signal",
                    f"all {sum(r.count for r in loop)} operations of the loop {ran} {ledger.device} and bytes moved "
                    f"per operation stayed under {MAX_MOVED_SHARE:.0%} of signal's {fmt_bytes(signal.nbytes)}: "
                    f"the data stayed on the device ({where})", details=details)


# -- gpu-request ------------------------------------------------------------------------------------------
N_TILES = 4
TILE = 200_000
FUNCTION = "tile_energy"


def tile_energy(i: int) -> float:
    """What the exercise's task returns for tile ``i``: the sum of squares of its values."""
    v = np.arange(i * TILE, (i + 1) * TILE, dtype=np.float64) / TILE
    return float(np.sum(v * v))


_REQUEST_SOLUTION = ("@hpc.remote(gpus=1)\ndef tile_energy(i):\n    ...\n\ntry:\n"
                     "    results = hpc.get([tile_energy.remote(i) for i in range(4)])\n"
                     "except hpc.ResourceRequestError as err:\n"
                     "    print(\"no GPU worker, running on CPU workers instead:\", err.request)\n"
                     "    results = hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])")
REQUEST_HINTS = {
    DEFAULT: Hint("Ask for one GPU per call in the remote decorator; where no worker has one the request is "
                  "refused with a resource-request error, so catch it and run the same calls again with the "
                  "request set to no GPU.", _REQUEST_SOLUTION),
    "results": Hint("`results` must be the 4 energies in tile order, whichever workers ran them: when the GPU "
                    "request is refused, submit the same 4 calls again without the request and get them all.",
                    _REQUEST_SOLUTION),
    "local": Hint("Run the fallback as tasks too, with the function's options set to no GPU, not as plain "
                  "calls in the notebook.", _REQUEST_SOLUTION),
    "no-gpu-asked": Hint("Ask for a GPU per call: one GPU in the remote decorator of tile_energy.", _REQUEST_SOLUTION),
    "not-from-tasks": Hint("Keep what the tile_energy tasks returned, in the order you submitted them, as "
                           "`results`: the list get() gives back for the futures of the calls that ran.",
                           _REQUEST_SOLUTION),
    "other-function": Hint("Put the GPU request on tile_energy itself, the function whose calls need the device, "
                           "not on another function.", _REQUEST_SOLUTION),
}


def _devices(held: dict[int, int]) -> str:
    """``GPU 0 (4 tasks)``, ``GPU 0 (2 tasks), GPU 1 (2 tasks)``."""
    return ", ".join(f"GPU {d} ({measure.plural(n, 'task')})" for d, n in sorted(held.items()))


@exercise("gpu-request", lesson=f"{COURSE}/03-per-call-resource-requests.ipynb", title="Ask for a GPU per call",
          hints=REQUEST_HINTS)
def gpu_request(a: Attempt) -> Verdict:
    """Grade the request from the trace: who asked for a GPU, who was refused, what each worker really had.

    ``results`` must be what this cell's ``tile_energy`` tasks returned, in order. With GPU
    workers, every one of those tasks held a GPU (the scheduler's gpu column), and the verdict
    says what the workers found behind it (:meth:`Trace.gpu_devices`: a device named with
    ``gpus=[0]`` on a machine without one reads -1, and is never called a GPU). Without, a
    ``tile_energy`` request for a GPU was refused and the tiles ran as CPU tasks.
    """
    from eugo_lab.exercises import derivation

    results = a.require("results")
    expected = [tile_energy(i) for i in range(N_TILES)]
    if not measure.same_result(list(results) if isinstance(results, (list, tuple)) else results, expected):
        return a.not_yet(f"`results` does not hold the {N_TILES} energies, in tile order.", mistake="results")
    ran = len(a.trace.results(FUNCTION))
    if ran < N_TILES:
        return a.not_yet(f"only {ran} of the {N_TILES} {FUNCTION} calls ran as tasks on the cluster: the others "
                         "ran here in the notebook.", mistake="local")
    came = derivation.listed(list(results), a.trace, FUNCTION, name="results")
    if not came:
        return a.not_yet(f"{came.why}.", mistake="not-from-tasks")
    first = a.trace.first_attempts(FUNCTION)
    assigned = np.asarray(a.trace.gpu)[first]
    refused = [r for r in a.trace.refused if r.function == FUNCTION and r.request.get("GPU", 0) > 0]
    others = sorted({r.function for r in a.trace.refused if r.function != FUNCTION})
    if a.trace.meta.get("gpu_workers"):
        without = int((assigned < 0).sum())
        if without:
            return a.not_yet(f"{without} of the {len(assigned)} {FUNCTION} tasks ran on workers without a GPU, "
                             "although this cluster has GPU workers: those calls asked for no GPU.",
                             mistake="no-gpu-asked")
        scheduled = dict(zip(*(v.tolist() for v in np.unique(assigned, return_counts=True))))
        asked = (f"all {len(assigned)} {FUNCTION} tasks asked for a GPU and the scheduler gave each one: "
                 f"{_devices(scheduled)} (the trace's gpu column)")
        found = Counter(a.trace.gpu_devices(FUNCTION).values())
        real = {d: n for d, n in found.items() if d >= 0}
        none = found.get(-1, 0)
        if not real:
            return a.passed(asked, f"on their workers no GPU was found behind the named device "
                                   f"({measure.plural(none, 'task')} read none), so the tiles ran on the CPU")
        tail = f"; {measure.plural(none, 'task')} found none and ran on the CPU" if none else ""
        return a.passed(asked, f"their workers found the device: {_devices(real)} ran with a GPU{tail}")
    if not refused:
        if others:
            return a.not_yet(f"a GPU request was refused, but it was made by {', '.join(others)}, not by "
                             f"{FUNCTION}: the {FUNCTION} tasks never asked for a GPU.", mistake="other-function")
        return a.not_yet("no task of this cell asked for a GPU: this cluster has no GPU worker, so a request would "
                         "have been refused with a ResourceRequestError, and none was.", mistake="no-gpu-asked")
    gpus = sorted({r.request["GPU"] for r in refused})
    return a.passed(f"{measure.plural(len(refused), FUNCTION + ' request')} for "
                    f"{' or '.join(f'{g:g}' for g in gpus)} GPU were refused with ResourceRequestError (no worker "
                    "here has one)",
                    f"then {int((assigned < 0).sum())} {FUNCTION} tasks ran on CPU workers (the trace's gpu column: "
                    "no GPU held) and `results` is what they returned, in order")


# -- grid-stride ------------------------------------------------------------------------------------------
CHECK_BLOCKS = 2
CHECK_THREADS = 32
#: More elements than the check's grid has threads (64), and not a multiple of it.
CHECK_N = 300
#: The check's input is random (from this seed), so no formula of the index gives its squares: only
#: squaring ``x`` itself writes the right ``out``.
CHECK_SEED = 20_240


def _missing(written: np.ndarray) -> str:
    """Which elements were never written, in words (``64-299``; ``32-63, 96-127, ...``)."""
    return _runs(np.flatnonzero(~written))


def _runs(idx: Any, most: int = 4) -> str:
    """Sorted indices as runs, in words: ``0-4, 9, 12-13``, the first ``most`` runs then ``...``."""
    idx = [int(i) for i in idx]
    runs, start = [], idx[0]
    for prev, cur in zip(idx[:-1], idx[1:]):
        if cur != prev + 1:
            runs.append((start, prev))
            start = cur
    runs.append((start, idx[-1]))
    words = [f"{s}" if s == e else f"{s}-{e}" for s, e in runs[:most]]
    return ", ".join(words) + (", ..." if len(runs) > most else "")


#: How Numba's simulator names the thread of an error: ``tid=[25, 0, 0] ctaid=[0, 0, 0]: index 345 is ...``.
_SIM_THREAD = re.compile(r"^tid=\[(\d+), \d+, \d+\] ctaid=\[(\d+), \d+, \d+\]:\s*")


def _kernel_error(exc: BaseException) -> str:
    """``IndexError in thread 25 of block 0: index 345 is out of bounds ...``: the error of a launch, in words."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    m = _SIM_THREAD.match(first)
    if m:
        return f"{type(exc).__name__} in thread {m.group(1)} of block {m.group(2)}: {first[m.end():]}"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class _Unfollowable(Exception):
    """The kernel used a part of ``numba.cuda`` the thread-by-thread run does not model."""


class _ThreadFailed(Exception):
    """One thread of the thread-by-thread run raised: ``str()`` is its error, ``thread`` and ``block`` where."""

    def __init__(self, error: str, thread: int, block: int) -> None:
        super().__init__(error)
        self.thread, self.block = thread, block


class _Dim3:
    """``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` of a 1-d launch."""

    def __init__(self, x: int, rest: int) -> None:
        self.x, self.y, self.z = x, rest, rest


class _OneThread:
    """``numba.cuda`` as one thread of a 1-d launch sees it: its indices and the grid's shape, nothing else."""

    def __init__(self, blocks: int, threads: int) -> None:
        self.blockDim, self.gridDim = _Dim3(threads, 1), _Dim3(blocks, 1)
        self.blockIdx = self.threadIdx = _Dim3(0, 0)

    def at(self, block: int, thread: int) -> None:
        self.blockIdx, self.threadIdx = _Dim3(block, 0), _Dim3(thread, 0)

    def grid(self, ndim: int) -> Any:
        i = self.blockIdx.x * self.blockDim.x + self.threadIdx.x
        return i if ndim == 1 else (i,) + (0,) * (ndim - 1)

    def gridsize(self, ndim: int) -> Any:
        n = self.gridDim.x * self.blockDim.x
        return n if ndim == 1 else (n,) + (1,) * (ndim - 1)

    def __getattr__(self, name: str) -> Any:
        # Shared memory, atomics, syncthreads: their meaning needs threads that run together, which this
        # one-after-another run does not have, so it says so rather than guess.
        raise _Unfollowable(f"cuda.{name}")


class _Traced:
    """A 1-d array whose writes record which thread of the run made them (``log[i]``: threads that wrote ``i``)."""

    def __init__(self, data: np.ndarray, log: list[list[int]] | None, thread: list[int]) -> None:
        self._data, self._log, self._thread = data, log, thread
        self.shape, self.size, self.ndim, self.dtype = data.shape, data.size, data.ndim, data.dtype

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[key] = value
        if self._log is not None:
            for i in np.atleast_1d(np.arange(self._data.shape[0])[key]).ravel().tolist():
                self._log[i].append(self._thread[0])


def _numba_cuda(value: Any) -> bool:
    return isinstance(value, types.ModuleType) and (value.__name__ == "numba.cuda"
                                                    or value.__name__.startswith("numba.cuda."))


def _as_python(fn: Any, fake: _OneThread, memo: dict[int, Any]) -> Any:
    """The kernel's (or a device function's) Python function, seeing ``fake`` wherever it names ``numba.cuda``."""
    py = getattr(fn, "py_func", fn)
    if id(py) in memo:
        return memo[id(py)]
    g = dict(py.__globals__)
    memo[id(py)] = out = types.FunctionType(py.__code__, g, py.__name__, py.__defaults__, py.__closure__)
    for name in py.__code__.co_names:
        value = g.get(name)
        if _numba_cuda(value):
            g[name] = fake
        elif type(value).__module__.startswith("numba") and hasattr(value, "py_func"):  # a device function
            g[name] = _as_python(value, fake, memo)
    return out


def follow_threads(kernel: Any, x: np.ndarray, blocks: int, threads: int) -> tuple[np.ndarray, list[list[int]]]:
    """Run ``kernel(x, out)`` thread by thread in Python: ``out``, and for each element the threads that wrote it.

    Thread ``b * threads + t`` is thread ``t`` of block ``b``. The threads run one after another,
    so a kernel whose threads wait for each other (shared memory, ``syncthreads``) raises
    :class:`_Unfollowable`; the kernels of this exercise have none.
    """
    fake = _OneThread(blocks, threads)
    fn = _as_python(kernel, fake, {})
    out = np.full(x.shape[0], np.nan, dtype=x.dtype)
    log: list[list[int]] = [[] for _ in range(x.shape[0])]
    thread = [0]
    xs, outs = _Traced(x.copy(), None, thread), _Traced(out, log, thread)
    for b in range(blocks):
        for t in range(threads):
            fake.at(b, t)
            thread[0] = b * threads + t
            try:
                fn(xs, outs)
            except _Unfollowable:
                raise
            except Exception as exc:  # the learner's error, named with its thread
                raise _ThreadFailed(_kernel_error(exc), t, b) from exc
    return out, log


def _thread_counts(counts: Counter) -> str:
    """``44 threads did 5 elements and 20 did 4``, ``all 64 threads did 4 elements`` (thread -> elements done)."""
    by = sorted(Counter(counts.values()).items(), reverse=True)  # (elements, threads that did that many)
    (k, n), rest = by[0], by[1:]
    if not rest:
        return f"all {measure.plural(n, 'thread')} did {measure.plural(k, 'element')}"
    return f"{measure.plural(n, 'thread')} did {measure.plural(k, 'element')}" + "".join(
        f" and {n} did {k}" for k, n in rest)


_STRIDE_SOLUTION = ("@cuda.jit\ndef square_kernel(x, out):\n"
                    "    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):   # start at my index, step by "
                    "the grid\n        out[i] = x[i] * x[i]")
STRIDE_HINTS = {
    DEFAULT: Hint("Let each thread loop: start at its index in the whole grid and step by the grid's size until "
                  "the end of the array, squaring each element it lands on.", _STRIDE_SOLUTION),
    "not-a-kernel": Hint("Make `square_kernel` a CUDA kernel: Numba's CUDA decorator on the function, which "
                         "takes the input and the output array.", _STRIDE_SOLUTION),
    "out-of-range": Hint("Keep every index below the array's length: a grid-stride loop's range stops there.",
                         _STRIDE_SOLUTION),
    "one-per-thread": Hint("Replace the single index by a loop, so each thread goes on by the grid's size (the "
                           "total number of threads) after its first element.", _STRIDE_SOLUTION),
    "block-index": Hint("Start each thread at its index in the whole grid, not its index inside the block "
                        "(which repeats in every block), and step by the grid's size.", _STRIDE_SOLUTION),
    "wrong-value": Hint("Write the square of the input element into the same position of the output, for the "
                        "index of the loop.", _STRIDE_SOLUTION),
    "repeated": Hint("Give each thread its own elements: start the loop at the thread's index in the whole grid "
                     "instead of at zero, and step by the grid's size instead of by one.", _STRIDE_SOLUTION),
    "not-own-thread": Hint("Let every thread work, on the elements a grid-stride loop gives it: its own index "
                           "in the grid, then that plus the grid's size, and so on, so neighbouring threads take "
                           "neighbouring elements.", _STRIDE_SOLUTION),
    "unfollowable": Hint("Write the kernel with only the thread's index in the grid and the grid's size (no "
                         "shared memory, atomics or barriers): a grid-stride loop needs nothing else.",
                         _STRIDE_SOLUTION),
}


@exercise("grid-stride", lesson=f"{COURSE}/04-a-first-cuda-kernel.ipynb", title="Cover every element",
          hints=STRIDE_HINTS)
def grid_stride(a: Attempt) -> Verdict:
    """Launch ``square_kernel`` on a small grid over more elements; check every value, and which thread wrote it.

    The launch runs where kernels run here (the GPU, or Numba's simulator). A GPU cannot say
    which thread wrote an element, so the same kernel then runs thread by thread in Python
    (:func:`follow_threads`): each element must be written once, by its own thread (element
    ``i`` by thread ``i`` mod the grid's size), which is what a grid-stride loop does.
    """
    from eugo_lab.offload import kernels

    kernel = a.require("square_kernel")
    if not hasattr(kernel, "__getitem__") or not callable(kernel) or not callable(getattr(kernel, "py_func", None)):
        return a.not_yet("`square_kernel` is not a CUDA kernel: it cannot be launched on a grid.",
                         mistake="not-a-kernel")
    cuda = kernels.cuda()
    t = kernels.check_grid(CHECK_BLOCKS, CHECK_THREADS)
    grid = CHECK_BLOCKS * CHECK_THREADS
    launch = f"launched on {CHECK_BLOCKS} blocks x {CHECK_THREADS} threads ({grid} threads) over {CHECK_N} elements"
    x = np.random.default_rng(CHECK_SEED).uniform(0.5, 4.0, CHECK_N).astype(np.float32)
    dx, dout = cuda.to_device(x), cuda.to_device(np.full(CHECK_N, np.nan, dtype=np.float32))
    try:
        kernel[CHECK_BLOCKS, CHECK_THREADS](dx, dout)
        cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the learner's kernel failed: say how, as a not yet
        return a.not_yet(f"{launch}, the kernel stopped with {_kernel_error(exc)}.", mistake="out-of-range")
    got = dout.copy_to_host()
    written = ~np.isnan(got)
    where = "the GPU" if t.kind == "gpu" else "the Numba CUDA simulator (no GPU here)"
    how = f"ran on {where}: {CHECK_BLOCKS} blocks x {CHECK_THREADS} threads = {grid} threads over {CHECK_N} elements"
    if not written.all():
        if written[:grid].all() and not written[grid:].any():
            return a.not_yet(f"{launch}, the kernel wrote only the first {grid}: each thread handled one element, "
                             "and the elements past the grid's threads were never reached.", mistake="one-per-thread",
                             details=(how,))
        return a.not_yet(f"{launch}, the kernel wrote {int(written.sum())} of them; never written: "
                         f"{_missing(written)}. The threads did not start at their index in the whole grid or did "
                         "not step by the grid's size.", mistake="block-index", details=(how,))
    if not np.allclose(got, x * x):
        bad = int(np.flatnonzero(~np.isclose(got, x * x))[0])
        return a.not_yet(f"every element was written, but element {bad} of the output is {got[bad]:g}, not the "
                         f"square of the input's {x[bad]:g}, {x[bad] * x[bad]:g}.", mistake="wrong-value",
                         details=(how,))
    try:
        followed, writers = follow_threads(kernel, x, CHECK_BLOCKS, CHECK_THREADS)
    except _Unfollowable as exc:
        return a.not_yet(f"every element came out right, but the check could not follow the kernel thread by "
                         f"thread to see which thread did which element: it uses {exc}, which needs threads "
                         "running together.", mistake="unfollowable", details=(how,))
    except _ThreadFailed as exc:  # a GPU does not check bounds; the thread-by-thread run does
        name, _, said = str(exc).partition(": ")
        return a.not_yet(f"run thread by thread over {CHECK_N} elements, the kernel stopped with {name} in "
                         f"thread {exc.thread} of block {exc.block}: {said}.", mistake="out-of-range",
                         details=(how,))
    if not np.array_equal(np.isnan(followed), np.isnan(got)) or not np.allclose(followed, got, equal_nan=True):
        return a.not_yet("every element came out right on the launch, but run thread by thread the kernel wrote "
                         "other values, so the check cannot say which thread did which element.",
                         mistake="unfollowable", details=(how,))
    repeated = [i for i, w in enumerate(writers) if len(w) > 1]
    if repeated:
        e = repeated[0]
        return a.not_yet(f"every element came out right, but {len(repeated)} of the {CHECK_N} elements were "
                         f"written more than once: element {e} by {measure.plural(len(writers[e]), 'thread')} "
                         f"(threads {_runs(sorted(set(writers[e])))}). The threads did each other's work instead of "
                         "each taking its own elements.", mistake="repeated", details=(how,))
    elsewhere = [i for i, w in enumerate(writers) if w[0] != i % grid]
    mine: dict[int, list[int]] = {}
    for i, w in enumerate(writers):
        mine.setdefault(w[0], []).append(i)
    counts = Counter({th: len(ks) for th, ks in mine.items()})
    if elsewhere:
        e, (busiest, _) = elsewhere[0], counts.most_common(1)[0]
        idle = grid - len(counts)
        return a.not_yet(f"every element came out right and was written once, but not by its own thread: element "
                         f"{e} was written by thread {writers[e][0]}, while a grid-stride loop over {grid} threads "
                         f"gives it to thread {e % grid} (its index modulo the grid's size). Thread {busiest} did "
                         f"elements {_runs(mine[busiest])}"
                         + (f", and {idle} of the {grid} threads did none." if idle else "."),
                         mistake="not-own-thread", details=(how,))
    steps = {j - i for ks in mine.values() for i, j in zip(ks, ks[1:])}
    stride = f", each stepping by the grid's {grid} threads (grid-stride loop)" if steps == {grid} else ""
    return a.passed(f"{launch}, the kernel squared every one of them, each element once and by its own thread "
                    f"(element i by thread i mod {grid}, followed thread by thread)",
                    f"{_thread_counts(counts)}{stride}", "where it ran: " + where, details=(how,))
