"""Which predictions a cell asked the cost model for: every call of ``predict()`` and ``break_even()``, in order.

A number that answers "at which size does the GPU win?" is only a result of this machine
when the cost model gave it. While a ``%%eugo`` cell runs, :func:`recording` keeps a
:class:`PredictionLog` of the public calls the cell makes (``eugo_lab.offload.predict`` and
``eugo_lab.offload.break_even``): the operation priced with its estimate, or the arguments
of a break-even scan with the size it returned. A grader reads :func:`last_cell` after the
cell, so a size typed by hand (or worked out beside the model) is one that no call gave.

The log records only what the calls were and what they returned; it never changes them.
The dispatcher's own predictions (a ``--gpu auto`` cell placing its operations) go through
:func:`eugo_lab.offload.cost.estimate`, which is not recorded: they are not the learner's.
Nothing is kept outside a recording, so a plain notebook cell pays one list check per call.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from eugo_lab.contract import cellrecord


@dataclass(frozen=True)
class PredictionCall:
    """One public call of the cost model: ``predict`` (an operation and its estimate) or ``break_even``."""

    function: str  # "predict" or "break_even"
    op: Any = None  # predict: the Operation priced
    estimate: Any = None  # predict: the Estimate it returned
    kind: str = ""  # break_even: the operation kind scanned
    work: str = ""  # break_even: its work class
    name: str | None = None  # break_even: the ufunc named
    resident: bool = False  # break_even: operands priced as already on the device
    result: int | None = None  # break_even: the size it returned (None: never)

    @property
    def size(self) -> int | None:
        """The size this call gave: elements of the priced result (a matmul: its order), or break_even's answer."""
        if self.function == "break_even":
            return self.result
        if self.op.kind == "matmul":
            return int(self.op.inputs[0][0]) if self.op.inputs and self.op.inputs[0] else None
        return int(math.prod(self.op.output)) if self.op.output else int(math.prod(self.op.inputs[0]))

    @property
    def copies(self) -> bool:
        """A ``predict`` whose operation has an operand in host memory (its price includes a copy to the device)."""
        return self.function == "predict" and any(not self.op.on_device(i) for i in range(len(self.op.inputs)))


@dataclass
class PredictionLog:
    """The calls one cell made, in order (the thread that opened the recording only)."""

    calls: list[PredictionCall] = field(default_factory=list)
    thread: int = field(default_factory=threading.get_ident)

    def predicted(self, size: int | None = None, name: str | None = None) -> list[PredictionCall]:
        """The ``predict`` calls, those of ``size`` elements (and of the ufunc ``name``) when given."""
        return [c for c in self.calls if c.function == "predict" and (size is None or c.size == size)
                and (name is None or c.op.name == name)]

    def scans(self, size: int | None = None) -> list[PredictionCall]:
        """The ``break_even`` calls, those that returned ``size`` when given."""
        return [c for c in self.calls if c.function == "break_even" and (size is None or c.result == size)]

    def sizes(self) -> list[int]:
        """Every size a call gave, in call order without repeats."""
        return list(dict.fromkeys(c.size for c in self.calls if c.size is not None))


_ACTIVE: list[PredictionLog] = []
#: The cell's log in its cell record (a block of :func:`recording` puts it there when it ends).
LOG = cellrecord.register(cellrecord.Slot("predictions", "the cost-model calls of the latest %%eugo cell"))


@contextlib.contextmanager
def recording() -> Iterator[PredictionLog]:
    """Record the cost-model calls made in this block (by this thread); the log is :func:`last_cell` after it."""
    log = PredictionLog()
    _ACTIVE.append(log)
    try:
        yield log
    finally:
        _ACTIVE.remove(log)
        cellrecord.contribute(LOG, log)


def last_cell() -> PredictionLog | None:
    """The calls of the last ``%%eugo`` cell (``None`` before the first one)."""
    return cellrecord.read(LOG)


def note(call: PredictionCall) -> None:
    """Add ``call`` to the innermost recording of this thread (none open: nothing is kept)."""
    if not _ACTIVE:
        return
    log = _ACTIVE[-1]
    if log.thread == threading.get_ident():  # a background thread's predictions are not the cell's code
        log.calls.append(call)
