"""A task's CPU time counts the programs it runs and waits for (``subprocess.run``).

The task's own thread waits while the child computes: without the child's CPU such a task read as
I/O-bound ("it mostly waits") and was advised more workers than cores. The child here spins for a
fixed amount of its own CPU time, so the assertion is a lower bound that holds on a busy core.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

from eugo_lab import hpc
from eugo_lab.backends._worker import execute, execute_batch

CHILD_CPU_S = 0.2
_SPIN = f"import time\nt = time.process_time()\nwhile time.process_time() - t < {CHILD_CPU_S}:\n    pass\n"


def run_child(_: object = None) -> int:
    return subprocess.run([sys.executable, "-c", _SPIN], check=True).returncode


def test_a_task_s_cpu_includes_the_child_it_waited_for():
    status, _payload, _tb, stats = execute(run_child, "run_child", pickle.dumps(((), {})))
    assert status == 0 and stats.cpu >= CHILD_CPU_S


def test_a_batch_s_cpu_includes_its_items_children():
    status, _payload, _errors, stats = execute_batch(run_child, "run_child", pickle.dumps((([1, 2],), {})))
    assert status == 0 and stats.cpu >= 2 * CHILD_CPU_S


def test_a_traced_task_running_a_program_is_not_io_bound():
    hpc.init(backend="local", workers=2)
    try:
        task = hpc.remote(run_child, optimize=False)
        with hpc.trace() as t:
            hpc.get([task.remote() for _ in range(2)])
        assert float(t.trace.tasks["cpu"].min()) >= CHILD_CPU_S
    finally:
        hpc.shutdown()
