"""One record of "the latest cell": what a ``%%eugo`` cell (or an ``hpc.trace()`` region outside a cell) left.

Every accessor of "the latest" reads this one record: ``hpc.last_trace()``,
``hpc.last_optimizations()``, ``exercises.last_verdict()``, the GPU ledger of
``eugo_lab.offload.last_ledger()``, ``%eugo trace``'s summary, the live view's cost. Before it, each
of those kept its own module global, two of them reconciled by comparing traces; now they cannot
disagree about which run they describe.

How it is filled:

- the cell runner opens a record when a cell starts (:func:`begin_cell`) and closes it when the
  cell ends, raised or not (:func:`end`); an ``hpc.trace()`` region that starts with no record
  open opens one of its own for its duration (:func:`begin_region`), and a region inside a cell
  (the cell's own runs, or one the learner wrote) records into the cell's;
- what goes in a record is declared by whoever fills it, as a :class:`Slot` registered here at
  the import of its module (the verdict by ``eugo_lab.exercises``, the ledger by
  ``eugo_lab.offload.cell``, the report by ``eugo_lab.optimizations.report``...). The runtime, which
  never imports a feature, reads a feature's slot once ``eugo_lab.contract.hooks`` has imported it.
  The runtime's own contributions are fields: the trace, the automatic JIT's state when it closed,
  the functions declared ``optimize=False`` it submitted, the ``--optimize`` run's generation;
- a new record starts with the previous record's trace and values (a learner's last verdict stays
  the last verdict after a plain cell; a cell that fails before its first run leaves the previous
  run readable), and replacing a record's trace (a region that closes) empties the slots that
  describe a trace (``Slot.follows_trace``): a report never describes another run than ``last_trace()``;
- a contribution made with no record open (a script calling a feature directly, a test) goes to
  the latest record, made if there is none: outside cells the accessors behave as the globals did.

A process has one latest record (cells run one at a time); its values are shared by every thread,
as the kernel's cells are.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Slot:
    """A value a feature keeps in each record, declared by the feature's module (:func:`register`).

    ``follows_trace``: the value describes the record's trace (a report of it, its summary), so a
    new trace empties it. ``derive(record)``: computes the value, on the first read, of a record
    whose trace was set and the slot never filled (a region's report, built only when asked for).
    """

    name: str
    doc: str
    follows_trace: bool = False
    derive: Callable[[CellRecord], Any] | None = None


_SLOTS: dict[str, Slot] = {}


def register(slot: Slot) -> Slot:
    """Declare ``slot`` (a module reloaded declares it again: the newer declaration wins); returns it."""
    _SLOTS[slot.name] = slot
    return slot


def _slot(slot: Slot | str) -> Slot:
    name = slot if isinstance(slot, str) else slot.name
    try:
        return _SLOTS[name]
    except KeyError:
        raise LookupError(f"no feature declared the cell record's slot {name!r} (is its module imported?); "
                          f"declared: {', '.join(sorted(_SLOTS)) or 'none'}") from None


#: The automatic JIT's state when a trace's region closed: never hooked in (no runtime started), on, or off.
JIT_STATES = ("unhooked", "on", "off")


class CellRecord:
    """What one ``%%eugo`` cell, or one ``hpc.trace()`` region outside a cell, left for the accessors.

    ``kind``: ``"cell"``, ``"region"``, or ``"outside"`` (made for a contribution when there was no record yet).
    ``trace``: the latest trace recorded while the record was open (a cell's main run: its region
    closes last), else the one it started with. ``number``: the order records were made in this
    process (1, 2, ...). Values of the features' slots: :meth:`get`, :meth:`put`.
    """

    def __init__(self, kind: str, number: int, before: CellRecord | None = None) -> None:
        self.kind = kind
        self.number = number
        self.is_open = True
        # The runtime's fields (it imports this module; it never imports the features that read them).
        self.trace: Any = before.trace if before is not None else None
        self.jit = before.jit if before is not None else "unhooked"  # see JIT_STATES
        self.opted_out: set[str] = set()  # names of optimize=False functions submitted while the record was open
        # names of optimize=True functions submitted while the record was open (their own JIT runs, also where the
        # automatic JIT is off: the report names them)
        self.opted_in: set[str] = set()
        self.generation = 0  # the --optimize/automatic JIT's wrapper generation of the cell's run now going (0: none)
        self._values: dict[str, Any] = dict(before._values) if before is not None else {}
        self._lock = threading.Lock()

    def get(self, slot: Slot | str) -> Any:
        """The value of ``slot`` in this record (derived on first read where the slot says how); None if none."""
        s = _slot(slot)
        with self._lock:
            if s.name in self._values:
                return self._values[s.name]
        trace = self.trace
        if s.derive is None or trace is None:
            return None
        value = s.derive(self)  # outside the lock: a derivation may take a while, and reads other slots
        with self._lock:
            if self.trace is not trace:  # a region closed meanwhile: the value describes the trace it replaced
                return value
            return self._values.setdefault(s.name, value)

    def filled(self, slot: Slot | str) -> bool:
        """Whether ``slot`` holds a value in this record (put, carried from the previous record, or derived)."""
        with self._lock:
            return _slot(slot).name in self._values

    def put(self, slot: Slot | str, value: Any) -> None:
        """Set ``slot`` to ``value`` in this record."""
        s = _slot(slot)
        with self._lock:
            self._values[s.name] = value

    def set_trace(self, trace: Any, jit: str = "unhooked") -> None:
        """Make ``trace`` the record's trace (``jit``: the automatic JIT's state when it closed, see JIT_STATES).

        Empties the slots that described the previous trace (``Slot.follows_trace``).
        """
        if jit not in JIT_STATES:
            raise ValueError(f"jit must be one of {', '.join(JIT_STATES)}; got {jit!r}")
        with self._lock:
            self.trace, self.jit = trace, jit
            for name in [n for n in self._values if n in _SLOTS and _SLOTS[n].follows_trace]:
                del self._values[name]

    def __repr__(self) -> str:
        with self._lock:
            filled = ", ".join(sorted(self._values))
        state = "open" if self.is_open else "closed"
        trace = "no trace" if self.trace is None else f"{len(self.trace)} task rows"
        return f"<CellRecord #{self.number} {self.kind}, {state}: {trace}; {filled or 'no values'}>"


_lock = threading.Lock()
_numbers = itertools.count(1)
_open: list[CellRecord] = []  # the records open now, innermost last (a cell; a region outside a cell)
_latest: CellRecord | None = None
_reading: list[CellRecord] = []  # records read instead of the latest while a run set aside is graded (innermost last)


def _new(kind: str) -> CellRecord:
    """A record of ``kind`` made the latest (with the lock held)."""
    global _latest
    rec = CellRecord(kind, next(_numbers), _latest)
    _latest = rec
    return rec


def begin_cell() -> CellRecord:
    """Open the record of a ``%%eugo`` cell starting now (it becomes the latest); close it with :func:`end`."""
    with _lock:
        rec = _new("cell")
        _open.append(rec)
        return rec


def begin_region() -> CellRecord | None:
    """Open a record for an ``hpc.trace()`` region starting now, unless one is open (then None: it records there)."""
    with _lock:
        if _open:
            return None
        rec = _new("region")
        _open.append(rec)
        return rec


def end(record: CellRecord | None) -> None:
    """Close ``record`` (None: nothing, the region recorded into an open one); it stays the latest until another."""
    if record is None:
        return
    with _lock:
        record.is_open = False
        if record in _open:
            _open.remove(record)


@contextlib.contextmanager
def aside() -> Iterator[CellRecord]:
    """A record open for the block that never becomes the latest: a run no accessor may describe.

    An exercise's hidden second case runs the learner's cell again inside the cell; its trace and
    reports go here, so ``hpc.last_trace()``, the optimizations report and the verdict stay the
    cell's own run's.
    """
    with _lock:
        rec = CellRecord("aside", next(_numbers), _latest)
        _open.append(rec)
    try:
        yield rec
    finally:
        end(rec)


def current() -> CellRecord | None:
    """The record open now (the running cell's, or an outermost region's), or None outside both."""
    return _open[-1] if _open else None


def latest() -> CellRecord | None:
    """The record of the latest cell or region (open or closed); None before the first one."""
    return _latest


def target() -> CellRecord:
    """Where a contribution made now goes: the open record, else the latest, else a new one (``"outside"``)."""
    with _lock:
        if _open:
            return _open[-1]
        if _latest is not None:
            return _latest
        rec = _new("outside")
        rec.is_open = False
        return rec


@contextlib.contextmanager
def reading(record: CellRecord) -> Iterator[CellRecord]:
    """While the block runs, :func:`read` answers from ``record`` instead of the latest.

    For the grader of a run set aside (:func:`aside`: an exercise's hidden second case): what it
    reads through the accessors (the ``--gpu`` ledger, the cell's predictions) is that run's own,
    while nothing is made the latest and the cell's own run stays what every accessor describes
    once the block ends.
    """
    _reading.append(record)
    try:
        yield record
    finally:
        _reading.remove(record)


def read(slot: Slot | str) -> Any:
    """``slot``'s value in the latest record (None when there is no record yet), or the one :func:`reading` names."""
    rec = _reading[-1] if _reading else _latest
    if rec is None:
        _slot(slot)  # a misspelt slot is an error even before the first cell
        return None
    return rec.get(slot)


def contribute(slot: Slot | str, value: Any) -> None:
    """Set ``slot`` to ``value`` in the record a contribution made now goes to (see :func:`target`)."""
    target().put(slot, value)


def generation() -> int:
    """The JIT wrappers' generation of the cell run going on now (0: none), in the record :func:`target` names."""
    try:  # one index, no lock: every call the runtime submits asks
        return _open[-1].generation
    except IndexError:  # none open (or it closed meanwhile): the record a contribution would go to
        rec = _latest
        return rec.generation if rec is not None else 0
