"""``%%eugo -w N``, ``--compare`` and ``--scaling`` restart the runtime with every option it was started with."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from eugo_lab import backends, hpc
from eugo_lab.cellrun import options as opt
from eugo_lab.cellrun.carry import restart_options
from eugo_lab.hpc import session

CELL = "from eugo_lab import hpc\nhpc.get(hpc.map(abs, range(-4, 4)))"


@pytest.mark.parametrize("line", ["-w 2 --no-live", "--compare -w 2 --no-live", "--scaling 1,2 --no-live"])
def test_a_restart_keeps_every_option_of_the_runtime(ip, line, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    hpc.init(backend="local", workers=1, memory_limit="700MB", cancel_grace=0.25, threads_per_worker=1,
             optimize=False)
    with capture_output():
        ip.run_cell_magic("eugo", line, CELL)
    rt = session.current(start=False)
    assert rt.backend.info().workers == 2  # it was restarted, for the cell's worker count
    assert rt.options["memory_limit"] == "700MB" and rt.options["cancel_grace"] == 0.25
    assert rt.backend.memory_limit == 700_000_000 and rt.backend.cancel_grace == 0.25
    assert rt.options["threads_per_worker"] == 1
    assert rt.auto_optimize is False


class _Running:
    """The parts of a runtime that restart_options reads."""

    def __init__(self, backend_name: str, auto_optimize: bool = True, **options: object):
        self.backend_name = backend_name
        self.options = {"workers": 2, **options}
        self.auto_optimize = auto_optimize


def test_another_engine_that_cannot_take_an_option_is_refused_by_name():
    rt = _Running("local", memory_limit="1GB", cancel_grace=0.5)
    with pytest.raises(opt.OptionError) as err:
        restart_options(rt, "threads", 2)
    msg = str(err.value)
    assert "memory_limit='1GB'" in msg and "cancel_grace=0.5" in msg and "threads engine does not take" in msg
    assert "hpc.init(backend='threads'" in msg
    # the same engine, or one that takes them, carries them over
    assert restart_options(rt, "local", 4) == {"memory_limit": "1GB", "cancel_grace": 0.5}
    assert restart_options(_Running("local", auto_optimize=False), "threads", 1) == {"optimize": False}


def test_a_cluster_this_kernel_did_not_start_is_not_resized():
    rt = _Running("dask", address="tcp://10.0.0.5:8786")
    with pytest.raises(opt.OptionError, match="cannot resize"):
        restart_options(rt, "dask", 1)
    assert restart_options(rt, "dask", None) == {"address": "tcp://10.0.0.5:8786"}
    assert restart_options(rt, "local", 2) == {}  # another engine: it starts where it starts


def test_the_magic_refuses_before_the_cell_runs(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    hpc.init(backend="local", workers=1, memory_limit="700MB")
    with pytest.raises(UsageError, match="memory_limit='700MB'"):
        ip.run_cell_magic("eugo", "-b threads -w 2 --no-live", "raise AssertionError('the cell must not run')")
    assert "threads" in backends.available()
