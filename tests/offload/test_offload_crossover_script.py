"""benchmarks/gpu_crossover.py without a GPU: the predicted table, the 2x agreement rule, a clear exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks import gpu_crossover as gx
from eugo_lab.hardware.gpus import detect_gpus

ROOT = Path(__file__).resolve().parents[2]


def test_predict_only_prints_a_markdown_table():
    out = subprocess.run([sys.executable, "-m", "benchmarks.gpu_crossover", "--predict-only"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "| operation | dtype | operands | H100 (published) | T4 (published) |" in out.stdout
    assert out.stdout.count("\n| ") == len(gx.CASES) + 1
    assert "no measurement on a GPU" in out.stdout


def test_without_a_gpu_it_says_so_and_exits_2():
    if detect_gpus().usable:
        return
    out = subprocess.run([sys.executable, "-m", "benchmarks.gpu_crossover"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert "cannot measure: no GPU here" in out.stderr and "--predict-only" in out.stderr


def test_agreement_within_2x():
    add = gx.CASES[0]
    top = gx.sizes(add.kind)[-1]
    assert gx.agree(add, 100_000, 190_000) and gx.agree(add, 100_000, 51_000)
    assert not gx.agree(add, 100_000, 210_000)
    assert gx.agree(add, None, None) and gx.agree(add, None, top // 2 + 1) and not gx.agree(add, None, 1000)
    assert gx.agree(add, top, None) and not gx.agree(add, 1000, None)
