"""One function record for a plain function that ``hpc.map`` is given again and again.

``hpc.map(f, items)`` with a function not decorated by ``@hpc.remote`` used to make a new record
(a new function id) on every call: every worker loaded one more copy of ``f`` and the pool kept one
more cost estimate, so a loop of 10,000 maps grew without end. The record of a recent function
is reused while its pickle is the same bytes; a function whose captured globals changed since
(cloudpickle ships a cell function's globals by value) pickles differently and gets a new
record, so a map never runs with stale globals.

The records are kept in a small LRU of strong references, not a weak mapping: a record holds
its function (every engine needs it), so a weakly keyed entry would keep its own key alive.
Large pickles are not kept: a function that captures a large array would otherwise stay in
memory after the user dropped it.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from eugo_lab.contract.task import FunctionRecord

# Distinct plain functions remembered: a notebook maps a handful of functions at once; a loop that
# maps a new lambda every time keeps only the latest ones.
RECENT_FUNCTIONS = 32
# A pickle above this is not kept between calls (it is resent, as before, rather than pinned in memory).
MAX_KEPT_PAYLOAD = 1 << 20

_recent: collections.OrderedDict[int, FunctionRecord] = collections.OrderedDict()
_lock = threading.Lock()


def record_for(fn: Callable, name: str) -> FunctionRecord:
    """The record ``hpc.map`` uses for the plain function ``fn``: the previous one while its pickle is unchanged.

    Raises ``SerializationError`` (naming the bad capture) for a function that cannot be pickled.
    """
    fresh = FunctionRecord(fn, name)
    payload = fresh.payload
    key = id(fn)
    with _lock:
        old = _recent.get(key)
        if old is not None and old.fn is fn and old.name == name and old.payload == payload:
            _recent.move_to_end(key)
            return old
        _recent.pop(key, None)
        if len(payload) <= MAX_KEPT_PAYLOAD:
            _recent[key] = fresh
            while len(_recent) > RECENT_FUNCTIONS:
                _recent.popitem(last=False)
    return fresh
