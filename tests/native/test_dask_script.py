"""An embedded Dask cluster in a plain script: no ``if __name__ == "__main__":`` guard needed.

Each test writes a script that calls ``hpc.init(backend="dask")`` at its top level and runs
it with this interpreter (the script inherits ``PYTHONPATH``, so it imports this checkout's
``eugo_lab``). Workers started through multiprocessing would re-import that ``__main__``:
the top level would run again in each of them and the start would fail ("Nanny failed to
start"). The script prints the pids of all its descendants, so that the test can check
that none outlives it: once it has exited they are no longer the test's descendants, and
the autouse leak check cannot see them.

Output goes to files, not pipes: worker processes inherit the script's stdout and stderr,
and a pipe would stay open as long as one of them lives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from _processes import wait_gone

MARKER = "TOP-LEVEL-OF-THE-SCRIPT"

# The family is printed at the end: by then every process the cluster started exists.
FAMILY = "print('FAMILY', *sorted(p.pid for p in psutil.Process().children(recursive=True)), flush=True)\n"

SCRIPT = f"""
import os
import psutil
from eugo_lab import hpc

print({MARKER!r}, flush=True)

@hpc.remote
def square(x):
    return x * x, os.getpid()

@hpc.remote
def total(pairs):
    return sum(x for x, _ in pairs)

hpc.init(backend="dask", workers=2)
results = hpc.get([square.remote(i) for i in range(8)])
print("RESULTS", *[r for r, _ in results], flush=True)
print("TASK-PIDS", *sorted({{pid for _, pid in results}}), flush=True)
print("TOTAL", hpc.get(total.remote([square.remote(3), square.remote(4)])), flush=True)
{FAMILY}"""

KILLED_SCRIPT = f"""
import os
import sys
import time
import psutil
from eugo_lab import hpc

print({MARKER!r}, flush=True)

@hpc.remote
def nap(seconds, folder):
    open(os.path.join(folder, f"running-{{os.getpid()}}"), "w").close()
    time.sleep(seconds)
    return os.getpid()

hpc.init(backend="dask", workers=2)
folder = sys.argv[1]
busy = [nap.remote(120, folder) for _ in range(2)]
while len([n for n in os.listdir(folder) if n.startswith("running-")]) < 2:  # both workers are in a task
    time.sleep(0.05)
{FAMILY}print("RUNNING", flush=True)
hpc.get(busy)
"""


def _lines(path: Path, prefix: str) -> list[list[str]]:
    """The words after ``prefix`` on each line of ``path`` that starts with it."""
    return [line.split()[1:] for line in path.read_text().splitlines() if line.split()[:1] == [prefix]]


def _kill(pids: set[int]) -> None:
    """Do not leave what a failed test found alive to the following tests."""
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass


def test_a_script_without_a_main_guard_runs_its_top_level_once_and_leaves_no_process(tmp_path):
    script = tmp_path / "plain_script.py"
    script.write_text(SCRIPT)
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.run([sys.executable, str(script)], stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                              cwd=tmp_path, env=dict(os.environ), timeout=180)
    stdout, stderr = out.read_text(), err.read_text()
    family = {int(p) for words in _lines(out, "FAMILY") for p in words}
    try:
        assert proc.returncode == 0, f"exit {proc.returncode}\n{stdout}\n{stderr}"
        assert stdout.count(MARKER) == 1, f"the script's top level ran {stdout.count(MARKER)} times\n{stdout}"
        assert _lines(out, "RESULTS") == [[str(i * i) for i in range(8)]]
        assert _lines(out, "TOTAL") == [["25"]]  # a task of futures: the cluster moves results between workers
        assert "Nanny failed" not in stderr and "Traceback" not in stderr and "ERROR" not in stderr, stderr
        task_pids = {int(p) for words in _lines(out, "TASK-PIDS") for p in words}
        assert task_pids and task_pids <= family, (task_pids, family)  # the tasks ran in its own processes
        alive = wait_gone(family, timeout=20)
        assert not alive, f"processes of the script outlived it: {sorted(alive)}"
    finally:
        _kill(wait_gone(family, timeout=0))


def test_the_workers_of_a_sigkilled_script_go_away(tmp_path):
    script = tmp_path / "killed_script.py"
    script.write_text(KILLED_SCRIPT)
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    folder = tmp_path / "markers"
    folder.mkdir()
    family: set[int] = set()
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([sys.executable, str(script), str(folder)], stdout=o, stderr=e,
                                stdin=subprocess.DEVNULL, cwd=tmp_path, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 120
        while not _lines(out, "RUNNING"):
            assert proc.poll() is None, f"the script exited with {proc.returncode}\n{out.read_text()}\n" \
                                        f"{err.read_text()}"
            assert time.monotonic() < deadline, f"the tasks did not start\n{out.read_text()}\n{err.read_text()}"
            time.sleep(0.1)
        assert out.read_text().count(MARKER) == 1
        family = {int(p) for words in _lines(out, "FAMILY") for p in words}
        task_pids = {int(n.split("-")[1]) for n in os.listdir(folder)}
        assert len(task_pids) == 2 and task_pids <= family, (task_pids, family)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        t = time.monotonic()
        alive = wait_gone(family, timeout=20)
        assert not alive, f"{time.monotonic() - t:.1f} s after the script was SIGKILLed, its processes live: " \
                          f"{sorted(alive)}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill(wait_gone(family, timeout=0))
