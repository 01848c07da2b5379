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
from eugo_lab.exercises import problems
from eugo_lab.offload import kernels
from tests._exercise_cells import code_in, hint_code, hint_words, run_exercise, shell

kernels.cuda()  # before anything imports numba.cuda: the simulator where there is no GPU


@pytest.fixture(autouse=True, scope="module")
def _stop_workers():
    yield
    hpc.shutdown()


# -- gpu-break-even -------------------------------------------------------------------------------------
BREAK_EVEN_SETUP = """
from eugo_lab import exercises
from eugo_lab.offload import break_even, predict, host_profile
from eugo_lab.offload.cell import device_profile
from eugo_lab.offload.cost import sample_operation
host, gpu = host_profile(), device_profile()
"""
#: The lesson's scan for one call (the starter): the first size where a single np.power from host memory wins.
ONE_CALL = """
size = None
for e in range(10, 31):
    n = 1 << e
    op = sample_operation("elementwise", n, work="special", name="power", resident={resident})
    if predict(op, host, gpu).where == "gpu":
        size = n{step_back}
        break
"""
CHAIN_REFERENCE = """
p = exercises.problem("gpu-break-even")
size = None
for e in range(10, {stop}):
    n = 1 << e
    first = predict(sample_operation("elementwise", n, work="special", name="power"), host, gpu)
    then = predict(sample_operation("elementwise", n, work="special", name="power", resident=True), host, gpu)
    if first.gpu_s + (p.calls - 1) * then.gpu_s < p.calls * first.cpu_s:
        size = n
        break
"""
#: Another correct pricing: one prediction per size, its copy counted once and its launch and kernel four times.
HONEST_CHAIN = """
p = exercises.problem("gpu-break-even")
n, size = 512, None
while size is None and n < 2 ** 31:
    n *= 2
    est = predict(sample_operation("elementwise", n, work="special", name="power"), host, gpu)
    gpu_total = est.h2d_s + p.calls * (est.launch_s + est.kernel_s)
    if gpu_total < p.calls * est.cpu_s:
        size = n
"""
#: (id, cell, setup after BREAK_EVEN_SETUP, passed, what the verdict must say, mistake)
BREAK_EVEN_CASES = [
    ("reference", CHAIN_REFERENCE.format(stop=31), "", True,
     "is a size this cell's own predictions priced (2 calls of predict() at that size, the copy of x and y priced)",
     None),
    ("honest-one-prediction-per-size", HONEST_CHAIN, "", True,
     "is a size this cell's own predictions priced (1 call of predict() at that size", None),
    ("starter-one-call", ONE_CALL.format(resident=False, step_back=""), "", False,
     "at your size a single call already pays for its own copy", "every-call-copies"),
    ("data-already-on-the-device", ONE_CALL.format(resident=True, step_back=""), "", False,
     "the cell priced np.power only with x and y already on the device", "resident"),
    ("one-step-short", CHAIN_REFERENCE.format(stop=31).replace("size = n\n", "size = n // 2\n"), "", False,
     "elements the model still runs the 4 calls faster on the CPU", "too-small"),
    ("scan-too-short", CHAIN_REFERENCE.format(stop=12), "", False, "found no size where the 4 calls won",
     "none-found"),
    ("not-a-number", "size = 'about eight thousand'\n", "", False, "should be a number of elements",
     "not-a-number"),
    # shortcuts: a number typed in (beside a decoy call of the model), break_even's answer for one call, and the
    # answer a plain earlier cell found (its predictions are not this cell's)
    ("shortcut-typed", "size = 8192\n", "", False,
     "`size` is 8,192, and no prediction in this cell gave it: the cell did not ask the cost model at all", "typed"),
    ("shortcut-typed-beside-a-decoy", "break_even('elementwise', host, gpu, work='special', name='power')\n"
     "size = 8192\n", "", False, "the cell asked the cost model 1 time, never about 8,192 elements", "typed"),
    ("shortcut-break-even-of-one-call", "size = break_even('elementwise', host, gpu, work='special', name='power', "
     "resident=True)\n", "", False,
     "`size` is what break_even() returned for a single call with x and y already on the device", "one-call"),
    ("shortcut-earlier-cell", "size = found\n", CHAIN_REFERENCE.format(stop=31).replace("size", "found"), False,
     "and no prediction in this cell gave it", "typed"),
]


@pytest.fixture
def fixed_host(monkeypatch):
    """The lesson's cell and the checker both price with one host profile of round numbers.

    Measured here, the host's speed sets where the GPU starts to win: on a busy machine the CPU side reads
    slower and a scan that stops at 2,048 elements already finds a size, so the verdicts would follow the
    machine's load. The checker reads the host profile the cell used, whatever it is; the test fixes it.
    """
    import eugo_lab.offload
    from eugo_lab.offload import profiles
    from tests._offload import HOST

    monkeypatch.setattr(profiles, "host_profile", lambda: HOST)
    monkeypatch.setattr(eugo_lab.offload, "host_profile", lambda: HOST, raising=False)  # the lazy name, once read


@pytest.mark.parametrize("cell, setup, passed, says, mistake", [c[1:] for c in BREAK_EVEN_CASES],
                         ids=[c[0] for c in BREAK_EVEN_CASES])
def test_break_even_cases(cell, setup, passed, says, mistake, fixed_host):
    v = run_exercise("gpu-break-even", cell, BREAK_EVEN_SETUP + setup, line="--no-live")
    text = v.to_text()
    assert v.passed is passed, text
    assert says in text, text
    assert v.mistake == mistake
    if passed:
        assert "published figures, a prediction" in text  # no GPU here: the profile is named as such
    else:
        assert code_in(text) == [], text
        assert hint_words(v) and hint_code(v)


@pytest.mark.parametrize("cell, setup", [c[1:3] for c in BREAK_EVEN_CASES if not c[3]],
                         ids=[c[0] for c in BREAK_EVEN_CASES if not c[3]])
def test_a_break_even_not_yet_never_states_the_models_sizes(cell, setup, fixed_host):
    """The model's break-even sizes (four calls, one call, one call on the device) appear in a pass only."""
    from eugo_lab.exercises.catalog import gpu as ex
    from eugo_lab.offload import profiles
    from eugo_lab.offload.cell import device_profile

    v = run_exercise("gpu-break-even", cell, BREAK_EVEN_SETUP + setup, line="--no-live")
    assert not v.passed, v.to_text()
    host, gpu = profiles.host_profile(), device_profile()
    answers = {ex.chain_break_even(host, gpu), ex._one_call(host, gpu, False), ex._one_call(host, gpu, True)}
    theirs = shell().user_ns.get("size")  # the learner's own size may be echoed back: it is not the model's
    for n in answers - {None, theirs}:
        for text in (v.to_text(), v.to_text(precise=True)):
            assert f"{n:,}" not in text and str(n) not in text, f"the model's {n:,} in\n{text}"


@pytest.fixture
def fast_host(monkeypatch):
    """A host whose np.power is so fast that the model never runs the four calls on the GPU: the answer is None."""
    from eugo_lab.offload import profiles

    fake = dataclasses.replace(profiles.host_profile(), special_rate=1e18, special_costs=(), mem_bw=1e18,
                               cache_bw=1e18)
    monkeypatch.setattr(profiles, "host_profile", lambda: fake)
    return fake


def test_where_the_answer_is_never_a_not_yet_does_not_say_so(fast_host):
    from eugo_lab.exercises.catalog import gpu as ex
    from eugo_lab.offload.cell import device_profile

    assert ex.chain_break_even(fast_host, device_profile()) is None
    cell = "est = predict(sample_operation('elementwise', 1 << 20, work='special', name='power'), host, gpu)\n" \
           "size = 1 << 20\n"
    v = run_exercise("gpu-break-even", cell, BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and v.mistake == "never", v.to_text()
    text = v.to_text(precise=True)
    assert "still runs the 4 calls faster on the CPU" in text, text
    for answer in ("None", "no size", "never", "every size"):
        assert answer not in text, text
    # the first tier says how to find out, not that this host's answer is "never": that is the second tier's
    assert "never" not in ex.BREAK_EVEN_HINTS["never"].change
    assert "never" in ex.BREAK_EVEN_HINTS["never"].code
    v = run_exercise("gpu-break-even", "size = None\n", BREAK_EVEN_SETUP, line="--no-live")
    assert v.passed, v.to_text()


@pytest.fixture
def cheap_power_host(monkeypatch):
    """A host whose np.power is so fast that one call never pays for its copy, while four calls in a row do."""
    from eugo_lab.offload import profiles

    # np.power at 0.3 ns an element from memory that keeps up: less than the copy of x and y over the link
    # (16 bytes at PCIe speed, ~0.5 ns), more than a quarter of it
    fake = dataclasses.replace(profiles.host_profile(), special_rate=1 / 0.3e-9, special_costs=(), mem_bw=1e12,
                               cache_bw=1e12)
    monkeypatch.setattr(profiles, "host_profile", lambda: fake)
    return fake


def test_break_even_past_the_answer_where_one_call_never_pays(cheap_power_host):
    from eugo_lab.exercises.catalog import gpu as ex
    from eugo_lab.offload.cell import device_profile

    gpu = device_profile()
    assert ex._one_call(cheap_power_host, gpu, False) is None
    expected = ex.chain_break_even(cheap_power_host, gpu)
    assert expected is not None
    past = 1 << (2 * expected).bit_length()  # a power of two at least twice the answer
    cell = f"est = predict(sample_operation('elementwise', {past}, work='special', name='power'), host, gpu)\n" \
           f"size = {past}\n"
    v = run_exercise("gpu-break-even", cell, BREAK_EVEN_SETUP, line="--no-live")
    assert not v.passed and v.mistake == "too-large", v.to_text()
    assert "already win on the GPU at half your size" in v.to_text()
    v = run_exercise("gpu-break-even", CHAIN_REFERENCE.format(stop=35), BREAK_EVEN_SETUP, line="--no-live")
    assert v.passed, v.to_text()


def test_the_recorder_keeps_the_cells_calls_and_not_the_checks():
    from eugo_lab.offload import predictions

    run_exercise("gpu-break-even", CHAIN_REFERENCE.format(stop=31), BREAK_EVEN_SETUP, line="--no-live")
    log = predictions.last_cell()
    sizes = log.sizes()
    assert sizes[0] == 1024 and all(b == 2 * a for a, b in zip(sizes, sizes[1:]))  # the cell's scan, no more
    assert len(log.predicted()) == 2 * len(sizes) and not log.scans()
    assert [c.copies for c in log.predicted(1024)] == [True, False]


# -- gpu-transfer ---------------------------------------------------------------------------------------
#: The lesson's earlier cell: the readings the checker hands out, bound to names of their own.
TRANSFER_SETUP = """
import numpy as np
from eugo_lab import exercises
p = exercises.problem("gpu-transfer")
signal, gain = p.signal, p.gain
"""
NEWTON = """
import numpy as np
from eugo_lab import exercises
p = exercises.problem("gpu-transfer")
{prelude}w = np.log1p({src})
for step in range(20):
    w = w * (1 + np.log({src}) - np.log(w)) / (1 + w)
{check}"""


def transfer(prelude: str = "", src: str = "p.signal * p.gain", check: str = "") -> str:
    return NEWTON.format(prelude=prelude, src=src, check=check)


REFERENCE = transfer("target = np.asarray(p.signal) * p.gain\n", "target")
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


#: Shortcuts: the answer computed by an earlier plain cell, a decoy loop of the right operations beside it.
EARLIER_ANSWER = TRANSFER_SETUP + """
w0 = np.log1p(signal * gain)
for _step in range(20):
    w0 = w0 * (1 + np.log(signal * gain) - np.log(w0)) / (1 + w0)
"""
DECOY = ("t = np.asarray(signal) * gain\nv = np.log1p(t)\nfor step in range(2):\n"
         "    v = v * (1 + np.log(t) - np.log(v)) / (1 + v)\n")
#: (id, cell, setup, passed, what the verdict must say, mistake), on a slow and a fast host
TRANSFER_CASES = [
    ("reference", REFERENCE, TRANSFER_SETUP, True, "all 140 operations of the loop would run on NVIDIA H100", None),
    # another correct restructuring: the product made on the host once and handed over, other names, the answer
    # handed over at the end; an earlier cell holds the same numbers, which proves nothing against it
    ("honest-product-handed-over", "import numpy as np\nt = np.asarray(signal * gain)\nguess = np.log1p(t)\n"
     "for k in range(20):\n    guess = guess * (1 + np.log(t) - np.log(guess)) / (1 + guess)\nw = guess\n",
     EARLIER_ANSWER, True, "it is the array this cell's placed operations produced", None),
    ("starter-recopies-the-product", transfer(), TRANSFER_SETUP, False,
     "`log` copied 16.0 MB to the GPU on each of its 20 calls", "recopied"),
    # the lesson's fix applied to signal alone: gain, a plain array, is copied again by every product in the loop
    ("signal-handed-over-gain-not", transfer("s = np.asarray(p.signal)\n", "s * p.gain"), TRANSFER_SETUP, False,
     "copied 16.0 MB to the GPU on each of its 20 calls", "recopied"),
    ("convergence-check-on-the-cpu", REFERENCE.rstrip("\n") + "\n    if np.allclose(w * np.exp(w), target):\n"
     "        pass\n", TRANSFER_SETUP, False, "`allclose` ran on the CPU 20 times", "dragged"),
    ("too-few-steps", REFERENCE.replace("range(20)", "range(2)"), TRANSFER_SETUP, False,
     "does not solve w * exp(w) = p.signal * p.gain, for the 2,000,000 readings of p.signal", "result"),
    # shortcuts: the earlier cell's answer itself, a view of it, a plain copy of it, each beside a decoy loop
    ("shortcut-earlier-answer", DECOY + "w = w0\n", EARLIER_ANSWER, False,
     "`w` is the array `w0` that an earlier cell computed", "copied"),
    ("shortcut-earlier-answer-view", DECOY + "w = w0[:]\n", EARLIER_ANSWER, False,
     "`w` is the array `w0` that an earlier cell computed", "copied"),
    ("shortcut-earlier-answer-copy", DECOY + "w = w0.copy()\n", EARLIER_ANSWER, False,
     "`w` is not an array this cell's placed operations produced", "copied"),
    # ... and through NumPy's own operations, which the proxy places: the chain behind `w` is one link long
    ("shortcut-earlier-answer-np-copy", DECOY + "w = np.copy(w0)\n", EARLIER_ANSWER, False,
     "`w` came out of 1 placed operation in a row", "copied"),
    ("shortcut-earlier-answer-one-step-on-it", DECOY + "w = w0 * (1 + np.log(t) - np.log(w0)) / (1 + w0)\n",
     EARLIER_ANSWER, False, "`w` came out of 6 placed operations in a row", "copied"),
]


@pytest.mark.parametrize("cell, setup, passed, says, mistake", [c[1:] for c in TRANSFER_CASES],
                         ids=[c[0] for c in TRANSFER_CASES])
def test_transfer_cases(host, cell, setup, passed, says, mistake):
    v = run_exercise("gpu-transfer", cell, setup, line=GPU_AUTO)
    text = v.to_text()
    assert v.passed is passed, text
    assert says in text, text
    assert v.mistake == mistake
    if passed:
        assert "a prediction for a named GPU profile: no GPU here" in text
    else:
        assert code_in(text) == [], text
        assert hint_words(v) and hint_code(v)


def test_transfer_hints_answer_what_happened(host):
    v = run_exercise("gpu-transfer", transfer(), TRANSFER_SETUP, line=GPU_AUTO)
    assert "np.asarray(p.signal) * p.gain" in hint_code(v)
    v = run_exercise("gpu-transfer", REFERENCE.rstrip("\n") + "\n    if np.allclose(w * np.exp(w), target):\n"
                     "        pass\n", TRANSFER_SETUP, line=GPU_AUTO)
    assert "float(np.max(np.abs(w * np.exp(w) - target)))" in hint_code(v)
    v = run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line="--no-live -w 1")
    assert not v.passed and "it ran without GPU placement" in v.to_text() and "--gpu auto" in hint_code(v)


def test_the_ledger_keeps_the_digest_of_what_the_cell_left():
    from eugo_lab.contract.digest import digest
    from eugo_lab.offload.cell import last_ledger
    from tests._exercise_cells import shell

    run_exercise("gpu-transfer", REFERENCE, TRANSFER_SETUP, line=GPU_AUTO)
    ledger, ns = last_ledger(), shell().user_ns
    assert set(ledger.left) >= {"w", "target"} and "signal" not in ledger.left
    assert ledger.left["w"] == digest(ns["w"])


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
from eugo_lab import exercises, hpc

p = exercises.problem("gpu-request")

@hpc.remote{load}
def load_tile(i, size):
    return np.arange(i * size, (i + 1) * size, dtype=np.float64) / size

@hpc.remote{request}
def tile_energy(tile):
    return float(np.sum(tile * tile))

tiles = [load_tile.remote(i, p.tile_size) for i in range(p.n_tiles)]
"""
REQUEST_REFERENCE = TILE_FN.format(load="", request="(gpus=1)") + """
try:
    results = hpc.get([tile_energy.remote(t) for t in tiles])
except hpc.ResourceRequestError:
    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])
"""
LOCAL_TILES = ("[float(np.sum((np.arange(i * p.tile_size, (i + 1) * p.tile_size) / p.tile_size) ** 2)) "
               "for i in range(p.n_tiles)]")
PLAIN = TILE_FN.format(load="", request="")
#: (id, cell, passed, what the verdict must say, mistake), run on a pool without GPU workers.
REQUEST_CASES = [
    ("reference", REQUEST_REFERENCE, True, "4 tile_energy requests for 1 GPU were refused with ResourceRequestError "
     "(no worker here has one), while the 4 load_tile tasks ran once each, holding no GPU", None),
    # another correct use of the API: the request per call with options(), the superclass caught, a dict of futures
    ("honest-options-per-call", PLAIN + """
futures = {i: tile_energy.options(gpus=1).remote(t) for i, t in enumerate(tiles)}
try:
    energies = hpc.get(list(futures.values()))
except hpc.NoWorkersError:
    energies = hpc.get([tile_energy.remote(tiles[i]) for i in futures])
results = energies
""", True, "then 4 tile_energy tasks ran on CPU workers (the trace's gpu column: no GPU held) on the tiles already "
     "loaded", None),
    ("starter-no-request", PLAIN + "results = hpc.get([tile_energy.remote(t) for t in tiles])\n", False,
     "no tile_energy task of this cell asked for a GPU", "no-gpu-asked"),
    ("uncaught-refusal", TILE_FN.format(load="", request="(gpus=1)") + "results = hpc.get([tile_energy.remote(t) "
     "for t in tiles])\n", False, "stopped with ResourceRequestError", None),
    ("no-fallback", REQUEST_REFERENCE.replace("hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])",
                                              "[]"), False,
     "does not hold the energies of the 4 tiles of p (p.n_tiles, 200,000 numbers each)", "results"),
    ("fallback-in-the-notebook", REQUEST_REFERENCE.replace(
        "hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])", LOCAL_TILES), False,
     "only 0 of the 4 tile_energy calls ran as tasks on the cluster", "local"),
    # both steps ask for a GPU: the loads are refused too, and the fallback runs everything without one
    ("both-steps-ask", TILE_FN.format(load="(gpus=1)", request="(gpus=1)") + """
try:
    results = hpc.get([tile_energy.remote(t) for t in tiles])
except hpc.ResourceRequestError:
    tiles = [load_tile.options(gpus=0).remote(i, p.tile_size) for i in range(p.n_tiles)]
    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])
""", False, "4 load_tile requests for a GPU were refused: the loading step asked for a GPU too", "over-asked"),
    # the fallback starts over: it loads every tile a second time
    ("fallback-reloads", REQUEST_REFERENCE.replace(
        "    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])",
        "    again = [load_tile.remote(i, p.tile_size) for i in range(p.n_tiles)]\n"
        "    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in again])"), False,
     "load_tile ran 8 times for 4 tiles: the fallback loaded the tiles again", "reloaded"),
    ("tiles-made-in-the-notebook", REQUEST_REFERENCE.replace(
        "tiles = [load_tile.remote(i, p.tile_size) for i in range(p.n_tiles)]",
        "tiles = [np.arange(i * 200_000, (i + 1) * 200_000, dtype=np.float64) / 200_000 for i in range(4)]"), False,
     "only 0 of the 4 load_tile calls ran as tasks on the cluster", "local"),
    # shortcut: a throwaway function makes the refused request; tile_energy itself never asks for a GPU
    ("shortcut-decoy-request", PLAIN + """
@hpc.remote(gpus=1)
def probe():
    return 0

try:
    hpc.get(probe.remote())
except hpc.ResourceRequestError:
    pass
results = hpc.get([tile_energy.remote(t) for t in tiles])
""", False, "it was made by probe, not by tile_energy: the tile_energy tasks never asked for a GPU",
     "other-function"),
    # shortcut: the energies computed in the notebook, decoy tasks beside them
    ("shortcut-driver-values", REQUEST_REFERENCE.replace(
        "    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])",
        "    hpc.get([tile_energy.options(gpus=0).remote(2 * t) for t in hpc.get(tiles)])\n"
        "    results = " + LOCAL_TILES),
     False, "`results` was not computed from the tasks' results: 0 of its 4 values are among what the 4 "
     "tile_energy tasks returned", "not-from-tasks"),
    # shortcut: the energies an earlier cell computed
    ("shortcut-earlier-cell", REQUEST_REFERENCE.replace(
        "    results = hpc.get([tile_energy.options(gpus=0).remote(t) for t in tiles])",
        "    hpc.get([tile_energy.options(gpus=0).remote(2 * t) for t in hpc.get(tiles)])\n"
        "    results = list(earlier)"),
     False, "`results` was not computed from the tasks' results", "not-from-tasks"),
]


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.delenv("EUGO_LAB_GPU_DEVICES", raising=False)
    hpc.shutdown()  # the next cell starts a pool that looks for GPUs again


@pytest.mark.parametrize("cell, passed, says, mistake", [c[1:] for c in REQUEST_CASES],
                         ids=[c[0] for c in REQUEST_CASES])
def test_request_cases_without_gpu_workers(no_gpu, cell, passed, says, mistake):
    v = run_exercise("gpu-request", cell, setup='from eugo_lab import exercises\np = exercises.problem("gpu-request")\n'
                     "earlier = " + LOCAL_TILES.replace("np.", "__import__('numpy').") + "\n")
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
    assert "the 4 load_tile tasks ran once each, holding no GPU" in text
    assert "no GPU was found behind the named device (4 tasks read none), so the energies ran on the CPU" in text
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
    v = run_exercise("gpu-request", PLAIN + "results = hpc.get([tile_energy.remote(t) for t in tiles])\n")
    assert not v.passed and "4 of the 4 tile_energy tasks ran on workers without a GPU" in v.to_text()
    assert v.mistake == "no-gpu-asked"


def test_request_on_gpu_workers_where_the_loads_hold_the_gpu_too_is_not_yet(named_gpu):
    cell = TILE_FN.format(load="(gpus=1)", request="(gpus=1)") + \
        "results = hpc.get([tile_energy.remote(t) for t in tiles])\n"
    v = run_exercise("gpu-request", cell)
    assert not v.passed and v.mistake == "over-asked", v.to_text()
    assert "4 load_tile tasks held a GPU: the loading step asked for a GPU too" in v.to_text()


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
    # as many elements as threads: one each, no step taken, so no grid-stride loop is claimed (the starter too);
    # the hidden case, more elements than its threads, then finds the starter out
    from eugo_lab.cellrun import exercise as exercise_cell

    firsts = []
    real = exercise_cell.problems.checked_again
    monkeypatch.setattr(exercise_cell.problems, "checked_again", lambda first, *rest: firsts.append(first) or
                        real(first, *rest))
    monkeypatch.setattr(gpu, "CHECK_N", 64)
    starter = "    i = cuda.grid(1)\n    if i < x.shape[0]:\n        out[i] = x[i] * x[i]"
    v = run_exercise("grid-stride", KERNEL.format(body=starter), line="--no-live")
    [first] = firsts
    assert first.passed and "all 64 threads did 1 element" in first.to_text()
    assert "(grid-stride loop)" not in first.to_text() and "stepping" not in first.to_text()
    assert not v.passed and v.mistake == problems.CARRY_OVER, v.to_text()


def test_break_even_measured_line_times_both_sides_on_a_device():
    # On a GPU the check adds measured times at the learner's size; the fake device runs the same path here.
    from eugo_lab.exercises.catalog import gpu
    from eugo_lab.offload.devices import FakeDevice
    from eugo_lab.offload.profiles import published

    line = gpu._measured_line(10_000, FakeDevice(published("h100")))
    assert line.startswith("measured at 10,000: 4 calls on the CPU ") and "with the copies to the device" in line
