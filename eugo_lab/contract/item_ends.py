"""Each item's end in an ``hpc.map`` batch, measured per group of items by the worker.

Its own small module, on the path both sides load: the driver unpickles one per batch,
and importing the whole worker shim for it (ctypes, signal handling) cost the first
``hpc.map`` of a session ~3 ms. Nothing here imports eugo_lab; numpy only on the driver.
"""

from __future__ import annotations

from array import array
from typing import Any


class ItemEnds:
    """The ends of a batch's items, measured per group: ``counts[g]`` items ended by ``ends[g]``.

    A group's items share its time evenly (they are tiny: together they last about
    ``backends._worker.GROUP_CLOCKS`` clock reads). Kept as two compact arrays on the wire;
    ``np.asarray`` expands them on the driver (the recorder does so), one float64 per item.
    """

    __slots__ = ("counts", "ends")

    def __init__(self, counts: bytes, ends: bytes):
        self.counts = counts  # int64 bytes: items per group
        self.ends = ends  # float64 bytes: each group's end, seconds after the body's start

    def __reduce__(self) -> tuple:
        return ItemEnds, (self.counts, self.ends)

    def __len__(self) -> int:
        return len(self.counts) and int(sum(array("q", self.counts)))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        counts = np.frombuffer(self.counts, dtype=np.int64)
        ends = np.frombuffer(self.ends, dtype=np.float64)
        # Each item gets an even share of its group's time; the running sum of the shares
        # lands on every group's measured end (to rounding). Two passes over the items: the
        # recorder's I/O thread does this once per batch.
        share = np.diff(ends, prepend=0.0) / np.maximum(counts, 1)
        out = np.cumsum(np.repeat(share, counts))
        return out if dtype is None else out.astype(dtype, copy=False)
