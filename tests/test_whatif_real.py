"""What-if accuracy on real runs: a finding's predicted wall time after the fix vs the fixed code's.

Sleep-based tasks (two cores suffice); generous bounds for a shared VM. The measured table
(several rounds, errors per round) is ``python -m benchmarks.whatif``, in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import statistics

import pytest

from benchmarks import whatif

# The target is 20%; on a VM shared with other test runs single rounds stray further
# (RESULTS.md has the measured spread: batching and put medians reached +35-69% in loaded runs),
# so the median of 3 rounds must be within 50%: a wrong model is off by 2x or more.
BOUND = 0.5


@pytest.fixture(scope="module")
def samples():
    return whatif.run(rounds=3)


@pytest.mark.parametrize("case", [c[0] for c in whatif.CASES])
def test_prediction_after_the_fix_is_close_to_the_fixed_run(samples, case):
    mine = [s for s in samples if s.case == case]
    assert len(mine) >= 2, f"the finding was raised in {len(mine)} of 3 rounds"
    err = statistics.median(s.error for s in mine)
    assert abs(err) <= BOUND, [(round(s.predicted, 3), round(s.measured, 3)) for s in mine]
