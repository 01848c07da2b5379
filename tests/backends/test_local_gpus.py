"""GPU workers of the local pool, on a machine without a GPU: devices named by ``hpc.init(gpus=...)``.

The pool really starts one worker per named device with ``CUDA_VISIBLE_DEVICES`` set to it
(no device stands behind it here, so the tasks read the environment rather than use CUDA;
``tests/offload/test_offload_gpu.py`` checks the same on a real GPU). Everything else is the real pool:
scheduling, the trace's ``gpu`` column, the errors.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

import pytest

from eugo_lab import hpc
from eugo_lab.backends import local_gpus
from eugo_lab.hpc import session


def _seen() -> tuple[str | None, str | None, int]:
    """``CUDA_VISIBLE_DEVICES`` as Python and as C (what CUDA's getenv reads) see it, and the pid."""
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    raw = libc.getenv(b"CUDA_VISIBLE_DEVICES")
    return os.environ.get("CUDA_VISIBLE_DEVICES"), raw.decode() if raw is not None else None, os.getpid()


seen = hpc.remote(_seen)
seen_gpu = hpc.remote(gpus=1)(_seen)


@hpc.remote(gpus=1)
def held(seconds: float) -> tuple[str | None, int]:
    time.sleep(seconds)
    return os.environ.get("CUDA_VISIBLE_DEVICES"), os.getpid()


@hpc.remote
def cpu_nap(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _pids() -> dict[int, int]:
    return {w.index: w.pid for w in session.current().backend.workers()}


def _replaced(index: int, old_pid: int, timeout: float = 20.0) -> int:
    """The pid of worker ``index`` once a new process stands in for ``old_pid``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = _pids().get(index)
        if pid is not None and pid != old_pid:
            return pid
        time.sleep(0.02)
    raise AssertionError(f"worker {index} was not replaced within {timeout} s")


@pytest.mark.parametrize("start", ["forked", "spawned"])
def test_each_gpu_worker_sees_only_its_device_and_cpu_workers_see_none(start, monkeypatch):
    from eugo_lab.backends import local_spawn

    if start == "spawned":  # fresh interpreters, as when no template can start: the same environment
        monkeypatch.setattr(local_spawn, "USE_TEMPLATE", False)
    info = hpc.init(workers=3, gpus=[0, 1])
    assert info.workers == 3 and info.gpus == 2 and info.gpu_workers == {0: 0, 1: 1}
    assert "gpu_workers=[worker 0: GPU 0, worker 1: GPU 1]" in repr(info)
    assert [(w.index, w.gpu) for w in sorted(session.current().backend.workers(), key=lambda w: w.index)] == \
        [(0, 0), (1, 1), (2, -1)]
    pids = _pids()
    by_pid = {pid: (py, c) for py, c, pid in hpc.get([seen_gpu.remote() for _ in range(6)])}
    assert by_pid == {pids[0]: ("0", "0"), pids[1]: ("1", "1")}  # Python and C agree: CUDA would see it
    # CPU tasks: the CPU worker sees no GPU at all (an empty list hides every device from CUDA)
    cpu_seen = {pid: (py, c) for py, c, pid in hpc.get([seen.remote() for _ in range(10)])}
    assert cpu_seen[pids[2]] == ("", "")
    # forked from the template (as CPU workers are), or spawned
    assert (session.current().backend.template_pid() is not None) == (start == "forked")


def test_gpu_tasks_run_only_on_gpu_workers_queue_when_busy_and_the_trace_says_which_gpu():
    hpc.init(workers=3, gpus=[0, 1])
    pids = _pids()
    with hpc.trace() as t:
        gpu_futs = [held.remote(0.15) for _ in range(6)]
        cpu_futs = [cpu_nap.remote(0.01) for _ in range(6)]
        results = hpc.get(gpu_futs)
        hpc.get(cpu_futs)
    assert {pid for _, pid in results} == {pids[0], pids[1]}
    assert all(cvd == {pids[0]: "0", pids[1]: "1"}[pid] for cvd, pid in results)
    df = t.to_dataframe()
    g = df[df["function"] == "held"]
    assert set(g["worker"]) == {0, 1} and (g["gpu"] == g["worker"]).all()  # worker i holds GPU i
    assert (df[df["function"] == "cpu_nap"]["gpu"] == -1).all()
    # six GPU tasks, two GPU workers: never more than two ran at once (the others waited in the queue)
    spans = sorted(zip(g["start"], g["end"]))
    assert max(sum(s <= a < e for s, e in spans) for a, _ in spans) <= 2
    assert t.gpu_tasks() == {0: int((g["gpu"] == 0).sum()), 1: int((g["gpu"] == 1).sum())}
    assert sum(t.gpu_tasks().values()) == 6
    # the saved trace keeps the column
    from eugo_lab.tracing.trace import Trace

    assert Trace.from_dict(t.to_dict()).gpu.tolist() == t.gpu.tolist()


def test_cpu_tasks_prefer_cpu_workers():
    hpc.init(workers=3, gpus=[0, 1])
    pids = _pids()
    # two CPU tasks at a time, one CPU worker: the GPU workers are idle, so they take the overflow,
    # but a lone task goes to the CPU worker
    assert hpc.get(cpu_nap.remote(0)) == pids[2]
    ran = set(hpc.get([cpu_nap.remote(0.2) for _ in range(3)]))
    assert pids[2] in ran and len(ran) == 3


def test_devices_from_the_environment_variable_and_a_replaced_worker_keeps_its_device(monkeypatch):
    monkeypatch.setenv("EUGO_LAB_GPU_DEVICES", "1")
    info = hpc.init(workers=2)
    assert info.gpu_workers == {0: 1}
    before = _pids()
    (cvd, _, pid), = hpc.get([seen_gpu.remote()])
    assert (cvd, pid) == ("1", before[0])
    os.kill(before[0], signal.SIGKILL)
    new = _replaced(0, before[0])
    with hpc.trace() as t:
        cvd, _, pid = hpc.get(seen_gpu.remote())
    assert cvd == "1" and pid == new
    assert t.gpu_tasks() == {1: 1}


def test_hpc_map_with_gpus_runs_its_batches_on_gpu_workers():
    hpc.init(workers=2, gpus=[0])
    with hpc.trace() as t:
        results = hpc.get(hpc.map(held, [0.0] * 8))
    assert {cvd for cvd, _ in results} == {"0"}
    df = t.to_dataframe()
    assert len(df) == 8 and (df["gpu"] == 0).all() and (df["worker"] == 0).all()


# -- errors: a request no worker can meet fails at submit, naming it and what the pool has --------
def _fails_at_submit(fut) -> hpc.ResourceRequestError:
    assert fut.done()
    with pytest.raises(hpc.ResourceRequestError) as info:
        hpc.get(fut, timeout=5)
    return info.value


def test_gpus_on_a_pool_without_gpu_workers_names_why(monkeypatch):
    monkeypatch.delenv("EUGO_LAB_GPU_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    from eugo_lab.hardware import gpus as detect

    monkeypatch.setattr(detect, "driver_absent", lambda: "no NVIDIA driver on this machine (no /dev/nvidiactl)")
    info = hpc.init(workers=1)
    assert info.gpus == 0 and info.gpu_workers == {}
    err = _fails_at_submit(seen_gpu.remote())
    assert str(err).startswith("task _seen() requested gpus=1, but this local pool has no GPU workers (no NVIDIA "
                               "GPU visible: no NVIDIA driver on this machine (no /dev/nvidiactl)); run it on a "
                               "machine with a GPU")
    assert str(err).endswith("or drop the request (_seen.options(gpus=0)).")
    assert isinstance(err, hpc.NoWorkersError) and err.request == {"GPU": 1}
    assert hpc.get(seen.remote())[0] is None  # no GPU workers: the environment is left as it was


def test_more_gpus_than_one_worker_holds_and_unknown_resources_fail_clearly():
    hpc.init(workers=2, gpus=[0, 1])
    err = _fails_at_submit(held.options(gpus=3).remote(0))
    assert "requested gpus=3, but each GPU worker of this local pool holds one device (it has 2: GPU 0, GPU 1)" \
        in str(err)
    err = _fails_at_submit(cpu_nap.options(resources={"TPU": 1}).remote(0))
    assert "requested resources={'TPU': 1}, but the local pool offers no custom resources" in str(err)
    assert "or drop the request (cpu_nap.options(resources={}))" in str(err)
    assert hpc.get(held.remote(0))[0] in ("0", "1")  # the pool is unharmed


def test_the_threads_backend_raises_the_same_type():
    hpc.init(backend="threads", workers=1)
    err = _fails_at_submit(held.remote(0))
    assert "the threads backend has no GPU workers" in str(err)


# -- which devices: the rules, without a pool ------------------------------------------------------
def _no_driver(monkeypatch, absent: str = "no NVIDIA driver on this machine (no /dev/nvidiactl)"):
    from eugo_lab.hardware import gpus as detect

    monkeypatch.setattr(detect, "driver_absent", lambda: absent)


def test_resolve_rules(monkeypatch):
    _no_driver(monkeypatch)
    monkeypatch.delenv("EUGO_LAB_GPU_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    d = local_gpus.resolve()
    assert d.tokens == () and d.reason.startswith("no NVIDIA GPU visible: no NVIDIA driver")
    assert local_gpus.resolve([0, 1]).tokens == ("0", "1")  # named devices are taken as given
    assert local_gpus.resolve(0).reason == "gpus=0 asked for none"
    uuid = local_gpus.resolve(["GPU-5e1c", 3])
    assert uuid.tokens == ("GPU-5e1c", "3") and uuid.indices == (0, 3) and uuid.describe() == "GPU 0 (GPU-5e1c), GPU 3"
    monkeypatch.setenv("EUGO_LAB_GPU_DEVICES", "2,3")
    assert local_gpus.resolve().tokens == ("2", "3") and local_gpus.resolve().source == "EUGO_LAB_GPU_DEVICES"
    assert local_gpus.resolve([1]).tokens == ("1",)  # gpus= wins over the variable
    monkeypatch.setenv("EUGO_LAB_GPU_DEVICES", "none")
    assert local_gpus.resolve().tokens == ()
    monkeypatch.delenv("EUGO_LAB_GPU_DEVICES")
    # an existing CUDA_VISIBLE_DEVICES: numbers count within it, as CUDA counts them
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert local_gpus.resolve([1]).tokens == ("6",)
    with pytest.raises(ValueError, match=r"names device 2, but CUDA_VISIBLE_DEVICES='4,6' shows 2 device"):
        local_gpus.resolve([2])
    assert local_gpus.resolve().tokens == ()  # listed, but no driver here: no GPU workers
    monkeypatch.setattr("eugo_lab.hardware.gpus.driver_absent", lambda: "")
    assert local_gpus.resolve().tokens == ("4", "6")
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert local_gpus.resolve().tokens == () and "hides every GPU" in local_gpus.resolve().reason


def test_resolve_rejects_bad_lists(monkeypatch):
    _no_driver(monkeypatch)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for bad in ([-1], ["0,1"], [""], [1.5], "0,,1", True, -2):
        with pytest.raises(ValueError, match="gpus= must list GPU devices"):
            local_gpus.resolve(bad)
    with pytest.raises(ValueError, match="names a device twice"):
        local_gpus.resolve([0, 0])
    with pytest.raises(ValueError, match=r"gpus=2 asks for 2 GPU workers, but this machine shows 0 GPU\(s\) \(no "
                                         r"NVIDIA GPU visible: no NVIDIA driver"):
        local_gpus.resolve(2)


def test_worker_envs_pin_gpu_workers_and_hide_devices_from_the_others(monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    named = local_gpus.Devices(("0", "1"), (0, 1), "gpus=")
    assert local_gpus.worker_envs(named, 3) == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"},
                                                {"CUDA_VISIBLE_DEVICES": ""}]
    found = local_gpus.Devices(("0",), (0,), "NVML", detected=True)  # numbered as NVML numbers them
    assert local_gpus.worker_envs(found, 1) == [{"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}]
    assert local_gpus.worker_envs(local_gpus.Devices((), (), ""), 2) == [{}, {}]


def test_workers_is_the_pool_size_devices_found_beyond_it_go_unused():
    found = local_gpus.Devices(("0", "1", "2"), (0, 1, 2), "NVML", detected=True)
    assert local_gpus.fit(found, 2).tokens == ("0", "1") and local_gpus.fit(found, None) is found
    named = local_gpus.Devices(("0", "1"), (0, 1), "gpus=")
    with pytest.raises(ValueError, match=r"gpus= names 2 GPUs \(GPU 0, GPU 1\), but workers=1: each GPU needs"):
        local_gpus.fit(named, 1)
    with pytest.raises(ValueError, match="each GPU needs a worker of its own"):
        hpc.init(workers=1, gpus=[0, 1])
    assert hpc.init(gpus=[0, 1, 2]).workers >= 3  # the default size grows to hold every device named


def _gpus_found(monkeypatch, count: int) -> None:
    """NVML finds ``count`` GPUs here (0: none, as on a machine without a GPU)."""
    monkeypatch.setattr(local_gpus, "_detected", lambda: (count, "" if count else "no NVIDIA driver"))


def test_the_summary_and_the_timeline_mark_gpu_tasks(monkeypatch):
    from eugo_lab.cellrun.report import Run, summarize
    from eugo_lab.render.html import summary_html, timeline_svg
    from eugo_lab.render.text import gpu_words, summary_text

    _gpus_found(monkeypatch, 1)  # a device stands behind gpus=[0]: the words say only which one was held
    hpc.init(workers=2, gpus=[0])
    with hpc.trace() as t:
        hpc.get([held.remote(0.01) for _ in range(3)] + [cpu_nap.remote(0) for _ in range(2)])
    s = summarize([Run(2, t)], error=None, options={})
    assert s.gpu_tasks == {0: 3}
    assert "  gpu tasks: 3 tasks held GPU 0" in summary_text(s).splitlines()
    assert "3 tasks held GPU 0" in summary_html(s)
    svg = timeline_svg(t, 3)
    assert svg.count(", held GPU 0</title>") == 3 and "held a GPU" in svg  # each GPU bar says so; the legend too
    assert ">worker 0 (GPU 0)</text>" in svg and ">worker 1</text>" in svg  # and the GPU worker's lane
    # several devices: the deterministic form gives the total (the split depends on timing), precise the split
    assert gpu_words({0: 2, 1: 3}) == "5 tasks held a GPU"
    assert gpu_words({0: 2, 1: 1}, precise=True) == "2 tasks held GPU 0, 1 task held GPU 1"


def test_the_live_view_reads_which_gpu_each_new_row_held():
    from eugo_lab.render import glyphs

    hpc.init(workers=2, gpus=[0])
    rec = session.current().recorder
    with hpc.trace():
        cursor, _ = rec.read_since(None)
        hpc.get([held.remote(0.01) for _ in range(2)] + [cpu_nap.remote(0)])
        _, chunk = rec.read_since(cursor)
    assert len(chunk) == 3 and sorted(chunk.gpu.tolist()) == [-1, 0, 0]
    cols = glyphs.task_columns(chunk, 0.0, glyphs.Palette(), merge=False)
    assert sorted(cols["gpu"]) == ["-", "GPU 0", "GPU 0"]
    assert cols["line_color"].count(glyphs.GPU_LINE) == 2


def test_a_bad_variable_names_itself(monkeypatch):
    _no_driver(monkeypatch)
    monkeypatch.setenv("EUGO_LAB_GPU_DEVICES", "0,-1")
    with pytest.raises(ValueError, match=r"EUGO_LAB_GPU_DEVICES must list GPU devices .* or be 'none', got"):
        local_gpus.resolve()


def test_named_devices_without_a_gpu_behind_them_are_labelled_everywhere(monkeypatch):
    from eugo_lab.cellrun.report import Run, summarize
    from eugo_lab.render.html import summary_html
    from eugo_lab.render.text import gpu_words, summary_text

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    _gpus_found(monkeypatch, 0)
    assert local_gpus.resolve([0]).present is False and local_gpus.resolve([0]).tokens == ("0",)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert local_gpus.resolve([0]).present is False  # listed by the variable, still nothing found behind it
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    info = hpc.init(workers=2, gpus=[0])
    assert info.gpus == 1 and info.gpus_detected is False
    assert "gpus=1 (named, no GPU detected)" in repr(info)
    with hpc.trace() as t:
        hpc.get([held.remote(0) for _ in range(2)])
    assert t.meta["gpus_detected"] is False and t.gpu_tasks() == {0: 2}
    s = summarize([Run(2, t)], error=None, options={})
    line = [x for x in summary_text(s).splitlines() if "gpu tasks:" in x][0]
    assert line == ("  gpu tasks: 2 tasks held GPU 0 (a device named with gpus=, no GPU detected on this machine: "
                    "they ran on the CPU)")
    assert "no GPU detected on this machine" in summary_html(s)
    assert gpu_words({0: 1, 1: 1}, detected=False).endswith("(devices named with gpus=, no GPU detected on this "
                                                            "machine: they ran on the CPU)")
    # where a GPU is found, the same pool says nothing of the kind
    _gpus_found(monkeypatch, 1)
    info = hpc.init(workers=2, gpus=[0])
    assert info.gpus_detected is True and "no GPU detected" not in repr(info)
    with hpc.trace() as t:
        hpc.get(held.remote(0))
    assert "gpus_detected" not in t.meta
    # a pool without GPU workers has nothing to label
    assert hpc.init(workers=1, gpus=0).gpus_detected is True
