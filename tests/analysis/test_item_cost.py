"""The one per-item cost estimator behind hpc.map's batches, batch="auto" coalescing and the local pool's prefetch."""

from __future__ import annotations

import pytest

from eugo_lab.contract.item_cost import ALPHA, ItemCost, task_seconds
from eugo_lab.contract.row import TaskStats


def test_the_first_timing_is_the_estimate_and_later_ones_move_it_by_alpha():
    cost = ItemCost()
    assert cost.seconds is None
    cost.add(0.010, items=10)  # a batch of 10 items in 10 ms
    assert cost.seconds == pytest.approx(0.001)
    cost.add(0.003)  # one item in 3 ms
    assert cost.seconds == pytest.approx(0.001 + ALPHA * 0.002)


def test_a_light_weight_moves_the_estimate_less():
    cost = ItemCost(0.001)
    cost.add(0.003, weight=0.25)
    assert cost.seconds == pytest.approx(0.001 + ALPHA * 0.25 * 0.002)


def test_items_in_a_span_uses_the_default_before_any_timing_and_never_divides_by_zero():
    cost = ItemCost()
    with pytest.raises(ValueError, match="no timing yet"):
        cost.items_in(0.2)
    assert cost.items_in(0.2, default=0.001) == 200
    cost.add(0.0)  # a body too short for the clock
    assert cost.items_in(0.2) == 2_000_000
    assert ItemCost(1.0).items_in(0.2) == 0


def test_an_attempt_costs_its_body_and_both_pickling_steps():
    stats = TaskStats(0.0, 0.5, 0.4, 0.1, 0.2, 10, 20, None, None, None)
    assert task_seconds(stats) == pytest.approx(0.8)
