"""Bytes a reader really takes from a file, and a model of network object storage.

:class:`CountingFile` is a binary file whose reads are counted: rasterio (through its
``opener`` argument) and pyarrow read through it, so ``bytes_read`` is what GDAL or the
Parquet reader asked the file for, not the size of the array that came back.

:class:`Throttle` is a *model*, and says so: this machine's local disk (and the page cache
behind it) serves a 2 MB tile in about a millisecond, far faster than the object storage a
cluster reads satellite scenes from. To show I/O-bound behaviour here, a throttled file
sleeps for the bytes it actually returns: ``latency`` once per file opened (the time to the
first byte of a request) and ``1 / bandwidth`` seconds per byte (one stream's throughput).
Sleeping waits the way a network read does, without a core, so more workers than cores or a
reading thread overlap it, as they would overlap real network reads. Real stores also charge
latency per request (a reader issues several per file); the model folds those into the
per-file figure.

With ``link`` (a path), ``bandwidth`` is the total of one shared pipe instead of each stream's:
every reader in every process that names the same link takes its turn on it (an exclusive
``flock`` on that file while its bytes "transfer"), so a saturated network link or storage
front end is modelled too. Then more readers only queue: they add waiting, not throughput.
"""

from __future__ import annotations

import io
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Throttle:
    """A model of network object storage: ``latency`` seconds per file, ``bandwidth`` bytes/s per stream.

    ``Throttle()`` costs nothing (infinite bandwidth, no latency): the local disk as it is.
    """

    latency: float = 0.0
    bandwidth: float = math.inf
    link: str | None = None  # a lock file shared by every reader: bandwidth is then their total

    def __post_init__(self) -> None:
        if self.link is not None:
            if math.isinf(self.bandwidth):
                raise ValueError("a Throttle link shares a finite bandwidth: give bandwidth= in bytes per second")
            object.__setattr__(self, "link", os.fspath(self.link))
        if not (isinstance(self.latency, (int, float)) and self.latency >= 0 and math.isfinite(self.latency)):
            raise ValueError(f"Throttle latency must be a finite number of seconds >= 0, got {self.latency!r}")
        if not (isinstance(self.bandwidth, (int, float)) and self.bandwidth > 0):
            raise ValueError(f"Throttle bandwidth must be a positive number of bytes per second (math.inf for "
                             f"no limit), got {self.bandwidth!r}")

    @property
    def is_free(self) -> bool:
        """True when this throttle never sleeps."""
        return self.latency == 0 and math.isinf(self.bandwidth)

    def transfer_time(self, nbytes: int, files: int = 1) -> float:
        """Seconds the model charges for ``files`` files holding ``nbytes`` bytes in total."""
        return files * self.latency + (0.0 if math.isinf(self.bandwidth) else nbytes / self.bandwidth)

    def first_byte(self) -> None:
        """Wait the per-file latency (called once per file opened)."""
        if self.latency:
            time.sleep(self.latency)

    def stream(self, nbytes: int) -> None:
        """Wait for ``nbytes`` bytes at this bandwidth (on a shared link: after the readers ahead of this one)."""
        if nbytes <= 0 or math.isinf(self.bandwidth):
            return
        if self.link is None:
            time.sleep(nbytes / self.bandwidth)
            return
        import fcntl  # POSIX; the link model serialises transfers across processes with it

        with open(self.link, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                time.sleep(nbytes / self.bandwidth)
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def upload(self, nbytes: int) -> None:
        """Wait for writing one file of ``nbytes`` bytes to the modelled store (latency + bytes)."""
        self.first_byte()
        self.stream(nbytes)

    def __str__(self) -> str:
        if self.is_free:
            return "no throttle (local disk)"
        bw = "unlimited" if math.isinf(self.bandwidth) else f"{self.bandwidth / 1e6:.3g} MB/s"
        per = "shared by all readers" if self.link else "per stream"
        return f"modelled object store: {self.latency * 1000:.3g} ms per file, {bw} {per}"


@dataclass
class Meter:
    """Bytes and read calls taken from the files opened through one :func:`counting_opener`."""

    bytes_read: int = 0
    reads: int = 0
    files: int = 0
    throttle: Throttle = field(default_factory=Throttle)
    # Seconds the throttle's model charged for these files and bytes (latency per file, bytes over
    # bandwidth): a function of the bytes alone, so it reads the same on an idle or a busy machine,
    # unlike the wall time the waits took (a shared link adds its queue on top).
    charged: float = 0.0


class CountingFile(io.FileIO):
    """A read-only binary file that adds every byte it returns to a :class:`Meter` (and waits the throttle)."""

    def __init__(self, path: str | os.PathLike, meter: Meter):
        super().__init__(os.fspath(path), "rb")
        self._meter = meter
        meter.files += 1
        meter.charged += meter.throttle.latency
        meter.throttle.first_byte()

    def _count(self, n: int) -> None:
        self._meter.bytes_read += n
        self._meter.reads += 1
        self._meter.charged += self._meter.throttle.transfer_time(n, files=0)
        self._meter.throttle.stream(n)

    def read(self, size: int = -1) -> bytes:
        """Read and count up to ``size`` bytes."""
        data = super().read(size)
        self._count(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer`` and count the bytes."""
        n = super().readinto(buffer) or 0
        self._count(n)
        return n

    def readall(self) -> bytes:
        """Read to the end and count the bytes."""
        data = super().readall()
        self._count(len(data))
        return data


def counting_opener(meter: Meter) -> Any:
    """An opener for ``rasterio.open(path, opener=...)``: every file it opens counts into ``meter``."""

    def opener(path: str, mode: str = "rb") -> CountingFile:
        if "w" in mode or "a" in mode or "+" in mode:
            raise ValueError(f"the counting opener reads only; got mode {mode!r} for {path}")
        return CountingFile(path, meter)

    return opener
