"""Faults where users meet them: a real Jupyter kernel (jupyter_client), interrupted, restarted, killed.

Engines: the local pool (every fault), an embedded Dask cluster and an embedded Ray instance
(a killed kernel takes all their processes with it).
"""

from __future__ import annotations

import os
import queue
import signal
import time
from pathlib import Path

import psutil
import pytest
from _processes import wait_gone
from _waiting import wait_for_file
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
%load_ext eugo_lab
import os, time
from eugo_lab import hpc

@hpc.remote
def slow(i, seconds=30):
    time.sleep(seconds)
    return i

@hpc.remote
def quick(i):
    return i * 10

hpc.init(workers=2)
print("PIDS", *hpc.api.session.current().backend.worker_pids())
"""


class Kernel:
    """A kernel started the way JupyterLab starts one, with helpers to run code and read output."""

    def __init__(self, cwd: Path):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(cwd), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    @property
    def pid(self) -> int:
        return self.km.provisioner.process.pid  # type: ignore[union-attr]

    def submit(self, code: str) -> str:
        return self.kc.execute(code)

    def collect(self, msg_id: str, timeout: float = 60) -> tuple[dict, str]:
        """Wait for the reply to ``msg_id``; return it and the text the cell printed or displayed."""
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        texts = []
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=5)
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            content = msg["content"]
            if msg["msg_type"] == "stream":
                texts.append(content["text"])
            elif msg["msg_type"] in ("display_data", "execute_result", "update_display_data"):
                texts.append(content["data"].get("text/plain", ""))
            elif msg["msg_type"] == "error":
                texts.append(f"{content['ename']}: {content['evalue']}")
            elif msg["msg_type"] == "status" and content["execution_state"] == "idle":
                break
        return reply["content"], "".join(texts)

    def run(self, code: str, timeout: float = 60) -> str:
        content, text = self.collect(self.submit(code), timeout)
        assert content["status"] == "ok", text
        return text

    def close(self) -> None:
        self.kc.stop_channels()
        if self.km.is_alive():
            self.km.shutdown_kernel(now=True)


@pytest.fixture
def kernel(tmp_path):
    k = Kernel(tmp_path)
    yield k
    k.close()


def _pids(text: str) -> set[int]:
    line = next(x for x in text.splitlines() if x.startswith("PIDS"))
    return {int(p) for p in line.split()[1:]}


def test_interrupt_during_a_cell_cancels_its_tasks_and_the_next_cell_works(kernel, tmp_path):
    seconds = 30  # each task; a cell (or a next cell) that waited for its tasks would take ~28 s more
    old = _pids(kernel.run(SETUP))
    marker = tmp_path / "submitted"  # written once the cell submitted its tasks (not a fixed delay: a busy machine)
    msg_id = kernel.submit(f"%%eugo -w 2\nfs = [slow.remote(i, {seconds}) for i in range(8)]\n"
                           f"open({str(marker)!r}, 'w').close()\nhpc.get(fs)")
    wait_for_file(marker)
    time.sleep(1.0)  # both workers are inside a 30 s task now
    t = time.monotonic()
    kernel.km.interrupt_kernel()  # SIGINT to the kernel's process group, as JupyterLab sends it
    content, text = kernel.collect(msg_id, timeout=seconds)
    elapsed = time.monotonic() - t
    assert content["status"] == "error" and content["ename"] == "KeyboardInterrupt"
    assert elapsed < 2.0, f"the cell took {elapsed:.1f} s to stop"  # the README's promise
    assert "stopped by KeyboardInterrupt" in text and "cancelled: 8" in text
    # The two running 30 s tasks were stopped: the next cell's tasks get both workers at once.
    out = kernel.run(f"%%eugo -w 2 --no-live\nprint('RESULT', hpc.get([quick.remote(i) for i in range(4)], "
                     f"timeout={seconds / 4}))\nprint('PIDS', *hpc.api.session.current().backend.worker_pids())")
    assert "RESULT [0, 10, 20, 30]" in out
    assert time.monotonic() - t < seconds / 4
    assert _pids(out) == old  # stopped inside their workers: no process had to be replaced


def test_interrupt_stops_tasks_the_cell_never_waited_on(kernel, tmp_path):
    kernel.run(SETUP)
    # The interrupt comes once the cell has submitted its tasks (a file it writes says so): on a busy
    # machine a fixed delay could interrupt the kernel before the cell even started.
    marker = tmp_path / "submitted"
    msg_id = kernel.submit(f"%%eugo -w 2 --no-live\nfs = [slow.remote(i) for i in range(6)]\n"
                           f"open({str(marker)!r}, 'w').close()\ntime.sleep(30)")
    wait_for_file(marker)
    kernel.km.interrupt_kernel()
    content, text = kernel.collect(msg_id, timeout=30)
    assert content["ename"] == "KeyboardInterrupt"
    assert "cancelled: 6" in text
    assert "[True, True, True, True, True, True]" in kernel.run("print([f.cancelled() for f in fs])")


def test_interrupt_while_idle_keeps_the_pool(kernel):
    old = _pids(kernel.run(SETUP))
    kernel.km.interrupt_kernel()
    time.sleep(0.5)
    out = kernel.run("print('RESULT', hpc.get(quick.remote(3)))\n"
                     "print('PIDS', *hpc.api.session.current().backend.worker_pids())")
    assert "RESULT 30" in out
    assert _pids(out) == old  # the same workers: none was killed by the interrupt


@pytest.mark.parametrize("how", ["shutdown", "restart", "sigkill"])
def test_no_worker_outlives_its_kernel(kernel, how):
    pids = _pids(kernel.run(SETUP + "\nf = slow.remote(0, 60)\ng = slow.remote(1, 60)\ntime.sleep(0.5)"))
    assert all(psutil.pid_exists(p) for p in pids)
    t = time.monotonic()
    if how == "shutdown":
        kernel.km.shutdown_kernel(now=False)
    elif how == "restart":
        kernel.km.restart_kernel(now=False)
    else:
        os.kill(kernel.pid, signal.SIGKILL)
    assert not wait_gone(pids, timeout=10), f"workers alive {time.monotonic() - t:.1f} s after kernel {how}"


def test_embedded_dask_cluster_dies_with_a_killed_kernel(kernel):
    out = kernel.run("from eugo_lab import hpc\nhpc.init(backend='dask', workers=2)\n"
                     "print('N', hpc.get(hpc.remote(abs).remote(-3)))", timeout=120)
    assert "N 3" in out
    family = {p.pid for p in psutil.Process(kernel.pid).children(recursive=True)}
    assert family, "the embedded cluster started no processes?"
    os.kill(kernel.pid, signal.SIGKILL)
    assert not wait_gone(family, timeout=10), "Dask processes outlived the killed kernel"


RAY_SETUP = """
import time
from eugo_lab import hpc

@hpc.remote
def nap(seconds):
    time.sleep(seconds)
    return seconds

hpc.init(backend="ray", workers=2)
print("N", hpc.get(hpc.remote(abs).remote(-3)))
busy = [nap.remote(60) for _ in range(2)]
time.sleep(1.0)  # both workers are inside a task now
"""


@pytest.mark.parametrize("how", ["sigkill", "restart"])  # a restart shuts the kernel down first
def test_embedded_ray_dies_with_its_kernel(kernel, how):
    assert "N 3" in kernel.run(RAY_SETUP, timeout=180)
    family = {p.pid: p.name() for p in psutil.Process(kernel.pid).children(recursive=True)}
    names = set(family.values())
    # Ray's daemons, its agents (children of the raylet, which Ray does not tie to the kernel)
    # and its busy workers: the test must see them all to prove anything.
    assert {"gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= names, names
    assert sum(n.startswith("ray::") and "Agent" not in n for n in names) >= 1, names
    t = time.monotonic()
    if how == "restart":
        kernel.km.restart_kernel(now=False)
    else:
        os.kill(kernel.pid, signal.SIGKILL)
    alive = wait_gone(set(family), timeout=10)
    assert not alive, (f"{time.monotonic() - t:.1f} s after the kernel {how}, Ray processes are alive: "
                       f"{sorted(family[p] for p in alive)}")
