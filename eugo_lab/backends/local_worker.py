"""The process main loop of one local-pool worker.

Started by :mod:`eugo_lab.backends.local` as ``python -c "...main()" TASK_FD RESULT_FD
LIFELINE_FD PARENT_PID STORE_DIR CANCEL_FD``, or forked by the pool's template process
(:mod:`eugo_lab.backends.local_zygote`), which calls :func:`serve` with the same pipes.

Why each safeguard is here:
- SIGINT is ignored and the worker runs in its own session: Jupyter's Interrupt signals
  the kernel's whole process group, which kills idle workers of standard pools.
- A thread blocks on the *lifeline* pipe, whose other end only the driver holds: when the
  driver dies, even by SIGKILL, the read returns EOF and the worker exits at once, also
  while a task is running. ``PR_SET_PDEATHSIG`` backs this up for tasks that hold the GIL.
- Frames are ``<8-byte little-endian length><pickle>`` (``local_wire``), read through a buffered file, so
  several small tasks arrive per system call.
- Start-up is on the pool's critical path (``hpc.init()`` waits for every hello), so this
  module and what it imports before the hello stay small: nothing heavier than the task
  loop needs (``shutil``, ``socket``, cloudpickle) is imported before it is used.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
import threading
import time
from typing import Any

from eugo_lab.backends import import_clock
from eugo_lab.backends.local_wire import LEN as _LEN
from eugo_lab.backends.local_wire import TASK_ID as _ID
from eugo_lab.contract.errors import TaskCancelled

# Results of a finished group of an hpc.map batch are sent ahead (so a later death in the batch
# does not lose them) only up to this size: a larger part would cross the pipe twice, ahead and
# with the batch's end. Without them, the driver counts those items as not run if the worker dies.
PART_BYTES = 1 << 16


def _die_with_parent(lifeline_fd: int, parent_pid: int | None, store_dir: str) -> None:
    def leave(*_: Any) -> None:
        # The driver is gone: free the shared-memory objects it can no longer free. shutil is
        # imported here, its only use, so a worker's start-up does not pay for it; whatever
        # that import or the removal raises, the worker still exits.
        try:
            import shutil

            shutil.rmtree(store_dir, ignore_errors=True)
        finally:
            os._exit(0)

    # SIGTERM (not SIGKILL) so the handler can clean up; both paths end in os._exit.
    signal.signal(signal.SIGTERM, leave)
    # parent_pid None: forked by the template (local_zygote), whose death must not take the
    # workers with it; the lifeline alone says when the driver is gone, and the template
    # kills its workers when it sees the driver go (for tasks that hold the GIL).
    if parent_pid is not None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - not Linux
            pass
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            leave()

    def watch() -> None:
        try:
            while os.read(lifeline_fd, 1):
                pass
        except OSError:
            pass
        leave()

    threading.Thread(target=watch, name="eugo-lifeline", daemon=True).start()


class _Objects:
    """Values that ``put()`` references stand for, mapped once per worker."""

    def __init__(self) -> None:
        self.cache: dict[int, Any] = {}

    def get(self, ref_id: int, path: str) -> Any:
        try:
            return self.cache[ref_id]
        except KeyError:
            from eugo_lab.backends.shm_store import read_object

            value = self.cache[ref_id] = read_object(path)
            return value


class _Unloadable:
    """Stands in for a function whose pickle could not be loaded here; calling it explains."""

    def __init__(self, name: str, exc: BaseException):
        self.name = name
        self.exc = exc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from eugo_lab.contract.errors import function_load_error

        raise function_load_error(self.name, self.exc) from self.exc


class _Cancels:
    """Task ids the driver cancelled, read from the cancel pipe when SIGUSR1 arrives."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.ids: set[int] = set()
        self.running: int | None = None
        signal.signal(signal.SIGUSR1, self.on_signal)

    def on_signal(self, *_: Any) -> None:
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            data = b""
        self.ids.update(i for (i,) in _ID.iter_unpack(data[: len(data) - len(data) % _ID.size]))
        if self.running is not None and self.running in self.ids:
            self.running = None
            raise TaskCancelled("the driver cancelled this task")


# The functions this worker has loaded, by function id: the pool sends one before its first task here
# and tells the worker to forget the least recently used beyond its bound (local.WORKER_FUNCTIONS).
_functions: dict[int, tuple[Any, str]] = {}


def loaded_functions() -> int:
    """How many functions this worker process holds loaded (a task can call it to check the bound)."""
    return len(_functions)


def _widen_pipe(fd: int) -> None:
    """Grow the result pipe to 1 MiB (Linux's default ceiling for a user), from the default 64 KiB.

    A result smaller than shared memory's threshold (``shm_store.OOB_BYTES``) then fits the pipe
    whole: the worker's write returns at once and it starts its next task while the driver reads.
    """
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ImportError):  # not Linux, or a lower limit (/proc/sys/fs/pipe-max-size): keep the default
        pass


def main() -> None:
    """Serve tasks until the driver closes the task pipe or disappears (argv: see the module docstring)."""
    task_fd, result_fd, lifeline_fd, parent_pid = (int(a) for a in sys.argv[1:5])
    serve(task_fd, result_fd, lifeline_fd, int(sys.argv[6]), sys.argv[5], parent_pid)


def serve(task_fd: int, result_fd: int, lifeline_fd: int, cancel_fd: int, store_dir: str,
          parent_pid: int | None) -> None:
    """The task loop on these pipes; never returns (``os._exit``). ``parent_pid`` None: forked by the template."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(lifeline_fd, parent_pid, store_dir)
    cancels = _Cancels(cancel_fd)

    from eugo_lab.backends import local_nested
    from eugo_lab.backends._worker import execute, execute_batch
    from eugo_lab.contract.serialization import dumps_value_oob, loads_value

    reader = local_nested.FrameReader(task_fd)
    _widen_pipe(result_fd)
    wfile = os.fdopen(result_fd, "wb", buffering=1 << 16)
    objects = _Objects()
    functions = _functions

    def send(msg: tuple) -> None:
        data = pickle.dumps(msg, 5)
        try:
            wfile.write(_LEN.pack(len(data)))
            wfile.write(data)
            wfile.flush()
        except OSError:
            # The pool closed our result pipe (shutdown, or the driver died): nobody is left
            # to read this result, and a traceback on the notebook's stderr would only alarm.
            os._exit(0)

    def store(value: Any) -> tuple[Any, int]:
        # Large results go into the store (shared memory) and only their name through the pipe: the
        # worker goes on to its next task at once instead of waiting for the driver to read them.
        # (write_result and OOB_BYTES are imported once, after the hello: see below.)
        return write_result(store_dir, value, OOB_BYTES)

    def run_task(msg: tuple) -> None:
        _, key, fid, args_bytes, deps, batch, staged, probe = msg

        def load_token(token: tuple, deps: dict | None = deps) -> Any:
            if token[0] == "fut":
                return loads_value(deps[token[1]])  # type: ignore[index]
            return objects.get(token[1], token[2])

        fn, name = functions[fid]
        if key in cancels.ids:  # cancelled before it started: answer without running it
            cancels.ids.discard(key)
            send(("done", key, 1, b"", None, None))
            return
        run = execute_batch if batch else execute
        extra: dict = {}
        if batch:
            # The driver learns each group's end as it happens (a "part": local.LocalBackend._handle): a worker that
            # dies within the batch costs only the group it was running, never the items that finished.
            def progress(lo: int, hi: int, results: list, errors: dict | None, next_size: int, begun: float,
                         end: float) -> None:
                try:
                    # Large array buffers are left out of the pickle, not copied: they mean a part too large.
                    part: bytes | None
                    part, large = dumps_value_oob(results[lo:hi], PART_BYTES)
                except Exception:  # noqa: BLE001 - the final result names the item at fault; these count as not run
                    part, large = None, None
                if large or (part is not None and len(part) > PART_BYTES):
                    part = None  # large results travel once, with the batch's end: see PART_BYTES
                failed = {i: e for i, e in errors.items() if lo <= i < hi} if errors else None
                send(("part", key, lo, hi, part, failed, next_size, begun, end))

            extra = {"progress": progress, "alone": batch == 2}
        buffers = None
        if staged is not None:
            from eugo_lab.backends.shm_store import read_chunks

            # One file per buffer (tasks sent the same array share its file): each mapped privately,
            # so a task that writes into its argument changes only its own.
            buffers = [chunk for path, _ in staged for chunk in read_chunks(path, private=True)]
        # A task may start on top of one waiting for its children (local_nested): the one below
        # is running again when this one returns.
        below = cancels.running
        frame = nested.push(key)
        cancels.running = key
        try:
            status, payload, detail, stats = run(fn, name, args_bytes, load_token, buffers=buffers, probe=probe,
                                                 store=store, **extra)
        except TaskCancelled:  # landed outside the task body (unpickling, pickling the result)
            status, payload, detail, stats = 1, b"", None, None
        finally:
            cancels.running = below
            nested.pop()
        cancels.ids.discard(key)
        del buffers
        stats = local_nested.own_cpu(stats, frame)
        # Stats travel as a plain tuple (TaskStats.from_wire re-types it on the driver):
        # pickling the named tuple itself would cost ~1.5 us per task on each side.
        send(("done", key, status, payload, detail, None if stats is None else tuple(stats)))

    def handle(msg: tuple) -> bool:
        """One message from the driver; False: leave the loop."""
        kind = msg[0]
        if kind == "run":
            run_task(msg)
        elif kind == "fn":
            _, fid, name, fn_bytes = msg
            try:
                # Unpickling a function imports its module's libraries (NumPy ~60 ms): its next attempt's warm-up.
                functions[fid] = (import_clock.measure_load(name, pickle.loads, fn_bytes), name)
            except BaseException as exc:  # noqa: BLE001 - reported when the task runs
                functions[fid] = (_Unloadable(name, exc), name)
        elif kind == "forget":  # the driver keeps at most WORKER_FUNCTIONS loaded here and re-sends one it needs
            functions.pop(msg[1], None)
        elif kind == "drop":
            objects.cache.pop(msg[1], None)
        elif kind == "exit":
            return False
        return True

    # Tasks that submit tasks talk to the driver through this connection (eugo_lab.hpc.nested).
    nested = local_nested.install(reader, send, cancels, handle, store_dir)
    # os.uname().nodename is what socket.gethostname() returns, without importing socket.
    send(("hello", os.getpid(), os.uname().nodename, time.time()))
    # Thread oversubscription guard, after the hello so start-up does not wait for it:
    # the environment already holds the limit; this also sets it for libraries loaded by now.
    from eugo_lab.threadguard.variables import apply_once

    apply_once()
    # What store() writes results with; imported after the hello, like the thread guard (a worker's
    # start-up is on the pool's critical path), and once, not per task (an import statement costs ~1 us).
    from eugo_lab.backends.shm_store import OOB_BYTES, write_result
    while True:
        msg = nested.next_message()
        if msg is None:
            break
        if msg[0] in ("res", "reply", "wake"):  # a child's late answer, after its parent ended
            nested.take(msg, inline=False)
        elif not handle(msg):
            break
    wfile.close()
    os._exit(0)
