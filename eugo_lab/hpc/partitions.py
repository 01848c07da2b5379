"""``hpc.map_partitions``: run a pandas analysis on row partitions of a DataFrame, one task each, and combine.

The analysis stays what it was on one machine, a function of a DataFrame; the runtime
splits the frame into **partitions**, runs the function once per partition, and joins the
results. Partition size is the lever: too few partitions leave workers idle (one slow
partition holds up the run), too many pay a fixed cost per partition (the task's scheduling
overhead plus pandas' own per-call cost) that the work no longer covers.

Each partition travels by value, as the argument of its one task. ``hpc.put`` pays off
when many tasks share one object; here every partition is read by exactly one task, so a
put would add a store and a reference without saving a copy. By value, the large column
buffers already go through shared memory on the local pool, and the trace counts them: the
tasks' ``bytes_in`` add up to about the frame's own size (``tests/hpc/test_map_partitions.py``).
Measured on the 2-core VM, 8 partitions of a 64 MB numeric frame, medians of 5 alternated
runs: by value 131 ms, one put per partition 160 ms (and the trace then shows 576 bytes in).
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eugo_lab.hpc import session
from eugo_lab.hpc.future import STATE_FAILED, STATE_PENDING
from eugo_lab.hpc.remote_function import RemoteFunction, remote

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

# Partitions per worker for partitions="auto". One per worker leaves no slack: a partition
# that runs 2x slower (a busy core, denser rows) doubles the run. With four, a worker that
# finishes early takes another partition, so one slow partition delays the end by about a
# quarter of a worker's share; more than four mostly adds per-partition fixed costs.
PARTITIONS_PER_WORKER = 4
# The smallest partition "auto" makes. pandas pays a fixed ~0.1-0.5 ms per operation
# whatever the row count (the Course 1 lesson's eight-step summary: ~4 ms on 500 rows,
# ~40 ms on 50,000, measured on the 2-core VM); at 10,000 rows the vectorized work per
# partition is at least that fixed part, so splitting further mostly multiplies it.
MIN_PARTITION_ROWS = 10_000
# The largest partition "auto" makes. A worker holds its partition, the copy it unpickled
# and pandas' intermediates (often 2-4x the input): 64 MiB keeps that to a few hundred MB
# per worker, and moving 64 MiB through shared memory (~20-50 ms) stays small beside the
# work. Above it the count grows past PARTITIONS_PER_WORKER per worker; this limit wins
# over MIN_PARTITION_ROWS, because memory is a hard limit and the row floor only a cost.
MAX_PARTITION_BYTES = 64 << 20


def auto_partitions(rows: int, nbytes: int, workers: int) -> int:
    """The partition count ``partitions="auto"`` uses for ``rows`` rows of ``nbytes`` bytes on ``workers`` workers."""
    n = min(PARTITIONS_PER_WORKER * max(1, workers), rows // MIN_PARTITION_ROWS)
    n = max(n, math.ceil(nbytes / MAX_PARTITION_BYTES))
    return max(1, min(n, rows))


def _check_count(partitions: Any, limit: int, what: str, unit: str) -> int | None:
    """``partitions`` as an int (None for "auto"); at most ``limit`` (``what`` says why) of ``unit``."""
    if isinstance(partitions, str) and partitions == "auto":
        return None
    choices = f"pass partitions='auto' or an int from 1 to {limit} ({what})"
    if isinstance(partitions, bool) or not hasattr(type(partitions), "__index__"):  # ints, NumPy ints; not 2.0
        raise ValueError(f"partitions={partitions!r} is not a partition count; {choices}")
    partitions = operator.index(partitions)
    if partitions < 1:
        raise ValueError(f"partitions={partitions!r}: the data needs at least 1 partition; {choices}")
    if partitions > limit:
        raise ValueError(f"partitions={partitions!r}: more partitions than {unit} would leave some empty; {choices}")
    return partitions


def _workers(workers: int | None) -> int:
    """``workers``, or the running runtime's worker count (the default runtime starts if none runs)."""
    if workers is not None:
        return workers
    return session.current().backend.worker_count  # type: ignore[union-attr]


def _row_bounds(rows: int, n: int) -> list[tuple[int, int]]:
    """``n`` contiguous ``(start, stop)`` row spans whose sizes differ by at most one."""
    cuts = [i * rows // n for i in range(n + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def _group_codes(frame: pd.DataFrame, by: Hashable | Sequence[Hashable]) -> np.ndarray:
    """One int per row: which group of the ``by`` columns it belongs to (missing keys form a group too)."""
    keys = list(by) if isinstance(by, (list, tuple)) else [by]
    if not keys:
        raise ValueError("by=[] names no column; pass a column name (by='meter') or a list of them, or leave by out")
    missing = [k for k in keys if k not in frame.columns]
    if missing:
        cols = ", ".join(repr(c) for c in frame.columns)
        raise ValueError(f"by={by!r}: no column {', '.join(repr(k) for k in missing)} in the DataFrame; "
                         f"its columns are {cols}")
    if len(keys) == 1:  # one column: factorize it directly (~10x faster than a groupby's ngroup)
        import pandas as pd

        codes, _ = pd.factorize(frame[keys[0]], use_na_sentinel=False)
        return codes
    return frame.groupby(keys, sort=False, observed=True, dropna=False).ngroup().to_numpy()


def _assign_groups(sizes: np.ndarray, n: int) -> np.ndarray:
    """Partition of each group: biggest groups first, each to the partition with the fewest rows so far.

    Longest-processing-time-first balancing: no partition exceeds the fair share by more than
    its smallest group, except where one group alone is bigger than the fair share.
    """
    import numpy as np

    out = np.empty(len(sizes), dtype=np.int64)
    heap = [(0, p) for p in range(n)]  # (rows so far, partition): ties go to the lower partition
    for g in np.argsort(-sizes, kind="stable"):
        rows, p = heapq.heappop(heap)
        out[g] = p
        heapq.heappush(heap, (rows + int(sizes[g]), p))
    return out


def plan(data: pd.DataFrame | pd.Series, partitions: int | str = "auto", *, by: Any = None,
         workers: int | None = None) -> list[slice | np.ndarray]:
    """The rows of each partition, as ``iloc`` selectors: contiguous spans, or whole groups of ``by`` each.

    ``workers`` sizes ``"auto"``; None asks the running runtime (starting the default one), and
    only once the data and the count have been checked, so a bad call starts no workers.
    Validates everything before any row is copied. Row spans keep the frame's order
    (partition 0 holds the first rows). With ``by``, the rows of one key value are all in one
    partition, each partition's rows in their original order.
    """
    import numpy as np
    import pandas as pd

    if not isinstance(data, (pd.DataFrame, pd.Series)):
        raise TypeError(f"hpc.map_partitions takes a pandas DataFrame or Series, got {type(data).__name__}; "
                        "for a list of items use hpc.map(f, items)")
    rows = len(data)
    if by is None:
        count = _check_count(partitions, max(1, rows), f"the data has {rows} rows", "rows")
        if count is None:
            nbytes = int(np.sum(data.memory_usage(index=True, deep=True)))
            count = auto_partitions(rows, nbytes, _workers(workers))
        return [slice(lo, hi) for lo, hi in _row_bounds(rows, count)]
    if not isinstance(data, pd.DataFrame):
        raise ValueError("by= groups the rows of a DataFrame by its columns; a Series has none: pass "
                         "series.to_frame() or leave by out")
    codes = _group_codes(data, by)
    sizes = np.bincount(codes, minlength=int(codes.max()) + 1 if rows else 0)
    groups = len(sizes)
    count = _check_count(partitions, max(1, groups), f"by={by!r} has {groups} distinct values", "keys")
    if count is None:
        nbytes = int(np.sum(data.memory_usage(index=True, deep=True)))
        count = min(auto_partitions(rows, nbytes, _workers(workers)), max(1, groups))
    if not groups:
        return [slice(0, rows)]
    part = _assign_groups(sizes, count)[codes]
    # One comparison pass per partition (~0.3 ms per 400,000 rows) gives its rows already in
    # order, where sorting all rows by partition cost ~10x more before the first could be sent.
    return [np.flatnonzero(part == p) for p in range(count)]


def split(data: pd.DataFrame | pd.Series, partitions: int | str = "auto", *, by: Any = None,
          workers: int | None = None) -> list[pd.DataFrame | pd.Series]:
    """The partitions ``map_partitions`` sends (see :func:`plan`), as DataFrames or Series."""
    return [data.iloc[rows] for rows in plan(data, partitions, by=by, workers=workers)]


def _combine_default(results: list) -> Any:
    """``pd.concat`` in partition order when every result is a DataFrame or Series, else the list."""
    import pandas as pd

    if results and all(isinstance(r, (pd.DataFrame, pd.Series)) for r in results):
        return pd.concat(results)
    return results


def _failed_partition(futures: list, sizes: list[int]) -> str:
    """Which partition's task failed first, as a note for the error the caller sees."""
    for i, fut in enumerate(futures):
        if fut._state == STATE_FAILED:
            return f"hpc.map_partitions: raised by {fut.function}() on partition {i} of {len(futures)} " \
                   f"({sizes[i]} rows)"
    return "hpc.map_partitions: a partition's task failed"


@dataclass(frozen=True)
class PartitionsRun:
    """One ``map_partitions`` call as a traced region keeps it (``Trace.partition_runs``), for a checker.

    ``function``: the name its tasks ran under; ``rows``: the rows of the frame it was given; ``results``:
    the partial results as get() returned them, in partition order; ``combine``: the combine it applied
    to them (the default one when none was given).
    """

    function: str
    rows: int
    results: tuple[Any, ...]
    combine: Callable[[list], Any]


def map_partitions(f: Callable[[Any], Any] | RemoteFunction, df: pd.DataFrame | pd.Series,
                   partitions: int | str = "auto", combine: Callable[[list], Any] | None = None, *,
                   by: Any = None) -> Any:
    """Run ``f(partition)`` on row partitions of ``df``, one task each, on the running runtime; combine the results.

    - ``partitions``: ``"auto"`` (about four per worker, none under 10,000 rows or over
      64 MiB: see the constants of :mod:`eugo_lab.hpc.partitions`) or an int from 1 to the
      number of rows (with ``by``: to the number of distinct keys).
    - ``combine``: a callable given the list of results in partition order (``sum``, or a
      function that re-aggregates partial group results). Default: ``pd.concat`` of them
      when they are DataFrames or Series (a row-wise ``f`` gives back the frame's rows in
      their order), else the list itself.
    - ``by``: a column name or a list of them: rows with the same key go to one partition,
      so ``f`` may group by that key and the combined result needs no second aggregation
      (its rows come in partition order: ``.sort_index()`` them if order matters). A key
      with most of the rows makes its partition a straggler; split by rows and ``combine``
      partial results instead.

    Blocks until every partition is done. A task's error is raised as its own type, with a
    note naming the partition; the other partitions still pending are cancelled.
    """
    if not callable(f):
        raise TypeError(f"hpc.map_partitions(f, df): f must be a function of a DataFrame, got {type(f).__name__}")
    if combine is not None and not callable(combine):
        raise TypeError(f"combine must be a callable taking the list of partition results (e.g. sum or "
                        f"pd.concat), got {type(combine).__name__}")
    selectors = plan(df, partitions, by=by)
    rf = f if isinstance(f, RemoteFunction) else remote(f)
    futures, sizes = [], []
    for rows in selectors:  # each partition is copied out and sent before the next is cut: the first starts at once
        part = df.iloc[rows]
        futures.append(rf.remote(part))
        sizes.append(len(part))
        del part
    from eugo_lab.hpc.api import get

    try:
        results = get(futures)
    except Exception as exc:
        exc.add_note(_failed_partition(futures, sizes))
        for fut in futures:
            if fut._state == STATE_PENDING:
                fut.cancel()
        raise
    combine = combine or _combine_default
    recorder = getattr(session.current(start=False), "recorder", None)
    if recorder is not None and getattr(recorder, "in_region", False):
        recorder.note_partitions(PartitionsRun(rf.function_name, len(df), tuple(results), combine))
    return combine(results)


__all__ = ["map_partitions", "plan", "split", "auto_partitions"]
