"""Digests of task results: what a value was, small enough to keep for every task of a trace.

A :class:`Digest` names a value's type, its size (``len``; shape and data bytes for arrays
and pandas objects), a 64-bit hash of its content and, for scalars, the value itself. Two
values have equal digests when they are equal *exactly*: the same type, the same shape and
the same bytes (``0.1 + 0.2`` and ``0.3`` differ; an ``int`` and a ``numpy.int64`` differ).

The hash is BLAKE2b (8 bytes) over a canonical form, so equal values hash alike however
they were built:

- a NumPy array: its dtype, its shape and its data in C order (a view and a copy agree);
- a pandas DataFrame or Series: ``pandas.util.hash_pandas_object`` (values and index),
  plus the column names and dtypes;
- anything else: its pickle (protocol 5, the bytes a task's result travels as).

Large canonical forms (over :data:`FULL_HASH_BYTES`) are hashed from a sample: their
length and :data:`SAMPLE_BLOCKS` blocks of :data:`SAMPLE_BLOCK` bytes, evenly spaced from
the first byte to the last (``Digest.sampled`` says so). Two large values that differ only
between the blocks then share a digest; their sizes, shapes and types still have to agree.

The worker shim and the driver both compute digests here, so this module imports nothing
heavy: NumPy and pandas are only looked at when the value is one of theirs.
"""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass, field
from typing import Any

# hashlib's blake2b is _blake2's: taking it from there skips hashlib's loading of OpenSSL, ~2 ms
# of every driver's and worker's start-up, which blake2b never uses.
try:
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

PROTOCOL = 5
#: Canonical forms up to this many bytes are hashed whole; larger ones from a sample.
FULL_HASH_BYTES = 256 * 1024
SAMPLE_BLOCKS = 64
SAMPLE_BLOCK = 4096
#: Strings up to this long keep their value in the digest (longer ones: type, length and hash only).
SHORT_STR = 100
#: The types whose value a digest keeps (strings only when short), and whose lists of results an
#: ``hpc.map`` batch digests item by item.
SCALAR_TYPES = frozenset({int, float, bool, type(None), str, complex})


@dataclass(frozen=True)
class Digest:
    """What one result was: its type, size, content hash and (scalars) value.

    Equality compares ``type``, ``length``, ``shape``, ``nbytes``, ``hash`` and
    ``sampled``; ``value`` is informative only (the hash already covers it exactly, and
    NaN would never equal itself).
    """

    type: str  # "int", "numpy.ndarray", "pandas.DataFrame"
    length: int  # len(value); -1 when it has none
    shape: tuple[int, ...] | None  # arrays and pandas objects
    nbytes: int  # arrays and pandas objects: their data; anything else: its pickle
    hash: int  # 64-bit, unsigned
    value: Any = field(default=None, compare=False)  # scalars (short strings) only
    sampled: bool = False  # the hash covers a sample of a large canonical form (see the module docstring)

    def matches(self, value: Any) -> bool:
        """True when ``value`` has this digest (equal exactly: same type, shape and bytes)."""
        return digest(value) == self

    def to_list(self) -> list:
        """A JSON-ready list (``Digest.from_list`` reads it back); a value JSON cannot hold is dropped."""
        v = self.value
        if isinstance(v, complex) or (isinstance(v, float) and v != v):
            v = None
        return [self.type, self.length, None if self.shape is None else list(self.shape), self.nbytes,
                self.hash, v, self.sampled]

    @classmethod
    def from_list(cls, d: list) -> Digest:
        """Inverse of :meth:`to_list`."""
        t, length, shape, nbytes, h, v, sampled = d
        return cls(t, int(length), None if shape is None else tuple(shape), int(nbytes), int(h), v, bool(sampled))


def type_name(value: Any) -> str:
    """``int``, ``numpy.ndarray``, ``pandas.DataFrame``: the top-level package and the class name."""
    t = type(value)
    mod = t.__module__
    return t.__qualname__ if mod == "builtins" else f"{mod.split('.')[0]}.{t.__qualname__}"


def _hash(data: Any) -> tuple[int, bool]:
    """The 64-bit hash of a bytes-like, sampled when large; and whether it was sampled."""
    mv = memoryview(data).cast("B")
    n = mv.nbytes
    if n <= FULL_HASH_BYTES:
        return int.from_bytes(blake2b(mv, digest_size=8).digest(), "little"), False
    h = blake2b(n.to_bytes(8, "little"), digest_size=8)
    last = n - SAMPLE_BLOCK
    for i in range(SAMPLE_BLOCKS):
        at = i * last // (SAMPLE_BLOCKS - 1)
        h.update(mv[at:at + SAMPLE_BLOCK])
    return int.from_bytes(h.digest(), "little"), True


def _array_digest(a: Any) -> Digest:
    import numpy as np

    if a.dtype.hasobject:  # objects have no bytes of their own: their pickle stands for them
        data = pickle.dumps(a, PROTOCOL)
        h, sampled = _hash(data)
        return Digest("numpy.ndarray", len(a) if a.ndim else -1, tuple(a.shape), a.nbytes, h, None, sampled)
    head = f"{a.dtype.str}{a.shape}".encode()
    body = np.ascontiguousarray(a)
    h, sampled = _hash(head + body.tobytes()) if body.nbytes <= FULL_HASH_BYTES else _hash_parts(head, body)
    return Digest(type_name(a), len(a) if a.ndim else -1, tuple(a.shape), a.nbytes, h, None, sampled)


def _hash_parts(head: bytes, body: Any) -> tuple[int, bool]:
    """A large array: the sample of its data, then its dtype and shape."""
    h, _ = _hash(body.reshape(-1).view("u1"))
    return int.from_bytes(blake2b(head + h.to_bytes(8, "little"), digest_size=8).digest(), "little"), True


def _pandas_digest(obj: Any) -> Digest:
    import pandas as pd

    rows = pd.util.hash_pandas_object(obj, index=True).to_numpy()
    if isinstance(obj, pd.DataFrame):
        head = repr((list(obj.columns), [str(d) for d in obj.dtypes])).encode()
    else:
        head = repr((obj.name, str(obj.dtype))).encode()
    h, sampled = _hash(head + rows.tobytes())
    # The columns' bytes, not the index's: a RangeIndex comes back from a pickle as another index type of
    # another size, while its values (in the hash above) are the same.
    nbytes = int(obj.memory_usage(index=False, deep=False).sum()) if isinstance(obj, pd.DataFrame) else \
        int(obj.memory_usage(index=False, deep=False))
    return Digest(type_name(obj), len(obj), tuple(obj.shape), nbytes, h, None, sampled)


def digest(value: Any, payload: bytes | None = None) -> Digest:
    """The :class:`Digest` of ``value``; ``payload``: its pickle when the caller has it already (not pickled again).

    Compare a value a learner holds with what tasks returned: ``digest(total) ==
    trace.results("chunk_sum")[0].digest``.
    """
    t = type(value)
    if t in SCALAR_TYPES:
        data = payload if payload is not None else pickle.dumps(value, PROTOCOL)
        h, sampled = _hash(data)
        length = len(value) if t is str else -1
        keep = value if t is not str or len(value) <= SHORT_STR else None
        return Digest(type_name(value), length, None, len(data), h, keep, sampled)
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(value, np.ndarray):
            return _array_digest(value)
        if isinstance(value, np.generic):  # a NumPy scalar: its pickle, and its value as Python's
            data = payload if payload is not None else pickle.dumps(value, PROTOCOL)
            h, sampled = _hash(data)
            return Digest(type_name(value), -1, (), value.nbytes, h, value.item(), sampled)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, (pd.DataFrame, pd.Series)):
        return _pandas_digest(value)
    if payload is None:
        try:
            payload = pickle.dumps(value, PROTOCOL)
        except Exception:  # noqa: BLE001 - what plain pickle refuses (lambdas, local classes) cloudpickle may take
            import cloudpickle

            payload = cloudpickle.dumps(value, protocol=PROTOCOL)
    try:
        length = len(value)
    except Exception:  # noqa: BLE001 - no len(), or one that raises: unsized
        length = -1
    h, sampled = _hash(payload)
    return Digest(type_name(value), length, None, len(payload), h, None, sampled)


def scalars_only(values: list) -> bool:
    """True when every item of ``values`` is a scalar (an ``hpc.map`` batch then gets a digest per item)."""
    return set(map(type, values)) <= SCALAR_TYPES
