"""Quantities read from people and written for them: sizes in bytes, seconds, and source locations.

Every display formats through here, so the same number reads the same everywhere:
``parse_bytes("2GB")`` / :func:`fmt_bytes` (``1.5 kB``), :func:`parse_grace` /
:func:`fmt_seconds` (``12.3 ms``), and :func:`fmt_source` (``cell line 4``, ``tasks.py:12``).
:func:`plural` counts things (``1 task``, ``3 tasks``). It imports nothing else of ``eugo_lab``, so every
layer may use it.
"""

from __future__ import annotations

import math
import re
from typing import Any

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(value: Any, what: str) -> int | None:
    """``2_000_000_000``, ``"2GB"``, ``"512 MiB"`` -> bytes; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a number of bytes or a string like '2GB', got {value!r}")
    if isinstance(value, (int, float)):
        n = int(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", value)
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise ValueError(f"{what}={value!r} is not a size; write bytes (2000000000) or e.g. '2GB', '512MiB'")
        n = int(float(m.group(1)) * _UNITS[unit])
    else:
        raise TypeError(f"{what} must be a number of bytes or a string like '2GB', got {type(value).__name__}")
    if n <= 0:
        raise ValueError(f"{what} must be positive, got {value!r}")
    return n


def fmt_bytes(n: float, spec: str = ".1f") -> str:
    """Bytes in powers of 1000, each number formatted with ``spec``: ``1536`` -> ``1.5 kB``.

    Every display uses this one function; callers pick only the precision (``.2f`` for a
    limit someone set, ``.3g`` for analysis text).
    """
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:{spec}} {unit}"
    return f"{int(n)} B"


def parse_grace(value: Any, what: str = "cancel_grace") -> float:
    """A grace period in seconds: a finite number >= 0 (``0``: no grace at all); raise naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds (e.g. {what}=5), got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0 (e.g. {what}=5), got {value!r}")
    return float(value)


_SECONDS = (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6))


def fmt_seconds(x: float | None, digits: int = 3) -> str:
    """Seconds with ``digits`` significant digits in a readable unit (``1.23 s``, ``45.6 ms``, ``789 us``).

    ``0`` is ``0 s``; a missing or non-finite value is ``n/a``. A number that rounds to
    ``10 ** digits`` or more in its unit is written whole (``1000 ms``), never as ``1e+03``.
    """
    if x is None or not math.isfinite(x):
        return "n/a"
    ax = abs(x)
    if ax == 0:
        return "0 s"
    unit, scale = next(((u, k) for u, k in _SECONDS if ax >= k), _SECONDS[-1])
    v = x / scale
    return f"{v:.0f} {unit}" if abs(v) >= 10 ** (digits - 1) else f"{v:.{digits}g} {unit}"


# A notebook cell's code is compiled under a temporary file name that holds the kernel's pid.
_CELL_FILE = re.compile(r"(ipykernel_\d+|<ipython-input-)")


def split_source(source: str) -> tuple[str, str]:
    """``"/a/b/tasks.py:12"`` -> ``("/a/b/tasks.py", "12")``; ``("", source)`` when it names no line."""
    path, _, line = source.rpartition(":")
    return (path, line) if path else ("", source)


def is_cell_file(path: str) -> bool:
    """Whether ``path`` is the temporary file IPython compiled a notebook or shell cell under."""
    return _CELL_FILE.search(path) is not None


def fmt_source(source: str) -> str:
    """A recorded ``file:line`` for deterministic text: ``tasks.py:12`` (no directories), a cell as ``cell line N``."""
    path, line = split_source(source)
    if not path:
        return source
    if is_cell_file(path):
        return f"cell line {line}"
    return f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


def capitalized(text: str) -> str:
    """``text`` with its first letter upper-cased and the rest kept (``str.capitalize`` lowers the rest)."""
    return text[:1].upper() + text[1:]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 task``, ``3 tasks``; ``many`` for a word whose plural is not ``word + "s"`` (``1 batch``, ``2 batches``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
