"""Worker side of profiling: sample a task body's stack while it runs; return a compact pyinstrument session.

How a task asks to be profiled: the driver hands the backend a :class:`Profiled` wrapper
around the function instead of the function itself (``hpc.profile``, ``%%eugo --profile``).
The worker shim (``backends/_worker.py``) tests ``type(fn) is Profiled`` (constant time),
unwraps it and runs the body between :func:`start` and :meth:`Recording.stop`. Because the
wrapper is a different function record, every engine's per-worker function cache keys it
apart from the plain function, and no engine's wire protocol changes: the samples travel
back in ``TaskStats.profile``.

Two samplers, both writing pyinstrument's frame records (its frame identifiers, from its
own C ``get_frame_info``, and its :class:`pyinstrument.session.Session`), so merging is
pyinstrument's ``Session.combine`` and its renderers work on the result:

- ``"thread"`` (default): one daemon thread per worker process wakes every ``interval``,
  reads the watched task threads' frames (``sys._current_frames``) and records each stack.
  The task itself runs untouched, so the cost is the GIL hand-over per sample (~2% more
  task CPU; ``benchmarks/profile_overhead.py``). A task seen inside C code called from Python
  (NumPy, BLAS, I/O, sleep; read from the instruction its frame is at, see :func:`_in_native`)
  gets a sample that ends in a :data:`NATIVE` frame.
- ``"pyinstrument"``: pyinstrument's own ``Profiler`` (``sys.setprofile``). It names every
  C function called, but on Python 3.11 an active profile function turns off the
  interpreter's specialised bytecode: we measured pure-Python loops 1.5x and call-heavy
  loops 3-4x slower, far over our 5% budget, hence not the default.

Nothing here imports pyinstrument until a profiled task runs: the worker shim imports this
module at start-up and a task without the wrapper pays one ``type(fn) is`` test.
"""

from __future__ import annotations

import dis
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from eugo_lab.contract import async_exc
from eugo_lab.profile import callees

#: Seconds between samples the thread sampler asks for. A thread running Python bytecode
#: hands the GIL over only at its switch interval (``sys.getswitchinterval()``, 5 ms), so
#: such code is sampled every ~10 ms; code that released the GIL every 5 ms. Measured
#: against 1 ms (pyinstrument's default; benchmarks/profile_overhead.py, RESULTS.md): the
#: same ~3-4% more task CPU, but on a loaded 2-core VM 1 ms stretched CPU-bound tasks' wall
#: time by 7-10% (each hand-over waits for the sampler thread to get a core), 5 ms by 1-2%.
DEFAULT_INTERVAL = 0.005
#: pyinstrument's own default: its cost is per call event, not per sample, so sampling often is free there.
PYINSTRUMENT_INTERVAL = 0.001
SAMPLERS = ("thread", "pyinstrument")
#: The frame a sample ends in when the task held no GIL (pyinstrument's format for C frames).
NATIVE = "[C code or waiting, GIL released]\x00<built-in>\x000"
#: The frame under a task's function that holds the time no sample covered (a task shorter
#: than the interval, or one whose sampler got no core or no GIL, e.g. two busy task threads).
UNSAMPLED = "[not sampled]\x00<unsampled>\x000"
# The sampler woke at most this late (beyond its interval): the GIL was free, so no thread
# was running bytecode. A thread running Python keeps the GIL up to the 5 ms switch
# interval, so 0.5 ms separates the two cases with a wide margin on both sides.
_GIL_FREE_S = 0.0005
# Samples in a row that find a watched thread outside its body before the watch is dropped
# (~1 s): a body stopped by an exception raised into it may never reach Recording.stop().
_MAX_MISSES = 1000
# How long the sampler keeps ticking after the last profiled task ended before it waits to be
# woken: the next task of a busy worker starts within milliseconds, and a sleeping sampler
# would first have to win the GIL from that task just to wake (~5 ms more, a 10 ms task unsampled).
_LINGER_S = 0.25
#: Version of the serialized form (``TaskStats.profile``): zlib-compressed pyinstrument session JSON.
FORMAT = 1


class Profiled:
    """A task function wrapped to be profiled on its worker; picklable (the function travels inside).

    The driver caches one wrapper record per (function, settings), so a function profiled in
    several regions is sent to each worker once.
    """

    __slots__ = ("fn", "interval", "sampler")

    def __init__(self, fn: Callable, interval: float = DEFAULT_INTERVAL, sampler: str = "thread"):
        self.fn = fn
        self.interval = float(interval)
        self.sampler = sampler

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function unprofiled (the worker shim unwraps it before the body runs)."""
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple:
        return _unpickle, (self.fn, self.interval, self.sampler)


def _unpickle(fn: Callable, interval: float, sampler: str) -> Profiled:
    """Rebuild a wrapper on the worker, loading pyinstrument now (~70 ms cold).

    Workers unpickle a function once, when it arrives, outside any task's timing: importing
    here keeps the import out of the first profiled task's body, where the sampler would
    also have missed it.
    """
    try:
        import pyinstrument.low_level.stat_profile
        import pyinstrument.session  # noqa: F401
    except ImportError:  # profiling is skipped on this worker (start() returns None); the task still runs
        pass
    return Profiled(fn, interval, sampler)


class Recording:
    """One task body being profiled; :meth:`stop` ends it and returns the serialized session."""

    __slots__ = ("_watch", "_sampler", "_profiler", "_root", "_start_wall", "_t0", "_c0", "_name", "_interval")

    def __init__(self, name: str, interval: float, root: Any):
        self._name = name  # the body's own frame identifier: where an unsampled (too short) task's time goes
        self._interval = interval
        self._root = root
        self._watch: _Watch | None = None
        self._sampler: _Sampler | None = None
        self._profiler: Any = None
        self._start_wall = time.time()
        self._t0 = time.perf_counter()
        self._c0 = time.thread_time()

    def stop(self) -> bytes | None:
        """End the recording; the session as bytes (``None`` if profiling failed: the task never suffers)."""
        try:
            duration = time.perf_counter() - self._t0
            cpu = time.thread_time() - self._c0
            if self._watch is not None:
                records = self._sampler.unwatch(self._watch)  # type: ignore[union-attr]
                samples = self._watch.samples
            else:
                session = self._stop_profiler()
                depth = len(session.start_call_stack)  # drop the frames above the task body (thread .. _worker)
                records = {}
                for stack, t in session.frame_records:
                    key = tuple(stack[depth:])
                    if key:
                        records[key] = records.get(key, 0.0) + t
                samples = len(session.frame_records)
            return dumps(records, self._name, self._start_wall, duration, cpu, self._interval, samples)
        except Exception:  # noqa: BLE001 - a profiling failure must not fail the task
            return None

    def _stop_profiler(self) -> Any:
        try:
            return self._profiler.stop()
        except BaseException:
            # Never leave pyinstrument's profile function installed: it would slow every later task.
            from pyinstrument.low_level.stat_profile import setstatprofile

            setstatprofile(None)
            raise


def start(wrapper: Profiled) -> Recording | None:
    """Start profiling the caller's callees on this thread (call it right before the body)."""
    root = sys._getframe(1)  # the worker shim's frame: stacks are recorded below it
    rec = Recording(_identifier(wrapper.fn), wrapper.interval, root)
    try:
        if wrapper.sampler == "pyinstrument":
            from pyinstrument import Profiler

            async_exc.clear_stuck_signal()  # a profile function can spin forever at a function's entry (3.11)
            rec._profiler = Profiler(interval=wrapper.interval, async_mode="disabled")
            rec._profiler.start(caller_frame=root, target_description=rec._name.split("\x00", 1)[0])
        else:
            rec._sampler = sampler(wrapper.interval)
            rec._watch = rec._sampler.watch(root)
    except Exception:  # noqa: BLE001 - e.g. pyinstrument missing on this worker: run the task unprofiled
        return None
    return rec


def _identifier(fn: Any) -> str:
    """The pyinstrument frame identifier (``name NUL file NUL first line``) of a function's code."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"{getattr(fn, '__qualname__', type(fn).__qualname__)}\x00<task>\x000"
    return f"{code.co_name}\x00{code.co_filename}\x00{code.co_firstlineno}"


def dumps(records: dict[tuple[str, ...], float], body: str, start_wall: float, duration: float, cpu: float,
          interval: float, samples: int = 0) -> bytes:
    """Serialize aggregated stacks as a pyinstrument session (compressed JSON).

    Identical stacks are summed on the worker (a CPU loop yields thousands of equal
    samples), so a task's profile is usually a few hundred bytes.
    """
    from pyinstrument.session import Session

    if not records:  # not sampled at all: its time is known, where it went is not
        records = {(body, UNSAMPLED): duration}
    session = Session(
        frame_records=[(list(k), v) for k, v in records.items()], start_time=start_wall, duration=duration,
        min_interval=interval, max_interval=interval, sample_count=samples, start_call_stack=[],
        target_description=body.split("\x00", 1)[0], cpu_time=cpu, sys_path=[p for p in sys.path if p],
        sys_prefixes=Session.current_sys_prefixes(),
    )
    import json
    import zlib

    doc = {"format": FORMAT, "session": session.to_json()}
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)


def loads(data: bytes) -> Any:
    """The pyinstrument :class:`~pyinstrument.session.Session` of one task's serialized profile."""
    import json
    import zlib

    from pyinstrument.session import Session

    doc = json.loads(zlib.decompress(data))
    if doc.get("format") != FORMAT:
        raise ValueError(f"profile format {doc.get('format')!r}; this eugo_lab reads format {FORMAT}")
    return Session.from_json(doc["session"])


# -- the thread sampler --------------------------------------------------------------------------------
class _Watch:
    """One task thread being sampled: where its body starts, when it was last sampled, its stacks."""

    __slots__ = ("thread_id", "native_id", "clock", "cpu", "root", "last", "records", "misses", "samples", "sites",
                 "bytecode_waits", "switch")

    def __init__(self, root: Any):
        self.misses = 0  # samples in a row that found the thread outside the body
        self.samples = 0
        self.thread_id = threading.get_ident()
        self.native_id = threading.get_native_id()
        try:  # the task thread's own CPU clock, readable from the sampler (Linux, macOS)
            self.clock: int | None = time.pthread_getcpuclockid(self.thread_id)
            self.cpu = time.clock_gettime(self.clock)
        except (AttributeError, OSError):
            self.clock, self.cpu = None, 0.0
        self.root = root
        self.last = time.perf_counter()
        self.records: dict[tuple[str, ...], float] = {}
        # Samples found just back from a call of machine code that may have held the GIL, by stack: [seconds,
        # the sampler's waits]. Settled when the watch ends (:meth:`settled_records`), by those waits.
        self.sites: dict[tuple[str, ...], list] = {}
        # The sampler's waits at samples of bytecode (a loop's back jump, a function's start): the baseline.
        self.bytecode_waits: list[float] = []
        self.switch = sys.getswitchinterval()  # the interpreter's switch interval while it was watched

    def settled_records(self) -> dict[tuple[str, ...], float]:
        """The stacks recorded, with each call site of machine code charged as native or as bytecode.

        Bytecode hands the GIL over within the switch interval of the sampler asking for it; machine code
        that holds it (a Numba-compiled kernel, ``sorted`` of a long list) hands it over only when the call
        returns, so the sampler's wait there is up to the rest of the call. A short C call inside a bytecode
        loop (``abs(x)``) waits as bytecode does. Each wait also holds the time the OS kept the sampler off
        a core, so a site is settled by the median of its waits against the median at bytecode samples of
        the same task (the same machine, as busy): longer by :data:`_HELD_OUT_S`, its time was native.
        Machine-code calls much shorter than that stay the caller's bytecode.
        """
        records = self.records
        base = _median(self.bytecode_waits) if len(self.bytecode_waits) >= 3 else self.switch
        for key, (seconds, waits) in self.sites.items():
            settled = key + (NATIVE,) if _median(waits) > base + _HELD_OUT_S else key
            records[settled] = records.get(settled, 0.0) + seconds
        self.sites = {}
        return records


_LINE_ATTR = "\x01l"  # pyinstrument's frame-info attribute for the line executing
_JUMP_BACKWARD = dis.opmap.get("JUMP_BACKWARD", -1)  # Python 3.11+; -1: never matches
_EXTENDED_ARG = dis.EXTENDED_ARG


def _line_at(code: Any, offset: int) -> int:
    """The line of the instruction at ``offset``, else of the last instruction before it that has one (0: none)."""
    line = 0
    for start, _end, lineno in code.co_lines():
        if start > offset:
            break
        if lineno is not None:
            line = lineno
    return line


def _with_line(info: str, frame: Any) -> str:
    """``info`` with a line for a frame stopped at an instruction that has none.

    CPython gives some instructions no line: the jump back to a loop's top after an ``if`` without
    ``else`` is one, and a loop like ``for ...: if cond: n += 1`` spends most samples there, so its
    hottest line went missing. Such a jump is the loop going round: it gets the line of the loop
    it jumps to (the ``for``); any other gets the line of the instruction before it.
    """
    try:
        code, at = frame.f_code, frame.f_lasti
        raw = code.co_code
        if raw[at] == _JUMP_BACKWARD:
            arg = raw[at + 1] | (raw[at - 1] << 8 if at >= 2 and raw[at - 2] == _EXTENDED_ARG else 0)
            line = _line_at(code, at + 2 - 2 * arg)
        else:
            line = _line_at(code, at)
    except (AttributeError, IndexError, ValueError):  # pragma: no cover - a frame without line tables
        return info
    return f"{info}{_LINE_ATTR}{line}" if line else info


_CODE_INFO: dict[Any, str] = {}  # code object -> its frame-info prefix (name, file, first line, class)


def frame_info(frame: Any) -> str:
    """Pyinstrument's frame identifier for a frame of another thread, read from its code object only.

    pyinstrument's own ``get_frame_info`` reads the frame's locals (``self`` or ``cls``, for the class
    name): on Python 3.11, reading another running thread's frame locals (``PyFrame_GetLocals``) is not
    safe, and a worker sampling a task while Numba compiled in it died of a segmentation fault in it
    (the task was retried: "failed: 1, retried: 1" in an ``--optimize`` cell). The class is the one the
    function is defined in (its ``co_qualname``), not the instance's own class.
    """
    code = frame.f_code
    prefix = _CODE_INFO.get(code)
    if prefix is None:
        prefix = f"{code.co_name}\x00{code.co_filename}\x00{code.co_firstlineno}"
        owner, dot, _ = getattr(code, "co_qualname", "").rpartition(".")
        if dot and not owner.endswith("<locals>"):
            prefix += f"\x01c{owner.rpartition('<locals>.')[2]}"
        if "__tracebackhide__" in code.co_varnames:
            prefix += "\x01h1"
        if len(_CODE_INFO) < 100_000:  # (a bound: code objects made on the fly must not grow it for ever)
            _CODE_INFO[code] = prefix
    line = frame.f_lineno
    return f"{prefix}{_LINE_ATTR}{line}" if line is not None else prefix


class _Sampler:
    """Samples the watched task threads of this process every ``interval`` seconds.

    One daemon thread, started with the first profiled task and asleep (a condition wait,
    no wake-ups) while none runs. Each sample charges the time since the thread's previous
    sample to the stack seen now, as pyinstrument does.
    """

    def __init__(self, interval: float):
        self.interval = interval
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watches: dict[int, _Watch] = {}
        self._switch_before: float | None = None  # the process's switch interval while tasks are watched
        self._thread: threading.Thread | None = None
        self._get_frame_info: Callable[[Any], str] = frame_info

    def watch(self, root: Any) -> _Watch:
        """Start sampling the calling thread below frame ``root``."""
        w = _Watch(root)
        with self._lock:
            if not self._watches:  # the first task watched: bytecode hands the GIL over sooner (see _SWITCH_S)
                self._switch_before = sys.getswitchinterval()
                sys.setswitchinterval(min(_SWITCH_S, self._switch_before))
            self._watches[w.thread_id] = w
            w.switch = sys.getswitchinterval()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="eugo-profile-sampler", daemon=True)
                self._thread.start()
            self._wake.notify()
        return w

    def unwatch(self, w: _Watch) -> dict[tuple[str, ...], float]:
        """Stop sampling; the stacks recorded (under the lock: no sample is half-written)."""
        with self._lock:
            self._watches.pop(w.thread_id, None)
            if not self._watches and self._switch_before is not None:
                sys.setswitchinterval(self._switch_before)
                self._switch_before = None
            w.root = None
            return w.settled_records()

    def _loop(self) -> None:
        global _YIELD_OPS
        _YIELD_OPS = _yield_ops()
        get_frame_info = self._get_frame_info
        perf = time.perf_counter
        idle_since = None
        while True:
            with self._lock:
                if self._watches:
                    idle_since = None
                elif idle_since is None:
                    idle_since = perf()
                elif perf() - idle_since > _LINGER_S:
                    while not self._watches:
                        self._wake.wait()
                    idle_since = None
            asked = perf()
            time.sleep(self.interval)
            now = perf()
            gil_free = now - asked - self.interval < _GIL_FREE_S
            with self._lock:
                if not self._watches:
                    continue
                frames = sys._current_frames()
                f = f_leaf = top = None
                gone: list[int] = []
                for w in self._watches.values():
                    f = frames.get(w.thread_id)
                    stack = []
                    f_leaf = f
                    top = None
                    while f is not None and f is not w.root:
                        info = get_frame_info(f)
                        if f is f_leaf and _LINE_ATTR not in info:
                            info = _with_line(info, f)
                        stack.append(info)
                        top, f = f, f.f_back
                    if f is None or not stack:  # not inside the body just now
                        w.misses += 1
                        if w.misses > _MAX_MISSES:  # its body ended without stop() (an async exception): forget it
                            gone.append(w.thread_id)
                        continue
                    if top.f_code in _OWN_CODE:  # the recording starting or stopping, not the task's time
                        continue
                    stack.reverse()
                    native = _in_native(w, f_leaf, now - w.last, gil_free)
                    if native is True:
                        stack.append(NATIVE)
                    key = tuple(stack)
                    waited = now - asked - self.interval
                    if native is _AFTER_MACHINE_CODE:
                        site = w.sites.get(key)
                        if site is None:
                            site = w.sites[key] = [0.0, []]
                        site[0] += now - w.last
                        if len(site[1]) < _WAITS_KEPT:
                            site[1].append(waited)
                    else:
                        if native is _BYTECODE and len(w.bytecode_waits) < _WAITS_KEPT:
                            w.bytecode_waits.append(waited)
                        w.records[key] = w.records.get(key, 0.0) + (now - w.last)
                    w.last = now
                    w.misses = 0
                    w.samples += 1
                for tid in gone:
                    self._watches.pop(tid, None)
                del frames, f, f_leaf, top  # keep no frame alive between samples


# Opcodes where a thread running pure Python waits for the GIL (the interpreter hands it over
# only at these): a thread seen there was not in C code, whatever the GIL's state. Filled by
# the sampler thread (``dis`` is not loaded with the worker).
_YIELD_OPS: frozenset[int] = frozenset()


# Opcodes that call something: a thread seen at one may be back from the call and handing the GIL over.
_CALL_OPS: frozenset[int] = frozenset(dis.opmap[name] for name in (
    "PRECALL", "CALL", "CALL_FUNCTION_EX", "CALL_KW", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW")
    if name in dis.opmap)
# Before 3.11 the interpreter could hand the GIL over before almost any instruction.
_HANDOVER_AT_CALLS_ONLY = sys.version_info >= (3, 11)


def _yield_ops() -> frozenset[int]:
    import dis

    return frozenset(dis.opmap[name] for name in ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RESUME",
                                                  "JUMP_ABSOLUTE") if name in dis.opmap)


# What _in_native answers for a sample just back from a call of machine code (native or not: the site's
# waits settle it, _Watch.settled_records), and for one at an instruction where only bytecode hands over.
_AFTER_MACHINE_CODE = "after machine code"
_BYTECODE = ""  # false, as "not native" is
# The interpreter's switch interval while a task is watched (the default is 5 ms): a thread running bytecode
# hands the GIL to the sampler this soon, which makes a sample land closer to when it was due, and makes a
# wait for machine code (which hands it over only when its call returns) stand out from a wait for bytecode.
# Only the sampler asks for the GIL every interval, so the task pays about one hand-over per sample as before.
_SWITCH_S = 0.001
# A call site whose median wait for the GIL is this much longer than at bytecode was machine code holding it.
_HELD_OUT_S = 0.002
_WAITS_KEPT = 256  # waits kept per site and for the baseline: enough for a median


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _in_native(w: _Watch, leaf: Any, wall: float, gil_free: bool) -> bool | str:
    """Whether the watched thread sits in C code called from Python, or waits in a call (sleep, I/O, a lock).

    The sampler holds the GIL while it looks, so the thread is either waiting for the GIL or in C
    code that let go of it. From Python 3.11 a thread running bytecode hands the GIL over only at a
    loop's back jump, a function's start, or right after a call returns, so the opcode its
    innermost frame is at says most of it:

    - at a back jump or a function's start: it was running bytecode (Python);
    - at any other instruction but a call (``x * y`` on arrays, ``a[i]``...): it is inside C code
      that instruction runs (native), however late the sampler woke. On a busy machine the sampler
      often wakes late with the GIL free, and lateness alone called 2e6-element NumPy arithmetic
      "Python bytecode";
    - at a call: inside the callee, or just back from it and handing the GIL over. Its CPU clock
      and the kernel's state tell a call that waits (asleep without using CPU: native) from one
      that ran, and for one that ran, ``gil_free`` (the sampler got the GIL before the interpreter's
      switch interval forced a hand-over) says the callee had let go of it. A callee that is machine
      code (:func:`eugo_lab.profile.callees.callee_kind`) may have kept the GIL while it ran: the
      answer is then :data:`_AFTER_MACHINE_CODE`, settled per call site by how long the sampler
      waited (:meth:`_Watch.settled_records`).

    pyinstrument's own sampler (``sampler="pyinstrument"``) names C functions exactly.
    """
    cpu = time.clock_gettime(w.clock) if w.clock is not None else 0.0
    used, w.cpu = cpu - w.cpu, cpu
    lasti = leaf.f_lasti
    op = leaf.f_code.co_code[lasti] if lasti >= 0 else -1
    if op in _YIELD_OPS:
        return _BYTECODE
    if _HANDOVER_AT_CALLS_ONLY and op >= 0 and op not in _CALL_OPS:
        return True
    if w.clock is None or used > 0.1 * wall:
        if gil_free:
            return True
        # Just back from machine code that kept the GIL (a Numba-compiled function, ``sorted``): native if it
        # ran long, which the site's waits for the GIL settle (_Watch.settled_records; eugo_lab.profile.callees).
        if _HANDOVER_AT_CALLS_ONLY and callees.callee_kind(leaf, lasti) == callees.NATIVE:
            return _AFTER_MACHINE_CODE
        return False
    state = _kernel_state(w.native_id)
    return gil_free if state is None else state != b"R"


def _kernel_state(native_id: int) -> bytes | None:
    """The kernel's one-letter state of a thread of this process (``R`` runnable, ``S`` asleep...); None: unknown."""
    try:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


# Frames of our own right below the task's root: samples taken there belong to no task code.
_OWN_CODE = {start.__code__, Recording.stop.__code__}


def not_task_code(code: Any) -> None:
    """Samples taken in a frame of ``code`` right below a task's root belong to no task code (the thread sampler).

    For the worker's own calls between a batch's items (``backends._worker``'s progress reports): their
    pipe writes release the GIL, which is when the sampler thread gets to look, so they would top the profile.
    """
    _OWN_CODE.add(code)

_samplers: dict[float, _Sampler] = {}
_samplers_lock = threading.Lock()


def _forget_after_fork() -> None:
    # A forked child has none of the parent's threads (the samplers') and maybe a lock the
    # parent held at the fork: start from nothing.
    global _samplers_lock
    _samplers.clear()
    _samplers_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # (not on Windows, which never forks)
    os.register_at_fork(after_in_child=_forget_after_fork)


def sampler(interval: float) -> _Sampler:
    """The thread sampler of this process for ``interval`` (created on first use)."""
    s = _samplers.get(interval)
    if s is None:
        with _samplers_lock:
            s = _samplers.setdefault(interval, _Sampler(interval))
    return s
