"""``digest(value)``: compare a value with what a traced region's tasks returned (``Trace.results``).

>>> from eugo_lab.tracing.digest import digest
>>> digest(total) == trace.results("chunk_sum")[0].digest   # doctest: +SKIP

Equal digests mean equal values exactly: the same type, shape and bytes (floats compare
bit for bit; NumPy arrays by dtype, shape and data; pandas objects by values, index,
columns and dtypes). See :mod:`eugo_lab.contract.digest` for how each is hashed.
"""

from __future__ import annotations

from eugo_lab.contract.digest import Digest, digest

__all__ = ["Digest", "digest"]
