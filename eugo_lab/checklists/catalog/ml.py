"""Quick guide for ML engineers: GPUs, per-call resource requests, and what the runtime does for you.

Measured on this machine's GPUs (:func:`eugo_lab.hardware.gpus.detect_gpus`), the per-operation
ledger of the last ``%%eugo --gpu`` cell, the learner's ``@hpc.remote(gpus=...)`` function
with its calls in the trace, and the BLAS threads each worker of the running runtime uses.
"""

from __future__ import annotations

from eugo_lab.checklists.model import Checklist, Item, register
from eugo_lab.checklists.subject import Subject
from eugo_lab.contract.row import OK
from eugo_lab.units import fmt_bytes
from eugo_lab.units import fmt_seconds as fmt_s

GPU_ENGINES = ("hpc.init(backend='dask', resources={'GPU': 1}) on GPU machines, or hpc.init(backend='ray', "
               "num_gpus=1)")
# Probe tasks per worker for the thread count: submitted together and held briefly, so that
# every worker (not one fast one) answers.
THREAD_PROBES_PER_WORKER = 2
THREAD_PROBE_HOLD_S = 0.05


def gpu_present(s: Subject) -> tuple[bool | None, str]:
    """A GPU this kernel can use (NVML or CuPy), and CuPy to run NumPy code on it."""
    from eugo_lab.hardware.gpus import GPU_EXTRA, detect_gpus

    d = detect_gpus()
    if d.usable:
        names = "; ".join(g.describe() for g in d.gpus)
        return True, f"{names}; CuPy {d.cupy_version} can run array code on it"
    if d.available:
        return False, f"{d.gpus[0].describe()} is here but CuPy is not installed: {GPU_EXTRA}"
    return False, (f"no GPU here ({d.reason}): %%eugo --gpu auto keeps NumPy on the CPU, and its report's GPU "
                   "numbers are predictions")


def work_on_gpu(s: Subject) -> tuple[bool | None, str]:
    """Operations of the last ``%%eugo --gpu`` cell that ran on the device (its per-op ledger)."""
    from eugo_lab.offload.cell import last_ledger

    led = last_ledger()
    if led is None:
        return None, "not measured: no %%eugo --gpu auto cell has run in this kernel yet; run one, then measure"
    n, gpu = led.n_ops(), led.n_ops("gpu")
    if led.predictions_only:
        return False, (f"the last --gpu cell ran its {n} operations on the CPU: there is no GPU here; the model "
                       f"predicts {gpu} of them would run on {led.device}")
    if gpu == 0:
        why = ", ".join(f"{k} {reason}" for reason, k in led.cpu_reasons().items()) or "none offloaded"
        return False, f"none of the last --gpu cell's {n} operations ran on {led.device} ({why})"
    device_s = sum(r.measured_s for r in led.ops if r.where == "gpu" and r.measured_where == "gpu")
    return True, (f"{gpu} of {n} operations of the last --gpu cell ran on {led.device}, {fmt_s(device_s)} measured "
                  f"on the device; {fmt_bytes(led.moved, '.3g')} moved between host and GPU")


# Arrays stay on the device when the bytes that crossed the bus are under half of what the device
# operations read and wrote: an operation per round trip moves about all of its operands (inputs up,
# result down), a chain of k operations on the device about 2/k of them.
ON_DEVICE_MAX_SHARE = 0.5


def data_on_device(s: Subject) -> tuple[bool | None, str]:
    """Bytes the last ``%%eugo --gpu`` cell moved between host and device, against its device operations' operands."""
    import numpy as np

    from eugo_lab.offload.cell import last_ledger

    led = last_ledger()
    if led is None:
        return None, "not measured: no %%eugo --gpu auto cell has run in this kernel yet; run one, then measure"
    on_gpu = [r for r in led.ops if r.where == "gpu"]
    if led.predictions_only or not on_gpu:
        where = "there is no GPU here" if led.predictions_only else f"none of its operations ran on {led.device}"
        return None, f"not measured: {where}, so no array stayed on a device in the last --gpu cell"
    operands = sum(r.count * sum(int(np.prod(shape)) for shape in r.shapes) * np.dtype(r.dtype).itemsize
                   for r in on_gpu)
    ops = sum(r.count for r in on_gpu)
    moved = led.moved
    said = (f"{ops} operations on {led.device} read and wrote {fmt_bytes(operands, '.3g')}; "
            f"{fmt_bytes(moved, '.3g')} crossed between host and GPU ({fmt_bytes(moved / ops, '.3g')} per operation)")
    if operands > 0 and moved <= ON_DEVICE_MAX_SHARE * operands:
        return True, said
    return False, f"{said}: the data went back and forth around the operations; keep the arrays on the device"


def gpu_requests(s: Subject) -> tuple[bool | None, str]:
    """The function's ``gpus=`` request, the runtime's GPUs, and how its calls in the trace ended."""
    from eugo_lab.hpc.remote_function import RemoteFunction

    fn = s.fn
    if fn is None:
        return None, "not measured: give fn= your @hpc.remote(gpus=1) function"
    if not isinstance(fn, RemoteFunction):
        return None, (f"not measured: {s.call_text.split('(')[0]} is a plain function; requests are made with "
                      "@hpc.remote(gpus=1) or f.options(gpus=1)")
    name, gpus = fn.function_name, fn._options.gpus
    if not gpus:
        return False, (f"{name}() asks for no GPU (gpus=0), so its calls may land on any worker; ask with "
                       f"@hpc.remote(gpus=1) or {name}.options(gpus=1)")
    rt = s.runtime()
    offered = int(rt.backend.info().gpus) if rt is not None else 0
    if rt is not None and offered == 0:
        return False, (f"{name}() asks for gpus={gpus:g} but the {rt.backend_name} runtime's workers have no GPU, so "
                       f"its calls are refused; start workers that have one: {GPU_ENGINES}")
    tr = s.trace
    if tr is None:
        return None, s.no_trace(f"where {name}() ran")
    if name not in tr.functions:
        return None, f"not measured: the trace has no call of {name}(); trace a run that calls it"
    t = tr.tasks
    mine = t["function"] == tr.functions.index(name)
    done = int((mine & (t["status"] == OK)).sum())
    failed = int(mine.sum()) - done
    where = f" (the runtime offers {offered} GPU{'s' if offered != 1 else ''})" if rt is not None else ""
    if failed:
        return False, f"{name}() asks for gpus={gpus:g}: {done} of its calls in the trace ran, {failed} did not{where}"
    return True, (f"{name}() asks for gpus={gpus:g}: all {done} of its calls in the trace ran on workers that have "
                  f"one{where}")


def threads_guarded(s: Subject) -> tuple[bool | None, str]:
    """BLAS threads per worker, asked of the workers themselves, against the cores they share."""
    from eugo_lab import hpc
    from eugo_lab.checklists.probes import worker_threads

    rt = s.runtime()
    if rt is None:
        return None, "not measured: no runtime is running (hpc.init() starts one)"
    if rt.backend_name == "threads":
        return True, "the threads backend runs every task in this one process: there are no worker BLAS pools to size"
    info = rt.backend.info()
    probe = hpc.remote(worker_threads)
    answers = hpc.get([probe.remote(THREAD_PROBE_HOLD_S) for _ in range(THREAD_PROBES_PER_WORKER * info.workers)])
    by_worker = {pid: n for pid, n, _ in answers}
    counts = [n for n in by_worker.values() if n is not None]
    if not counts:
        return None, "not measured: threadpoolctl is not installed in the workers (pip install threadpoolctl)"
    per = max(counts)
    total = per * info.workers
    head = (f"each worker's BLAS runs {per} thread{'s' if per != 1 else ''} ({len(by_worker)} workers answered): "
            f"{info.workers} workers x {per} = {total} threads on {info.cores} cores")
    # One thread per worker is the least a worker can run; the guard gives each its share of the cores.
    if per <= max(1, info.cores // max(info.workers, 1)):
        return True, head
    return False, (f"{head}: they fight for the cores; limit them with hpc.init(threads_per_worker=1) or "
                   "OMP_NUM_THREADS=1")


def optimizations(s: Subject) -> tuple[bool | None, str]:
    """What the report of the latest cell or traced region (``hpc.last_optimizations()``) says the runtime did."""
    from eugo_lab import hpc

    rep = hpc.last_optimizations()
    if rep is None:
        return None, ("not measured: no %%eugo cell with optimizations has run yet; run one (or --optimize) to "
                      "see what the runtime did")
    done = [o.bucketed for o in rep.applied]
    skipped = [f"{o.target} ({o.reason})" if o.reason else o.target for o in rep.declined]
    which = "the last --optimize cell" if rep.mode == "--optimize" else "the last run (automatic JIT)"
    head = f"{which}: {len(done)} applied" + (f" ({'; '.join(done)})" if done else "")
    if skipped:
        head += f", {len(skipped)} declined: {'; '.join(skipped)}"
    return bool(done), head


ML = register(Checklist(
    id="quick-guide-ml-engineer",
    order=4,  # its place on the course page (courses/index.ipynb)
    title="Quick guide: ML engineer",
    purpose=("GPUs, per-call resource requests, and which optimizations the runtime applies on your behalf, plus how "
             "to confirm work actually reached the GPU."),
    aliases=("ml", "ml-engineer"),
    items=(
        Item("gpu-present", "This kernel can use a GPU",
             "Offloading needs a device and a library that drives it. Without one every GPU number in a report is a "
             "prediction, not a measurement.", gpu_present, "machine"),
        Item("work-on-gpu", "The operations you meant for the GPU ran there",
             "An operation stays on the CPU when it is too small for the copy to pay, or when the GPU path fails. "
             "Only the per-operation report shows which.", work_on_gpu, "last --gpu cell"),
        Item("gpu-requests", "Calls that need a GPU ask for one, and got one",
             "A task lands on any free worker unless it says what it needs. With gpus=1 the engine places it on a "
             "worker that has a GPU, or says that none has.", gpu_requests, "fn, trace"),
        Item("threads-guarded", "Worker processes do not oversubscribe the cores with BLAS threads",
             "Each NumPy process starts one BLAS thread per core. Several workers on one machine then run many "
             "threads per core, and every matrix product slows down.", threads_guarded, "runtime"),
        Item("optimizations", "You read what the runtime compiled, batched or declined",
             "The runtime changes how your code runs only when the result stays the same, and says when it "
             "declines. The report tells you how to help it.", optimizations, "last cell or traced run"),
        Item("data-on-device", "Arrays stay on the GPU between operations",
             "Copying to the GPU and back for every operation often costs more than the operation saves. Chain "
             "operations on the device and bring back only the answer.", data_on_device, "last --gpu cell"),
    ),
))
