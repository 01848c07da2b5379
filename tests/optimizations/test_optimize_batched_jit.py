"""``%%eugo --optimize`` for functions that run in batches: ``hpc.map`` and ``batch="auto"``.

A batch runs its items inside one task; the JIT trial on a worker's first call announces its
verdict as ``hpc.phase`` spans, which the batch now carries back, each on the row of the item
it started in. Without that, a function used only through ``hpc.map`` had no verdict, and a
``batch="auto"`` function's batched calls ran the plain version after the probes compiled it.
"""

from __future__ import annotations

import numpy as np
import pytest
from _optimize_tasks import boxed_sum, smooth

from eugo_lab import hpc
from eugo_lab.cellrun.optimize import CellOptimizer
from eugo_lab.cellrun.options import CellOptions
from eugo_lab.hpc import session


@pytest.fixture
def pool():
    hpc.init(workers=2)
    yield session.current()
    hpc.shutdown()


def _optimized_run(rt, body):
    """Run ``body()`` as an ``--optimize`` cell's main run does; return (its report, its trace)."""
    opt = CellOptimizer(CellOptions(optimize=True))
    with hpc.trace() as t:
        with opt.running(rt):
            body()
    return opt.finish(rt, t), t


def test_a_function_used_only_through_hpc_map_gets_a_verdict_and_runs_compiled(pool):
    data = np.random.default_rng(0).random(20_000)
    out: list = []
    report, t = _optimized_run(pool, lambda: out.extend(hpc.get(hpc.map(hpc.remote(smooth), [data] * 6))))
    for o in out:
        np.testing.assert_allclose(o, smooth(data))
    item = report.find("smooth", "jit")
    assert item is not None and item.applied and "result checked" in item.precise, report.items
    assert 1 <= item.numbers["compiles"] <= 2  # once on each worker that ran it
    # the trial's spans sit on item rows of the batches (rows whose batch column names their batch)
    df, ph = t.to_dataframe(), t.phases_dataframe(markers=True)
    jit_rows = df[df["task_id"].isin(ph[ph["phase"].str.startswith("jit: ")]["task_id"])]
    assert len(jit_rows) >= 1 and (jit_rows["batch"] >= 0).all()


def test_batch_auto_calls_run_the_compiled_version_the_probes_chose(pool):
    auto = hpc.remote(batch="auto")(smooth)
    data = np.random.default_rng(1).random(20_000)
    report, t = _optimized_run(pool, lambda: hpc.get([auto.remote(data) for _ in range(40)]))
    item = report.find("smooth", "jit")
    assert item is not None and item.applied, report.items
    batched = t.to_dataframe()
    assert (batched["batch"] >= 0).sum() >= 10  # most calls went in batches
    # the calls after the trial ran compiled: far below the plain run (a 100x+ loop; 10x is a loose bound)
    assert item.numbers["later_calls"] >= 10 and item.numbers["later_s"] < item.numbers["plain_s"] / 10


def test_an_uncompilable_mapped_function_is_declined_with_the_reason(pool):
    data = np.random.default_rng(2).random(2_000)
    report, _ = _optimized_run(pool, lambda: hpc.get(hpc.map(hpc.remote(boxed_sum), [data] * 4)))
    item = report.find("boxed_sum", "jit")
    assert item is not None and not item.applied and item.reason, report.items


def _read_then_sum(a):
    with hpc.phase("read"):
        b = a * 2
    return float(b.sum())


def test_phases_inside_mapped_items_land_on_their_items(pool):
    # 200 tiny items in one batch: items would run in growing groups sharing one clock read; items that
    # mark phases run one a group, so each span is found on its own item's row
    data = [np.full(10, i, dtype=float) for i in range(200)]
    with hpc.trace() as t:
        out = hpc.get(hpc.map(hpc.remote(_read_then_sum), data, batch=200))
    assert out == [20.0 * i for i in range(200)]
    df, ph = t.to_dataframe(), t.phases_dataframe()
    assert len(df) == 200 and df["batch"].nunique() == 1
    assert sorted(ph["task_id"]) == sorted(df["task_id"])  # one span per item, on its own row
    assert set(ph["phase"]) == {"read"}
    rows = df.set_index("task_id").loc[ph["task_id"]]
    assert ((ph["start"].to_numpy() >= rows["start"].to_numpy() - 1e-6)
            & (ph["end"].to_numpy() <= rows["end"].to_numpy() + 1e-6)).all()  # inside its item's span


def _twice(s):
    return int(s) * 2


def test_a_map_of_plain_scalars_runs_under_optimize(pool):
    # hpc.map packs a batch of plain items ahead (not a list): the JIT trial must not index it.
    out: list = []
    _optimized_run(pool, lambda: out.extend(hpc.get(hpc.map(hpc.remote(_twice), [str(i) for i in range(500)]))))
    assert out == [2 * i for i in range(500)]


def _double(x):
    return 2 * x


def test_the_records_the_jit_wraps_live_no_longer_than_the_functions_own(pool):
    # hpc.map on a plain function makes a new record each call; its wrapped record must go with it,
    # or every traced region (which reads every live record's send count) slows as they pile up.
    import gc

    from eugo_lab.contract.task import live_records

    hpc.get(hpc.map(_double, [1, 2]))
    gc.collect()
    before = len(live_records())
    for _ in range(40):
        assert hpc.get(hpc.map(_double, [1, 2, 3])) == [2, 4, 6]
    gc.collect()
    assert len(live_records()) <= before + 2
