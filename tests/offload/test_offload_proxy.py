"""The proxy against plain NumPy and against the fake device: same results, counted transfers, fallbacks."""

from __future__ import annotations

import pickle

import numpy
import pytest
from _offload import HOST, Shell

from eugo_lab.offload import cell, dispatch
from eugo_lab.offload.devices import FakeDevice, FakeDeviceArray
from eugo_lab.offload.profiles import published
from eugo_lab.offload.proxy import AccelArray, ProxyModule, ProxyUfunc

H100, T4 = published("h100"), published("t4")

CELLS = {
    "ufuncs": "a = np.linspace(0, 1, 50_000)\nr = np.sqrt(a) * np.exp(-a) + np.sin(a) ** 2 - 1 / (1 + a)",
    "comparisons": "a = np.arange(-500, 500)\nr = (a > 3) & (a % 7 == 0) | np.isnan(a * 1.0)",
    "reductions": ("a = np.arange(60_000.0).reshape(300, 200)\n"
                   "r = [a.sum(), a.sum(axis=0), np.mean(a, axis=1), a.max(), np.std(a), a.argmax(),\n"
                   "     np.sum(a, axis=1, keepdims=True), np.add.reduce(a, axis=1), a.min(axis=(0, 1))]"),
    "matmul": ("x = np.random.default_rng(1).random((150, 80))\ny = np.random.default_rng(2).random((80, 60))\n"
               "r = [x @ y, np.dot(x, y), np.matmul(x[0], y), x.T @ x, np.dot(x[0], x[1])]"),
    "broadcasting": "a = np.arange(12.0).reshape(3, 4)\nb = np.arange(4.0)\nr = [a + b, a * b[None, :], a - a[:, :1]]",
    "slicing": ("a = np.arange(100_000.0)\nb = a[10:-10:3] * 2\nc = a[::-1][:5]\nd = a.reshape(1000, 100)[5, 7:9]\n"
                "e = a[a > 99_990]\nf = a[[1, 5, 9]]\nr = [b, c, d, e, f, a[3], a[-1]]"),
    "inplace": ("a = np.zeros(100_000)\na += 1\na *= np.arange(100_000.0)\nv = a[10:20]\nv -= 5\n"
                "a[0] = 42\nb = a * 2\na[1] = -1\nc = a * 2\nnp.multiply(a, 3, out=a)\nr = [a, b, c, v]"),
    "mixed": ("import numpy\nplain = numpy.arange(30_000.0)\na = np.ones(30_000)\n"
              "r = [a + plain, plain + a, plain * a.sum(), numpy.add(plain, a), numpy.sum(a),\n"
              "     np.where(a > 0, plain, 0), np.concatenate([a, plain]), np.clip(plain, 5, 10)]"),
    "dtypes": ("a = np.arange(20_000, dtype=np.int32)\nb = a.astype(np.float32) / 3\nc = (a * 2) // 3\n"
               "r = [b, c, a.sum(), b.mean(), np.float32(2) * b, a.dtype.name]"),
    "loop": "a = np.ones(10)\nfor i in range(50):\n    a = a * 1.01 + i\nr = a",
}


def _run(src, mode="auto", device=None, profile=H100):
    sh = Shell()
    code = compile(src, "<cell>", "exec")
    if device is not None:
        with cell.use_device(device):
            cell.run(sh, mode, exec, code, sh.user_global_ns, sh.user_ns)
    else:
        cell.run(sh, mode, exec, code, sh.user_global_ns, sh.user_ns)
    return sh.user_ns, cell.last_ledger()


def _reference(src):
    ns = {"np": numpy}
    exec(compile(src, "<cell>", "exec"), ns)
    return ns


def _same(x, y):
    if isinstance(x, list):
        assert isinstance(y, list) and len(x) == len(y)
        for a, b in zip(x, y):
            _same(a, b)
        return
    assert not isinstance(x, AccelArray), "a proxy left the cell"
    assert type(x) is type(y), (type(x), type(y))
    if isinstance(y, numpy.ndarray):
        assert x.dtype == y.dtype and x.shape == y.shape
        numpy.testing.assert_array_equal(x, y)
    else:
        assert x == y


@pytest.fixture(autouse=True)
def fixed_host(monkeypatch):
    # Decisions depend on the host: a fixed profile makes them the same on every machine.
    monkeypatch.setattr(dispatch.Offload, "host", property(lambda self: HOST))


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("how", ["predictions", "fake-h100", "fake-t4", "fake-on", "fake-failing"])
def test_results_identical_to_numpy(name, how):
    src = "import numpy as np\n" + CELLS[name]
    device = {"predictions": None, "fake-h100": FakeDevice(H100), "fake-t4": FakeDevice(T4),
              "fake-on": FakeDevice(H100), "fake-failing": FakeDevice(H100, fail=lambda op: True)}[how]
    ns, ledger = _run(src, "on" if how == "fake-on" else "auto", device)
    ref = _reference(CELLS[name])
    for var in ref:
        if var in ("np", "__builtins__") or var.startswith("_"):
            continue
        _same(ns[var], ref[var])
    assert ns["np"] is numpy
    if how == "fake-failing":
        assert ledger.n_ops("gpu") == 0


def test_the_fake_device_counts_what_the_ledger_says():
    dev = FakeDevice(H100)
    src = ("import numpy as np\na = np.ones(1_000_000)\nb = np.ones(1_000_000)\nc = a + b\nd = c * a\n"
           "e = d.sum()\nsmall = np.ones(4) + 1\n")
    ns, ledger = _run(src, device=dev)
    rows = {r.op: r for r in ledger.ops if r.shapes != ((4,),)}
    assert rows["add"].where == "gpu" and rows["add"].h2d_bytes == 16_000_000  # both operands moved
    assert rows["multiply"].where == "gpu" and rows["multiply"].h2d_bytes == 0  # both already there
    assert rows["sum"].where == "gpu" and rows["sum"].h2d_bytes == 0
    assert rows["add"].predicted_gpu_s > rows["multiply"].predicted_gpu_s  # resident data costs less
    small = [r for r in ledger.rows if r.op == "add" and r.shapes == ((4,),)][0]
    assert (small.where, small.why) == ("cpu", "too small")
    assert dev.h2d_count == 2 and dev.h2d_bytes == 16_000_000
    # c, d and e leave the cell: they come back once each, and only then
    assert dev.d2h_count == 3 and dev.d2h_bytes == 16_000_008
    assert sum(r.h2d_bytes for r in ledger.rows) == dev.h2d_bytes
    assert sum(r.d2h_bytes for r in ledger.rows) == dev.d2h_bytes
    assert ledger.summary() == "4 ops: 3 on GPU, 1 on CPU (1 too small), 32.0 MB moved"
    assert float(ns["e"]) == 2_000_000.0 and type(ns["e"]) is numpy.float64


def test_modelled_latency_shows_in_device_timings():
    dev = FakeDevice(T4)
    _, ledger = _run("import numpy as np\na = np.ones(2_000_000, dtype=np.float32)\nb = np.exp(a)\n", device=dev)
    (row,) = [r for r in ledger.rows if r.op == "exp"]
    assert row.where == "gpu" and row.measured_where == "gpu"
    modelled = T4.transfer_s + 8e6 / (T4.link_bw * T4.link_eff) + T4.launch_s
    assert row.measured_s >= modelled  # NumPy's own time plus the modelled transfer and launch


def test_a_failing_device_falls_back_to_numpy_and_says_why():
    dev = FakeDevice(H100, fail={"matmul"})
    ns, ledger = _run("import numpy as np\nx = np.ones((500, 500))\ny = x @ x\nz = x + 1\n", device=dev)
    mm = [r for r in ledger.rows if r.op == "matmul"][0]
    assert (mm.where, mm.why) == ("cpu", "fallback")
    assert mm.fallback == "FakeDeviceError: out of memory in matmul (fake device told to fail)"
    assert "GPU failed (FakeDeviceError" in mm.reason
    numpy.testing.assert_array_equal(ns["y"], numpy.full((500, 500), 500.0))
    assert "1 fallback: FakeDeviceError: out of memory in matmul" in ledger.summary()


def test_gpu_on_forces_the_device_even_for_tiny_arrays():
    dev = FakeDevice(H100)
    _, ledger = _run("import numpy as np\na = np.ones(3) + 1\n", "on", dev)
    (row,) = ledger.ops
    assert (row.where, row.why) == ("gpu", "forced") and row.reason.startswith("gpu: --gpu on (predicted ")


def test_gpu_on_without_a_gpu_is_a_clear_error(monkeypatch):
    from eugo_lab.hardware import gpus as detect
    from eugo_lab.offload.devices import NoDeviceError

    monkeypatch.setattr(cell, "detect_gpus", lambda: detect.Detection((), "NVML could not start"))
    with pytest.raises(NoDeviceError, match="--gpu on needs an NVIDIA GPU, and there is none here"):
        _run("import numpy as np\n", "on")


def test_predictions_track_where_data_would_be():
    _, ledger = _run("import numpy as np\na = np.ones(1_000_000)\nb = a * 2\nc = b + a\nprint(c[0])\n")
    assert ledger.predictions_only
    ops = {r.op: r for r in ledger.ops}
    assert ops["multiply"].h2d_bytes == 8_000_000 and ops["add"].h2d_bytes == 0
    leaving = [r for r in ledger.rows if r.is_transfer]
    assert {r.why for r in leaving} == {"left the cell"}  # b and c; a still has its host copy
    assert sum(r.d2h_bytes for r in leaving) == 16_000_000


def test_off_and_no_numpy_change_nothing():
    ns, ledger = _run("import numpy as np\na = np.ones(3)\n", "off")
    assert ledger is None and ns["np"] is numpy and type(ns["a"]) is numpy.ndarray
    ns, ledger = _run("x = 1\n")
    assert ledger is not None and ledger.rows == []


def test_the_global_numpy_module_is_never_modified():
    before = {k: v for k, v in vars(numpy).items()}
    ns, _ = _run("import numpy as np\nfrom numpy import sqrt, linalg\nimport numpy.linalg\n"
                 "seen = (type(np).__name__, type(sqrt).__name__, type(linalg).__name__, type(numpy.linalg).__name__)\n"
                 "a = sqrt(np.ones(4)) + np.linalg.norm(np.ones(4))\n")
    assert ns["seen"] == ("ProxyModule", "ProxyUfunc", "ProxyModule", "ProxyModule")
    for k, v in before.items():
        assert vars(numpy)[k] is v, k
    assert not any(isinstance(v, (ProxyModule, ProxyUfunc, AccelArray)) for v in vars(numpy).values())
    assert numpy.add(numpy.ones(2), 1).__class__ is numpy.ndarray


def test_other_modules_keep_the_real_numpy():
    ns, _ = _run("import numpy as np\nimport json\nimport pandas as pd\ns = pd.Series([1.0, 2.0])\nv = s.values\n"
                 "inside = type(pd.Series([1.0]).values).__name__\n")
    assert ns["inside"] == "ndarray"


def test_proxies_and_the_proxy_module_pickle_as_plain_numpy():
    s = dispatch.offload("auto", FakeDevice(H100), host=HOST)
    with s.activate():
        a = s.wrap_host(numpy.arange(4.0))
        b = a * 2  # 4 elements: on the CPU
        dev = s._new(dev=FakeDeviceArray(numpy.arange(3.0)))
        mod = s.module(numpy)
        assert type(pickle.loads(pickle.dumps(b))) is numpy.ndarray
        assert pickle.loads(pickle.dumps(dev)).tolist() == [0.0, 1.0, 2.0]
        assert pickle.loads(pickle.dumps(mod)) is numpy
    s.close()


def test_functions_defined_in_the_cell_get_real_numpy_afterwards():
    ns, _ = _run("def f():\n    import numpy as np\n    return np\nduring = type(f()).__name__\n")
    assert ns["during"] == "ProxyModule"
    assert ns["f"]() is numpy


def test_a_name_bound_to_numpy_before_the_cell_points_at_the_proxy_during_it():
    sh = Shell()
    sh.user_ns["np"] = numpy
    code = compile("a = np.ones(5) + 1\nkind = type(np).__name__\n", "<cell>", "exec")
    cell.run(sh, "auto", exec, code, sh.user_ns, sh.user_ns)
    assert sh.user_ns["kind"] == "ProxyModule" and sh.user_ns["np"] is numpy
    assert type(sh.user_ns["a"]) is numpy.ndarray


def test_an_exception_in_the_cell_restores_everything():
    sh = Shell()
    code = compile("import numpy as np\na = np.ones(3)\nraise KeyError('boom')\n", "<cell>", "exec")
    with pytest.raises(KeyError):
        cell.run(sh, "auto", exec, code, sh.user_ns, sh.user_ns)
    assert sh.user_ns["np"] is numpy and type(sh.user_ns["a"]) is numpy.ndarray
    assert sh.user_ns["__builtins__"] is __builtins__
    assert dispatch.active() is None


def test_repr_and_python_conversions_behave_like_numpy():
    ns, _ = _run("import numpy as np\na = np.arange(3.0)\ntext = (repr(a), str(a), repr(a.sum()), f'{a.sum():.1f}', "
                 "float(a[1]), int(a[2]), bool(a.any()), len(a), list(a.tolist()), a.shape, a.ndim, a.size)\n",
                 device=FakeDevice(H100))
    ref = numpy.arange(3.0)
    assert ns["text"] == (repr(ref), str(ref), repr(ref.sum()), "3.0", 1.0, 2, True, 3, [0.0, 1.0, 2.0], (3,), 1, 3)


def test_cached_copies_never_go_stale_after_writes_through_views():
    dev = FakeDevice(H100)
    src = ("import numpy as np\n"
           "a = np.ones(1_000_000)\nb = a * 2\n"  # a gets a device copy; b lives on the device
           "a[0] = 5\nc = a * 2\n"  # a host write: a's device copy is stale, c must see the 5
           "s1 = str(b[:3])\nw = b[:10]\nw += 1\ns2 = str(b[:3])\n"  # a device write through a view of b
           "h = np.asarray(b)\nh[1] = -7\nd = b * 1\n")  # written through the exposed host array
    ns, _ = _run(src, device=dev)
    assert ns["c"][0] == 10.0 and ns["c"][1] == 2.0
    assert ns["s1"] == "[2. 2. 2.]" and ns["s2"] == "[3. 3. 3.]"
    assert ns["d"][1] == -7.0 and ns["d"][0] == 3.0 and ns["b"][1] == -7.0


def test_a_failed_operation_is_not_retried_on_the_device_in_the_same_cell():
    calls = []
    dev = FakeDevice(H100, fail=lambda op: calls.append(op) or op == "add")
    _, ledger = _run("import numpy as np\na = np.ones(1_000_000)\nfor _ in range(5):\n    b = a + a\n", device=dev)
    rows = [r for r in ledger.ops if r.op == "add"]
    assert {(r.where, r.why) for r in rows} == {("cpu", "fallback")} and sum(r.count for r in rows) == 5
    assert calls.count("add") == 1
    assert ledger.summary().startswith("5 ops: 0 on GPU, 5 on CPU (5 fallback: FakeDeviceError: out of memory in add")


def test_an_operand_given_twice_crosses_once_predicted_and_on_the_device():
    src = "import numpy as np\na = np.random.default_rng(0).random(400_000)\nb = a * a\nc = np.sqrt(b)\n"
    _, predicted = _run(src)
    _, fake = _run(src, device=FakeDevice(H100))
    for ledger in (predicted, fake):
        (mul,) = [r for r in ledger.ops if r.op == "multiply"]
        assert mul.h2d_bytes == 400_000 * 8  # one copy of a, not two
    assert predicted.moved == fake.moved


def test_writing_an_element_of_a_value_left_on_the_device_moves_nothing_back():
    src = "import numpy as np\na = np.random.default_rng(0).random(400_000)\n" \
          "b = np.sqrt(a)\nb[0] = 1.0\nc = np.sqrt(b)"
    _, predicted = _run(src)
    _, fake = _run(src, device=FakeDevice(H100))
    for ledger in (predicted, fake):
        assert not [r for r in ledger.rows if r.is_transfer and r.why == "host needed"]
        assert sum(r.h2d_bytes for r in ledger.ops) == 400_000 * 8  # a, once; b stayed on the device
