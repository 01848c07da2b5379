"""Dependencies through the driver: a task passed a value that an earlier ``get()`` returned.

``x = hpc.get(step.remote(x))`` in a loop makes each task need the previous one's result,
yet no future connects them: the value goes through the driver. Timing alone cannot tell
that loop from ``hpc.get(f.remote(i))`` over independent inputs, so the runtime records it.
While a region is open, every value ``get()``/``result()`` hands to the driver is noted
with its task; a later ``.remote()`` whose argument (or an element of a list, tuple or
dict argument: one level deep) *is* one of those values records a dependency edge
(``Recorder.record_driver_deps``, read as ``Trace.driver_deps``). The runtime (``eugo_lab.hpc``)
and the recording of an engine's own API (``eugo_lab.native``) both keep a :class:`DriverValues`:
it lives with the recorder, below both.

"Is" means identity: the very object the runtime decoded. CPython shares a few values
between all code (``None``, booleans, small ints, one-character strings, the empty tuple),
so identity says nothing about where those came from (``x + 1`` in the loop above is a
small int, and so is the loop counter beside it). For them the notebook's own bytecode
decides: the get() stored its value into a variable (``x = hpc.get(...)``), and the next
``.remote()`` loaded that same variable as the argument, which must still equal the value;
only until that next submission. ``None`` and booleans are never matched: tasks return them
for "nothing" and "ok" far too often. A value the driver computed from a result
(``y = x * 2``) is not seen: the edge is missing there, never invented.

For graders, :class:`Handed` keeps the same facts without the chain's limits: every object a
get()/result() of the region handed the driver (a get() of 3,000 futures or of an ``hpc.map``
included), with the task it is the result of, so a checker can ask after the run whether the
learner's graded value *is* what the tasks returned rather than an equal value computed again in
the notebook (:meth:`Handed.task_of`). It is the region's record, handed to its
:class:`~eugo_lab.tracing.trace.Trace` (``trace.handed``, never saved with it).
"""

from __future__ import annotations

import bisect
import dis
import functools
import sys
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from types import CodeType, FrameType
from typing import Any

# Results noted per region, oldest dropped first: a chain reads the latest results, and the
# table must not grow with a loop of a million get()s (a dict entry and a weak reference each).
MAX_NOTED = 4096
# Results that cannot be referenced weakly (lists, dicts, tuples, ints, strings) are held strongly so
# that their id is not reused by another object; only the latest few, to bound the memory they keep.
MAX_HELD = 16
# A get() of more futures than this is a barrier (collect everything, then go on), which the
# recorded wait already shows; noting each value would cost ~1 us per future on the hot path.
MAX_FUTURES_NOTED = 64
# Containers longer than this are not searched element by element at .remote() (a big list
# argument is data, not a handful of results; searching it would slow every submission).
MAX_ELEMENTS = 1024

_SMALL_INT = range(-5, 257)  # CPython's cached ints
# The bytes of results a region keeps alive for graders (held objects: a number 32; a container its own
# size and its items' one level in, an array's data counted), oldest get() dropped first: a course cell
# takes a few thousand numbers, and a loop of get()s of large results must not keep them all alive.
MAX_HANDED_BYTES = 64 << 20
_NUMBER_BYTES = 32  # a float or a small int object, and its slot in the copy
# Results held as they are (they cannot be referenced weakly, and are small): the fast path of a big get().
_SMALL_TYPES = frozenset({float, int, complex, bool, type(None)})
_CONTAINERS = frozenset({list, tuple, dict})  # a batch's results, one level in


def _shared(v: Any) -> bool:
    """Whether ``v`` may be the same object as an unrelated value (a CPython-cached constant)."""
    t = type(v)
    if t is int:
        return v in _SMALL_INT
    if t is str or t is bytes:
        return len(v) <= 1
    return t is tuple and not v


def identifiable(v: Any) -> bool:
    """Whether identity can tell ``v`` from an equal value made elsewhere (not None, a boolean or a shared constant)."""
    return v is not None and type(v) is not bool and not _shared(v)


class Handed:
    """The objects get()/result() handed the driver in one region, each with the task it is the result of.

    Identity is only evidence while the object lives: a freed object's id can be reused by an equal
    value computed later (CPython's free lists hand the same memory back at once). So the record keeps
    each object alive, or a weak reference to it (an array, most objects of a class: a big result the
    notebook dropped is not kept), up to ``MAX_HANDED_BYTES`` kept alive; :attr:`dropped` counts the
    values forgotten beyond it. A get() is noted as copies of references (its futures and its values: the
    notebook may change its lists afterwards); task ids are read from the futures only when a grader
    asks (:meth:`task_of`), so a get() of numbers pays two copies and a scan of their types.
    """

    def __init__(self) -> None:
        # Each get(): (values, the task ids: a range, a tuple, or the futures that name them, weight).
        self._gets: deque[tuple[Sequence[Any], Any, int]] = deque()
        self._weight = 0
        #: How many handed values were forgotten (over the cap): a grader says so rather than guess.
        self.dropped = 0
        self._index: dict[int, tuple[Any, int]] | None = None  # id -> (object or weak reference, task id)

    def __len__(self) -> int:
        return sum(len(v) for v, _, _ in self._gets)

    def note(self, values: Sequence[Any], task_ids: Any) -> None:
        """Record that ``values[i]`` was handed to the driver as the result of task ``task_ids[i]``.

        ``task_ids``: a sequence of ints, a ``range``, or the futures themselves (anything with
        ``task_id``), read lazily. ``values`` is copied (references only).
        """
        n = len(values)
        if not n:
            return
        if set(map(type, values)) <= _SMALL_TYPES:  # numbers: held as they are, a C-speed copy
            kept: Sequence[Any] = tuple(values)
            weight = n * _NUMBER_BYTES
        else:
            kept, weight = _keep(values)
        self._gets.append((kept, task_ids if type(task_ids) is range else tuple(task_ids), weight))
        self._weight += weight
        self._index = None
        while self._weight > MAX_HANDED_BYTES and self._gets:  # the latest get() too, when it alone is over
            old, _, w = self._gets.popleft()
            self._weight -= w
            self.dropped += len(old)
            self._index = None

    def _built(self) -> dict[int, tuple[Any, int]]:
        if self._index is None:
            index: dict[int, tuple[Any, int]] = {}
            for kept, ids, _ in self._gets:  # oldest first: a later get() of the same object names its task last
                for v, t in zip(kept, ids):
                    task = t if type(t) is int else t.task_id
                    obj = _alive(v)
                    # A task that returns a batch (a list, tuple or dict of results): its items are its results
                    # too, as the notebook takes them apart; the container, held, keeps them alive. Every item:
                    # the index is built when a grader asks, and the weight cap bounds what is held.
                    if type(v) in _CONTAINERS:
                        for item in (obj.values() if type(obj) is dict else obj):
                            index.setdefault(id(item), (item, task))
                    index[id(obj)] = (v, task)
            index.pop(id(None), None)  # a weak reference whose object is gone
            self._index = index
        return self._index

    def task_of(self, obj: Any) -> int | None:
        """The task whose result ``obj`` is (the very object get()/result() handed over), else None.

        An item of a list, tuple or dict a task returned (a batch) counts as that task's result: it
        is the object the notebook takes apart. (An item the notebook put into such a list afterwards
        would count too: the record reads the list as it is when asked.)

        A CPython-shared constant (small int, one-character string, ``None``, a boolean) is never
        matched: any code gets the same object for it, so identity proves nothing there.
        """
        if not identifiable(obj):
            return None
        hit = self._built().get(id(obj))
        return hit[1] if hit is not None and _alive(hit[0]) is obj else None


class _Weak(weakref.ref):
    """A weak reference kept in :class:`Handed` (told apart from a result that is itself a weak reference)."""

    __slots__ = ()


def _alive(v: Any) -> Any:
    """The object ``v`` keeps (``v`` itself, or the object of a :class:`_Weak`; None once it is gone)."""
    return v() if type(v) is _Weak else v


def _size(v: Any) -> int:
    """About the bytes ``v`` keeps alive by itself: an array's data, else its own size (never raises)."""
    nbytes = getattr(v, "nbytes", None)
    if type(nbytes) is int:
        return nbytes
    try:
        return sys.getsizeof(v)
    except Exception:  # noqa: BLE001 - an object whose __sizeof__ fails still counts
        return _NUMBER_BYTES


def _keep(values: Sequence[Any]) -> tuple[list[Any], int]:
    """Each value held, or weakly referenced where it can be (a result the notebook drops is not kept); the bytes kept.

    A held container counts its items one level in (a task's ``(array, meta)`` keeps its array alive).
    """
    kept: list[Any] = []
    weight = 0
    for v in values:
        t = type(v)
        if t in _SMALL_TYPES:
            kept.append(v)
            weight += _NUMBER_BYTES
            continue
        try:
            kept.append(_Weak(v))
            weight += _NUMBER_BYTES  # a weak reference keeps nothing alive
            continue
        except TypeError:
            kept.append(v)
        weight += _size(v)
        if t in _CONTAINERS:
            weight += sum(_size(item) for item in (v.values() if t is dict else v))
    return kept, weight


class DriverValues:
    """What ``get()``/``result()`` returned in the open region, to recognise those values as arguments.

    Task ids are whatever the caller names tasks by (the runtime's ints, Dask's keys).
    """

    def __init__(self) -> None:
        self._epoch: Any = None
        self._weak: OrderedDict[int, tuple[Any, int]] = OrderedDict()  # id -> (weakref, task id)
        self._held: OrderedDict[int, tuple[Any, int]] = OrderedDict()  # id -> (object, task id)
        # Shared constants returned since the last submission, with the variable each was stored into.
        self._recent: list[tuple[Any, Any, str]] = []
        self._handed = Handed()

    def fresh_handed(self, epoch: Any) -> None:
        """Start an empty :class:`Handed` record (an outermost region opens: nothing before it is its own)."""
        self._check_epoch(epoch)
        self._handed = Handed()

    def handed(self, epoch: Any) -> Handed:
        """The record of every object handed to the driver in the recording ``epoch`` (see :class:`Handed`)."""
        self._check_epoch(epoch)
        return self._handed

    def _check_epoch(self, epoch: Any) -> None:
        if epoch is not self._epoch:  # a new recording: forget the previous one's values
            self._epoch = epoch
            self._weak.clear()
            self._held.clear()
            self._recent.clear()
            self._handed = Handed()  # a new object: the closed region's trace keeps the old one

    def note(self, epoch: Any, value: Any, task_id: Any, stored: Callable[[], str | None] | None = None) -> None:
        """Remember that the driver received ``value`` as task ``task_id``'s result.

        ``stored``: the variable the notebook stored it into (asked only for a shared constant).
        """
        self._check_epoch(epoch)
        if value is None or type(value) is bool:
            return
        if _shared(value):
            name = stored() if stored is not None else None
            if name is not None:
                self._recent.append((value, task_id, name))
            return
        key = id(value)
        try:
            ref = weakref.ref(value)
        except TypeError:
            self._weak.pop(key, None)
            self._held[key] = (value, task_id)
            self._held.move_to_end(key)
            if len(self._held) > MAX_HELD:
                self._held.popitem(last=False)
            return
        self._held.pop(key, None)
        self._weak[key] = (ref, task_id)
        self._weak.move_to_end(key)
        if len(self._weak) > MAX_NOTED:
            self._weak.popitem(last=False)

    def note_many(self, epoch: Any, values: list, task_ids: list) -> None:
        """:meth:`note` for each value of a get() of a few futures (see ``MAX_FUTURES_NOTED``)."""
        if len(values) <= MAX_FUTURES_NOTED:
            for v, t in zip(values, task_ids):
                self.note(epoch, v, t)

    def _source(self, v: Any, name: str | None) -> Any:
        if v is None or type(v) is bool:
            return None
        if _shared(v):
            for value, task_id, stored in self._recent:
                if stored == name and type(value) is type(v) and value == v:
                    return task_id
            return None
        key = id(v)
        hit = self._weak.get(key)
        if hit is not None:
            return hit[1] if hit[0]() is v else None
        held = self._held.get(key)
        return held[1] if held is not None and held[0] is v else None

    def sources(self, epoch: Any, args: tuple, kwargs: dict,
                loaded: Callable[[], list[str | None] | None] | None = None) -> list:
        """The tasks whose returned values are among ``args``/``kwargs`` (one level deep), in order, no repeats.

        ``loaded()``: the variables the notebook loaded as ``args`` then ``kwargs``' values (asked
        only when a shared constant is pending). Also closes the window of shared constants: they count
        only for the next submission.
        """
        self._check_epoch(epoch)
        if not (self._weak or self._held or self._recent):
            return []  # the common case (a fan-out, no get() yet): nothing to search
        values = (*args, *kwargs.values())
        names: list[str | None] | None = None
        if self._recent and loaded is not None:
            names = loaded()
            if names is not None and len(names) != len(values):
                names = None  # the call was not read as these arguments: no constant is matched
        found: dict[Any, None] = {}
        for k, a in enumerate(values):
            name = names[k] if names is not None else None
            t = type(a)
            if t is list or t is tuple:
                items = a if len(a) <= MAX_ELEMENTS else ()
            elif t is dict:
                items = a.values() if len(a) <= MAX_ELEMENTS else ()
            else:
                items = ()
            for v in (a, *items):
                task_id = self._source(v, name if v is a else None)
                if task_id is not None:
                    found[task_id] = None
        self._recent.clear()
        return list(found)


def note_returned(rt: Any, values: Sequence[Any], task_ids: Any, single: bool = False) -> None:
    """Note what a get()/result() of runtime ``rt`` returned, while it records (a tracing aid: never raises).

    ``single``: one future's value, returned to the notebook as is (so it may be stored in a variable).
    ``task_ids``: ints, a ``range``, or the futures (see :meth:`Handed.note`). Every value goes to the
    region's :class:`Handed`; only a get() of a few goes to the chain's table too (``MAX_FUTURES_NOTED``).
    """
    if rt is None or not rt.recorder.active:
        return
    try:
        rt.driver_values.handed(rt.recorder.epoch).note(values, task_ids)
        if len(values) > MAX_FUTURES_NOTED:
            return
        if not isinstance(task_ids, (list, tuple, range)) or (task_ids and type(task_ids[0]) is not int):
            task_ids = [t if type(t) is int else t.task_id for t in task_ids]
        if single:
            rt.driver_values.note(rt.recorder.epoch, values[0], task_ids[0], stored=lambda: stored_name(user_frame()))
        else:
            rt.driver_values.note_many(rt.recorder.epoch, values, task_ids)
    except Exception:  # noqa: BLE001 - a value that misbehaves under id()/weakref must not fail the get()
        pass


# -- the notebook's bytecode: which variable a call's value went into, which ones its arguments came from --
_PKG_DIR = __file__.rsplit("/tracing/", 1)[0] + "/"
_LOADS = frozenset({"LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FAST_CHECK"})
_STORES = frozenset({"STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF"})
_CALL_PREFIX = frozenset({"PRECALL", "KW_NAMES"})  # between the last argument's load and CALL (3.11, keywords)


def user_frame(skip: tuple[str, ...] = ()) -> FrameType | None:
    """The innermost frame outside eugo_lab (and outside the folders ``skip``): the notebook's code."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith(_PKG_DIR) or
                             (skip and f.f_code.co_filename.startswith(skip))):
        f = f.f_back
    return f


@functools.lru_cache(maxsize=256)  # a notebook's cells and loops: a few code objects, decoded once each
def _instructions(code: CodeType) -> tuple[tuple[int, ...], tuple[dis.Instruction, ...]]:
    ins = tuple(dis.get_instructions(code))
    return tuple(i.offset for i in ins), ins


def _at_call(frame: FrameType) -> tuple[tuple[dis.Instruction, ...], int] | None:
    """The frame's instructions and the index of the call it is executing."""
    offsets, ins = _instructions(frame.f_code)
    j = bisect.bisect_right(offsets, frame.f_lasti) - 1
    return (ins, j) if j >= 0 and ins[j].opname.startswith("CALL") else None


def stored_name(frame: FrameType | None) -> str | None:
    """The variable the value of the call ``frame`` is executing goes straight into (``x = call()``), else None."""
    at = _at_call(frame) if frame is not None else None
    if at is None:
        return None
    ins, j = at
    nxt = ins[j + 1] if j + 1 < len(ins) else None
    return str(nxt.argval) if nxt is not None and nxt.opname in _STORES else None


def loaded_names(frame: FrameType | None) -> list[str | None] | None:
    """The variables the call ``frame`` is executing loaded as its arguments, in order (keywords after).

    None where an argument was not a plain variable load; None for all when the call's
    arguments cannot be read (an expression spread over several instructions, ``*args``).
    """
    at = _at_call(frame) if frame is not None else None
    if at is None:
        return None
    ins, j = at
    n = ins[j].arg
    if not isinstance(n, int):
        return None
    k = j - 1
    while k >= 0 and ins[k].opname in _CALL_PREFIX:
        k -= 1
    loads = ins[k - n + 1:k + 1] if n else ()
    if len(loads) != n:
        return None
    return [str(i.argval) if i.opname in _LOADS else None for i in loads]
