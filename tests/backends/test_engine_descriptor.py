"""A new engine is one file: its Backend subclass and its descriptor, and every part of the package knows it.

The toy engine below is written to a temporary module, as a contributor would write one, and
nothing else changes: ``hpc.init(backend="toy")`` runs tasks on it, ``%%eugo -b toy`` takes it
(and the magic's list of valid options names it), an address is refused for it because its
descriptor says it is local, the timeline assumes a local transfer and the thread guard leaves
its threads alone.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types

import pytest

from eugo_lab import hpc
from eugo_lab.contract import base

TOY_ENGINE = '''
"""A toy engine: each task runs on a thread of its own, in this process."""

import os
import threading
import time
from typing import Any

from eugo_lab.backends._worker import execute, execute_batch
from eugo_lab.contract import base, outcome
from eugo_lab.contract.refs import ObjectRef, describe_type
from eugo_lab.contract.serialization import loads_value


class ToyBackend(base.Backend):
    name = "toy"

    def __init__(self, workers: int | None = None, greeting: str = "hello"):
        self.n_workers = workers or 1
        self.greeting = greeting
        self._objects: dict[int, Any] = {}

    def start(self) -> None:
        pass

    def submit(self, task, on_done) -> None:
        threading.Thread(target=self._run, args=(task, on_done), daemon=True).start()

    def _run(self, task, on_done) -> None:
        deps = task.deps_payload

        def load_token(token):
            return loads_value(deps[token[1]]) if token[0] == "fut" else self._objects[token[1]]

        run = execute_batch if task.is_batch else execute
        status, payload, detail, stats = run(task.fn.fn, task.fn.name, task.args, load_token, time.thread_time,
                                             None, task.probe)
        on_done(task, outcome.from_worker(status, payload, detail, stats, 0, task.is_batch))

    def cancel(self, task) -> None:
        pass

    def put(self, obj: Any) -> ObjectRef:
        ref = ObjectRef(None, 0, describe_type(obj))
        ref.location = ref.ref_id
        self._objects[ref.ref_id] = obj
        return ref

    def get_object(self, ref: ObjectRef) -> Any:
        return self._objects[ref.ref_id]

    def shutdown(self) -> None:
        pass

    def info(self) -> base.ClusterInfo:
        return base.ClusterInfo(backend="toy", workers=self.n_workers, cores=1, memory=0, address="this process")

    def workers(self) -> list[base.WorkerInfo]:
        return [base.WorkerInfo(0, "toy", os.getpid())]


base.register_engine(base.EngineDescriptor("toy", __name__, "ToyBackend", "a toy engine in one file",
                                           local=True, in_process=True, options=("greeting",)))
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy engine's module, imported from a file of its own; the registry is restored afterwards."""
    (tmp_path / "toy_engine.py").write_text(TOY_ENGINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(base, "_ENGINES", dict(base._ENGINES))
    monkeypatch.delitem(sys.modules, "toy_engine", raising=False)
    yield importlib.import_module("toy_engine")
    hpc.shutdown()
    sys.modules.pop("toy_engine", None)


def _square(x: int) -> int:
    return x * x


def test_a_toy_engine_in_one_file_runs_tasks_through_hpc_init(toy):
    info = hpc.init(backend="toy", greeting="hi")
    assert info.backend == "toy" and hpc.cluster().address == "this process"
    sq = hpc.remote(_square)
    assert hpc.get([sq.remote(i) for i in range(5)]) == [0, 1, 4, 9, 16]
    assert hpc.get(sq.remote(sq.remote(3))) == 81  # a future as an argument: the runtime's dependencies
    with pytest.raises(ValueError, match="its options are: greeting, workers"):
        hpc.init(backend="toy", colour="red")


def test_the_magic_and_its_options_know_the_toy_engine(toy):
    pytest.importorskip("IPython")
    from eugo_lab import magics
    from eugo_lab.backends import available, resolve_name
    from eugo_lab.cellrun import options

    assert "toy" in available()
    assert options.build(backend="toy").backend == "toy"
    assert "-b/--backend local|dask|ray|threads|toy," in magics.options_help()
    with pytest.raises(options.OptionError, match="does not apply to -b/--backend toy"):
        options.build(backend="toy", address="tcp://10.0.0.1:8786")  # its descriptor says: local
    with pytest.raises(ValueError, match="does not apply to backend 'toy'"):
        resolve_name("toy", address="tcp://10.0.0.1:8786")


def test_the_analyses_and_the_thread_guard_read_the_toy_engines_descriptor(toy):
    from eugo_lab.analysis.timeline import LOCAL_BANDWIDTH, NETWORK_BANDWIDTH, bandwidth
    from eugo_lab.cellrun.optimize import guard_plan

    assert bandwidth(types.SimpleNamespace(meta={"backend": "toy"})) == LOCAL_BANDWIDTH
    assert bandwidth(types.SimpleNamespace(meta={"backend": "an engine of another machine"})) == NETWORK_BANDWIDTH
    assert guard_plan(types.SimpleNamespace(backend_name="toy")) is None  # its tasks are threads of this process
    from eugo_lab.hpc.counters import on_own_machine

    assert on_own_machine(types.SimpleNamespace(backend_name="toy"))  # no bill: its descriptor says local


def test_an_address_routes_by_the_engines_schemes():
    from eugo_lab.backends import resolve_name

    assert resolve_name(None, address="tcp://10.0.0.1:8786") == "dask"
    assert resolve_name(None, address="ray://10.0.0.1:10001") == "ray"
    assert resolve_name(None, address="auto") == "ray"
    assert resolve_name(None, cluster=object()) == "dask"
    assert resolve_name(None) == "local"


@pytest.mark.parametrize("address, engine", [("tcp://10.0.0.1:8786", "dask"), ("10.0.0.1:8786", "dask"),
                                             ("ray://10.0.0.1:10001", "ray"), ("auto", "ray")])
def test_hpc_init_and_the_magic_route_an_address_alike(address, engine):
    pytest.importorskip("IPython")
    from eugo_lab import magics
    from eugo_lab.backends import resolve_name
    from eugo_lab.cellrun import options

    assert base.route_address(address).name == engine
    assert resolve_name(None, address=address) == engine  # hpc.init(address=...) / EUGO_ADDRESS
    assert options.build(address=address, available=sorted(base.engines())).backend == engine  # %%eugo --address
    assert base.route_address("spark://10.0.0.1:7077") is None and base.route_address("nonsense") is None
    help_line = " ".join(magics.EugoMagics.eugo.__doc__.split())
    assert "scheduler to connect to: tcp://HOST:PORT, ray://HOST:PORT, HOST:PORT or auto" in help_line


@pytest.mark.parametrize("name", sorted(base.engines()))
def test_each_engines_descriptor_names_its_class_and_options(name):
    # The options a descriptor lists (for the help) are the class's own: a renamed option fails here.
    d = base.engine(name)
    cls = getattr(importlib.import_module(d.module), d.cls)
    assert issubclass(cls, base.Backend)
    params = set(inspect.signature(cls).parameters) - {"workers", "address", "cluster"}
    assert set(d.options) == params
