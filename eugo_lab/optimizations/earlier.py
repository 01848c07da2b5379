"""JIT verdicts said in an earlier run on the same worker processes, for a run whose calls said nothing new.

The automatic JIT decides once per worker process and function, and says so once (its verdict
phases). A later traced region on the same workers then carries no verdict for the function:
it runs compiled, or is still compiling, or stays plain, as decided before. Without this memory
such a function read "not tried: it has not yet spent enough CPU", counted as declined, while it
ran compiled.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eugo_lab.optimizations.report import Optimization

# function name -> (the worker processes whose trace carried its verdict, that verdict's line)
_said: dict[str, tuple[frozenset[int], Optimization]] = {}


def _pids(trace: Any, function: str) -> frozenset[int]:
    """The process ids of the workers that ran ``function`` in ``trace``."""
    import numpy as np

    if function not in trace.functions:
        return frozenset()
    t = trace.tasks
    workers = np.unique(np.asarray(t["worker"])[np.asarray(t["function"]) == trace.functions.index(function)])
    return frozenset(int(trace.workers[w][1]) for w in workers.tolist() if w in trace.workers)


def remember(trace: Any, items: list[Optimization]) -> None:
    """Keep the JIT lines of ``trace``'s functions, with the worker processes that said them."""
    for item in items:
        if item.kind == "jit":
            pids = _pids(trace, item.target)
            if pids:
                known = _said.get(item.target)
                # The same processes again: add to them (one worker may say it in one run, the other in the next).
                same = known is not None and known[1].applied == item.applied and known[1].tried == item.tried
                _said[item.target] = (pids | known[0] if same and known is not None else pids, item)


def recall(trace: Any, function: str) -> Optimization | None:
    """The verdict ``function`` ran under in ``trace``, said earlier by the same workers; None: not known."""
    known = _said.get(function)
    pids = _pids(trace, function)
    if known is None or not pids or not pids <= known[0]:
        return None
    item = known[1]
    note = " (decided in an earlier run on these workers)"
    return dataclasses.replace(item, precise=item.precise + note, bucketed=item.bucketed + note)
