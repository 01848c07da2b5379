"""Every task option on every engine: honoured, or refused with a message that names it; never ignored.

The table below is the contract: for each option of ``@hpc.remote`` (``TaskOptions``) and each
engine, either a probe that shows the option took effect (a ``cpus=2`` task keeps the cores it
holds to itself, a ``memory=`` task that outgrows its limit is stopped, a renamed task is
traced under its name...) or the words its ``ResourceRequestError`` must contain. One test per
engine starts its cluster once and walks the whole table on it (Dask and Ray are slow to start).
No option is left out: the test fails when ``TaskOptions`` grows a field the table does not cover.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _optimize_tasks import smooth
from _waiting import wait_for_file

from eugo_lab import hpc
from eugo_lab.contract.task import TaskOptions

HONOURED = "honoured"

ENGINES: dict[str, dict[str, Any]] = {
    "local": {"backend": "local", "workers": 2, "gpus": 0},
    "threads": {"backend": "threads", "workers": 2},
    # one worker with two task threads: a cpus=2 task fits, a cpus=3 one does not
    "dask": {"backend": "dask", "workers": 1, "threads_per_worker": 2, "dashboard": False},
    "ray": {"backend": "ray", "workers": 2, "num_gpus": 0},
}


# -- what the tasks do ------------------------------------------------------------------------------------
def wide(marker: str, seconds: float) -> tuple[float, float]:
    """Announce the start in ``marker``, hold on for ``seconds``; return (start, end) wall times."""
    start = time.time()
    with open(marker, "w") as f:
        f.write("started")
    time.sleep(seconds)
    return start, time.time()


def started() -> float:
    return time.time()


def echo(x: Any) -> Any:
    return x


def hog(mb: int) -> int:
    """Grow by ``mb`` MiB (written, so resident) and hold it."""
    block = b"x" * (mb << 20)
    time.sleep(5)
    return len(block)


def flaky(marker: str) -> str:
    """Fail with ValueError the first time (no marker yet), succeed the next."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise ValueError("first attempt fails")
    return "second attempt"


def inc(x: int) -> int:
    return x + 1


# -- probes: an option took effect --------------------------------------------------------------------------
def _cpus_2(engine: str, tmp: str) -> None:
    """A cpus=2 task on two cores: a task submitted while it runs starts only after it ended."""
    marker = os.path.join(tmp, f"wide-{engine}")
    w = hpc.remote(wide).options(cpus=2).remote(marker, 0.6)
    wait_for_file(marker, "started", timeout=60)
    narrow = hpc.remote(started).remote()
    (_, wide_end), narrow_start = hpc.get([w, narrow], timeout=120)
    assert narrow_start >= wide_end, f"{engine}: a task ran beside a cpus=2 task on a 2-core cluster"


def _cpus_half(engine: str, tmp: str) -> None:
    assert hpc.get(hpc.remote(echo).options(cpus=0.5).remote(7), timeout=60) == 7


def _memory(engine: str, tmp: str) -> None:
    with pytest.raises(hpc.WorkerMemoryError, match="memory limit"):
        hpc.get(hpc.remote(hog).options(memory="150MB", retries=0).remote(400), timeout=120)


def _retries(engine: str, tmp: str) -> None:
    marker = os.path.join(tmp, f"flaky-{engine}")
    f = hpc.remote(flaky)
    assert hpc.get(f.options(retries=1, retry_exceptions=(ValueError,)).remote(marker), timeout=60) == \
        "second attempt"
    os.unlink(marker)
    with pytest.raises(ValueError, match="first attempt fails"):  # without retry_exceptions: not re-run
        hpc.get(f.options(retries=1).remote(marker), timeout=60)
    os.unlink(marker)
    with pytest.raises(ValueError, match="first attempt fails"):  # retries=0: no second attempt either
        hpc.get(f.options(retries=0, retry_exceptions=True).remote(marker), timeout=60)


def _name(engine: str, tmp: str) -> None:
    with hpc.trace() as t:
        hpc.get(hpc.remote(echo).options(name=f"renamed_{engine}").remote(1), timeout=60)
    assert f"renamed_{engine}" in set(t.to_dataframe()["function"])


def _optimize(engine: str, tmp: str) -> None:
    from eugo_lab.jit import checked

    checked.reset()  # the threads engine runs the trial in this process: no verdict cached from earlier tests
    data = np.random.default_rng(0).random(200_000)
    with hpc.trace() as t:
        out = hpc.get(hpc.remote(optimize=True)(smooth).remote(data), timeout=120)
    np.testing.assert_allclose(out, smooth(data))
    phases = set(t.phases_dataframe(markers=True)["phase"])
    assert any(p.startswith("jit: ") for p in phases), f"{engine}: no JIT trial ran ({sorted(phases)})"


def _batch(engine: str, tmp: str) -> None:
    from eugo_lab.hpc import coalesce

    name = f"tiny_{engine}"
    tiny = hpc.remote(batch="auto", name=name)(inc)
    assert hpc.get([tiny.remote(i) for i in range(400)], timeout=120) == list(range(1, 401))
    (stats,) = [s for s in coalesce.all_stats() if s.function == name]
    assert stats.batches >= 1 and stats.backend_tasks < stats.calls, stats


def refused(*words: str) -> tuple[str, ...]:
    """A refusal: ``ResourceRequestError`` at once, its message containing each of ``words``."""
    return words


# option label -> (options given, {engine: probe | refusal words})
TABLE: dict[str, tuple[dict[str, Any], dict[str, Callable | tuple[str, ...]]]] = {
    "cpus=2": ({"cpus": 2}, {
        "local": _cpus_2, "dask": _cpus_2, "ray": _cpus_2,
        "threads": refused("requested cpus=2, but the threads backend runs each task on one of its 2 threads",
                           "options(cpus=1)"),
    }),
    "cpus=3": ({"cpus": 3}, {
        "local": refused("requested cpus=3, but this local pool has 2 worker processes", "at most cpus=2"),
        "dask": refused("requested cpus=3, but no worker of the Dask cluster offers CPU=3: its 1 worker(s) offer "
                        "CPU=2", "threads_per_worker=3"),
        "ray": refused("requested cpus=3, but no node of the Ray cluster offers CPU=3"),
        "threads": refused("requested cpus=3, but the threads backend"),
    }),
    "cpus=0.5": ({"cpus": 0.5}, {e: _cpus_half for e in ENGINES}),
    "gpus=1": ({"gpus": 1}, {
        "local": refused("requested gpus=1, but this local pool has no GPU workers"),
        "dask": refused("requested gpus=1, but no worker of the Dask cluster offers", "GPU=1"),
        "ray": refused("requested gpus=1, but no node of the Ray cluster offers", "GPU=1"),
        "threads": refused("requested gpus=1, but the threads backend has no GPU workers"),
    }),
    "resources": ({"resources": {"TPU": 1}}, {
        "local": refused("requested resources={'TPU': 1}, but the local pool offers no custom resources"),
        "dask": refused("requested resources={'TPU': 1}, but no worker of the Dask cluster offers", "TPU=1"),
        "ray": refused("requested resources={'TPU': 1}, but no node of the Ray cluster offers", "TPU=1"),
        "threads": refused("requested resources={'TPU': 1}, but the threads backend"),
    }),
    "memory": ({"memory": "150MB"}, {
        "local": _memory, "dask": _memory, "ray": _memory,
        "threads": refused("requested memory=150.0 MB, but the threads backend runs tasks as threads of this "
                           "process", "options(memory=None)"),
    }),
    "retries, retry_exceptions": ({}, {e: _retries for e in ENGINES}),
    "name": ({}, {e: _name for e in ENGINES}),
    "optimize": ({}, {e: _optimize for e in ENGINES}),
    "batch": ({}, {e: _batch for e in ENGINES}),
}


def test_the_table_covers_every_task_option():
    covered = {"cpus", "gpus", "memory", "resources", "retries", "retry_exceptions", "name", "optimize", "batch"}
    fields = {f.name for f in dataclasses.fields(TaskOptions)}
    assert fields == covered, f"options without a row in TABLE: {sorted(fields - covered)}"
    for label, (_, by_engine) in TABLE.items():
        assert set(by_engine) == set(ENGINES), f"{label}: {sorted(set(ENGINES) - set(by_engine))} not covered"


def _walk(engine: str, tmp: str) -> dict[str, str]:
    """Run every row of the table on ``engine`` (already started); return what each row found."""
    seen: dict[str, str] = {}
    for label, (opts, by_engine) in TABLE.items():
        expected = by_engine[engine]
        if callable(expected):
            expected(engine, tmp)
            seen[label] = HONOURED
            continue
        t0 = time.monotonic()
        with pytest.raises(hpc.ResourceRequestError) as info:
            hpc.get(hpc.remote(echo).options(**opts).remote(1), timeout=60)
        message = str(info.value)
        for words in expected:
            assert words in message, f"{engine}, {label}: {words!r} not in {message!r}"
        assert "drop the request (echo.options(" in message, message
        assert time.monotonic() - t0 < 30, f"{engine}, {label}: refused only after {time.monotonic() - t0:.0f} s"
        seen[label] = "refused"
        assert hpc.get(hpc.remote(echo).remote(2), timeout=60) == 2  # the engine is unharmed by the refusal
    return seen


@pytest.mark.parametrize("engine", list(ENGINES))
def test_each_option_is_honoured_or_refused(engine, tmp_path):
    if engine in ("dask", "ray"):
        pytest.importorskip("distributed" if engine == "dask" else "ray")
    hpc.init(**ENGINES[engine])
    seen = _walk(engine, str(tmp_path))
    assert seen == {label: HONOURED if callable(by[engine]) else "refused" for label, (_, by) in TABLE.items()}
