"""JIT: Numba tried on the worker, kept only when checked and faster; declines in plain words."""

from __future__ import annotations

import numpy as np
import pytest
from _optimize_tasks import big_product, boxed_sum, compiles_here, smooth

from eugo_lab import hpc
from eugo_lab.jit import checked as jit
from eugo_lab.jit.verdicts import explain, verdicts_from_trace
from eugo_lab.optimizations import report as opt_report


@pytest.fixture(autouse=True)
def _fresh():
    jit.reset()
    yield
    jit.reset()


def test_trial_compiles_a_loop_stencil_checks_it_and_is_much_faster():
    a = np.random.default_rng(0).random(200_000)
    value, verdict, compiled = jit.trial(smooth, (a,), {})
    assert verdict.compiled and compiled is not None
    np.testing.assert_array_equal(value, smooth(a))
    # Loose: ~1000x measured here; 10x leaves room for a loaded 2-core VM.
    assert verdict.plain_s / verdict.compiled_s >= 10, verdict
    assert 0 < verdict.compile_s < 30
    out = compiled(a)
    assert out.dtype == a.dtype and out.shape == a.shape and np.allclose(out, value)


def test_an_uncompilable_function_is_declined_in_plain_words():
    a = np.random.default_rng(1).random(50_000)
    value, verdict, compiled = jit.trial(boxed_sum, (a,), {})
    assert compiled is None and not verdict.compiled
    assert value == pytest.approx(a.sum())  # the plain function ran: the caller got its result
    assert (verdict.code, verdict.detail) == ("python-objects", "Box, a class"), verdict
    what, helps = explain(verdict.code)
    assert "Numba" in what and ("NumPy" in helps or "numbers" in helps)
    assert "TypingError" not in what + helps


def test_a_function_whose_compiled_result_differs_is_declined_by_the_check():
    a = np.random.default_rng(2).random(20_000)
    value, verdict, compiled = jit.trial(big_product, (a,), {})
    assert compiled is None and verdict.code == "differs"
    assert value == big_product(a)  # the exact Python integer, not the overflowed one
    assert "differs" in explain("differs")[0]


def test_lists_and_short_calls_are_declined_with_what_would_help():
    _, v, _ = jit.trial(lambda xs: sum(xs), ([1.0, 2.0],), {})
    assert v.code == "lists" and "np.asarray" in explain(v.code)[1]
    _, v, _ = jit.trial(lambda a: a.sum(), (np.ones(10),), {})
    assert v.code == "too-short"


def test_numba_typing_errors_are_translated():
    class E(Exception):
        pass

    assert jit.classify_numba_error(E("Untyped global name 'foo': cannot determine Numba type"))[0] == "unknown-call"
    # Numba's own wording, for a function, a class and an instance used in the loop:
    said = "Untyped global name '{}': Cannot determine Numba type of <class '{}'>"
    assert jit.classify_numba_error(E(said.format("helper", "function"))) == ("unknown-call", "helper")
    assert jit.classify_numba_error(E(said.format("Box", "type"))) == ("python-objects", "Box, a class")
    assert jit.classify_numba_error(E(said.format("B", "__main__.Box"))) == ("python-objects", "B, a Box object")
    arg = "non-precise type pyobject\n- argument 1: Cannot determine Numba type of <class 'dict'>"
    assert jit.classify_numba_error(E(arg)) == ("python-objects", "dict")
    assert jit.classify_numba_error(E("Cannot unify int64 and unicode_type for 's'"))[0] == "type-unstable"
    code, detail = jit.classify_numba_error(E("Unknown attribute 'dumps' of type Module(<module 'json' from 'x'>)"))
    assert (code, detail) == ("unknown-call", "json.dumps")
    assert "type-stable" in explain("type-unstable")[1]


def test_optimize_true_compiles_once_per_worker_and_reports_it():
    hpc.init("local", workers=2)
    try:
        f = hpc.remote(optimize=True)(smooth)
        a = np.random.default_rng(3).random(100_000)
        with hpc.trace() as region:
            out = hpc.get([f.remote(a) for _ in range(12)])
        for o in out:
            np.testing.assert_allclose(o, smooth(a))
        verdicts = verdicts_from_trace(region.trace)
        assert [v.function for v in verdicts] == ["smooth"] and verdicts[0].status == "compiled"
        assert verdicts[0].compiles == verdicts[0].workers <= 2  # one compile per worker that ran it
        counts = dict(hpc.get([hpc.remote(compiles_here).remote() for _ in range(20)]))
        assert all(n <= 1 for n in counts.values()), counts
        # The same code again (a new record, as a cell re-run makes): no second compile anywhere.
        g = hpc.remote(optimize=True)(smooth)
        hpc.get([g.remote(a) for _ in range(6)])
        counts = dict(hpc.get([hpc.remote(compiles_here).remote() for _ in range(20)]))
        assert all(n <= 1 for n in counts.values()), counts
        rep = opt_report.build(region.trace, None)
        item = rep.find("smooth", "jit")
        assert item.applied and "result checked" in item.precise and "->" in item.bucketed
    finally:
        hpc.shutdown()


def test_optimize_options_round_trip():
    f = hpc.remote(optimize=True)(smooth)
    assert isinstance(f._record.fn, jit.Optimized)
    assert not isinstance(f.options(optimize=False)._record.fn, jit.Optimized)
    with pytest.raises(TypeError, match="optimize"):
        hpc.remote(optimize="yes")(smooth)


@pytest.mark.parametrize("engine", ["dask", "ray"])
def test_cluster_workers_compile_once_each(engine):
    hpc.init(engine, workers=2)
    try:
        f = hpc.remote(optimize=True)(smooth)
        a = np.random.default_rng(4).random(100_000)
        with hpc.trace() as region:
            out = hpc.get([f.remote(a) for _ in range(8)])
        np.testing.assert_allclose(out[-1], smooth(a))
        (v,) = verdicts_from_trace(region.trace)
        assert v.status == "compiled" and v.compiles == v.workers  # _cluster's function cache: one wrapper per worker
        counts = dict(hpc.get([hpc.remote(compiles_here).remote() for _ in range(12)]))
        assert all(n <= 1 for n in counts.values()), counts
    finally:
        hpc.shutdown()


def test_the_compiled_version_runs_only_for_the_argument_types_its_trial_checked():
    # Numba would compile a new, unchecked version for other types (a reflected list, float32): plain runs instead.
    a = np.random.default_rng(0).random(200_000)
    opt = jit.Optimized(smooth, "smooth-key")
    np.testing.assert_array_equal(opt(a), smooth(a))  # the trial
    assert jit._verdicts["smooth-key"][0].compiled
    compiled = jit._verdicts["smooth-key"][1]
    assert jit._chosen(jit._verdicts["smooth-key"], smooth, (a.copy(),), {}) is compiled
    for other in (a.astype(np.float32), a[::2], a.tolist()[:1000]):
        assert jit._chosen(jit._verdicts["smooth-key"], smooth, (other,), {}) is smooth, type(other)
    small = a.astype(np.float32)[:1000]
    out = opt(small)
    assert out.dtype == np.float32 and np.array_equal(out, smooth(small))


def test_optimize_gives_a_task_that_takes_put_references_its_trial():
    # Before: --optimize wrapped only calls with arrays or lists in hand, so a task given hpc.put references
    # (resolved to arrays on the worker) never had a trial and got no JIT line in the report.
    from types import SimpleNamespace

    from eugo_lab.contract.refs import ObjectRef
    from eugo_lab.contract.task import FunctionRecord
    from eugo_lab.hpc import optimized

    rt = SimpleNamespace(optimize=1, auto_optimize=True, profiling=None)
    record = FunctionRecord(smooth, "smooth")
    ref = ObjectRef(None, 0, "ndarray")
    assert isinstance(optimized.jit_trial(rt, record, (ref,), {}, None).fn, jit.Optimized)
    assert optimized.jit_trial(rt, record, (3,), {}, None) is record  # nothing a JIT could be for
