"""Course 2 exercises: each reference passes, each typical mistake is ``not yet`` with its own message.

They run here without a GPU: the break-even on the published prediction profile, the transfer
on the ledger's predicted bytes and placements (for a slow and a fast injected host), the GPU
request refused by a pool without GPU workers, the kernel on Numba's CUDA simulator (on a GPU
machine the same cells grade what the GPU did).
"""

from __future__ import annotations

import dataclasses

import pytest

from eugo_lab import hpc
from eugo_lab.offload import kernels
from tests._exercise_cells import code_in, hint_code, hint_words, run_exercise

kernels.cuda()  # before anything imports numba.cuda: the simulator where there is no GPU


@pytest.fixture(autouse=True, scope="module")
def _stop_workers():
    yield
    hpc.shutdown()


# -- gpu-break-even -------------------------------------------------------------------------------------
BREAK_EVEN_SETUP = """
from eugo_lab.offload import predict, host_profile
from eugo_lab.offload.cell import device_profile
from eugo_lab.offload.cost import sample_operation
host, gpu = host_profile(), device_profile()
"""


def scan(resident: bool, start: int = 10, stop: int = 31, step_back: bool = False) -> str:
    return f"""
size = None
for e in range({start}, {stop}):
    n = 1 << e
    op = sample_operation("elementwise", n, work="special", name="power", resident={resident})
    if predict(op, host, gpu).where == "gpu":
        size = n{" // 2" if step_back else ""}
        break
"""


def test_break_even_reference_passes():
    v = run_exercise("gpu-break-even", scan(resident=False), BREAK_EVEN_SETUP, line="--no-live")
    assert v.passed, v.to_text()
    assert "published figures, a prediction" in v.to_text()  # no GPU here: the profile is named as such


def test_break_even_with_the_data_already_on_the_device_is_not_yet():
    v = run_exercise("gpu-break-even", scan(resident=True), BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed
    assert "size where it pays for data already on the GPU" in v.to_text()


def test_break_even_too_large_or_on_the_cpu_side_is_not_yet():
    v = run_exercise("gpu-break-even", scan(resident=False) + "size = size * 4\n", BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and "already wins at half your size" in v.to_text()
    v = run_exercise("gpu-break-even", scan(resident=False, step_back=True), BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and "still keeps np.power on the CPU" in v.to_text()
    v = run_exercise("gpu-break-even", scan(resident=False, stop=12), BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and "found no size" in v.to_text()


# -- gpu-transfer ---------------------------------------------------------------------------------------
TRANSFER_SETUP = """
import numpy as np
signal = np.random.default_rng(7).uniform(1.0, 100.0, 2_000_000)
"""
NEWTON = """
import numpy as np
{prelude}w = np.log1p({src})
for step in range(20):
    w = w * (1 + np.log({src}) - np.log(w)) / (1 + w)
{check}"""


def transfer(prelude: str = "", src: str = "signal", check: str = "") -> str:
    return NEWTON.format(prelude=prelude, src=src, check=check)


REFERENCE = transfer("s = np.asarray(signal)\n", "s")
GPU_AUTO = "--gpu auto --no-live -w 1"


@pytest.fixture(params=[12e9, 100e9], ids=["slow-host", "fast-host"])
def host(request, monkeypatch):
    """A host whose main memory moves 12 GB/s (a loaded machine) or 100 GB/s (a quiet one, or cache-fed).

    The grade must not depend on which: the cost model reads the host profile through
    ``profiles.host_profile`` when a cell starts, so an injected one decides every placement.
    """
    from eugo_lab.offload import profiles

    fake = dataclasses.replace(profiles.host_profile(), mem_bw=request.param)
    monkeypatch.setattr(profiles, "host_profile", lambda: fake)
    return fake


def test_transfer_reference_passes(host):
    v = run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line=GPU_AUTO)
    assert v.passed, v.to_text()
    text = v.to_text()
    assert "a prediction for a named GPU profile: no GPU here" in text
    assert "all 140 operations of the loop would run on NVIDIA H100" in text


def test_transfer_starter_recopies_signal_every_step(host):
    v = run_exercise("gpu-transfer", transfer(), TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed
    text = v.to_text()
    assert "`log` copied 16.0 MB to the GPU on each of its 20 calls" in text
    assert "s = np.asarray(signal)" in hint_code(v) and code_in(text) == []


def test_transfer_convergence_check_on_the_cpu_drags_the_data_back(host):
    check = "    if np.allclose(w * np.exp(w), s):\n        pass\n"
    v = run_exercise("gpu-transfer", REFERENCE.rstrip("\n") + "\n" + check, TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed
    assert "`allclose` ran on the CPU 20 times" in v.to_text()
    assert "float(np.max(np.abs(w * np.exp(w) - s)))" in hint_code(v)


def test_transfer_wrong_result_and_no_gpu_mode_are_not_yet(host):
    v = run_exercise("gpu-transfer", REFERENCE.replace("range(20)", "range(2)"), TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed and "does not solve w * exp(w) = signal" in v.to_text()
    v = run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line="--no-live -w 1")
    assert not v.passed and "it ran without GPU placement" in v.to_text() and "--gpu auto" in hint_code(v)


def test_transfer_kept_on_the_cpu_is_not_credited_as_staying_on_the_device(monkeypatch):
    # A host whose exp/log and memory outrun the link: the model keeps everything on the CPU and nothing
    # moves. That must read as "the loop did not use the GPU", never as "the data stayed on the device".
    from eugo_lab.offload import profiles

    fake = dataclasses.replace(profiles.host_profile(), mem_bw=1e12, special_rate=1e12)
    monkeypatch.setattr(profiles, "host_profile", lambda: fake)
    v = run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line=GPU_AUTO)
    assert not v.passed
    text = v.to_text()
    assert "on the CPU, so no data was kept on the device: the loop did not use the GPU" in text
    assert "the data stayed on the device" not in text
    assert "On this host, copying its operands to the device costs more" in text


#: Shortcuts: the answer computed by an earlier plain cell, a decoy loop of the right operations beside it.
EARLIER_ANSWER = TRANSFER_SETUP + """
w0 = np.log1p(signal)
for _step in range(20):
    w0 = w0 * (1 + np.log(signal) - np.log(w0)) / (1 + w0)
"""
DECOY = ("s = np.asarray(signal)\nv = np.log1p(s)\nfor step in range(20):\n"
         "    v = v * (1 + np.log(s) - np.log(v)) / (1 + v)\n")


@pytest.mark.parametrize("handed_in", ["w = w0\n", "w = w0[:]\n"], ids=["same-object", "a-view"])
def test_transfer_answer_from_an_earlier_cell_is_not_yet(handed_in):
    v = run_exercise("gpu-transfer", DECOY + handed_in, EARLIER_ANSWER, line=GPU_AUTO)
    assert not v.passed and v.mistake == "copied"
    assert "`w` is the array `w0` that an earlier cell computed" in v.to_text()
    assert code_in(v.to_text()) == []


def test_transfer_honest_variant_other_names_passes():
    # the loop's own names, the answer handed over at the end; an earlier cell holds the same numbers, which
    # proves nothing against it (equal values are what an honest recomputation gives)
    cell = "sig = np.asarray(signal)\nguess = np.log1p(sig)\nfor k in range(20):\n" \
           "    guess = guess * (1 + np.log(sig) - np.log(guess)) / (1 + guess)\nw = guess\n"
    v = run_exercise("gpu-transfer", "import numpy as np\n" + cell, EARLIER_ANSWER, line=GPU_AUTO)
    assert v.passed, v.to_text()


def test_setitem_on_a_value_the_model_keeps_on_the_device_moves_nothing_back():
    from eugo_lab.offload.cell import last_ledger

    cell = "s = np.asarray(signal)\nr = np.sqrt(s)\nr[0] = 1.0\nt = np.sqrt(r)\n"
    run_exercise("gpu-transfer", cell, TRANSFER_SETUP, line=GPU_AUTO)
    ledger = last_ledger()
    fetched = [r for r in ledger.rows if r.is_transfer and r.why == "host needed"]
    assert fetched == []  # the device writes the element where the array is, as the GPU path does


# -- gpu-request ----------------------------------------------------------------------------------------
TILE_FN = """
import numpy as np
from eugo_lab import hpc

@hpc.remote{request}
def tile_energy(i):
    v = np.arange(i * 200_000, (i + 1) * 200_000, dtype=np.float64) / 200_000
    return float(np.sum(v * v))

"""
REQUEST_REFERENCE = TILE_FN.format(request="(gpus=1)") + """
try:
    results = hpc.get([tile_energy.remote(i) for i in range(4)])
except hpc.ResourceRequestError as err:
    print("no GPU worker:", err)
    results = hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])
"""
LOCAL_TILES = "[float(np.sum((np.arange(i * 200_000, (i + 1) * 200_000) / 200_000) ** 2)) for i in range(4)]"
PLAIN = TILE_FN.format(request="")
#: (id, cell, passed, what the verdict must say, mistake), run on a pool without GPU workers.
REQUEST_CASES = [
    ("reference", REQUEST_REFERENCE, True, "4 tile_energy requests for 1 GPU were refused with ResourceRequestError",
     None),
    # another correct use of the API: the request per call with options(), any exception name, a dict of futures
    ("honest-options-per-call", PLAIN + """
futures = {i: tile_energy.options(gpus=1).remote(i) for i in range(4)}
try:
    energies = hpc.get(list(futures.values()))
except hpc.ResourceRequestError:
    energies = hpc.get([tile_energy.remote(i) for i in futures])
results = energies
""", True, "then 4 tile_energy tasks ran on CPU workers (the trace's gpu column: no GPU held)", None),
    ("starter-no-request", PLAIN + "results = hpc.get([tile_energy.remote(i) for i in range(4)])\n", False,
     "no task of this cell asked for a GPU", "no-gpu-asked"),
    ("uncaught-refusal", TILE_FN.format(request="(gpus=1)") + "results = hpc.get([tile_energy.remote(i) for i in "
     "range(4)])\n", False, "stopped with ResourceRequestError", None),
    ("no-fallback", REQUEST_REFERENCE.replace("hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])",
                                              "[]"), False, "does not hold the 4 energies", "results"),
    ("fallback-in-the-notebook", REQUEST_REFERENCE.replace(
        "hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])", LOCAL_TILES), False,
     "only 0 of the 4 tile_energy calls ran as tasks on the cluster", "local"),
    # shortcut: a throwaway function makes the refused request; tile_energy itself never asks for a GPU
    ("shortcut-decoy-request", PLAIN + """
@hpc.remote(gpus=1)
def probe():
    return 0

try:
    hpc.get(probe.remote())
except hpc.ResourceRequestError:
    pass
results = hpc.get([tile_energy.remote(i) for i in range(4)])
""", False, "it was made by probe, not by tile_energy: the tile_energy tasks never asked for a GPU",
     "other-function"),
    # shortcut: the energies computed in the notebook, decoy tasks on other tiles beside them
    ("shortcut-driver-values", REQUEST_REFERENCE.replace(
        "results = hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4)])",
        "hpc.get([tile_energy.options(gpus=0).remote(i) for i in range(4, 8)])\n    results = " + LOCAL_TILES),
     False, "`results` was not computed from the tasks' results: 0 of its 4 values are among what the 4 "
     "tile_energy tasks returned", "not-from-tasks"),
]


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.delenv("EUGO_LAB_GPU_DEVICES", raising=False)
    hpc.shutdown()  # the next cell starts a pool that looks for GPUs again


@pytest.mark.parametrize("cell, passed, says, mistake", [c[1:] for c in REQUEST_CASES],
                         ids=[c[0] for c in REQUEST_CASES])
def test_request_cases_without_gpu_workers(no_gpu, cell, passed, says, mistake):
    v = run_exercise("gpu-request", cell)
    assert v.passed is passed, v.to_text()
    assert says in v.to_text(), v.to_text()
    assert v.mistake == mistake
    if mistake is not None:  # the checker's own message (a cell that raised quotes its error as it is)
        assert code_in(v.to_text()) == [], v.to_text()
        assert hint_words(v) and hint_code(v)


@pytest.fixture
def named_gpu(monkeypatch):
    """A pool with a worker pinned to device 0 by name; no device stands behind it here (the scheduling is real)."""
    from eugo_lab.backends import local_gpus

    monkeypatch.setenv("EUGO_LAB_GPU_DEVICES", "0")
    monkeypatch.setattr(local_gpus, "_detected", lambda: (0, "no NVIDIA driver"))
    hpc.shutdown()
    yield
    hpc.shutdown()


def test_request_on_a_named_device_without_a_gpu_never_says_a_gpu_ran_it(named_gpu):
    v = run_exercise("gpu-request", REQUEST_REFERENCE)
    text = v.to_text()
    assert v.passed, text
    assert "all 4 tile_energy tasks asked for a GPU and the scheduler gave each one: GPU 0 (4 tasks)" in text
    assert "no GPU was found behind the named device (4 tasks read none), so the tiles ran on the CPU" in text
    assert "ran with a GPU" not in text


def test_request_says_which_gpu_the_workers_found(named_gpu, monkeypatch):
    # What a worker on a GPU machine reports (Trace.gpu_devices): the sentence follows that fact, task by task.
    from eugo_lab.tracing.trace import Trace

    real = Trace.gpu_devices
    monkeypatch.setattr(Trace, "gpu_devices", lambda self, fn=None: {t: 0 for t in real(self, fn)})
    v = run_exercise("gpu-request", REQUEST_REFERENCE)
    assert v.passed and "their workers found the device: GPU 0 (4 tasks) ran with a GPU" in v.to_text()
    assert "found none" not in v.to_text()
    monkeypatch.setattr(Trace, "gpu_devices", lambda self, fn=None: {
        t: (0 if k % 2 else -1) for k, t in enumerate(real(self, fn))})
    v = run_exercise("gpu-request", REQUEST_REFERENCE)
    assert v.passed and "GPU 0 (2 tasks) ran with a GPU; 2 tasks found none and ran on the CPU" in v.to_text()


def test_request_on_gpu_workers_without_asking_is_not_yet(named_gpu):
    v = run_exercise("gpu-request", PLAIN + "results = hpc.get([tile_energy.remote(i) for i in range(4)])\n")
    assert not v.passed and "4 of the 4 tile_energy tasks ran on workers without a GPU" in v.to_text()
    assert v.mistake == "no-gpu-asked"


# -- grid-stride ----------------------------------------------------------------------------------------
KERNEL = """
from eugo_lab.offload import kernels
cuda = kernels.cuda()

@cuda.jit
def square_kernel(x, out):
{body}
"""
GRID_STRIDE = """    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = x[i] * x[i]"""
STRIDE_PASS = "44 threads did 5 elements and 20 did 4, each stepping by the grid's 64 threads (grid-stride loop)"
#: (id, kernel body, passed, what the verdict must say, mistake)
STRIDE_CASES = [
    ("reference", GRID_STRIDE, True, STRIDE_PASS, None),
    # another correct grid-stride loop: indices from the block and thread, a while loop, a power
    ("honest-while-loop", "    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x\n"
                          "    while i < len(x):\n        out[i] = x[i] ** 2\n"
                          "        i += cuda.blockDim.x * cuda.gridDim.x", True, STRIDE_PASS, None),
    ("starter-one-per-thread", "    i = cuda.grid(1)\n    if i < x.shape[0]:\n        out[i] = x[i] * x[i]", False,
     "wrote only the first 64: each thread handled one element", "one-per-thread"),
    ("block-index", GRID_STRIDE.replace("cuda.grid(1), x.shape", "cuda.threadIdx.x, x.shape"), False,
     "never written: 32-63, 96-127, 160-191, 224-255, ...", "block-index"),
    ("wrong-value", GRID_STRIDE.replace("x[i] * x[i]", "x[i] + x[i]"), False,
     "element 0 of the output is", "wrong-value"),
    ("past-the-end", GRID_STRIDE.replace("x.shape[0], cuda", "x.shape[0] + 64, cuda"), False,
     "the kernel stopped with IndexError in thread", "out-of-range"),
    ("needs-threads-together", "    cuda.syncthreads()\n" + GRID_STRIDE, False, "it uses cuda.syncthreads",
     "unfollowable"),
    # shortcuts: every element right, but not each done once by its own thread
    ("shortcut-thread-zero-does-all", "    if cuda.grid(1) == 0:\n        for i in range(x.shape[0]):\n"
                                      "            out[i] = x[i] * x[i]", False,
     "element 1 was written by thread 0, while a grid-stride loop over 64 threads gives it to thread 1 (its index "
     "modulo the grid's size). Thread 0 did elements 0-299, and 63 of the 64 threads did none.", "not-own-thread"),
    ("shortcut-every-thread-does-all", "    for i in range(x.shape[0]):\n        out[i] = x[i] * x[i]", False,
     "300 of the 300 elements were written more than once: element 0 by 64 threads (threads 0-63)", "repeated"),
    ("shortcut-chunks", "    per = (x.shape[0] + cuda.gridsize(1) - 1) // cuda.gridsize(1)\n"
                        "    for i in range(cuda.grid(1) * per, min(x.shape[0], (cuda.grid(1) + 1) * per)):\n"
                        "        out[i] = x[i] * x[i]", False,
     "Thread 0 did elements 0-4, and 4 of the 64 threads did none.", "not-own-thread"),
]


@pytest.mark.parametrize("body, passed, says, mistake", [c[1:] for c in STRIDE_CASES],
                         ids=[c[0] for c in STRIDE_CASES])
def test_grid_stride_cases(body, passed, says, mistake):
    v = run_exercise("grid-stride", KERNEL.format(body=body), line="--no-live")
    text = v.to_text()
    assert v.passed is passed, text
    assert says in text, text
    assert v.mistake == mistake
    assert ("(grid-stride loop)" in text) is passed  # the phrase only where the loop was verified
    if passed:
        assert "Numba CUDA simulator" in text or "where it ran: the GPU" in text
    else:
        assert code_in(text) == [], text
        assert hint_words(v) and hint_code(v)


def test_grid_stride_not_a_kernel():
    v = run_exercise("grid-stride", "def square_kernel(x, out):\n    out[:] = x * x\n", line="--no-live")
    assert not v.passed and "is not a CUDA kernel" in v.to_text() and v.mistake == "not-a-kernel"


def test_grid_stride_evidence_follows_what_the_threads_did(monkeypatch):
    from eugo_lab.exercises.catalog import gpu

    monkeypatch.setattr(gpu, "CHECK_N", 256)
    v = run_exercise("grid-stride", KERNEL.format(body=GRID_STRIDE), line="--no-live")
    assert v.passed and "all 64 threads did 4 elements, each stepping by the grid's 64 threads" in v.to_text()
    # as many elements as threads: one each, no step taken, so no grid-stride loop is claimed (the starter too)
    monkeypatch.setattr(gpu, "CHECK_N", 64)
    starter = "    i = cuda.grid(1)\n    if i < x.shape[0]:\n        out[i] = x[i] * x[i]"
    v = run_exercise("grid-stride", KERNEL.format(body=starter), line="--no-live")
    assert v.passed and "all 64 threads did 1 element" in v.to_text()
    assert "(grid-stride loop)" not in v.to_text() and "stepping" not in v.to_text()


def test_break_even_measured_line_times_both_sides_on_a_device():
    # On a GPU the check adds measured times at the learner's size; the fake device runs the same path here.
    from eugo_lab.exercises.catalog import gpu
    from eugo_lab.offload.devices import FakeDevice
    from eugo_lab.offload.profiles import published

    line = gpu._measured_line(10_000, FakeDevice(published("h100")))
    assert line.startswith("measured at 10,000: CPU ") and "with the copies to the device" in line
