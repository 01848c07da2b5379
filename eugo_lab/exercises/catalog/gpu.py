"""Exercises of Course 2 (GPU acceleration): break-even, keeping data on the device, GPU requests, a grid-stride kernel.

Every check works on a machine without a GPU (the cost model's predictions for a named
profile, the refused request, Numba's CUDA simulator) and, where there is one, on what the
GPU did (the calibrated profile, the trace's gpu column, the kernel run on the device).

``gpu-break-even`` (lesson 1). ``np.power`` ``p.calls`` times in a row (the checker hands it out: four,
``CHAIN``, in the lesson; one call in the hidden case), each call on the last one's result:
only the first copies x and y; the others find their data on the device. Starter
(graded ``not yet``: it finds where *one* call from host memory pays, and that call's copy is
not shared)::

    %%eugo --exercise gpu-break-even
    p = exercises.problem("gpu-break-even")
    size = None
    for e in range(10, 31):
        n = 1 << e
        op = sample_operation("elementwise", n, work="special", name="power")
        if predict(op, host, gpu).where == "gpu":
            size = n
            break

Reference: at each size, ``first`` priced from host memory and ``then`` with ``resident=True``;
the size where ``first.gpu_s + (p.calls - 1) * then.gpu_s < p.calls * first.cpu_s``. Criteria: ``size`` is a size
this cell's own calls of ``predict()`` priced (the log of :mod:`eugo_lab.offload.predictions`:
a number typed in, or an earlier cell's answer, is one no call here gave; ``break_even()``
answers for one call only), with the copy priced at that size; the model runs the chain on the
GPU at ``size`` and not at ``size // 2`` already (the smallest within a factor of two). On a GPU
the profile is the one calibrated on it, and the chain's measured times at ``size`` are shown.

``gpu-transfer`` (lesson 2). The checker hands out ``p.signal`` (float64 in ``[1, 100)``: 2 M in
the lesson, the 16 MB ``signal`` its earlier cells use; 1-1.5 M others in the hidden case) and
``p.gain`` (in ``[0.5, 2)``, as many), read-only host arrays. Starter (``not yet``: ``p.signal *
p.gain`` is a product of two plain arrays, made again on the host at every step, and every
``np.log`` of it copies it to the device again)::

    %%eugo --exercise gpu-transfer --gpu auto -w 1
    p = exercises.problem("gpu-transfer")
    w = np.log1p(p.signal * p.gain)
    for step in range(STEPS):
        w = w * (1 + np.log(p.signal * p.gain) - np.log(w)) / (1 + w)   # Newton's step for w * exp(w) = t

Reference: ``target = np.asarray(p.signal) * p.gain`` once, then ``target`` in the loop. Criteria:
``w * exp(w)`` equals the checker's own ``p.signal * p.gain``; ``w`` is what this cell's placed operations produced
(its digest is the one the ledger kept for the name, :attr:`Ledger.left`: an earlier cell's
array, or a plain copy of one, never went through the proxy) at the end of a chain of at least
``STEPS`` placed operations (:attr:`Ledger.chains`: ``np.copy`` of an earlier answer is a chain of
one); every operation the loop repeats
ran (without a GPU: is predicted to run) on the device; the ledger's bytes moved per operation
are under ``MAX_MOVED_SHARE`` of ``p.signal``'s size. The loop has a logarithm per step, so offload
pays even on a host whose memory is fast (a loop of adds and divides alone may rightly stay on
such a host's CPU, and then the check says so instead of crediting data that never left the host).

``gpu-request`` (lesson 3). The checker hands out ``p.n_tiles`` tiles of ``p.tile_size`` numbers
(4 of 200,000 in the lesson; 3 or 5 smaller ones in the hidden case). Two steps per tile:
``load_tile(i, size)`` (CPU work) and ``tile_energy(tile)`` on its future (the step that wants a
GPU). Starter (``not yet``: no task asks for a GPU)::

    %%eugo --exercise gpu-request -w 2
    p = exercises.problem("gpu-request")
    @hpc.remote
    def load_tile(i, size): ...
    @hpc.remote
    def tile_energy(tile): ...
    tiles = [load_tile.remote(i, p.tile_size) for i in range(p.n_tiles)]
    results = hpc.get([tile_energy.remote(t) for t in tiles])

Reference: ``@hpc.remote(gpus=1)`` on ``tile_energy`` only, and ``except hpc.ResourceRequestError:``
the energies again on ``tile_energy.options(gpus=0)``, on the tiles already loaded. Criteria:
``results`` the energies of the checker's own tiles, returned by ``p.n_tiles`` ``tile_energy``
tasks; ``load_tile`` ran once per tile, as tasks, holding no GPU and never refused one; with GPU
workers, every ``tile_energy`` task held a GPU (trace's gpu column); without, its request was
made and refused (``ResourceRequestError``) and the cell went on with CPU tasks.

``grid-stride`` (lesson 4). The checker hands out the launch: ``p.x`` (float32 values to square:
300 in the lesson, fewer in the hidden case) on ``p.blocks`` x ``p.threads`` threads (2 x 32 in the
lesson; another grid of fewer threads in the hidden case). Starter (``not yet``: one element per
thread; the cell launches it on ``p``'s grid and counts what was written)::

    %%eugo --exercise grid-stride
    p = exercises.problem("grid-stride")
    @cuda.jit
    def square_kernel(x, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = x[i] * x[i]

Reference: ``for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):``. Criteria: launched
by the check on its own copy of ``p.x``, on ``p.blocks`` x ``p.threads`` threads (fewer than the
elements), every element of ``out`` is ``x * x``, and followed thread by thread, each element was
written once, by its own thread (element ``i`` by thread ``i`` mod the grid's size).
"""

from __future__ import annotations

import random
import re
import types
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.exercises import measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise
from eugo_lab.units import fmt_bytes

COURSE = "02-gpu-acceleration"


# -- gpu-break-even -------------------------------------------------------------------------------------
#: The exercise prices np.power applied this many times in a row, each call on the result of the one before.
#: With four calls the one copy of x and y is shared by four kernels: on the published profiles that puts the
#: break-even at less than half a single call's, and still above the size where the data is on the device already.
CHAIN = 4
#: The largest size the checks scan (2**34 elements, as break_even does).
MAX_LOG2 = 34
# The hidden case's chain: one call, whose copy no kernel shares, so the model's answer moves up the most (past the
# next power of two on the tests' host and on a measured one here; a chain of two moved it too little on the latter);
# a count of four calls written into the cell prices the wrong chain. Pricing it costs the cell nothing more (the
# model answers in microseconds).
BREAK_EVEN_HIDDEN_CALLS = (1,)


@problems.declare("gpu-break-even")
@dataclass(frozen=True, repr=False)
class BreakEvenProblem(problems.Problem):
    """How many np.power calls in a row to price (``calls``), each on the result of the one before: 4 in the lesson."""

    calls: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> BreakEvenProblem:
        """The lesson's four calls, or (hidden) a shorter chain drawn from ``rng`` (one call, so far)."""
        return cls(rng.choice(BREAK_EVEN_HIDDEN_CALLS) if hidden else CHAIN)


def power_op(n: int, resident: bool = False) -> Any:
    """``np.power(x, y)`` on ``n``-element float64 vectors (on the host unless ``resident``), as the model sees it."""
    from eugo_lab.offload.cost import sample_operation

    return sample_operation("elementwise", int(n), work="special", name="power", resident=resident)


def chain_wins(n: int, host: Any, gpu: Any, steps: int = CHAIN) -> bool:
    """Whether the model runs ``steps`` np.power calls in a row on ``n`` elements faster on the GPU.

    The first call copies x and y to the device; the ones after it find y there and their input
    (the last result) too, so they pay only their kernel. The CPU pays every call in full.
    """
    from eugo_lab.offload.cost import estimate

    first, then = estimate(power_op(n), host, gpu), estimate(power_op(n, resident=True), host, gpu)
    return (first.gpu_s or 0.0) + (steps - 1) * (then.gpu_s or 0.0) < steps * first.cpu_s


def chain_break_even(host: Any, gpu: Any, steps: int = CHAIN) -> int | None:
    """The smallest ``n`` where :func:`chain_wins` (``None``: never, up to ``2**MAX_LOG2``)."""
    from eugo_lab.offload.cost import first_win

    return first_win(lambda n: chain_wins(n, host, gpu, steps), MAX_LOG2)


def _one_call(host: Any, gpu: Any, resident: bool) -> int | None:
    """The break-even of a single np.power call (not recorded: the check's own pricing, not the learner's)."""
    from eugo_lab.offload.cost import estimate, first_win

    return first_win(lambda n: estimate(power_op(n, resident), host, gpu).where == "gpu", MAX_LOG2)


def _measured_line(size: int, device: Any, steps: int = CHAIN) -> str:
    """On a GPU: the chain timed at ``size`` on the CPU (host timer) and on the GPU (CUDA events, with the copies)."""
    import time

    from eugo_lab.offload.cost import fmt_time
    from eugo_lab.offload.dispatch import offload

    rng = np.random.default_rng(0)
    x, y = rng.random(size) + 0.5, rng.uniform(0.9, 1.1, size)  # exponents near 1: the chain stays finite
    t0 = time.perf_counter()
    z = x
    for _ in range(steps):
        z = np.power(z, y)
    cpu = time.perf_counter() - t0
    gpu = 0.0
    for _ in range(2):  # the first run compiles CuPy's kernel: the second is timed
        s = offload("on", device)
        with s.activate():
            xp = s.module(np)
            z, yy = xp.asarray(x), xp.asarray(y)
            for _ in range(steps):
                z = xp.power(z, yy)
        ledger = s.close()
        gpu = sum(r.measured_s for r in ledger.ops)
    return (f"measured at {size:,}: {steps} calls on the CPU {fmt_time(cpu)}, on the GPU {fmt_time(gpu)} with the "
            "copies to the device")


_BREAK_EVEN_SOLUTION = (
    'p = exercises.problem("gpu-break-even")\n'
    "size = None\nfor e in range(10, 31):\n    n = 1 << e\n"
    "    first = predict(sample_operation(\"elementwise\", n, work=\"special\", name=\"power\"), host, gpu)\n"
    "    then = predict(sample_operation(\"elementwise\", n, work=\"special\", name=\"power\", resident=True), "
    "host, gpu)\n"
    "    # one copy and p.calls kernels, against p.calls CPU calls\n"
    "    if first.gpu_s + (p.calls - 1) * then.gpu_s < p.calls * first.cpu_s:\n"
    "        size = n\n        break")
BREAK_EVEN_HINTS = {
    DEFAULT: Hint("Price the p.calls calls together at each size: the first one on data in host memory (it pays "
                  "the copy), the others on data already on the device; keep the first size where the GPU's total "
                  "is below p.calls CPU calls.", _BREAK_EVEN_SOLUTION),
    "never": Hint("Ask the model whether the p.calls calls together win on the GPU at your size and at every larger "
                  "one the loop tries; keep a size only where they do, and None if they win at none.",
                  "size = None  # the model never runs the p.calls calls faster on the GPU on this host"),
    "none-found": Hint("Scan larger sizes, up to about a billion elements (2 to the 30th), and stop at the first "
                       "one where the p.calls calls together are faster on the GPU.", _BREAK_EVEN_SOLUTION),
    "not-a-number": Hint("`size` must be a whole number of elements (or None): the n of the loop where the p.calls "
                         "calls first won on the GPU.", _BREAK_EVEN_SOLUTION),
    "typed": Hint("Let the cell find the size: at each size of the loop ask the model for the price of a call, and "
                  "keep the n where the p.calls calls first win on the GPU, rather than writing the number in.",
                  _BREAK_EVEN_SOLUTION),
    "one-call": Hint("break_even() answers for one call at a time. Price the calls yourself with predict() at each "
                     "size, the first from host memory and the others on the device, and add them up.",
                     _BREAK_EVEN_SOLUTION),
    "resident": Hint("Price the first call with x and y in host memory (the resident flag off), so the copy over "
                     "the link is in the total; only the calls after it find their data on the device.",
                     _BREAK_EVEN_SOLUTION),
    "every-call-copies": Hint("Only the first call copies x and y. Add the GPU times of one call from host memory "
                              "and of the others (p.calls less one) with the data on the device, and compare the sum "
                              "with p.calls CPU calls.", _BREAK_EVEN_SOLUTION),
    "too-small": Hint("Look at larger sizes and stop at the first one where the GPU's total for the p.calls calls "
                      "is below the CPU's.", _BREAK_EVEN_SOLUTION),
    "too-large": Hint("Go from small sizes to large ones and stop at the first where the p.calls calls win on the "
                      "GPU: yours is past it.", _BREAK_EVEN_SOLUTION),
    problems.CARRY_OVER: Hint("Price the chain p hands out, the exercise's input: p.calls calls in a row, one copy "
                              "and p.calls kernels against p.calls CPU calls, instead of a number of calls written "
                              "in the cell.", _BREAK_EVEN_SOLUTION),
}
# An honest scan can stop short of the hidden case's answer (a shorter chain wins later): say so, not "typed in".
problems.explained_on_hidden(
    "gpu-break-even", "none-found",
    "your loop found no size where the calls won on the GPU among the sizes it tried, while the model finds one "
    "further on: let the loop go on to larger sizes")


@exercise("gpu-break-even", lesson=f"{COURSE}/01-host-and-device-memory.ipynb", title="Break-even of four calls",
          hints=BREAK_EVEN_HINTS)
def gpu_break_even(a: Attempt) -> Verdict:
    """Grade ``size``: where the model first runs the chain of np.power calls on the GPU, from the cell's predictions.

    ``size`` must be a size the cell's own calls of the cost model gave (the log of
    :mod:`eugo_lab.offload.predictions`): a number no call gave is not this machine's answer.
    """
    from eugo_lab.offload import predictions
    from eugo_lab.offload.cell import choose_device, device_profile
    from eugo_lab.offload.profiles import host_profile

    p = problems.given(a)  # the checker's own copy: how many calls in a row
    calls = p.calls
    size = a.require("size")
    log = predictions.last_cell() or predictions.PredictionLog()
    host, gpu = host_profile(), device_profile()
    expected = chain_break_even(host, gpu, calls)
    single, resident = _one_call(host, gpu, False), _one_call(host, gpu, True)
    if expected is None:  # a host faster than this profile at every size: the right answer is "never"
        if size is None:
            return a.passed(f"the model never runs {calls} np.power calls in a row faster on {gpu.name}: None is right")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            return a.not_yet(f"`size` should be a number of elements (a whole number), got {size!r}.",
                             mistake="not-a-number")
        # "Never" is this host's answer: the not yet says what the model does at the learner's size, not that.
        return a.not_yet(f"at {int(size):,} elements the model still runs the {calls} calls faster on the CPU: the "
                         f"copy and the kernels together cost more there than {calls} NumPy calls.", mistake="never")
    if size is None:
        return a.not_yet(f"`size` is None: your loop found no size where the {calls} calls won on the GPU, among the "
                         "sizes it tried.", mistake="none-found")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        return a.not_yet(f"`size` should be a number of elements (a whole number), got {size!r}.",
                         mistake="not-a-number")
    size = int(size)
    # The model's break-even sizes are the answer: the passing verdict's details only, never a not yet's.
    words = [f"model: {calls} calls in a row win from {expected:,} elements"]
    if single is not None:
        words.append(f"one call from host memory from {single:,}")
    if resident is not None:
        words.append(f"one call on data already on the device from {resident:,}")
    details: tuple[str, ...] = ()
    priced, scanned = log.predicted(size), log.scans(size)
    if not priced and not scanned:
        asked = (f"the cell asked the cost model {measure.plural(len(log.calls), 'time')}, never about "
                 f"{size:,} elements" if log.calls else "the cell did not ask the cost model at all")
        return a.not_yet(f"`size` is {size:,}, and no prediction in this cell gave it: {asked}. The size has to "
                         "come from the model's prices on this machine, not be written in or worked out beside "
                         "them.", mistake="typed", details=details)
    if not priced:
        where = "already on the device" if scanned[0].resident else "in host memory"
        return a.not_yet(f"`size` is what break_even() returned for a single call with x and y {where}: it prices "
                         f"one operation on its own, while the {calls} calls in a row share one copy of x and y.",
                         mistake="one-call", details=details)
    if not any(c.copies for c in priced):
        return a.not_yet(f"at {size:,} elements the cell priced np.power only with x and y already on the device: "
                         "the copy of x and y that the first call pays is missing from the price.",
                         mistake="resident", details=details)
    if not chain_wins(size, host, gpu, calls):
        return a.not_yet(f"at {size:,} elements the model still runs the {calls} calls faster on the CPU: the copy "
                         f"and the kernels together cost more there than {calls} NumPy calls.", mistake="too-small",
                         details=details)
    if size >= 2 * expected:
        if single is not None and size >= single:
            return a.not_yet(f"at your size a single call already pays for its own copy: the {calls} calls win on "
                             "the GPU at less than half of it, because only the first call copies x and y and the "
                             "others find them on the device.", mistake="every-call-copies", details=details)
        return a.not_yet(f"the {calls} calls already win on the GPU at half your size: offload starts to pay earlier.",
                         mistake="too-large", details=details)
    details = ("; ".join(words),)
    device, _ = choose_device("auto")
    if device is not None:
        details += (_measured_line(size, device, calls),)
    where = "calibrated on this GPU" if gpu.calibrated else "published figures, a prediction"
    n = len(priced)
    return a.passed(f"the model runs {calls} np.power calls in a row on the GPU from your size on, and not at half "
                    "of it",
                    f"{size:,} is a size this cell's own predictions priced ({measure.plural(n, 'call')} of "
                    "predict() at that size, the copy of x and y priced)",
                    f"device profile: {gpu.name}, {where}; host profile: measured on this machine",
                    details=details)


# -- gpu-transfer -----------------------------------------------------------------------------------------
#: Newton's method for w * exp(w) = t from log1p(t) converges (quadratically) to machine precision in
#: about 6 steps for t = signal * gain in [0.5, 200); 20 leaves no doubt.
STEPS = 20
#: Bytes moved per operation, as a share of ``signal``: the reference moves signal, gain and the result once
#: over ~140 operations (about 2%); re-copying one host array every step moves about a sixth of it per operation.
MAX_MOVED_SHARE = 0.1
#: The result the exercise asks for, by name.
RESULT = "w"
#: The lesson's readings: 2 million of them, the 16 MB ``signal`` its prose and earlier cells describe.
TRANSFER_N = 2_000_000
# The hidden case: half to three quarters of the lesson's readings (a pass costs less than the lesson's run), still
# far above the size where the model keeps a logarithm on the CPU on a slow host or a fast one.
TRANSFER_HIDDEN_SIZES = range(1_000_000, 1_500_001)


@problems.declare("gpu-transfer")
@dataclass(frozen=True, repr=False, eq=False)  # array fields: compared by identity, never element by element
class TransferProblem(problems.Problem):
    """The readings ``signal`` (in [1, 100)) and a calibration factor per reading ``gain`` (in [0.5, 2)): read-only.

    The equation's right-hand side is their product. The lesson's are 2 million of each, from NumPy's
    generators seeded 7 and 8 (the arrays its earlier cells run on); the hidden case's are fewer and others.
    """

    signal: np.ndarray
    gain: np.ndarray

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> TransferProblem:
        """The lesson's seeded readings, or (hidden) fewer readings from seeds drawn from ``rng``."""
        n = rng.choice(TRANSFER_HIDDEN_SIZES) if hidden else TRANSFER_N
        seeds = (rng.randrange(2**32), rng.randrange(2**32)) if hidden else (7, 8)
        signal = np.random.default_rng(seeds[0]).uniform(1.0, 100.0, n)
        gain = np.random.default_rng(seeds[1]).uniform(0.5, 2.0, n)
        return cls(problems.frozen_array(signal), problems.frozen_array(gain))


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
                "one of its operands is a host array the proxy does not track (p.signal, p.gain, or their product "
                "made by plain NumPy), and the proxy cannot keep a device copy of memory it does not track, so every "
                "operation that reads it copies it again.", "recopied")
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
                "operation, so the first copy never pays for itself.", "recopied")
    return (head + " On this host the model predicts NumPy is faster for these operations than "
            f"{ledger.device}, so there is no offload to keep here.", "cpu-wins")


_TRANSFER_SOLUTION = ('p = exercises.problem("gpu-transfer")\n'
                      "target = np.asarray(p.signal) * p.gain   # handed over once: the product is made on the device\n"
                      "w = np.log1p(target)\nfor step in range(20):\n"
                      "    w = w * (1 + np.log(target) - np.log(w)) / (1 + w)")
TRANSFER_HINTS = {
    DEFAULT: Hint("Make the product of p.signal and p.gain once, at the top of the cell, as an array the GPU proxy "
                  "tracks, and use it in the loop: the proxy keeps one device copy of what it tracks, so every step "
                  "reuses it.", _TRANSFER_SOLUTION),
    "no-ledger": Hint("Run the exercise cell with GPU placement on (the --gpu auto option on the cell's first "
                      "line), so every NumPy operation is placed and its bytes counted.",
                      "%%eugo --exercise gpu-transfer --gpu auto -w 1\n" + _TRANSFER_SOLUTION),
    "result": Hint("Keep Newton's step as the starter has it, for all 20 steps, starting from the log of one "
                   "plus the product of p.signal and p.gain.", _TRANSFER_SOLUTION),
    "recopied": Hint("Form the product of p.signal and p.gain once, before the loop, with one of them brought in "
                     "through NumPy's asarray (the proxy then tracks it and the product), and read that product in "
                     "the loop: a product of two plain arrays is made again, on the host, at every step.",
                     _TRANSFER_SOLUTION),
    "dragged": Hint("Do every step of the loop with operations the report shows on the GPU, and bring back only "
                    "a number when you need one, such as the largest error for a convergence check.",
                    "err = float(np.max(np.abs(w * np.exp(w) - target)))   # one number crosses the link"),
    "fetched": Hint("Keep the loop in NumPy operations and look at the result once, after the loop: printing, "
                    "converting to a float or a list, mid-loop, copies the array back each time.",
                    _TRANSFER_SOLUTION),
    "moved": Hint("Keep every array of the loop on the device and bring back only what you need after it; "
                  "start by handing p.signal to the proxy once.", _TRANSFER_SOLUTION),
    "no-loop": Hint("Keep the 20 Newton steps in a loop in this cell, so the same operations repeat on the "
                    "device copies.", _TRANSFER_SOLUTION),
    "copied": Hint("Compute the answer in the exercise cell itself: the Newton loop on the array you handed to "
                   "the proxy, its last step assigned to w (not a copy of an earlier result).", _TRANSFER_SOLUTION),
    "cpu-wins": Hint("Nothing to change in the placement: on this host the model keeps these operations on the "
                     "CPU, rightly. Check that the cell is the loop of the starter with the product handed over once.",
                     _TRANSFER_SOLUTION),
    problems.CARRY_OVER: Hint("Take the readings from p, the exercise's inputs: solve for p.signal * p.gain as "
                              "handed out, instead of arrays made or loaded in the cell, and let the loop run on "
                              "them.", _TRANSFER_SOLUTION),
}


@exercise("gpu-transfer", lesson=f"{COURSE}/02-automatic-gpu-offloading.ipynb", title="Keep the data on the device",
          hints=TRANSFER_HINTS)
def gpu_transfer(a: Attempt) -> Verdict:
    """Grade from the offload ledger: the right ``w``, made by this cell's run, the loop on the device, few bytes moved.

    ``w`` must be what this cell's placed operations produced: the ledger keeps the digest of each
    array a name held as a proxy when the cell ended (:attr:`Ledger.left`), and ``w``'s value must
    have that digest. An earlier cell's array, or a plain copy of one, never went through the proxy.
    """
    from eugo_lab.contract.digest import digest

    ledger = _ledger_or_not_yet()
    p = problems.given(a)  # the checker's own copy of the readings: nothing is read from the learner's namespace
    signal = p.signal
    target = p.signal * p.gain
    value = a.require(RESULT)
    w = np.asarray(value, dtype=float)
    if w.shape != target.shape or not measure.same_within_tolerance(w * np.exp(w), target):
        return a.not_yet(f"`{RESULT}` does not solve w * exp(w) = p.signal * p.gain, for the {signal.size:,} readings "
                         f"of p.signal, after the cell's steps: Newton's {STEPS} steps from the starter converge to "
                         "it.", mistake="result")
    copied = measure.left_by_earlier_cell(value, a.before, skip=(RESULT,))
    if copied is not None:
        return a.not_yet(f"`{RESULT}` is the array `{copied}` that an earlier cell computed, not the result of "
                         "this cell's Newton steps: what this cell's loop did on the device is not what it handed "
                         "in.", mistake="copied")
    made = ledger.left.get(RESULT)
    if made is None or not isinstance(value, np.ndarray) or made != digest(value):
        return a.not_yet(f"`{RESULT}` is not an array this cell's placed operations produced: when the cell ended "
                         "it held a plain NumPy value that never went through the GPU proxy (a copy of an earlier "
                         "result, or one made outside NumPy's operations), so the bytes and places in the report "
                         "are not about it.", mistake="copied")
    chain = ledger.chains.get(RESULT, 0)
    if chain < STEPS:
        return a.not_yet(f"`{RESULT}` came out of {measure.plural(chain, 'placed operation')} in a row, from values "
                         f"this cell was handed: each of Newton's {STEPS} steps reads the step before, so this "
                         f"cell's loop leaves a chain of at least {STEPS}. A copy of an earlier answer, or a step "
                         "or two on it, is not the loop the report measured.", mistake="copied")
    n_ops = ledger.n_ops()
    per_op = ledger.moved / max(n_ops, 1)
    limit = MAX_MOVED_SHARE * signal.nbytes
    kind = "predicted for " + ledger.device if ledger.predictions_only else "measured on " + ledger.device
    details = (f"{fmt_bytes(ledger.moved)} moved over {n_ops} operations, {fmt_bytes(per_op)} each ({kind})",)
    if per_op >= limit:
        why, mistake = _transfer_advice(ledger, signal.nbytes)
        return a.not_yet(f"{fmt_bytes(per_op)} moved per operation, more than {MAX_MOVED_SHARE:.0%} of p.signal's "
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
    return a.passed(f"{RESULT} solves w * exp(w) = p.signal * p.gain, and it is the array this cell's placed "
                    f"operations produced (its digest is the one the report kept), at the end of a chain of {chain} "
                    "of them",
                    f"all {sum(r.count for r in loop)} operations of the loop {ran} {ledger.device} and bytes moved "
                    f"per operation stayed under {MAX_MOVED_SHARE:.0%} of p.signal's {fmt_bytes(signal.nbytes)}: "
                    f"the data stayed on the device ({where})", details=details)


# -- gpu-request ------------------------------------------------------------------------------------------
#: The lesson's tiles: four of 200,000 numbers each.
N_TILES = 4
TILE = 200_000
# The hidden case: another number of tiles, of fewer numbers each (at most 750,000 numbers in all, against the
# lesson's 800,000), so a tile count or size written into the cell does not fit it.
REQUEST_HIDDEN_TILES = (3, 5)
REQUEST_HIDDEN_SIZES = range(50_000, 150_001)
#: The task that needs a GPU, and the one before it that does not (it reads a tile: CPU and disk work).
FUNCTION = "tile_energy"
LOADER = "load_tile"


@problems.declare("gpu-request")
@dataclass(frozen=True, repr=False)
class RequestProblem(problems.Problem):
    """How many tiles to load (``n_tiles``: 4 in the lesson) and the numbers in each (``tile_size``: 200,000)."""

    n_tiles: int
    tile_size: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> RequestProblem:
        """The lesson's four tiles of 200,000, or (hidden) another count of smaller tiles drawn from ``rng``."""
        if not hidden:
            return cls(N_TILES, TILE)
        return cls(rng.choice(REQUEST_HIDDEN_TILES), rng.choice(REQUEST_HIDDEN_SIZES))


def load_tile(i: int, size: int = TILE) -> np.ndarray:
    """What the exercise's loading task returns for tile ``i`` of ``size`` numbers: its values."""
    return np.arange(i * size, (i + 1) * size, dtype=np.float64) / size


def tile_energy(i: int, size: int = TILE) -> float:
    """What the exercise's GPU task returns for tile ``i`` of ``size`` numbers: the sum of squares of its values."""
    v = load_tile(i, size)
    return float(np.sum(v * v))


_REQUEST_SOLUTION = ('p = exercises.problem("gpu-request")\n\n'
                     "@hpc.remote\ndef load_tile(i, size):\n    ...\n\n@hpc.remote(gpus=1)   # only the energy needs "
                     "the device\ndef tile_energy(tile):\n    ...\n\n"
                     "tiles = [load_tile.remote(i, p.tile_size) for i in range(p.n_tiles)]\n"
                     "try:\n    results = hpc.get([tile_energy.remote(t) for t in tiles])\n"
                     "except hpc.ResourceRequestError:   # no GPU worker: the same energies on CPU workers\n"
                     "    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])")
REQUEST_HINTS = {
    DEFAULT: Hint("Ask for one GPU on the energy task only, in its remote decorator, and leave the loading task "
                  "as it is. Where no worker has a GPU the energies are refused with a resource-request error: "
                  "catch it and submit the energies again, with the request set to no GPU, on the tiles already "
                  "loaded.", _REQUEST_SOLUTION),
    "results": Hint("`results` must be the energies of the p.n_tiles tiles in tile order, whichever workers ran "
                    "them: when the GPU request is refused, submit the energy calls again without the request and "
                    "get them all.", _REQUEST_SOLUTION),
    "local": Hint("Run every step as tasks: a load and an energy per tile, the fallback too (with the energy "
                  "function's options set to no GPU), not as plain calls in the notebook.", _REQUEST_SOLUTION),
    "no-gpu-asked": Hint("Ask for a GPU per call of the energy task: one GPU in the remote decorator of "
                         "tile_energy.", _REQUEST_SOLUTION),
    "not-from-tasks": Hint("Keep what the tile_energy tasks returned, in the order you submitted them, as "
                           "`results`: the list get() gives back for the futures of the calls that ran.",
                           _REQUEST_SOLUTION),
    "other-function": Hint("Put the GPU request on tile_energy itself, the function whose calls need the device, "
                           "not on another function.", _REQUEST_SOLUTION),
    "over-asked": Hint("Leave the loading task without a request: reading a tile needs no GPU, and on a machine "
                       "with one GPU the loads would wait for its worker. Only the energy task asks for one.",
                       _REQUEST_SOLUTION),
    "reloaded": Hint("In the fallback, submit only the energies again, on the futures of the tiles you loaded "
                     "before the refusal: the loads were never refused, so they need not run again.",
                     _REQUEST_SOLUTION),
    problems.CARRY_OVER: Hint("Load the tiles p hands out, the exercise's inputs: p.n_tiles of them, each of "
                              "p.tile_size numbers passed to load_tile as an argument, instead of a count or a size "
                              "written in the cell.", _REQUEST_SOLUTION),
}


def _devices(held: dict[int, int]) -> str:
    """``GPU 0 (4 tasks)``, ``GPU 0 (2 tasks), GPU 1 (2 tasks)``."""
    return ", ".join(f"GPU {d} ({measure.plural(n, 'task')})" for d, n in sorted(held.items()))


def _loads(a: Attempt, n_tiles: int) -> Verdict | None:
    """``not yet`` when the loading tasks asked for a GPU, did not run as tasks, or ran again; else None."""
    asked = [r for r in a.trace.refused if r.function == LOADER and r.request.get("GPU", 0) > 0]
    held = int((np.asarray(a.trace.gpu)[a.trace.first_attempts(LOADER)] >= 0).sum())
    if asked or held:
        what = (f"{measure.plural(held, LOADER + ' task')} held a GPU" if held else
                f"{measure.plural(len(asked), LOADER + ' request')} for a GPU were refused")
        return a.not_yet(f"{what}: the loading step asked for a GPU too. Reading a tile needs none, and with one GPU "
                         f"worker the loads would queue for it behind the {FUNCTION} tasks while the other worker "
                         "sits idle.", mistake="over-asked")
    loads = len(a.trace.results(LOADER))
    steps.every_call_a_task(a, LOADER, loads, n_tiles, " on the cluster")
    if loads > n_tiles:
        return a.not_yet(f"{LOADER} ran {loads} times for {n_tiles} tiles: the fallback loaded the tiles again, "
                         f"although only the {FUNCTION} requests were refused and the tiles were loaded already.",
                         mistake="reloaded")
    return None


@exercise("gpu-request", lesson=f"{COURSE}/03-per-call-resource-requests.ipynb", title="A GPU for one step",
          hints=REQUEST_HINTS)
def gpu_request(a: Attempt) -> Verdict:
    """Grade the requests from the trace: which step asked for a GPU, who was refused, what each worker really had.

    ``results`` must be what this cell's ``tile_energy`` tasks returned, in order. The loading
    step (``load_tile``) ran once per tile, as tasks, without a GPU. With GPU workers, every
    ``tile_energy`` task held a GPU (the scheduler's gpu column), and the verdict says what the
    workers found behind it (:meth:`Trace.gpu_devices`: a device named with ``gpus=[0]`` on a
    machine without one reads -1, and is never called a GPU). Without, a ``tile_energy`` request
    for a GPU was refused and the energies ran as CPU tasks on the tiles already loaded.
    """
    from eugo_lab.exercises import derivation

    p = problems.given(a)  # the checker's own copy of the tiles: their count and size
    n = p.n_tiles
    results = a.require("results")
    expected = [tile_energy(i, p.tile_size) for i in range(n)]
    if not measure.same_within_tolerance(list(results) if isinstance(results, (list, tuple)) else results, expected):
        return a.not_yet(f"`results` does not hold the energies of the {n} tiles of p (p.n_tiles, "
                         f"{p.tile_size:,} numbers each), in tile order.", mistake="results")
    steps.every_call_a_task(a, FUNCTION, len(a.trace.results(FUNCTION)), n, " on the cluster")
    steps.from_tasks(a, derivation.listed(list(results), a.trace, FUNCTION, name="results"), FUNCTION)
    steps.fetched(a, results, FUNCTION, "results", mistake="not-from-tasks")
    first = a.trace.first_attempts(FUNCTION)
    assigned = np.asarray(a.trace.gpu)[first]
    refused = [r for r in a.trace.refused if r.function == FUNCTION and r.request.get("GPU", 0) > 0]
    others = sorted({r.function for r in a.trace.refused if r.function not in (FUNCTION, LOADER)})
    loads = f"the {n} {LOADER} tasks ran once each, holding no GPU"
    if a.trace.meta.get("gpu_workers"):
        without = int((assigned < 0).sum())
        if without:
            return a.not_yet(f"{without} of the {len(assigned)} {FUNCTION} tasks ran on workers without a GPU, "
                             "although this cluster has GPU workers: those calls asked for no GPU.",
                             mistake="no-gpu-asked")
        wrong = _loads(a, n)
        if wrong is not None:
            return wrong
        scheduled = dict(zip(*(v.tolist() for v in np.unique(assigned, return_counts=True))))
        asked = (f"all {len(assigned)} {FUNCTION} tasks asked for a GPU and the scheduler gave each one: "
                 f"{_devices(scheduled)} (the trace's gpu column); {loads}")
        found = Counter(a.trace.gpu_devices(FUNCTION).values())
        real = {d: n for d, n in found.items() if d >= 0}
        none = found.get(-1, 0)
        if not real:
            return a.passed(asked, f"on their workers no GPU was found behind the named device "
                                   f"({measure.plural(none, 'task')} read none), so the energies ran on the CPU")
        tail = f"; {measure.plural(none, 'task')} found none and ran on the CPU" if none else ""
        return a.passed(asked, f"their workers found the device: {_devices(real)} ran with a GPU{tail}")
    if not refused:
        if others:
            return a.not_yet(f"a GPU request was refused, but it was made by {', '.join(others)}, not by "
                             f"{FUNCTION}: the {FUNCTION} tasks never asked for a GPU.", mistake="other-function")
        wrong = _loads(a, n)
        if wrong is not None and wrong.mistake == "over-asked":
            return wrong
        return a.not_yet(f"no {FUNCTION} task of this cell asked for a GPU: this cluster has no GPU worker, so a "
                         "request would have been refused with a ResourceRequestError, and none was.",
                         mistake="no-gpu-asked")
    wrong = _loads(a, n)
    if wrong is not None:
        return wrong
    gpus = sorted({r.request["GPU"] for r in refused})
    return a.passed(f"{measure.plural(len(refused), FUNCTION + ' request')} for "
                    f"{' or '.join(f'{g:g}' for g in gpus)} GPU were refused with ResourceRequestError (no worker "
                    f"here has one), while {loads}",
                    f"then {int((assigned < 0).sum())} {FUNCTION} tasks ran on CPU workers (the trace's gpu column: "
                    "no GPU held) on the tiles already loaded, and `results` is what they returned, in order")


# -- grid-stride ------------------------------------------------------------------------------------------
CHECK_BLOCKS = 2
CHECK_THREADS = 32
#: More elements than the lesson's grid has threads (64), and not a multiple of it.
CHECK_N = 300
#: The check's input is random (from this seed), so no formula of the index gives its squares: only
#: squaring ``x`` itself writes the right ``out``.
CHECK_SEED = 20_240
#: The hidden case's grids (blocks, threads per block): none of 64 threads, none larger (the simulator runs a
#: Python thread per GPU thread, and the check follows every thread again), so a stride or a length written
#: into the kernel for the lesson's launch does not fit them.
STRIDE_HIDDEN_GRIDS = ((1, 32), (2, 16), (3, 16), (5, 8), (2, 24))
#: The hidden case's values: fewer than the lesson's 300, more than twice its grid's threads and not a multiple of them.
STRIDE_HIDDEN_MAX_N = 299


@problems.declare("grid-stride")
@dataclass(frozen=True, repr=False, eq=False)  # an array field: compared by identity, never element by element
class StrideProblem(problems.Problem):
    """The launch: ``x`` (read-only float32 values in [0.5, 4) to square) on ``blocks`` x ``threads`` threads.

    The lesson's: 300 values on 2 x 32 threads. The hidden case: fewer values on another, smaller grid,
    always more than twice as many values as threads and not a multiple of them, so every thread loops.
    """

    x: np.ndarray
    blocks: int
    threads: int

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> StrideProblem:
        """The lesson's seeded launch, or (hidden) another grid and other values drawn from ``rng``."""
        if not hidden:
            blocks, threads, n, seed = CHECK_BLOCKS, CHECK_THREADS, CHECK_N, CHECK_SEED
        else:
            blocks, threads = rng.choice(STRIDE_HIDDEN_GRIDS)
            grid = blocks * threads
            n = rng.choice([k for k in range(2 * grid + 1, STRIDE_HIDDEN_MAX_N + 1) if k % grid])
            seed = rng.randrange(2**32)
        x = np.random.default_rng(seed).uniform(0.5, 4.0, n).astype(np.float32)
        return cls(problems.frozen_array(x), blocks, threads)


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
    problems.CARRY_OVER: Hint("Let the kernel read what it is launched on: the array's length from x and the grid's "
                              "size from cuda.gridsize, instead of numbers written for the lesson's launch of p.x on "
                              "p.blocks x p.threads.",
                              'p = exercises.problem("grid-stride")\n\n' + _STRIDE_SOLUTION
                              + "\n\nsquare_kernel[p.blocks, p.threads](cuda.to_device(p.x), "
                              "cuda.to_device(np.full(p.x.size, np.nan, dtype=np.float32)))"),
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
    p = problems.given(a)  # the checker's own launch: its values and grid, never the cell's
    blocks, threads, n = p.blocks, p.threads, p.x.size
    cuda = kernels.cuda()
    t = kernels.check_grid(blocks, threads)
    grid = blocks * threads
    launch = (f"launched on {blocks} blocks x {threads} threads (p.blocks x p.threads, {grid} threads) over the {n} "
              "elements of p.x")
    x = np.array(p.x)  # the check's own writable copy
    dx, dout = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, dtype=np.float32))
    try:
        kernel[blocks, threads](dx, dout)
        cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the learner's kernel failed: say how, as a not yet
        return a.not_yet(f"{launch}, the kernel stopped with {_kernel_error(exc)}.", mistake="out-of-range")
    got = dout.copy_to_host()
    written = ~np.isnan(got)
    where = "the GPU" if t.kind == "gpu" else "the Numba CUDA simulator (no GPU here)"
    how = f"ran on {where}: {blocks} blocks x {threads} threads = {grid} threads over {n} elements"
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
        followed, writers = follow_threads(kernel, x, blocks, threads)
    except _Unfollowable as exc:
        return a.not_yet(f"every element came out right, but the check could not follow the kernel thread by "
                         f"thread to see which thread did which element: it uses {exc}, which needs threads "
                         "running together.", mistake="unfollowable", details=(how,))
    except _ThreadFailed as exc:  # a GPU does not check bounds; the thread-by-thread run does
        name, _, said = str(exc).partition(": ")
        return a.not_yet(f"run thread by thread over {n} elements, the kernel stopped with {name} in "
                         f"thread {exc.thread} of block {exc.block}: {said}.", mistake="out-of-range",
                         details=(how,))
    if not np.array_equal(np.isnan(followed), np.isnan(got)) or not np.allclose(followed, got, equal_nan=True):
        return a.not_yet("every element came out right on the launch, but run thread by thread the kernel wrote "
                         "other values, so the check cannot say which thread did which element.",
                         mistake="unfollowable", details=(how,))
    repeated = [i for i, w in enumerate(writers) if len(w) > 1]
    if repeated:
        e = repeated[0]
        return a.not_yet(f"every element came out right, but {len(repeated)} of the {n} elements were "
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
