"""``backends.available()`` lists the engines installed here, and a missing one is named with its install command."""

from __future__ import annotations

import sys

import pytest

from eugo_lab import backends, hpc
from eugo_lab.cellrun import options as opt


@pytest.fixture
def ray_missing(monkeypatch):
    real = backends.installed_package
    monkeypatch.setattr(backends, "installed_package", lambda p: p != "ray" and real(p))


def test_available_lists_only_installed_engines(ray_missing):
    assert "ray" in backends.known()
    assert "ray" not in backends.available()
    assert {"local", "threads"} <= set(backends.available())


def test_available_does_not_import_the_engines():
    was = {m for m in ("ray", "distributed") if m in sys.modules}
    backends.available()
    assert {m for m in ("ray", "distributed") if m in sys.modules} == was


def test_the_magic_names_the_extra_at_once(ray_missing):
    with pytest.raises(opt.OptionError) as err:
        opt.build(backend="ray")
    msg = str(err.value)
    assert 'pip install "eugo-lab[ray]"' in msg and "not installed" in msg and "engines available: " in msg
    with pytest.raises(opt.OptionError, match=r'eugo-lab\[ray\]'):
        opt.build(address="ray://10.0.0.5:10001")


def test_init_names_the_extra_before_it_stops_the_running_runtime(local2, ray_missing):
    with pytest.raises(ImportError) as err:
        hpc.init(backend="ray")
    assert 'pip install "eugo-lab[ray]"' in str(err.value) and "the ray engine needs ray" in str(err.value)
    assert hpc.is_initialized()  # the local pool still runs
