"""Large arguments by value on the local pool: one shared-memory copy for every task sent the same array.

``f.remote(big)`` for ten tasks used to copy ``big`` into the store ten times. The pool now
keeps each large buffer it staged, by the object it came from, while tasks that use it are
pending: a later call with the same object whose bytes are still the same (compared with
``memcmp`` against the stored copy, at memory speed and without allocating: a copy into
``/dev/shm`` costs ~3x more, and the page faults of a new file on top) reuses the stored copy
instead of writing another one. That is what joblib's automatic memory-mapping does, without
its hashing of the whole array on every call.

Semantics do not change: each task maps the copy privately (copy-on-write), so a task that
writes into its argument changes only its own, as when it had its own copy; an array changed
by the caller between two calls no longer matches and is copied again. The file goes when the
last task that uses it is final (no retry will follow), or with the store at shutdown.

What the trace records stays true: the task's ``bytes_in`` is the argument it received by
value; the driver's serializing span counts the bytes the driver really copied (see
:meth:`SharedArguments.copied`), which is how the repeated-argument finding tells a shared
copy from one copy per task.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import weakref
from typing import Any

from eugo_lab.backends.shm_store import read_chunks, write_chunks

# memcmp from the C library: compares two buffers at memory speed with the GIL released (ctypes.CDLL).
_libc = ctypes.CDLL(None)
_memcmp = _libc.memcmp
_memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_memcmp.restype = ctypes.c_int


class _Stored:
    """One buffer copied into the store: its file, a read-only view of it, what it came from, its users."""

    __slots__ = ("path", "view", "owner", "nbytes", "users", "key")

    def __init__(self, path: str, view: memoryview | None, owner: weakref.ref | None, nbytes: int, key: Any):
        self.path = path
        self.view = view  # the stored bytes (a read-only mapping), compared with later calls' buffers
        self.owner = owner  # the object the buffer belongs to (an ndarray), weakly: None when not shareable
        self.nbytes = nbytes
        self.users = 0  # tasks not final yet that were sent this copy
        self.key = key


def _address(view: memoryview) -> int | None:
    """The address of a contiguous buffer's first byte (NumPy reads it for read-only buffers too)."""
    np = sys.modules.get("numpy")
    if np is None:
        return None
    try:
        return int(np.frombuffer(view, dtype=np.uint8).ctypes.data)
    except (TypeError, ValueError):
        return None


def _same_bytes(a: memoryview, b: memoryview) -> bool:
    """True when two buffers of one length hold the same bytes (``memcmp``)."""
    if a.nbytes != b.nbytes:
        return False
    if a.nbytes == 0:
        return True
    pa, pb = _address(a), _address(b)
    if pa is None or pb is None:
        return False
    return _memcmp(pa, pb, a.nbytes) == 0


class SharedArguments:
    """The large argument buffers of pending tasks, in ``store_dir``; thread-safe.

    :meth:`stage` is called at ``.remote()`` on the caller's thread, :meth:`release` on the pool's
    I/O thread when a task is final.
    """

    def __init__(self, store_dir: str):
        self.store_dir = store_dir
        self._lock = threading.Lock()
        self._by_key: dict[Any, _Stored] = {}
        self._by_path: dict[str, _Stored] = {}

    def stage(self, task_id: int, buffers: list[memoryview]) -> tuple[tuple[str, int], ...]:
        """Store (or reuse) each buffer; the handle: ``(path, bytes copied now)`` per buffer, in order."""
        handle = []
        for i, view in enumerate(buffers):
            entry = self._reuse(view)
            if entry is not None:
                handle.append((entry.path, 0))
                continue
            path = os.path.join(self.store_dir, f"args-{task_id}-{i}")
            write_chunks(path, [view])
            self._remember(view, path)
            handle.append((path, view.nbytes))
        return tuple(handle)

    @staticmethod
    def copied(handle: tuple[tuple[str, int], ...]) -> int:
        """The bytes :meth:`stage` copied for this handle (0 for every buffer it reused)."""
        return sum(n for _, n in handle)

    def _key(self, view: memoryview) -> Any:
        """What identifies the object a buffer belongs to, or None when it cannot be shared.

        Only objects that take a weak reference (NumPy arrays do; ``bytes`` do not): the entry
        must tell a live object from a new one at the same address.
        """
        owner = view.obj
        try:
            weakref.ref(owner)
        except TypeError:
            return None
        return (id(owner), view.nbytes)

    def _reuse(self, view: memoryview) -> _Stored | None:
        """A stored copy of the same object with the same bytes, now counted as used by one more task."""
        key = self._key(view)
        if key is None:
            return None
        with self._lock:
            entry = self._by_key.get(key)
            if entry is None or entry.owner is None or entry.owner() is not view.obj or entry.view is None:
                return None
            entry.users += 1  # held while comparing: a release meanwhile cannot delete it
        if _same_bytes(view, entry.view):
            return entry
        self._drop_user(entry)  # changed since it was stored: copy it again
        return None

    def _remember(self, view: memoryview, path: str) -> None:
        """Track the copy just written at ``path`` (shareable when its object takes a weak reference)."""
        key = self._key(view)
        stored_view = None
        owner = None
        if key is not None and _address(view) is not None:
            try:
                stored_view = read_chunks(path)[0]  # a read-only mapping of what was written
                owner = weakref.ref(view.obj)
            except OSError:
                stored_view = None
        entry = _Stored(path, stored_view, owner, view.nbytes, key if owner is not None else None)
        entry.users = 1
        with self._lock:
            self._by_path[path] = entry
            if entry.key is not None:
                self._by_key[entry.key] = entry  # the newest copy of this object is the one to compare with

    def release(self, handle: tuple[tuple[str, int], ...]) -> None:
        """A task that used ``handle`` is final: delete each file no pending task uses any more."""
        for path, _ in handle:
            with self._lock:
                entry = self._by_path.get(path)
            if entry is not None:
                self._drop_user(entry)

    def _drop_user(self, entry: _Stored) -> None:
        with self._lock:
            entry.users -= 1
            if entry.users > 0:
                return
            self._by_path.pop(entry.path, None)
            if entry.key is not None and self._by_key.get(entry.key) is entry:
                del self._by_key[entry.key]
            entry.view = None  # the mapping goes with its last view
        try:
            os.unlink(entry.path)
        except OSError:
            pass

    def pending(self) -> int:
        """Files in use (tests and diagnostics)."""
        with self._lock:
            return len(self._by_path)
