"""``%%eugo`` in a real kernel: a notebook executed headless with nbclient, then re-checked with nbval.

No Jupyter server here, so the magic shows live ipywidgets counters and a static HTML
summary (with an SVG timeline); every output's ``text/plain`` is deterministic, which
the nbval pass proves by re-running the notebook and comparing.
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
from jupyter_fixtures import REPO, kernel_env, write_notebook
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

SANITIZE = """[eugo-summary-html]
regex: <div class='eugo-summary'[\\s\\S]*
replace: EUGO-SUMMARY-HTML
"""

CELLS = [
    "%load_ext eugo_lab",
    "import time\nfrom eugo_lab import hpc\n\n@hpc.remote\ndef nap(x):\n    time.sleep(0.05)\n    return x * 2",
    "%%eugo -w 2\nfutures = [nap.remote(i) for i in range(8)]\nhpc.get(futures)",
    "%%eugo -w 2 --no-live --save t\nhpc.get([nap.remote(i) for i in range(4)])",
    "len(t), t.meta['workers'], hpc.last_trace() is t",
    "%eugo glossary straggler",
    "%%eugo -w 2\n# NBVAL_RAISES_EXCEPTION\nhpc.get([nap.remote(i) for i in range(2)])\n1 / 0",
    "await nap.remote(21)",  # a plain cell: top-level await of an hpc future (IPython's autoawait)
    "import asyncio\nawait asyncio.gather(*[nap.remote(i) for i in range(3)])",
    "%eugo stop",
]


def _outputs(nb, i):
    return nb.cells[i].outputs


def test_notebook_outputs(tmp_path):
    path = tmp_path / "magic.ipynb"
    write_notebook(path, CELLS)
    nb = nbformat.read(path, as_version=4)
    nb.cells[6].metadata["tags"] = ["raises-exception"]
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=kernel_env())

    live = _outputs(nb, 2)
    kinds = [o.output_type for o in live]
    assert kinds == ["display_data", "display_data", "execute_result"], kinds
    assert "application/vnd.jupyter.widget-view+json" in live[0].data
    assert live[0].data["text/plain"] == "eugo live view (counters and timeline; needs a running kernel)"
    assert live[1].data["text/plain"].startswith("%%eugo: 8 tasks on 2 workers (backend local)\n  functions: nap x8")
    assert "<svg class='eugo-timeline'" in live[1].data["text/html"]
    assert re.search(r"speedup</td><td[^>]*>\d+(\.\d+)?x", live[1].data["text/html"])
    assert live[2].data["text/plain"] == "[0, 2, 4, 6, 8, 10, 12, 14]"
    # the widget state saved in the notebook holds the final counters
    states = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    assert any("finished" in str(s.get("state", {}).get("value", "")) for s in states.values())

    assert [o.output_type for o in _outputs(nb, 3)] == ["display_data", "execute_result"]
    assert _outputs(nb, 4)[0].data["text/plain"] == "(4, 2, True)"
    assert _outputs(nb, 5)[0].data["text/plain"].startswith("Straggler: ")

    err = _outputs(nb, 6)
    assert [o.output_type for o in err][-1] == "error"
    assert sum(1 for o in err if o.output_type == "error") == 1
    summary = [o for o in err if o.output_type == "display_data" and "eugo-summary" in o.data.get("text/html", "")]
    assert "stopped by ZeroDivisionError" in summary[0].data["text/plain"]
    tb = "\n".join(err[-1].traceback)
    assert re.search(r"----> 4\S* 1 / 0", re.sub(r"\x1b\[[0-9;]*m", "", tb)), tb

    assert _outputs(nb, 7)[0].data["text/plain"] == "42"
    assert _outputs(nb, 8)[0].data["text/plain"] == "[0, 2, 4]"

    nbformat.write(nb, path)
    (tmp_path / "sanitize.cfg").write_text(SANITIZE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", str(path),
         "--nbval-sanitize-with", str(tmp_path / "sanitize.cfg"), "--rootdir", str(tmp_path)],
        cwd=tmp_path, env=kernel_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"{len(CELLS)} passed" in proc.stdout, proc.stdout[-2000:]
    assert str(REPO)  # the kernels imported this worktree (kernel_env puts it first on PYTHONPATH)
