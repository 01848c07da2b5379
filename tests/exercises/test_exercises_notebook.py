"""Exercise cells in a real kernel: a starter graded ``not yet``, the reference ``passed``, and the
reference's verdict compared by nbval (``--nbval-lax``, the courses' mode) from the cell after it.

A ``%%eugo`` cell's own output cannot be compared (its summary HTML carries timings), so a lesson
shows the reference's verdict again with ``exercises.last_verdict()`` in a ``# NBVAL_CHECK_OUTPUT``
cell: its text/plain and HTML are deterministic.
"""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from jupyter_fixtures import kernel_env, write_notebook
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

FUNC = ("import time\nfrom eugo_lab import exercises, hpc\np = exercises.problem(\"fan-out\")\n"
        "\n@hpc.remote\ndef slow_square(x):\n"
        "    time.sleep(0.05)\n    return x * x\n")
CELLS = [
    "%load_ext eugo_lab",
    "%%eugo --exercise fan-out -w 2\n" + FUNC + "\nresults = []\nfor x in p.xs:\n"
    "    results.append(hpc.get(slow_square.remote(x)))",
    "%%eugo --exercise fan-out -w 2\n" + FUNC + "\nfutures = [slow_square.remote(x) for x in p.xs]\n"
    "results = hpc.get(futures)",
    "# NBVAL_CHECK_OUTPUT\nfrom eugo_lab import exercises\nexercises.last_verdict()",
    "hpc.shutdown()",
]


def _verdict(outputs) -> dict:
    found = [o.data for o in outputs
             if o.output_type == "display_data" and "eugo-exercise" in o.data.get("text/html", "")]
    assert len(found) == 1, outputs
    return found[0]


def test_exercise_cells_in_a_kernel_and_under_nbval(tmp_path):
    path = tmp_path / "exercise.ipynb"
    write_notebook(path, CELLS)
    nb = nbformat.read(path, as_version=4)
    env = kernel_env(EUGO_LAB_PROGRESS_DIR=str(tmp_path / "progress"))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                   ).execute(env=env)
    starter = _verdict(nb.cells[1].outputs)
    assert starter["text/plain"].startswith("exercise fan-out: not yet\n  your loop called get() at cell line 13")
    reference = _verdict(nb.cells[2].outputs)
    assert reference["text/plain"].startswith("exercise fan-out: passed\n")
    assert "measured: " in reference["text/html"] and "measured" not in reference["text/plain"]
    shown = nb.cells[3].outputs[0].data
    assert shown["text/plain"] == reference["text/plain"] and "measured" not in shown["text/html"]
    saved = json.loads((tmp_path / "progress" / "progress.json").read_text())["exercises"]["fan-out"]
    assert saved["passed"] is True and saved["attempts"] == 2 and saved["last"]["status"] == "passed"

    nbformat.write(nb, path)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", str(path),
                           "--rootdir", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"{len(CELLS)} passed" in proc.stdout, proc.stdout[-2000:]
