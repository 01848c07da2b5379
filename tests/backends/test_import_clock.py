"""The worker measures the time a task's own code spends importing (backends.import_clock).

A warm-up is read from this time, not from modules that appeared since the previous attempt: those
include the runtime's own lazy imports and other functions' unpickling. Assertions read what was
imported and lower bounds of time a module's import sleeps, never an upper bound: they hold on one
busy core.
"""

from __future__ import annotations

import pickle
import sys
import threading
import time

import pytest

from eugo_lab import hpc
from eugo_lab.backends import import_clock
from eugo_lab.backends._worker import execute
from eugo_lab.contract.row import FACT_IMPORT_S, FACT_IMPORTS, TaskStats


@pytest.fixture
def slow_module(tmp_path, monkeypatch):
    """A fresh importable module whose import sleeps 50 ms (a library loading)."""
    name = f"eugo_test_slow_{time.monotonic_ns()}"
    (tmp_path / f"{name}.py").write_text("import time\ntime.sleep(0.05)\nVALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _facts(fn, name: str = "f") -> tuple:
    status, _payload, _tb, stats = execute(fn, name, pickle.dumps(((), {})), probe=True)
    assert status == 0
    return TaskStats.from_wire(tuple(stats)).facts


def test_a_task_importing_a_slow_module_reports_the_time_it_took(slow_module):
    def load():
        __import__(slow_module)

    facts = _facts(load)
    assert facts[FACT_IMPORTS] == 1 and facts[FACT_IMPORT_S] >= 0.05


def test_what_the_runtime_imports_in_its_own_phases_is_not_the_task_s(slow_module):
    # The JIT's trial runs inside the task and imports Numba there, in its "jit: ..." phases: the runtime's
    # work, and no warm-up of the task's (a JupyterLab run called 1,087 such modules the task's).
    from eugo_lab.contract.phases import JIT_COMPILE_PHASE, phase

    def trial():
        with phase(JIT_COMPILE_PHASE):
            __import__(slow_module)

    facts = _facts(trial)
    assert facts[FACT_IMPORTS] == 0 and facts[FACT_IMPORT_S] == 0.0


def test_the_task_s_own_code_in_the_jit_s_trial_runs_still_counts(slow_module):
    # The trial runs the function itself plain ("jit: plain run"): what the function imports there is its own.
    from eugo_lab.contract.phases import RUNTIME_PHASE_PREFIX, phase

    def trial():
        with phase(RUNTIME_PHASE_PREFIX + "plain run"):
            __import__(slow_module)

    facts = _facts(trial)
    assert facts[FACT_IMPORTS] == 1 and facts[FACT_IMPORT_S] >= 0.05


def test_what_a_runtime_feature_imports_during_the_attempt_is_not_the_task_s(slow_module):
    # The JIT imports Numba inside the task between its trial's plain run and its compile, outside its
    # phases: code of a feature asked for it, so it is the runtime's work, not the task's warm-up.
    import types

    feature = types.ModuleType("eugo_lab.jit._import_clock_probe")
    exec(compile("def load(name):\n    __import__(name)\n", "<probe>", "exec"), feature.__dict__)
    facts = _facts(lambda: feature.load(slow_module))
    assert facts[FACT_IMPORTS] == 0 and facts[FACT_IMPORT_S] == 0.0


def test_modules_imported_outside_the_attempt_are_not_the_task_s(slow_module):
    # Imported between two attempts (the runtime's lazy import, another function's unpickling): the next
    # attempt, which imports nothing itself, reports nothing, though the module count grew.
    __import__(slow_module)
    facts = _facts(lambda: time.sleep(0.01))
    assert facts[FACT_IMPORTS] == 0 and facts[FACT_IMPORT_S] == 0.0


def test_another_thread_importing_during_the_attempt_is_not_the_task_s(slow_module):
    def body():
        t = threading.Thread(target=__import__, args=(slow_module,))
        t.start()
        t.join()

    facts = _facts(body)
    assert facts[FACT_IMPORTS] == 0 and facts[FACT_IMPORT_S] == 0.0


def test_imports_while_loading_a_function_are_charged_to_its_next_traced_attempt(slow_module):
    import_clock.measure_load("g", __import__, slow_module)
    facts = _facts(lambda: None, name="g")
    assert facts[FACT_IMPORTS] == 1 and facts[FACT_IMPORT_S] >= 0.05
    assert _facts(lambda: None, name="g")[FACT_IMPORTS] == 0  # charged once


def test_the_runtime_s_own_modules_are_not_counted(tmp_path, monkeypatch):
    # A module of the package imported for the first time (a probe in a folder added to the package's path: a
    # real module of it, imported again, would leave two copies of its classes for the tests after this one).
    import eugo_lab

    name = f"eugo_lab._clock_probe_{time.monotonic_ns()}"
    (tmp_path / f"{name.rsplit('.', 1)[1]}.py").write_text("import time\ntime.sleep(0.05)\n")
    monkeypatch.setattr(eugo_lab, "__path__", [*eugo_lab.__path__, str(tmp_path)])
    try:
        facts = _facts(lambda: __import__(name))
    finally:
        sys.modules.pop(name, None)
    assert facts[FACT_IMPORTS] == 0 and facts[FACT_IMPORT_S] == 0.0


def nap(t: float) -> float:
    time.sleep(t)
    return t


def test_tasks_on_warm_workers_record_no_imports():
    # The reviewer's case: a sleeping task on workers that already ran it. Its code imports nothing, whatever
    # the runtime loads lazily on the first traced task.
    hpc.init(backend="local", workers=2)
    try:
        task = hpc.remote(nap, optimize=False)
        hpc.get([task.remote(0.001) for _ in range(4)])
        with hpc.trace() as t:
            hpc.get([task.remote(0.01) for _ in range(4)])
        facts = t.trace.facts
        assert len(facts["task"]) == 4
        assert facts["imports"].tolist() == [0] * 4 and facts["import_s"].tolist() == [0.0] * 4
    finally:
        hpc.shutdown()
