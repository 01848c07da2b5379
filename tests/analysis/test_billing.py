"""What a runtime is billed at: a setting and a runtime option, shown with every cost; no bill on your own machine."""

from __future__ import annotations

import types

import pytest

from eugo_lab import hpc
from eugo_lab.cellrun.status import status
from eugo_lab.hpc import session
from eugo_lab.hpc.counters import DEFAULT_PRICE, Rate, rate
from eugo_lab.hpc.status import snapshot
from eugo_lab.render import html, text
from eugo_lab.settings import PRICE_ENV


def _runtime(backend: str = "local", address: str | None = None, price: float | None = None):
    """A stand-in runtime: what the billing reads (the engine's name, its address, the init option)."""
    be = types.SimpleNamespace(address=address, cluster=None)
    return types.SimpleNamespace(backend_name=backend, backend=be, price_per_worker_hour=price)


@pytest.fixture(autouse=True)
def no_price_setting(monkeypatch):
    monkeypatch.delenv(PRICE_ENV, raising=False)


def test_a_pool_on_your_own_machine_has_no_bill_unless_a_rate_is_set(monkeypatch):
    # A fixed $0.10 per worker-hour billed a laptop's local pool "$0.08 so far".
    for own in (_runtime("local"), _runtime("threads"), _runtime("dask"), _runtime("ray")):
        r = rate(own)
        assert r == Rate(None, "own machine") and r.cost(4, 3600.0) is None
        assert r.words() == "on your own machine: no bill"
    monkeypatch.setenv(PRICE_ENV, "0.096")
    r = rate(_runtime("local"))
    assert (r.per_worker_hour, r.source) == (0.096, PRICE_ENV) and r.cost(2, 3600.0) == pytest.approx(0.192)
    assert r.words() == f"at $0.096 per worker-hour ({PRICE_ENV})"
    # the runtime's own option wins over the setting, and %eugo status --price over both
    assert rate(_runtime("local", price=0.5)).words() == "at $0.5 per worker-hour (hpc.init(price_per_worker_hour=...))"
    assert rate(_runtime("local", price=0.5), price=2.0).words() == "at $2 per worker-hour (--price)"


def test_a_remote_cluster_with_no_rate_is_priced_at_an_example_rate_that_says_so():
    r = rate(_runtime("dask", address="tcp://scheduler:8786"))
    assert r.per_worker_hour == DEFAULT_PRICE and "example rate" in r.words() and "price_per_worker_hour" in r.words()


@pytest.mark.parametrize("bad", ["cheap", "-1", "inf", "nan"])
def test_a_malformed_price_setting_names_the_variable(monkeypatch, bad):
    monkeypatch.setenv(PRICE_ENV, bad)
    with pytest.raises(ValueError, match=PRICE_ENV):
        rate(_runtime("local"))


@pytest.mark.parametrize("bad", [-1, "0.1", True, float("inf")])
def test_init_refuses_a_price_that_is_not_one_before_starting(bad):
    hpc.shutdown()
    with pytest.raises(ValueError, match="price_per_worker_hour"):
        hpc.init(backend="threads", workers=1, price_per_worker_hour=bad)
    assert not hpc.is_initialized()


def test_status_and_the_status_file_show_the_rate_or_no_bill():
    hpc.init(backend="threads", workers=1)
    try:
        rt = session.current(start=False)
        st = status(rt)
        assert st.cost is None and "cost: on your own machine: no bill" in text.status_text(st, precise=True)
        assert "on your own machine: no bill" in html.status_html(st)
        doc = snapshot(rt)
        assert doc["price"] is None and doc["cost"] is None and doc["price_source"] == "own machine"
        hpc.init(backend="threads", workers=1, price_per_worker_hour=0.25)
        rt = session.current(start=False)
        st = status(rt, now=rt.started_at + 3600.0)
        assert st.cost == pytest.approx(0.25)
        assert "cost: $0.2500 so far at $0.25 per worker-hour (hpc.init(price_per_worker_hour=...))" in \
            text.status_text(st, precise=True)
        doc = snapshot(rt)
        assert doc["price"] == 0.25 and doc["price_source"].startswith("hpc.init") and doc["cost"] >= 0
    finally:
        hpc.shutdown()


def test_a_cell_that_restarts_the_runtime_keeps_its_rate():
    from eugo_lab.cellrun.carry import restart_options

    rt = types.SimpleNamespace(options={"workers": 2}, backend_name="local", auto_optimize=True,
                               price_per_worker_hour=0.25)
    assert restart_options(rt, "local", 1) == {"price_per_worker_hour": 0.25}
    assert restart_options(rt, "threads", 1) == {"price_per_worker_hour": 0.25}  # every engine takes it
    rt.price_per_worker_hour = None
    assert restart_options(rt, "local", 1) == {}
