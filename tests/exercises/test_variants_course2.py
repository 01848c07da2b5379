"""Course 2's exercises own their problem, and a passing cell is run again on a hidden case (``exercises.problems``).

Through the real ``%%eugo --exercise`` magic, per exercise: the lesson's reference passes on both
cases; a cell that types in the lesson's inputs (or its answer) passes the lesson's case but not the
hidden one, with the "did not carry over" message and nothing of the hidden case in it; honest
solutions unlike the reference pass both; the mistakes the exercise names are still named. The
hidden case's seed is fixed here (``problems.draw_seed``) so a test knows what must not be shown.

They run without a GPU, as the course's checks do here: the transfer on the ledger's predicted
placements and bytes (for a fixed slow and fast host), the kernel on Numba's CUDA simulator, the GPU
request refused by a pool without GPU workers, the break-even on the published prediction profile.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from _exercise_cells import run_exercise, shell
from _notebooks import cell_source, read_notebook
from _variants import carried_over, hidden, lesson, never_shown, not_yet, passed_twice

from eugo_lab import hpc
from eugo_lab.contract.digest import digest
from eugo_lab.offload import kernels
from eugo_lab.offload.cell import last_ledger
from eugo_lab.units import fmt_bytes

kernels.cuda()  # before anything imports numba.cuda: the simulator where there is no GPU

pytestmark = pytest.mark.usefixtures("hidden_seed")  # every hidden case here is made from _variants.SEED

COURSE = Path(__file__).resolve().parents[2] / "courses" / "02-gpu-acceleration"


@pytest.fixture(scope="module", autouse=True)
def _workers():
    yield
    hpc.shutdown()


def notebook_cell(lesson_file: str, tag: str) -> str:
    """The body of the lesson's exercise cell tagged ``tag`` (``starter``, ``solution``), its magic line left out."""
    cells = read_notebook(COURSE / lesson_file)["cells"]
    [cell] = [c for c in cells if tag in c.get("metadata", {}).get("tags", [])]
    return cell_source(cell).split("\n", 1)[1]


# -- gpu-transfer -----------------------------------------------------------------------------------------------
TRANSFER_LESSON = "02-automatic-gpu-offloading.ipynb"
GPU_AUTO = "--gpu auto --no-live -w 1"
#: The lesson's earlier cells: numpy, the exercises module, and the readings bound to names of their own.
TRANSFER_SETUP = ("import numpy as np\nfrom eugo_lab import exercises\np = exercises.problem(\"gpu-transfer\")\n"
                  "signal, gain = p.signal, p.gain\n")
TAKE = 'p = exercises.problem("gpu-transfer")\n'
NEWTON = ("{head}w = np.log1p({t})\nfor step in range(20):\n"
          "    w = w * (1 + np.log({t}) - np.log(w)) / (1 + w)\n")


@pytest.fixture(params=[12e9, 100e9], ids=["slow-host", "fast-host"])
def transfer_host(request, monkeypatch):
    """A host whose memory moves 12 or 100 GB/s: the model's placements, hence the verdict, must not depend on it."""
    from eugo_lab.offload import profiles
    from tests._offload import HOST

    fake = dataclasses.replace(HOST, mem_bw=request.param)
    monkeypatch.setattr(profiles, "host_profile", lambda: fake)
    return fake


def _transfer(cell: str, setup: str = TRANSFER_SETUP):
    return run_exercise("gpu-transfer", cell, setup=setup, line=GPU_AUTO)


def _transfer_hidden_values() -> tuple:
    h = hidden("gpu-transfer")
    return h.signal.size, f"{h.signal.size:,}", fmt_bytes(h.signal.nbytes)


def test_transfer_the_lesson_s_readings_are_its_earlier_cells_and_the_hidden_ones_fewer_and_others():
    p, h = lesson("gpu-transfer"), hidden("gpu-transfer")
    # the 16 MB signal and the gain the lesson's prose, guess and smoothing cells describe
    assert (p.signal == np.random.default_rng(7).uniform(1.0, 100.0, 2_000_000)).all()
    assert (p.gain == np.random.default_rng(8).uniform(0.5, 2.0, 2_000_000)).all()
    assert 1_000_000 <= h.signal.size <= 1_500_000 and h.gain.size == h.signal.size
    assert h.signal.min() >= 1.0 and h.signal.max() < 100.0 and 0.5 <= h.gain.min() and h.gain.max() < 2.0
    assert not h.signal.flags.writeable and not p.gain.flags.writeable  # a cell cannot change the checker's copy


def test_transfer_the_lesson_s_reference_passes_on_both_cases(transfer_host):
    text = passed_twice(_transfer(notebook_cell(TRANSFER_LESSON, "solution")))
    assert "bytes moved per operation stayed under 10% of p.signal's 16.0 MB" in text, text
    never_shown(text, *_transfer_hidden_values())
    # the hidden run was graded on its own ledger; the learner's last_ledger() is still the cell's own run
    ledger, w = last_ledger(), shell().user_ns["w"]
    assert w.size == 2_000_000 and ledger.left["w"] == digest(w)


#: The readings made by NumPy's generators, as the lesson's earlier cell once made them, not taken from ``p``.
OWN_READINGS = ("signal = np.random.default_rng(7).uniform(1.0, 100.0, 2_000_000)\n"
                "gain = np.random.default_rng(8).uniform(0.5, 2.0, 2_000_000)\n")


@pytest.mark.parametrize(("cell", "setup"), [
    (TAKE + OWN_READINGS + NEWTON.format(head="target = np.asarray(signal) * gain\n", t="target"), TRANSFER_SETUP),
    (NEWTON.format(head="target = np.asarray(signal) * gain\n", t="target"),
     "import numpy as np\nfrom eugo_lab import exercises\n" + OWN_READINGS),
], ids=["readings-made-in-the-cell", "readings-made-by-an-earlier-cell"])
def test_transfer_readings_not_taken_from_p_do_not_carry_over(cell, setup, transfer_host):
    text = carried_over(_transfer(cell, setup))
    never_shown(text, *_transfer_hidden_values())


#: Honest cells unlike the reference: each passes on both cases.
TRANSFER_HONEST = [
    # the names an earlier cell bound to the handed-out arrays (the hidden run gets the hidden case's)
    ("signal-and-gain-of-the-earlier-cell", NEWTON.format(head="target = np.asarray(signal) * gain\n", t="target")),
    # the product made on the host once and handed over whole, other names, the answer handed over at the end
    ("product-handed-over-whole", TAKE + "t = np.asarray(p.signal * p.gain)\nguess = np.log1p(t)\n"
     "for k in range(20):\n    guess = guess * (1 + np.log(t) - np.log(guess)) / (1 + guess)\nw = guess\n"),
    # both arrays handed over, the product made on the device, a while loop
    ("both-handed-over-while-loop", TAKE + "s, g = np.asarray(p.signal), np.asarray(p.gain)\nt = s * g\n"
     "w = np.log1p(t)\nk = 0\nwhile k < 25:\n    w = w * (1 + np.log(t) - np.log(w)) / (1 + w)\n    k += 1\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in TRANSFER_HONEST], ids=[i for i, _ in TRANSFER_HONEST])
def test_transfer_honest_cells_pass_on_both_cases(cell, transfer_host):
    passed_twice(_transfer(cell))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    (notebook_cell(TRANSFER_LESSON, "starter"), "recopied", "`log` copied 16.0 MB to the GPU on each of its 20 calls"),
    (TAKE + NEWTON.format(head="target = np.asarray(p.signal) * p.gain\n", t="target").replace("20", "2"),
     "result", "does not solve w * exp(w) = p.signal * p.gain, for the 2,000,000 readings of p.signal"),
], ids=["the-starter", "too-few-steps"])
def test_transfer_named_mistakes_are_still_named(cell, mistake, says, transfer_host):
    not_yet(_transfer(cell), mistake, says)


# -- grid-stride ------------------------------------------------------------------------------------------------
STRIDE_LESSON = "04-a-first-cuda-kernel.ipynb"
#: The lesson's first cell: numpy, the exercises module, Numba's CUDA (the simulator here).
STRIDE_SETUP = "import numpy as np\nfrom eugo_lab import exercises\nfrom eugo_lab.offload import kernels\n" \
               "cuda = kernels.cuda()\n"
STRIDE_TAKE = 'p = exercises.problem("grid-stride")\n\n'
STRIDE_LAUNCH = ("\nx = cuda.to_device(p.x)\nout = cuda.to_device(np.full(p.x.size, np.nan, dtype=np.float32))\n"
                 "square_kernel[p.blocks, p.threads](x, out)\n")


def _stride(cell: str):
    return run_exercise("grid-stride", cell, setup=STRIDE_SETUP, line="--no-live")


def _kernel(body: str) -> str:
    return STRIDE_TAKE + "@cuda.jit\ndef square_kernel(x, out):\n" + body + "\n" + STRIDE_LAUNCH


def _stride_hidden_values() -> tuple:
    h = hidden("grid-stride")
    return (f"{h.x.size} elements", f"{h.blocks} blocks x {h.threads} threads", f"{h.blocks * h.threads} threads)",
            f"{h.x[0]:g}")


def test_stride_the_lesson_s_launch_and_a_hidden_one_on_another_grid():
    p, h = lesson("grid-stride"), hidden("grid-stride")
    assert (p.blocks, p.threads) == (2, 32)
    assert p.x.dtype == np.float32 and (p.x == np.random.default_rng(20_240).uniform(0.5, 4.0, 300)
                                        .astype(np.float32)).all()
    grid = h.blocks * h.threads
    assert grid < 64 and 2 * grid < h.x.size < 300 and h.x.size % grid  # every thread loops, some once more
    assert not p.x.flags.writeable and not h.x.flags.writeable


def test_stride_the_lesson_s_reference_passes_on_both_cases():
    text = passed_twice(_stride(notebook_cell(STRIDE_LESSON, "solution")))
    assert ("launched on 2 blocks x 32 threads (p.blocks x p.threads, 64 threads) over the 300 elements of p.x, the "
            "kernel squared every one of them") in text, text
    never_shown(text, *_stride_hidden_values())


@pytest.mark.parametrize("body", [
    # the lesson's length and grid written into the loop
    "    for i in range(cuda.grid(1), 300, 64):\n        out[i] = x[i] * x[i]",
    # the length read from x, the lesson's grid size written in
    "    for i in range(cuda.grid(1), x.shape[0], 64):\n        out[i] = x[i] * x[i]",
], ids=["length-and-stride-typed", "stride-typed"])
def test_stride_a_kernel_written_for_the_lesson_s_launch_does_not_carry_over(body):
    text = carried_over(_stride(_kernel(body)))
    never_shown(text, *_stride_hidden_values())


#: Honest kernels unlike the reference: each passes on both cases.
STRIDE_HONEST = [
    ("while-loop-from-block-and-thread",
     "    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x\n    while i < len(x):\n"
     "        out[i] = x[i] ** 2\n        i += cuda.blockDim.x * cuda.gridDim.x"),
    ("stride-named-and-size",
     "    start, stride = cuda.grid(1), cuda.gridsize(1)\n    for i in range(start, out.size, stride):\n"
     "        v = x[i]\n        out[i] = v * v"),
]


@pytest.mark.parametrize("body", [b for _, b in STRIDE_HONEST], ids=[i for i, _ in STRIDE_HONEST])
def test_stride_honest_kernels_pass_on_both_cases(body):
    passed_twice(_stride(_kernel(body)))


def test_stride_a_cell_that_launches_its_own_demo_passes_on_both_cases():
    # the check launches the kernel itself: the cell's own launch (another grid, other values) is the cell's business
    cell = ("@cuda.jit\ndef square_kernel(x, out):\n"
            "    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):\n        out[i] = x[i] * x[i]\n\n"
            "demo = cuda.to_device(np.full(10, np.nan, dtype=np.float32))\n"
            "square_kernel[1, 4](cuda.to_device(np.arange(10, dtype=np.float32)), demo)\n")
    passed_twice(_stride(cell))


@pytest.mark.parametrize(("body", "mistake", "says"), [
    ("    i = cuda.grid(1)\n    if i < x.shape[0]:\n        out[i] = x[i] * x[i]", "one-per-thread",
     "the kernel wrote only the first 64: each thread handled one element"),
    ("    for i in range(cuda.threadIdx.x, x.shape[0], cuda.gridsize(1)):\n        out[i] = x[i] * x[i]",
     "block-index", "never written: 32-63, 96-127, 160-191, 224-255, ..."),
], ids=["the-starter", "block-index"])
def test_stride_named_mistakes_are_still_named(body, mistake, says):
    not_yet(_stride(_kernel(body)), mistake, says)


def test_stride_the_starter_of_the_lesson_is_the_one_per_thread_mistake():
    not_yet(_stride(notebook_cell(STRIDE_LESSON, "starter")), "one-per-thread", "wrote only the first 64")


# -- gpu-request ------------------------------------------------------------------------------------------------
REQUEST_LESSON = "03-per-call-resource-requests.ipynb"
REQUEST_HEAD = '''
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("gpu-request")

@hpc.remote
def load_tile(i, size):
    return np.arange(i * size, (i + 1) * size, dtype=np.float64) / size

@hpc.remote({request})
def tile_energy(tile):
    return float(np.sum(tile * tile))

'''
FALLBACK = ("try:\n    results = hpc.get([tile_energy.remote(t) for t in tiles])\n"
            "except hpc.ResourceRequestError:\n"
            "    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])\n")


@pytest.fixture
def no_gpu(monkeypatch):
    """A pool without GPU workers: every GPU request is refused, and the cell's fallback runs."""
    monkeypatch.delenv("EUGO_LAB_GPU_DEVICES", raising=False)
    hpc.shutdown()  # the next cell starts a pool that looks for GPUs again


def _request(cell: str):
    return run_exercise("gpu-request", cell, setup="from eugo_lab import hpc\n")  # the lesson's first cell


def _request_hidden_values() -> tuple:
    from eugo_lab.exercises.catalog.gpu import tile_energy

    h = hidden("gpu-request")
    return (f"{h.n_tiles} tile_energy", f"{h.n_tiles} load_tile", f"{h.tile_size:,}", h.tile_size,
            tile_energy(0, h.tile_size), f"{tile_energy(1, h.tile_size):g}")


def test_request_the_lesson_s_four_tiles_and_a_hidden_count_of_smaller_ones():
    p, h = lesson("gpu-request"), hidden("gpu-request")
    assert (p.n_tiles, p.tile_size) == (4, 200_000)
    assert h.n_tiles in (3, 5) and 50_000 <= h.tile_size <= 150_000
    assert h.n_tiles * h.tile_size < p.n_tiles * p.tile_size  # fewer numbers to load and square


def test_request_the_lesson_s_reference_passes_on_both_cases(no_gpu):
    text = passed_twice(_request(notebook_cell(REQUEST_LESSON, "solution")))
    assert "4 tile_energy requests for 1 GPU were refused with ResourceRequestError" in text, text
    never_shown(text, *_request_hidden_values())


@pytest.mark.parametrize("tiles", [
    "tiles = [load_tile.remote(i, p.tile_size) for i in range(4)]\n",
    "tiles = [load_tile.remote(i, 200_000) for i in range(p.n_tiles)]\n",
], ids=["count-typed", "size-typed"])
def test_request_a_typed_tile_count_or_size_does_not_carry_over(tiles, no_gpu):
    text = carried_over(_request(REQUEST_HEAD.format(request="gpus=1") + tiles + FALLBACK))
    never_shown(text, *_request_hidden_values())


#: Honest cells unlike the reference: each passes on both cases.
REQUEST_HONEST = [
    # the request per call with options(), the superclass caught, the size as a keyword
    ("options-per-call-and-the-superclass",
     REQUEST_HEAD.format(request="") + "tiles = [load_tile.remote(k, size=p.tile_size) for k in range(p.n_tiles)]\n"
     "try:\n    results = hpc.get([tile_energy.options(gpus=1).remote(t) for t in tiles])\n"
     "except hpc.NoWorkersError:\n    results = hpc.get([tile_energy.remote(t) for t in tiles])\n"),
    # the tile's bounds worked out in the notebook and passed to the loader, one get per future
    ("bounds-passed-and-a-get-per-future",
     "import numpy as np\nfrom eugo_lab import exercises, hpc\n\np = exercises.problem('gpu-request')\n\n"
     "@hpc.remote\ndef load_tile(start, stop, scale):\n    return np.arange(start, stop, dtype=np.float64) / scale\n\n"
     "@hpc.remote(gpus=1)\ndef tile_energy(tile):\n    return float(np.dot(tile, tile))\n\n"
     "n, size = p.n_tiles, p.tile_size\ntiles = [load_tile.remote(i * size, (i + 1) * size, size) for i in range(n)]\n"
     "try:\n    futures = [tile_energy.remote(t) for t in tiles]\n    results = hpc.get(futures)\n"
     "except hpc.ResourceRequestError:\n    futures = [tile_energy.options(gpus=0).remote(t) for t in tiles]\n"
     "    results = [hpc.get(f) for f in futures]\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in REQUEST_HONEST], ids=[i for i, _ in REQUEST_HONEST])
def test_request_honest_cells_pass_on_both_cases(cell, no_gpu):
    passed_twice(_request(cell))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    (notebook_cell(REQUEST_LESSON, "starter"), "no-gpu-asked", "no tile_energy task of this cell asked for a GPU"),
    (REQUEST_HEAD.format(request="gpus=1") + "tiles = [load_tile.remote(i, p.tile_size) for i in range(p.n_tiles)]\n"
     + FALLBACK.replace("    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])\n",
                        "    again = [load_tile.remote(i, p.tile_size) for i in range(p.n_tiles)]\n"
                        "    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in again])\n"),
     "reloaded", "load_tile ran 8 times for 4 tiles: the fallback loaded the tiles again"),
], ids=["the-starter", "fallback-reloads"])
def test_request_named_mistakes_are_still_named(cell, mistake, says, no_gpu):
    not_yet(_request(cell), mistake, says)


# -- gpu-break-even ---------------------------------------------------------------------------------------------
BREAK_EVEN_LESSON = "01-host-and-device-memory.ipynb"
#: The lesson's first cell: the cost model's functions, the host and the device profile.
BREAK_EVEN_SETUP = ("from eugo_lab import exercises\nfrom eugo_lab.offload import break_even, predict, host_profile\n"
                    "from eugo_lab.offload.cell import device_profile\n"
                    "from eugo_lab.offload.cost import sample_operation\n"
                    "host, gpu = host_profile(), device_profile()\n")
#: The reference's scan with the chain's length written in (``{k}`` calls), up to 2 ** (``stop`` - 1) elements.
SCAN = ('p = exercises.problem("gpu-break-even")\nsize = None\nfor e in range(10, {stop}):\n    n = 1 << e\n'
        '    first = predict(sample_operation("elementwise", n, work="special", name="power"), host, gpu)\n'
        '    then = predict(sample_operation("elementwise", n, work="special", name="power", resident=True), '
        'host, gpu)\n'
        "    if first.gpu_s + ({k} - 1) * then.gpu_s < {k} * first.cpu_s:\n        size = n\n        break\n")


@pytest.fixture
def fixed_host(monkeypatch):
    """The cell and the checker price with one host profile of round numbers, not this busy machine's measurements."""
    import eugo_lab.offload
    from eugo_lab.offload import profiles
    from tests._offload import HOST

    monkeypatch.setattr(profiles, "host_profile", lambda: HOST)
    monkeypatch.setattr(eugo_lab.offload, "host_profile", lambda: HOST, raising=False)  # the lazy name, once read
    return HOST


def _break_even(cell: str):
    return run_exercise("gpu-break-even", cell, setup=BREAK_EVEN_SETUP, line="--no-live")


def _break_even_hidden_values(host) -> tuple:
    from eugo_lab.exercises.catalog import gpu as ex
    from eugo_lab.offload.cell import device_profile

    h = hidden("gpu-break-even")
    answer = ex.chain_break_even(host, device_profile(), h.calls)
    return (f"{h.calls} calls in a row", f"{h.calls} np.power", f"{answer:,}", f"{1 << (answer - 1).bit_length():,}")


def test_break_even_the_lesson_s_four_calls_and_a_hidden_shorter_chain(fixed_host):
    from eugo_lab.exercises.catalog import gpu as ex
    from eugo_lab.offload.cell import device_profile

    p, h = lesson("gpu-break-even"), hidden("gpu-break-even")
    assert p.calls == 4 and h.calls == 1
    # on this host the hidden chain's answer is another power of two's: four calls written in do not fit it
    gpu = device_profile()
    lesson_scan = 1 << (ex.chain_break_even(fixed_host, gpu, 4) - 1).bit_length()
    assert not ex.chain_wins(lesson_scan, fixed_host, gpu, h.calls)


def test_break_even_the_lesson_s_reference_passes_on_both_cases(fixed_host):
    text = passed_twice(_break_even(notebook_cell(BREAK_EVEN_LESSON, "solution")))
    assert "the model runs 4 np.power calls in a row on the GPU from your size on" in text, text
    assert "16,384 is a size this cell's own predictions priced" in text, text
    never_shown(text, *_break_even_hidden_values(fixed_host))


@pytest.mark.parametrize("cell", [
    SCAN.format(stop=31, k="4"),  # the lesson's reference as it was: three calls on the device, four on the CPU
    # one prediction per size, its launch and kernel counted four times
    ('p = exercises.problem("gpu-break-even")\nsize = None\nfor e in range(10, 31):\n'
     '    est = predict(sample_operation("elementwise", 1 << e, work="special", name="power"), host, gpu)\n'
     "    if est.h2d_s + 4 * (est.launch_s + est.kernel_s) < 4 * est.cpu_s:\n        size = 1 << e\n        break\n"),
], ids=["the-reference-with-four-written-in", "one-prediction-with-four-written-in"])
def test_break_even_four_calls_written_in_do_not_carry_over(cell, fixed_host):
    text = carried_over(_break_even(cell))
    never_shown(text, *_break_even_hidden_values(fixed_host))


#: Honest cells unlike the reference: each passes on both cases.
BREAK_EVEN_HONEST = [
    # one prediction per size: its copy counted once, its launch and kernel p.calls times
    ("one-prediction-per-size",
     'p = exercises.problem("gpu-break-even")\nn, size = 512, None\nwhile size is None and n < 2 ** 31:\n'
     "    n *= 2\n"
     '    est = predict(sample_operation("elementwise", n, work="special", name="power"), host, gpu)\n'
     "    if est.h2d_s + p.calls * (est.launch_s + est.kernel_s) < p.calls * est.cpu_s:\n        size = n\n"),
    # the chain priced call by call, summed, and the scan as a list of sizes
    ("call-by-call-over-a-list-of-sizes",
     'p = exercises.problem("gpu-break-even")\n'
     "def chain(n):\n"
     '    calls = [predict(sample_operation("elementwise", n, work="special", name="power", resident=k > 0), '
     "host, gpu) for k in range(p.calls)]\n"
     "    return sum(c.gpu_s for c in calls) < sum(c.cpu_s for c in calls)\n"
     "wins = [n for n in (2 ** e for e in range(10, 31)) if chain(n)]\nsize = wins[0] if wins else None\n"),
]


@pytest.mark.parametrize("cell", [c for _, c in BREAK_EVEN_HONEST], ids=[i for i, _ in BREAK_EVEN_HONEST])
def test_break_even_honest_cells_pass_on_both_cases(cell, fixed_host):
    passed_twice(_break_even(cell))


def test_break_even_a_scan_that_stops_short_of_the_hidden_answer_is_told_so(fixed_host):
    # Every input taken from p, but the loop ends at the lesson's answer; the shorter hidden chain wins later.
    v = _break_even(SCAN.format(stop=15, k="p.calls"))
    text = v.to_text()
    assert not v.passed and v.mistake == "none-found", text
    assert "there your loop found no size where the calls won on the GPU among the sizes it tried" in text, text
    assert "a value is written into the cell" not in text, text
    never_shown(text, *_break_even_hidden_values(fixed_host))


@pytest.mark.parametrize(("cell", "mistake", "says"), [
    (notebook_cell(BREAK_EVEN_LESSON, "starter"), "every-call-copies",
     "at your size a single call already pays for its own copy"),
    (SCAN.format(stop=31, k="p.calls").replace("size = n\n", "size = n // 2\n"), "too-small",
     "elements the model still runs the 4 calls faster on the CPU"),
], ids=["the-starter", "one-step-short"])
def test_break_even_named_mistakes_are_still_named(cell, mistake, says, fixed_host):
    not_yet(_break_even(cell), mistake, says)
