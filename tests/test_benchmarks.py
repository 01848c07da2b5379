"""The benchmark suite runs end to end in its quick mode (numbers are checked by `make bench`, not here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_runs_and_writes_results():
    out = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick"], cwd=ROOT, capture_output=True,
                         text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "| 500 tiny tasks | eugo_lab |" in out.stdout
    doc = json.loads((ROOT / "benchmarks" / "results" / "quick.json").read_text())
    assert {"date", "versions", "machine", "results", "targets", "simulator"} <= set(doc)
    scenarios = {r["scenario"] for r in doc["results"]}
    assert {"startup", "500 tiny tasks", "5000 items batched", "10 MB array to 8 tasks",
            "tracing, 500 tiny tasks", "import (fresh interpreter)",
            "%%eugo display, 500 tiny tasks (terminal IPython)"} <= scenarios
    engines = set(doc["engines"])
    assert {"eugo_lab", "ProcessPoolExecutor"} <= engines
    for r in doc["results"]:
        assert r["engines"], r["scenario"]
        for name, row in r["engines"].items():
            assert row["median_s"] > 0, (r["scenario"], name)
    by = {r["scenario"]: r["engines"] for r in doc["results"]}
    assert "eugo_lab_first_remote" in by["startup"]  # the learner's path: start-up only
    assert any(t["target"].startswith("startup: first .remote()") for t in doc["targets"])
    for name in engines - {"eugo_lab_first_remote"}:  # every other installed engine ran every scenario
        assert name in by["startup"] and name in by["500 tiny tasks"] and name in by["5000 items batched"]
        assert by["startup"][name]["extra"]["rss"]["median"] > 0
    # Driver memory per pending item: measured (tracemalloc) for hpc.map and the chunked-map peers. The
    # counts are structural (a lazy result holds the input's slot; a pool's map holds a tuple per item).
    rows = by["20000 items pending (driver memory)"]
    pending = {name: row["extra"]["bytes_per_item"]["median"] for name, row in rows.items()}
    assert {"eugo_lab", "ProcessPoolExecutor"} <= set(pending), pending
    assert 0 < pending["eugo_lab"] < 20 and pending["eugo_lab"] < pending["ProcessPoolExecutor"], pending
    for t in doc["targets"]:
        assert {"target", "measured", "limit", "ratio", "pass"} <= set(t)
    assert any(t["target"] == "%%eugo display over hpc.trace, 500 tasks" for t in doc["targets"])
    assert not doc["leaks"], doc["leaks"]


def test_memspeed_targets_compare_engines_of_one_run():
    from benchmarks.memspeed import summarize

    sizes = dict(results=16, result_mb=16, big_mb=1024, arg_mb=64, arg_tasks=10, put_mb=100, put_tasks=8)
    raw = {"results": {"eugo_lab": [1.0, 1.2, 0.9], "ray": [1.1, 1.3, 1.2], "dask": [2.0, 2.1, 1.9]},
           "big result": {"eugo_lab": [3.0, 3.1, 2.8], "ray": [2.9, 2.9, 2.9]},
           "by value": {"eugo_lab": [1.4, 1.5, 1.3], "joblib": [1.0, 1.0, 1.0]},
           "put": {"eugo_lab": [0.2, 0.2, 0.2], "ray": [0.1, 0.1, 0.1]}}
    table, verdicts = summarize(raw, sizes)
    assert "| 16 results of 16 MB | ray | 1.200 s (1.100-1.300) | 1.20x |" in table
    assert verdicts[0].startswith("PASS 16 results of 16 MB") and "best peer ray" in verdicts[0]
    assert verdicts[1].startswith("MISS one result of 1024 MB no slower than Ray")  # 3.0 s vs 2.9 s (medians)
    assert verdicts[2].startswith("PASS 64 MB array by value to 10 tasks within 1.5x of joblib")
    assert verdicts[3].startswith("INFO put of 100 MB") and "(2.00x)" in verdicts[3]
