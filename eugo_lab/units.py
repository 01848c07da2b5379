"""Sizes in bytes: reading them from users (``"2GB"``) and writing them for people (``1.5 kB``)."""

from __future__ import annotations

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
        import re

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
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds (e.g. {what}=5), got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0 (e.g. {what}=5), got {value!r}")
    return float(value)
