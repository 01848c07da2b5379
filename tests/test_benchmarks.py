"""The benchmark suite runs end to end in its quick mode (numbers are checked by `make bench`, not here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_runs_and_writes_results():
    out = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| 500 tiny tasks | eugo_lab |" in out.stdout
    doc = json.loads((ROOT / "benchmarks" / "results" / "quick.json").read_text())
    scenarios = {r["scenario"] for r in doc["results"]}
    assert {"startup", "500 tiny tasks", "5000 items batched", "10 MB array to 8 tasks"} <= scenarios
    for r in doc["results"]:
        for row in r["engines"].values():
            assert row["median_s"] > 0
