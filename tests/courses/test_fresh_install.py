"""A new user's first ``%%eugo`` cell after ``pip install eugo-lab`` alone (no ``lab`` extra).

A fresh venv gets this repository (core dependencies only) and ``ipykernel``, nothing else;
its Python runs a real kernel that this test process drives with jupyter_client. Without
ipywidgets and Bokeh the magic must run the cell traced, show the static report, and say
once per kernel how to get the live view; ``ModuleNotFoundError`` must appear nowhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from _processes import signal_all
from jupyter_fixtures import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

HINT = ('eugo: live view off: ipywidgets, bokeh and jupyter_bokeh are not installed; '
        'pip install "eugo-lab[lab]" and restart the kernel')
SETUP = """
import time
from eugo_lab import hpc

@hpc.remote
def square(x):
    time.sleep(0.02)
    return x * x
"""
FAN_OUT = "%%eugo -w 2\nfutures = [square.remote(i) for i in range(8)]\nhpc.get(futures)"
PROBE = """
import importlib.util, os, eugo_lab
print(json.dumps({"file": eugo_lab.__file__, "version": eugo_lab.__version__,
                  "missing": [m for m in ("ipywidgets", "bokeh", "jupyter_bokeh", "jupyter_server", "jupyterlab")
                              if importlib.util.find_spec(m) is None]}))
"""


def _clean_env() -> dict[str, str]:
    """The user's environment, minus anything that would let the venv see this worktree or our test settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "EUGO_LAB_DISPLAY", "EUGO_LAB_BOKEH_URL")
           and not k.startswith("PYTEST")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    """``python -m venv`` + ``pip install <repo> ipykernel``; yields the venv's python."""
    root = tmp_path_factory.mktemp("fresh")
    venv = root / "venv"
    env = _clean_env()
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, timeout=300)
    py = venv / "bin" / "python"
    # The pip cache is welcome (this is about what gets installed, not where from); a build of
    # this repo with hatchling happens in pip's isolated build env, from a copy-free source tree.
    r = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", str(REPO), "ipykernel"],
                       env=env, cwd=str(root), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    print(f"fresh venv ready in {time.monotonic() - t0:.0f} s")
    yield py
    shutil.rmtree(root, ignore_errors=True)


def _kernel(py: Path, workdir: Path, stderr):  # an open binary file
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = workdir / "kernels" / "fresh"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh eugo-lab", "language": "python"}))
    km = KernelManager(kernel_name="fresh", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    # cwd outside the repository: a kernel puts its cwd on sys.path, and must import the installed package.
    # Its stderr (logged tracebacks, warnings) goes to a file the test reads.
    km.start_kernel(env=_clean_env(), cwd=str(workdir), stderr=stderr)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=180)
    return km, kc


def _execute(kc, code: str, timeout: float = 180) -> tuple[dict, list[dict]]:
    """Run ``code``; returns the reply's content and the IOPub messages (outputs, errors) it produced."""
    msgs: list[dict] = []

    def keep(msg: dict) -> None:
        if msg["msg_type"] in ("stream", "display_data", "execute_result", "error", "update_display_data"):
            msgs.append({"type": msg["msg_type"], **msg["content"]})

    reply = kc.execute_interactive(code, output_hook=keep, timeout=timeout)
    return reply["content"], msgs


def test_first_eugo_cell_after_core_install(fresh_venv, tmp_path):
    with open(tmp_path / "kernel.err", "wb") as err:
        _run_kernel(fresh_venv, tmp_path, err)
    stderr = (tmp_path / "kernel.err").read_text(errors="replace")
    assert "ModuleNotFoundError" not in stderr, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]


def _run_kernel(fresh_venv: Path, tmp_path: Path, err) -> None:  # an open binary file
    km, kc = _kernel(fresh_venv, tmp_path, err)
    kernel_tree = [psutil.Process(km.provisioner.process.pid)]
    everything: list[dict] = []
    try:
        reply, out = _execute(kc, "import json\n" + PROBE)
        everything += out
        assert reply["status"] == "ok", out
        probe = json.loads("".join(m["text"] for m in out if m["type"] == "stream"))
        assert Path(probe["file"]).resolve().is_relative_to(fresh_venv.parent.parent.resolve()), probe
        assert probe["missing"] == ["ipywidgets", "bokeh", "jupyter_bokeh", "jupyter_server", "jupyterlab"], probe

        for code in ("%load_ext eugo_lab", SETUP):
            reply, out = _execute(kc, code)
            everything += out
            assert reply["status"] == "ok", out

        plains = []
        for i in range(2):
            if i == 1:  # as if a JupyterLab of another environment, with Bokeh and our extension, ran this kernel
                reply, out = _execute(kc, "import os\nos.environ['EUGO_LAB_BOKEH_URL'] = '/eugo/bokeh/'")
                assert reply["status"] == "ok", out
            reply, out = _execute(kc, FAN_OUT)
            everything += out
            assert reply["status"] == "ok", out
            assert not [m for m in out if m["type"] == "error"], out
            results = [m for m in out if m["type"] == "execute_result"]
            assert len(results) == 1 and results[0]["data"]["text/plain"] == "[0, 1, 4, 9, 16, 25, 36, 49]", out
            shown = [m["data"] for m in out if m["type"] == "display_data"]
            assert not any("application/vnd.jupyter.widget-view+json" in d or "application/javascript" in d
                           for d in shown), shown
            summary = [d for d in shown if d["text/plain"].startswith("%%eugo: 8 tasks on 2 workers (backend local)")]
            assert len(summary) == 1, shown
            assert "functions: square x8" in summary[0]["text/plain"]
            assert "<svg class='eugo-timeline'" in summary[0]["text/html"]
            plains += [d["text/plain"] for d in shown]
            if i == 0:  # the pool's workers are children of the kernel: remember them to check the cleanup
                kernel_tree += kernel_tree[0].children(recursive=True)
        assert plains.count(HINT) == 1, plains
        assert plains.index(HINT) == 0, plains  # shown when the first cell starts, before its report

        for code in ("%eugo status", "%eugo trace", "%eugo glossary speedup", "%eugo stop"):
            reply, out = _execute(kc, code)
            everything += out
            assert reply["status"] == "ok", (code, out)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
        _, alive = psutil.wait_procs(kernel_tree, timeout=20)
        signal_all(alive)
    assert not alive, f"left running after the kernel shut down: {alive}"
    assert "ModuleNotFoundError" not in json.dumps(everything), everything
