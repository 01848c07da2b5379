"""Which cells are eugo_lab.hpc cells and which are written in an engine's own API (``cellrun.native.uses_hpc``).

Read from the code, never the words: a Dask or Ray exercise cell takes its inputs with
``from eugo_lab import exercises`` and must still be recorded from its engine.
"""

from __future__ import annotations

import pytest

from eugo_lab.cellrun.native import uses_hpc

CELLS = {
    "hpc named": ("x = hpc.get(f)", True),
    "hpc imported": ("from eugo_lab import hpc", True),
    "hpc module imported": ("import eugo_lab.hpc as h\nh.get(x)", True),
    "hpc in a line magic": ("%time hpc.get(x)", True),
    "hpc in a cell magic": ("%%time\nhpc.get(x)\n", True),
    "a workload module": ("from eugo_lab.workloads import geo\ngeo.read(1)", True),
    "the exercises' inputs": ('from eugo_lab import exercises\np = exercises.problem("dask-scatter")', False),
    "the exercises' module": ("from eugo_lab.exercises import problem", False),
    "hpc in a comment": ("# like hpc.get, but Dask's\ncounts = client.gather(futs)", False),
    "hpc in a string": ('print("hpc")', False),
}


@pytest.mark.parametrize(("cell", "expected"), list(CELLS.values()), ids=list(CELLS))
def test_a_cell_uses_hpc_when_its_code_does(cell, expected):
    assert uses_hpc(cell) is expected
