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

from typing import Any

import numpy as np

from eugo_lab.exercises import measure
from eugo_lab.exercises.base import Attempt, NotYet, Verdict, exercise
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


@exercise("gpu-break-even", lesson=f"{COURSE}/01-host-and-device-memory.ipynb", title="Find the break-even size")
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
        return a.not_yet("on this host the model keeps np.power on the CPU at every size up to 2**34 elements, "
                         "so the answer is size = None; check predict(...).where for the sizes you tried.")
    if size is None:
        return a.not_yet("`size` is None: your loop found no size where predict(...).where == 'gpu'. Scan larger "
                         "sizes (up to 2**30 elements), and stop at the first one the model sends to the GPU.")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        return a.not_yet(f"`size` should be a number of elements (a whole number), got {size!r}.")
    size = int(size)
    details = (f"model: {expected:,} elements from host memory, {on_device:,} already on the device" if on_device
               else f"model: {expected:,} elements from host memory",)
    est = predict(power_op(size), host, gpu)
    if est.where != "gpu":
        if on_device is not None and size >= on_device:
            return a.not_yet("at your size the model still keeps np.power on the CPU once x and y have to travel "
                             f"to the device ({est.why}): you found the size where it pays for data already on the "
                             "GPU. Build the operation with resident=False, so its price includes the copy "
                             "over the link.", details=details)
        return a.not_yet(f"at your size the model still keeps np.power on the CPU ({est.why}); look at larger "
                         "sizes, and stop at the first one where predict(...).where == 'gpu'.", details=details)
    if size >= 2 * expected:
        return a.not_yet("the GPU already wins at half your size: offload starts to pay earlier. Step through "
                         "the sizes from small to large and stop at the first one the model sends to the GPU.",
                         details=details)
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
        raise NotYet("the cell recorded no NumPy operations for the GPU report: run it with --gpu auto "
                     "(%%eugo --exercise gpu-transfer --gpu auto), so each operation is placed and its bytes "
                     "counted.")
    return ledger


def _transfer_advice(ledger: Any, nbytes: int) -> str:
    """The specific reason the bytes moved: the biggest cause the ledger shows, and what to change."""
    heavy = [r for r in ledger.ops if r.count > 1]
    recopied = [r for r in heavy if r.where == "gpu" and r.h2d_bytes / r.count >= nbytes / 2]
    if recopied:
        r = max(recopied, key=lambda r: r.h2d_bytes)
        return (f"`{r.op}` copied {fmt_bytes(r.h2d_bytes // r.count)} to the GPU on each of its {r.count} calls: "
                "one of its operands is a NumPy array from outside this cell (signal), and the proxy cannot keep a "
                "device copy of memory it does not track, so every operation that reads it copies it again. Bring "
                "it in once at the top of the cell, s = np.asarray(signal), and use s in the loop.")
    dragged = [r for r in heavy if r.where == "cpu" and r.d2h_bytes + r.h2d_bytes >= nbytes / 2]
    if dragged:
        r = max(dragged, key=lambda r: r.d2h_bytes + r.h2d_bytes)
        return (f"`{r.op}` ran on the CPU {r.count} times ({r.reason_bucketed}), and each time the arrays it "
                f"reads came back from the device ({fmt_bytes(r.d2h_bytes + r.h2d_bytes)} in all). Do that step "
                "with operations the report shows on the GPU, and bring back only a number: for a convergence "
                "check, float(np.max(np.abs(w * np.exp(w) - s))).")
    fetched = [r for r in ledger.rows if r.is_transfer and r.why == "host needed" and r.count > 1]
    if fetched:
        r = max(fetched, key=lambda r: r.d2h_bytes)
        return (f"the host asked for a {fmt_bytes(r.d2h_bytes // r.count)} array {r.count} times (print, float(), "
                ".tolist(), or a library that is not NumPy): each time it crossed the link. Keep the loop in NumPy "
                "operations and look at the result once, after the loop.")
    return ("the report's moved column shows where: keep every array of the loop on the device, and bring back "
            "only what you need after it.")


def _kept_on_cpu(ledger: Any, cpu_rows: list) -> str:
    """Why the loop did not use the device: the repeated operations the model kept on the CPU, and their reasons."""
    r = max(cpu_rows, key=lambda r: r.count)
    n, total = sum(x.count for x in cpu_rows), sum(x.count for x in ledger.ops if x.count > 1)
    head = (f"the model kept {n} of the loop's {total} operations on the CPU, so no data was kept on the device: "
            f"the loop did not use the GPU (`{r.op}` x{r.count}: {r.reason_bucketed}).")
    if r.why == "transfer":
        return (head + " On this host, copying its operands to the device costs more than the CPU takes for the "
                "operation, so no first copy pays for itself. Where signal is read in the loop, hand it to the "
                "proxy once (s = np.asarray(signal)) so one copy can serve every step.")
    return (head + " On this host the model predicts NumPy is faster for these operations than "
            f"{ledger.device}, so there is no offload to keep here.")


@exercise("gpu-transfer", lesson=f"{COURSE}/02-automatic-gpu-offloading.ipynb", title="Keep the data on the device")
def gpu_transfer(a: Attempt) -> Verdict:
    """Grade from the offload ledger: the right ``w``, the loop on the device, and few bytes moved per operation."""
    ledger = _ledger_or_not_yet()
    signal = np.asarray(a.namespace.get("signal"))
    if signal.ndim != 1 or signal.size == 0:
        return a.not_yet("`signal` is missing: run the cell that makes it (above this exercise) first.")
    w = np.asarray(a.require(RESULT), dtype=float)
    if w.shape != signal.shape or not measure.same_result(w * np.exp(w), signal):
        return a.not_yet(f"`{RESULT}` does not solve w * exp(w) = signal: keep Newton's step, w = w * (1 + "
                         f"np.log(s) - np.log(w)) / (1 + w), for all {STEPS} steps, starting from w = np.log1p(s).")
    n_ops = ledger.n_ops()
    per_op = ledger.moved / max(n_ops, 1)
    limit = MAX_MOVED_SHARE * signal.nbytes
    kind = "predicted for " + ledger.device if ledger.predictions_only else "measured on " + ledger.device
    details = (f"{fmt_bytes(ledger.moved)} moved over {n_ops} operations, {fmt_bytes(per_op)} each ({kind})",)
    if per_op >= limit:
        return a.not_yet(f"{fmt_bytes(per_op)} moved per operation, more than {MAX_MOVED_SHARE:.0%} of signal's "
                         f"{fmt_bytes(signal.nbytes)}.", _transfer_advice(ledger, signal.nbytes), details=details)
    loop = [r for r in ledger.ops if r.count > 1]
    cpu_rows = [r for r in loop if r.where != "gpu"]
    if not loop or cpu_rows:
        if not loop:
            return a.not_yet(f"no operation ran more than once: keep the {STEPS} Newton steps in a loop in this "
                             "cell.", details=details)
        return a.not_yet(_kept_on_cpu(ledger, cpu_rows), details=details)
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


@exercise("gpu-request", lesson=f"{COURSE}/03-per-call-resource-requests.ipynb", title="Ask for a GPU per call")
def gpu_request(a: Attempt) -> Verdict:
    """Grade the request: GPU workers used where there are some, a refused request and a CPU fallback where not."""
    results = a.require("results")
    expected = [tile_energy(i) for i in range(N_TILES)]
    if not measure.same_result(list(results) if isinstance(results, (list, tuple)) else results, expected):
        return a.not_yet(f"`results` should hold the {N_TILES} energies, in tile order: when the GPU request is "
                         f"refused, submit the same calls again with {FUNCTION}.options(gpus=0).remote(i) and get "
                         "them all.")
    ran = measure.tasks(a.trace, FUNCTION)
    if ran < N_TILES:
        return a.not_yet(f"only {ran} of the {N_TILES} {FUNCTION} calls ran as tasks on the cluster: run the "
                         f"fallback as tasks too ({FUNCTION}.options(gpus=0).remote(i)), not in the notebook.")
    held = sum(a.trace.gpu_tasks().values())
    gpu_workers = bool(a.trace.meta.get("gpu_workers"))
    # Devices named (gpus=[0], EUGO_LAB_GPU_DEVICES) on a machine where none was found: the scheduling is
    # real, the device is not, and the verdict must not say the tiles ran on a GPU.
    detected = a.trace.meta.get("gpus_detected", True) is not False
    if gpu_workers:
        if held < N_TILES:
            return a.not_yet(f"{N_TILES - held} of the {N_TILES} tasks ran on workers without a GPU, although this "
                             f"cluster has GPU workers: ask for one per call with @hpc.remote(gpus=1).")
        if not detected:
            return a.passed(f"all {N_TILES} tasks asked for a GPU and were scheduled on the pool's GPU workers (the "
                            "trace's gpu column); their device was named with gpus= and no GPU was detected on "
                            "this machine, so the tiles ran on the CPU",
                            details=(f"devices held: {a.trace.gpu_tasks()} (named, no GPU detected)",))
        return a.passed(f"all {N_TILES} tasks asked for a GPU and ran on GPU workers (the trace's gpu column)",
                        details=(f"GPUs held: {a.trace.gpu_tasks()}",))
    if a.refused == 0:
        return a.not_yet("no task of this cell asked for a GPU: this cluster has no GPU worker, so a request would "
                         "have been refused with hpc.ResourceRequestError, and none was. Ask with "
                         "@hpc.remote(gpus=1), catch the error, and fall back to .options(gpus=0).")
    return a.passed("the gpus=1 request was refused with ResourceRequestError (no GPU worker here), and the cell "
                    f"ran its {N_TILES} tiles on CPU workers instead")


# -- grid-stride ------------------------------------------------------------------------------------------
CHECK_BLOCKS = 2
CHECK_THREADS = 32
#: More elements than the check's grid has threads (64), and not a multiple of it.
CHECK_N = 300


def _missing(written: np.ndarray) -> str:
    """Which elements were never written, in words (``64-299``; ``32-63, 96-127, ...``)."""
    idx = np.flatnonzero(~written)
    runs, start = [], idx[0]
    for prev, cur in zip(idx[:-1], idx[1:]):
        if cur != prev + 1:
            runs.append((start, prev))
            start = cur
    runs.append((start, idx[-1]))
    words = [f"{s}" if s == e else f"{s}-{e}" for s, e in runs[:4]]
    return ", ".join(words) + (", ..." if len(runs) > 4 else "")


@exercise("grid-stride", lesson=f"{COURSE}/04-a-first-cuda-kernel.ipynb", title="Cover every element")
def grid_stride(a: Attempt) -> Verdict:
    """Launch the learner's ``square_kernel`` on a small grid over more elements, and check every one."""
    from eugo_lab.offload import kernels

    kernel = a.require("square_kernel")
    if not hasattr(kernel, "__getitem__") or not callable(kernel):
        return a.not_yet("`square_kernel` should be a CUDA kernel: decorate it with @cuda.jit, taking (x, out).")
    cuda = kernels.cuda()
    t = kernels.check_grid(CHECK_BLOCKS, CHECK_THREADS)
    x = np.arange(CHECK_N, dtype=np.float32) / 8
    out = np.full(CHECK_N, np.nan, dtype=np.float32)
    dx, dout = cuda.to_device(x), cuda.to_device(out)
    try:
        kernel[CHECK_BLOCKS, CHECK_THREADS](dx, dout)
        cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the learner's kernel failed: say how, as a not yet
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return a.not_yet(f"launched on {CHECK_BLOCKS} blocks x {CHECK_THREADS} threads over {CHECK_N} elements, "
                         f"the kernel stopped with {type(exc).__name__}: {first}. Keep every index below "
                         "x.shape[0], as the grid-stride loop's range does.")
    got = dout.copy_to_host()
    grid = CHECK_BLOCKS * CHECK_THREADS
    written = ~np.isnan(got)
    how = kernels.KernelRun(t, CHECK_BLOCKS, CHECK_THREADS, CHECK_N).describe()
    if not written.all():
        n_written = int(written.sum())
        if written[:grid].all() and not written[grid:].any():
            return a.not_yet(f"launched on {grid} threads over {CHECK_N} elements, the kernel wrote only the first "
                             f"{grid}: each thread handled one element. Loop instead: for i in range(cuda.grid(1), "
                             "x.shape[0], cuda.gridsize(1)), so each thread goes on by the grid's size.",
                             details=(how,))
        return a.not_yet(f"launched on {grid} threads over {CHECK_N} elements, the kernel wrote {n_written} of "
                         f"them; never written: {_missing(written)}. Start each thread at cuda.grid(1) (its index "
                         "in the whole grid, not threadIdx.x, which repeats in every block) and step by "
                         "cuda.gridsize(1).", details=(how,))
    if not np.allclose(got, x * x):
        bad = int(np.flatnonzero(~np.isclose(got, x * x))[0])
        return a.not_yet(f"every element was written, but out[{bad}] is {got[bad]:g}, not x[{bad}] * x[{bad}] = "
                         f"{x[bad] * x[bad]:g}: write out[i] = x[i] * x[i] for the i of the loop.", details=(how,))
    return a.passed(f"launched on {CHECK_BLOCKS} blocks x {CHECK_THREADS} threads over {CHECK_N} elements, the "
                    "kernel squared every one of them (grid-stride loop)",
                    "where it ran: " + ("the GPU" if t.kind == "gpu" else "the Numba CUDA simulator (no GPU here)"),
                    details=(how,))
