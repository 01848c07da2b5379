"""Which large argument a task was sent: a cheap identity, so the trace can count repeats by it.

The Serialization finding ("the same big argument sent N times: use hpc.put") used to group
tasks by their pickle's exact size, so a small argument that differed between calls (a
percentile level ``99`` in one call, ``99.9`` in the next: a few bytes more) split one array
sent 8 times into "7 times" and "once". It also counted equal-sized *different* arrays
(partitions) as one repeated argument. The driver knows better: at ``.remote()`` it sees
the argument objects. :func:`large_argument_key` names the largest of them by its identity
(``id``, type, size, shape and dtype where it has them) plus a sample of its content, so
a new array that happens to get the address of a freed one does not pass for it.

Only computed while a trace records and the call's arguments pickle to at least
``contract.row.ARG_KEY_MIN_BYTES``: a tiny task never pays for it.
"""

from __future__ import annotations

import sys
import zlib
from typing import Any

# Argument types that are never "the large argument" however many there are (a few bytes each).
_SCALARS = frozenset({int, float, bool, complex, type(None)})
# Containers whose members are also candidates (``f.remote([big_array, 0.5])``), up to this length.
_MEMBERS_MAX = 16
# Bytes of content sampled (spread over the buffer) to tell a new object at a reused address apart.
_SAMPLE_BYTES = 256
_MASK = (1 << 62) - 1


def _size(obj: Any) -> int:
    """A cheap estimate of ``obj``'s pickled size: exact for bytes-likes and arrays, shallow for containers."""
    t = type(obj)
    if t in _SCALARS:
        return 0
    if t in (bytes, bytearray, str):
        return len(obj)
    if t is memoryview:
        return obj.nbytes
    nbytes = getattr(obj, "nbytes", None)  # NumPy arrays, pandas Series/Index, tensors
    if isinstance(nbytes, int):
        return nbytes
    if hasattr(obj, "memory_usage") and hasattr(obj, "columns"):  # a pandas DataFrame: per column, not deep
        try:
            return int(obj.memory_usage(index=True, deep=False).sum())
        except Exception:  # noqa: BLE001 - an object that only looks like a DataFrame
            return 0
    if t in (list, tuple, dict, set, frozenset):
        return sys.getsizeof(obj)  # the pointer table: O(1), not the members
    return 0


def _sample(obj: Any) -> int:
    """A checksum of a few hundred bytes spread over ``obj``'s content (0 when it has no flat buffer)."""
    try:
        view = memoryview(obj).cast("B")
    except (TypeError, ValueError):  # no buffer, or not contiguous
        if type(obj) in (list, tuple) and obj:
            try:
                return hash((obj[0], obj[len(obj) // 2], obj[-1])) & _MASK
            except TypeError:  # unhashable members
                return 0
        return 0
    n = view.nbytes
    step = max(n // _SAMPLE_BYTES, 1)
    return zlib.crc32(bytes(view[::step]), zlib.crc32(bytes(view[-64:])))


def _candidates(args: tuple, kwargs: dict) -> list[Any]:
    out = []
    for v in (*args, *kwargs.values()):
        out.append(v)
        t = type(v)
        if t in (list, tuple) and len(v) <= _MEMBERS_MAX:
            out.extend(v)
        elif t is dict and len(v) <= _MEMBERS_MAX:
            out.extend(v.values())
    return out


def large_argument_key(args: tuple, kwargs: dict) -> int:
    """A positive int naming the largest argument of a call (the same object, the same key); 0: none found."""
    best, size = None, 0
    for obj in _candidates(args, kwargs):
        s = _size(obj)
        if s > size:
            best, size = obj, s
    if best is None:
        return 0
    shape = getattr(best, "shape", None)
    dtype = getattr(best, "dtype", None)
    ident = (id(best), type(best).__qualname__, size, str(shape) if shape is not None else "",
             str(dtype) if dtype is not None else "", _sample(best))
    return (hash(ident) & _MASK) or 1
