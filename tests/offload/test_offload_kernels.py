"""A small ``@cuda.jit`` kernel (threads, blocks, grid-stride loop): on the GPU if there is one, else the simulator."""

from __future__ import annotations

import json
import subprocess
import sys

# A fresh interpreter: the simulator is chosen when numba.cuda is first imported, once per process.
CODE = """
import json, numpy as np
from eugo_lab.offload import kernels
x = np.arange(1000, dtype=np.float32)
y = np.ones(1000, dtype=np.float32)
out, run = kernels.saxpy(2.0, x, y, blocks=4, threads_per_block=32)
t = kernels.target()
try:
    kernels.saxpy(1.0, x, y, blocks=64, threads_per_block=256)
    too_many = None
except ValueError as exc:
    too_many = str(exc)
print(json.dumps({"ok": bool(np.array_equal(out, 2 * x + y)), "kind": t.kind, "target": t.describe(),
                  "run": run.describe(), "too_many": too_many}))
"""


def test_saxpy_kernel_runs_and_says_where():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"]
    from eugo_lab.hardware.gpus import detect_gpus

    if detect_gpus().available:
        assert got["kind"] == "gpu" and got["run"].startswith("ran on the GPU (")
    else:
        assert got["kind"] == "simulator"
        assert got["target"].startswith("kernels run on the Numba CUDA simulator (no GPU here)")
        assert got["run"] == ("ran on the Numba CUDA simulator (no GPU here): 4 blocks x 32 threads = 128 threads "
                              "over 1000 elements (grid-stride loop)")
        assert "too many for the CUDA simulator" in got["too_many"]


def test_numba_imported_without_the_simulator_is_explained():
    code = ("import os\nos.environ.pop('NUMBA_ENABLE_CUDASIM', None)\nimport numba.cuda\n"
            "from eugo_lab.hardware import gpus as detect\nfrom eugo_lab.offload import kernels\n"
            "if detect.detect_gpus().available:\n    print('gpu')\nelse:\n"
            "    try:\n        kernels.target()\n    except RuntimeError as e:\n        print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    assert out == "gpu" or "call eugo_lab.offload.kernels.cuda() before importing numba.cuda" in out
