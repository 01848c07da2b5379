"""The per-operation ledger of an offloaded cell: what each operation did, where, why, at what cost.

One :class:`OpRecord` per distinct (operation, shapes, dtype, place, reason): a loop that
runs the same ``a + b`` a thousand times is one row ``x1000``. Device timings (CUDA events)
are resolved when the cell ends (:meth:`Ledger.finish`), so recording never synchronises.
In a predictions-only ledger (no GPU here) the placement, reasons, bytes and GPU times are
what the model predicts for a named device profile; only CPU times are measured.

A time is shown only where one was measured: an operation whose device timer failed (or had
none), and a move that was only predicted, count as ``unmeasured`` and read "not measured",
never as a zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from eugo_lab.offload.cost import fmt_time
from eugo_lab.units import fmt_bytes

#: Categories of a CPU decision, in the order the summary lists them.
CPU_WHYS = ("too small", "transfer", "slower", "too big", "not offloaded", "no device", "fallback", "off")


@dataclass
class OpRecord:
    """One row of the report (possibly ``count`` identical operations)."""

    op: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    where: str  # "gpu" or "cpu" (predictions-only: where the model would run it); "transfer" for a move
    why: str  # the model's category (see cost.Estimate.why), or "fallback", "not offloaded", "host needed"
    reason: str  # precise reason text
    reason_bucketed: str  # the same with times rounded to 1-2-5 steps (deterministic text)
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    predicted_cpu_s: float | None = None
    predicted_gpu_s: float | None = None
    measured_s: float = 0.0  # summed over `count`
    measured_where: str = "cpu"  # where the measured time was taken: "cpu" (host timer) or "gpu" (device timer)
    fallback: str | None = None
    count: int = 1
    unmeasured: int = 0  # of `count`, the operations without a measured time (a failed or missing timer)
    _timers: list = field(default_factory=list, repr=False)
    #: The cost model's Estimate behind ``reason`` (None: a reason of no prediction): at :meth:`Ledger.finish`
    #: a row measured on the CPU is reworded with its measured time (``Estimate.reason(cpu_measured=...)``).
    estimate: Any = field(default=None, repr=False)
    label_predicted: bool = False  # a predictions-only ledger's reason: "cpu (predicted): ..."

    def reword_measured(self) -> None:
        """Quote the row's measured CPU time (its mean per operation) in its reasons, where one was measured.

        Both the precise reason and the bucketed one (the ``text/plain``): every form of the report
        says the CPU time it measured, "measured", never the model's where a measurement exists. The
        bucketed one rounds it to 1-2-5 steps, which keeps the text stable between runs.
        """
        timed = self.count - self.unmeasured
        if self.estimate is None or self.measured_where != "cpu" or timed <= 0:
            return
        per_op = self.measured_s / timed
        words = self.estimate.reason(cpu_measured=per_op)
        bucketed = self.estimate.reason(bucket=True, cpu_measured=per_op)
        self.reason = predicted_words(words) if self.label_predicted else words
        self.reason_bucketed = predicted_words(bucketed) if self.label_predicted else bucketed

    @property
    def is_transfer(self) -> bool:
        """A move of data the host asked for, not an operation."""
        return self.where == "transfer"

    @property
    def predicted_text(self) -> tuple[str, str]:
        """The predicted CPU and GPU times as the report writes them ('' where the model made no prediction)."""
        return (fmt_time(self.predicted_cpu_s) if self.predicted_cpu_s is not None else "",
                fmt_time(self.predicted_gpu_s) if self.predicted_gpu_s is not None else "")

    @property
    def measured(self) -> bool:
        """Whether any operation of the row has a measured time."""
        return self.unmeasured < self.count

    @property
    def measured_text(self) -> str:
        """The measured time (summed over ``count``) as the report writes it; "not measured" where none was."""
        if not self.measured:
            return "not measured"
        text = fmt_time(self.measured_s)
        return f"{text} ({self.unmeasured} of {self.count} not measured)" if self.unmeasured else text

    def key(self) -> tuple:
        """What identical rows share."""
        return (self.op, self.shapes, self.dtype, self.where, self.why, self.fallback, self.measured_where)


@dataclass
class Ledger:
    """All rows of one cell, plus what the report needs to say about the device."""

    device: str  # the device the GPU column is about (a real GPU, a fake one, or a named profile)
    predictions_only: bool  # True: no GPU here; placements and GPU times are predictions
    mode: str = "auto"
    measured_by: str = "host timer"
    host: str = ""
    rows: list[OpRecord] = field(default_factory=list)
    busy: tuple[float, float, int] | None = None  # GPU busy % (mean, max, samples) from NVML
    busy_note: str = ""
    note: str = ""  # e.g. "NVIDIA H200 found, but CuPy is not installed (...)": why predictions only
    #: name -> digest of each array the cell left under that name as a proxy (what its placed operations made)
    left: dict[str, Any] = field(default_factory=dict)
    #: name -> the longest chain of placed operations behind that array (``AccelArray._chain``): a
    #: loop of 20 steps leaves 20 or more, a copy of an earlier cell's answer 1
    chains: dict[str, int] = field(default_factory=dict)
    _index: dict = field(default_factory=dict, repr=False)

    def add(self, rec: OpRecord, timer: Any = None, measured_s: float = 0.0, key: Any = None,
            measured: bool = True) -> OpRecord:
        """Add a row (merged into an identical one); ``timer`` is resolved at :meth:`finish`.

        ``key``: the caller's own identity for the row (see :meth:`merge`), instead of :meth:`OpRecord.key`.
        ``measured=False``: ``measured_s`` is no measurement (a move that was only predicted). A row
        timed on the device (``measured_where="gpu"``) is measured only by its ``timer``.
        """
        k = rec.key() if key is None else key
        if self.merge(k, rec.h2d_bytes, rec.d2h_bytes, rec.predicted_cpu_s, rec.predicted_gpu_s, measured_s, timer,
                      measured):
            return self._index[k]
        rec.measured_s = measured_s
        rec.unmeasured = int(_untimed(rec, timer, measured))
        if timer is not None:
            rec._timers.append(timer)
        self.rows.append(rec)
        self._index[k] = rec
        return rec

    def merge(self, key: Any, h2d: int, d2h: int, cpu_s: float | None, gpu_s: float | None, measured_s: float,
              timer: Any = None, measured: bool = True) -> bool:
        """Count one more operation into the row ``key``; False when there is no such row yet (the fast path)."""
        row = self._index.get(key)
        if row is None:
            return False
        row.count += 1
        if _untimed(row, timer, measured):
            row.unmeasured += 1
        row.h2d_bytes += h2d
        row.d2h_bytes += d2h
        row.predicted_cpu_s = _add(row.predicted_cpu_s, cpu_s)
        row.predicted_gpu_s = _add(row.predicted_gpu_s, gpu_s)
        row.measured_s += measured_s
        if timer is not None:
            row._timers.append(timer)
        return True

    def finish(self) -> Ledger:
        """Resolve device timers (synchronises once, at the end of the cell)."""
        for row in self.rows:
            for t in row._timers:
                try:
                    seconds = float(t.elapsed())
                except Exception:  # noqa: BLE001 - a timer of a failed launch has no end event
                    seconds = math.nan
                if math.isfinite(seconds) and seconds >= 0:
                    row.measured_s += seconds
                else:  # no time: the row says "not measured" for it, never adds a zero
                    row.unmeasured += 1
            row._timers.clear()
            row.reword_measured()
        return self

    @property
    def unmeasured_gpu(self) -> int:
        """Operations that ran on the device without a measured time (their timer failed or was missing)."""
        return sum(r.unmeasured for r in self.rows if r.measured_where == "gpu")

    # -- counts for the summary ------------------------------------------------------------------------
    @property
    def ops(self) -> list[OpRecord]:
        """Rows that are operations (not transfers the host asked for)."""
        return [r for r in self.rows if not r.is_transfer]

    def n_ops(self, where: str | None = None) -> int:
        """How many operations ran (or would run) on ``where`` (all when ``None``)."""
        return sum(r.count for r in self.ops if where is None or r.where == where)

    def cpu_reasons(self) -> dict[str, int]:
        """CPU operations by category, in :data:`CPU_WHYS` order."""
        out: dict[str, int] = {}
        for r in self.ops:
            if r.where == "cpu":
                out[r.why] = out.get(r.why, 0) + r.count
        return {k: out[k] for k in (*CPU_WHYS, *sorted(set(out) - set(CPU_WHYS))) if k in out}

    def fallbacks(self) -> list[str]:
        """Distinct reasons the GPU path failed."""
        return sorted({r.fallback for r in self.ops if r.fallback})

    @property
    def moved(self) -> int:
        """Bytes moved (or, predictions-only, that would move) between host and device, both ways."""
        return sum(r.h2d_bytes + r.d2h_bytes for r in self.rows)

    def summary(self) -> str:
        """``7 ops: 3 on GPU, 4 on CPU (2 too small, 1 fallback: ...), 48 MB moved``."""
        n = self.n_ops()
        gpu, cpu = self.n_ops("gpu"), self.n_ops("cpu")
        parts = []
        for why, k in self.cpu_reasons().items():
            if why == "fallback":
                parts.append(f"{k} fallback: {'; '.join(self.fallbacks())}")
            else:
                parts.append(f"{k} {why}")
        detail = f" ({', '.join(parts)})" if parts else ""
        ops = f"{n} op{'s' if n != 1 else ''}"
        if self.predictions_only:
            return (f"{ops} ran on the CPU (no GPU here); predicted for {self.device}: {gpu} on GPU, "
                    f"{cpu} on CPU{detail}, {fmt_bytes(self.moved)} would move")
        return f"{ops}: {gpu} on GPU, {cpu} on CPU{detail}, {fmt_bytes(self.moved)} moved"


def _untimed(row: OpRecord, timer: Any, measured: bool) -> bool:
    """Whether an operation added to ``row`` with this ``timer`` has no time coming: never a zero in its place."""
    return timer is None and (not measured or row.measured_where == "gpu")


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


def predicted_words(reason: str) -> str:
    """A reason of a predictions-only ledger, labelled so: ``cpu: too small: ...`` -> ``cpu (predicted): too small:``.

    Without a GPU every time in a reason is the cost model's (but a CPU time the reason says was
    measured); the ones that start by saying "predicted" (``gpu: predicted 2 ms vs 5 ms on CPU``)
    are left as they are.
    """
    where, sep, rest = reason.partition(": ")
    if reason.startswith("predicted") or rest.startswith("predicted"):
        return reason
    return f"{where} (predicted): {rest}" if sep else f"predicted: {reason}"
