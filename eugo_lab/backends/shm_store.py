"""Objects stored once in shared memory for ``hpc.put`` on the local pool.

An object is pickled with protocol 5 and its large buffers (NumPy arrays, bytes-likes)
are written out of band into one file under ``/dev/shm``: one copy on ``put``. Workers
map that file read-only and rebuild the object over the mapping, so a 100 MB array given
to eight tasks is never copied again (arrays arrive read-only, as with Ray's ``put``).

Large task results travel the same way, the other direction (:func:`write_result`): the
worker writes the result's pickle and its large buffers into one file of the store and sends
the pool only its name, so a 1 GiB result never goes through a pipe and the worker starts its
next task without waiting for the driver to read anything. The pool claims the file
(:func:`claim_result`) and the future holds a :class:`SharedResult`, which maps the file
copy-on-write on each ``get`` (no copy: the arrays are writable, their pages shared with the
file until written) and deletes it when the future lets it go.

Each runtime owns one directory named after the driver's pid. Workers delete it when the
driver disappears, and a new runtime deletes directories whose driver is dead, so nothing
is left in memory after a crash.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import mmap
import os
import pickle
import struct
import threading
import weakref
from typing import Any

from eugo_lab.contract.serialization import StoredValue, dumps_value_oob

_LEN = struct.Struct("<Q")
_END = 0xFFFFFFFFFFFFFFFF  # length value that marks the last chunk
ALIGN = 64  # where each chunk starts in a file: a cache line, more than any NumPy dtype needs
_PREFIX = "eugo-store-"
#: A result a worker wrote and the pool has not claimed yet: ``res-<worker pid>-<n>`` (the pool
#: deletes those of a worker that died, see :func:`sweep_results`); claimed ones are ``out-<n>``.
RESULT_PREFIX = "res-"
_CLAIMED_PREFIX = "out-"
_claims = itertools.count()
#: Buffers (of arguments and of results) at least this large go through shared memory. Below it
#: a pipe is as fast: creating, mapping and deleting a file costs ~50-100 us, what copying ~1 MB
#: through a pipe costs, and a result this small fits the worker's 1 MiB result pipe whole, so
#: the worker never waits for the driver to read it (local_worker widens the pipe).
OOB_BYTES = 1 << 20


def store_root() -> str:
    """Where object files live: RAM-backed ``/dev/shm`` when usable, else the temp folder."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    import tempfile

    return tempfile.gettempdir()


def make_store_dir() -> str:
    """Create this driver's store directory, after removing those of dead drivers."""
    root = store_root()
    for name in os.listdir(root):
        if name.startswith(_PREFIX):
            try:
                pid = int(name[len(_PREFIX) :].split("-")[0])
            except ValueError:
                continue
            if not _alive(pid):
                import shutil  # only for a dead driver's leftovers: not on every pool's start

                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    # What tempfile.mkdtemp does (a private folder under a random name), without importing
    # tempfile: with the shutil, random, bz2 and lzma it pulls in, ~2 ms of the pool's start-up.
    while True:
        path = os.path.join(root, f"{_PREFIX}{os.getpid()}-{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_chunks(path: str, chunks: list) -> int:
    """Write byte chunks into a new file at ``path`` (length-prefixed, one copy); return its size.

    Each chunk starts at a multiple of :data:`ALIGN` bytes, so an array rebuilt over the mapping
    is aligned as NumPy's own allocations are: an unaligned one is slower to compute on, and
    NumPy sums it in another order (buffered), which changes the last bits of a float sum.

    Plain ``write`` calls, not a copy into a fresh ``mmap``: the kernel fills tmpfs pages
    directly, where an ``mmap`` copy takes a page fault per 4 KiB page (measured: 47 ms
    against 95 ms for 100 MB).
    """
    views = [memoryview(c).cast("B") for c in chunks]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    total = 0
    try:
        for v in views:
            _write_all(fd, _LEN.pack(v.nbytes))
            total += _LEN.size
            pad = _padding(total)
            if pad:
                _write_all(fd, bytes(pad))
                total += pad
            _write_all(fd, v)
            total += v.nbytes
        _write_all(fd, _LEN.pack(_END))
        total += _LEN.size
    finally:
        os.close(fd)
    return total


def _padding(offset: int) -> int:
    """Bytes from ``offset`` to the next multiple of :data:`ALIGN`."""
    return -offset % ALIGN


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view[: 1 << 30])  # one call writes at most ~2 GB on Linux
        view = view[n:]


def read_chunks(path: str, private: bool = False) -> list[memoryview]:
    """Map a file written by :func:`write_chunks`; views of the mapping, no copy.

    ``private=False`` maps read-only (objects shared by many tasks must not change under
    them); ``private=True`` maps copy-on-write, so a task may modify its own arguments
    without affecting anybody else and without paying for a copy it does not need.
    """
    if private:
        view = _map_private(path)
    else:
        with open(path, "rb") as f:
            view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    chunks = []
    off = 0
    while True:
        (n,) = _LEN.unpack_from(view, off)
        off += _LEN.size
        if n == _END:
            break
        off += _padding(off)
        chunks.append(view[off : off + n])
        off += n
    # The mapping stays alive as long as any view (or array built over one) does.
    return chunks


# A private mapping made with the C library's mmap: Python's mmap object keeps a duplicate of the file's
# descriptor for as long as it lives, so each result a notebook holds (an array over its mapping) would hold
# one open file, and a thousand of them would exhaust a kernel's usual limit of 1024 for every other library
# in the process. This one closes the file at once; the pages are unmapped when the last view goes.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


def _map_private(path: str) -> memoryview:
    """The file at ``path`` mapped copy-on-write (writable, private), holding no file descriptor."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of {path}: {os.strerror(err)}")
    finally:
        os.close(fd)
    region = (ctypes.c_char * size).from_address(addr)
    weakref.finalize(region, _libc.munmap, addr, size)
    return memoryview(region).cast("B")


def write_object(obj: Any, path: str) -> int:
    """Serialize ``obj`` into a new file at ``path``; return its size in bytes."""
    buffers: list[pickle.PickleBuffer] = []
    import cloudpickle  # on first put(), not when the pool starts (the driver's start-up waits for it)

    header = cloudpickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return write_chunks(path, [header, *(b.raw() for b in buffers)])


def read_object(path: str) -> Any:
    """Rebuild the object stored at ``path`` over a read-only mapping (no copy of buffers)."""
    chunks = read_chunks(path)
    return pickle.loads(chunks[0], buffers=chunks[1:])


# -- results ------------------------------------------------------------------------------------
_written = itertools.count()


def write_result(store_dir: str, value: Any, threshold: int) -> tuple[bytes | tuple, int]:
    """A task's result as a worker sends it: ``(payload, nbytes)``.

    ``payload`` is the pickle itself (``bytes``) when no buffer of ``value`` reaches
    ``threshold``; otherwise ``("shm", path, nbytes)``: the pickle and its large buffers were
    written into a new file of the store (one copy, at memory speed), which the pool claims.
    ``nbytes`` is what the result weighs either way (pickle plus buffers): the trace's bytes out.
    """
    header, buffers = dumps_value_oob(value, threshold)
    if not buffers:
        return header, len(header)
    path = os.path.join(store_dir, f"{RESULT_PREFIX}{os.getpid()}-{next(_written)}")
    try:
        nbytes = write_chunks(path, [header, *buffers])
    except BaseException as exc:
        _unlink(path)  # a full /dev/shm, an interrupt: no half-written file left behind
        if not isinstance(exc, OSError):
            raise
        # No room in shared memory: the result still arrives, through the pipe (pickled in band).
        from eugo_lab.contract.serialization import dumps_value

        data = dumps_value(value)
        return data, len(data)
    return ("shm", path, nbytes), nbytes


def claim_result(wire: tuple) -> SharedResult:
    """The pool's side of :func:`write_result`: own the file (renamed out of the worker's name space)."""
    _, path, nbytes = wire
    claimed = os.path.join(os.path.dirname(path), f"{_CLAIMED_PREFIX}{os.getpid()}-{next(_claims)}")
    try:
        os.rename(path, claimed)
    except OSError:  # the store is being removed (shutdown): owned under its name; a get says it is gone
        claimed = path
    return SharedResult(claimed, nbytes, owner=True)


def drop_result(wire: tuple) -> None:
    """Delete a result file nobody will read (its task was cancelled before the result came)."""
    _unlink(wire[1])


def sweep_results(store_dir: str, pid: int) -> int:
    """Delete the results worker ``pid`` wrote and the pool never claimed (the worker died); return how many."""
    prefix = f"{RESULT_PREFIX}{pid}-"
    n = 0
    try:
        names = os.listdir(store_dir)
    except OSError:
        return 0
    for name in names:
        if name.startswith(prefix):
            _unlink(os.path.join(store_dir, name))
            n += 1
    return n


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# Deleting a large tmpfs file frees its pages there and then: ~0.6 s for 1 GiB on this VM, which
# the thread that dropped the last reference (a get() returning) would wait for. Files of at least
# UNLINK_LATER_BYTES are deleted by one background thread instead; smaller ones at once (a thread
# hand-off costs more than their unlink).
UNLINK_LATER_BYTES = 64 << 20
_unlink_queue: Any = None
_unlink_lock = threading.Lock()


def _unlink_soon(path: str, nbytes: int) -> None:
    """Delete ``path`` now, or on the background deleter when it is large (see UNLINK_LATER_BYTES)."""
    global _unlink_queue
    if nbytes < UNLINK_LATER_BYTES:
        _unlink(path)
        return
    with _unlink_lock:
        if _unlink_queue is None:
            import queue

            _unlink_queue = queue.SimpleQueue()
            threading.Thread(target=_deleter, args=(_unlink_queue,), name="eugo-shm-unlink", daemon=True).start()
    _unlink_queue.put(path)


def _deleter(q: Any) -> None:
    while True:
        _unlink(q.get())


class SharedResult(StoredValue):
    """A result in a file of the store: decoded over a copy-on-write mapping, deleted with its owner.

    The owner (the pool's, held by the future and by tasks it is forwarded to) deletes the file
    when it is garbage collected, or when the store is removed at shutdown, whichever comes
    first. Pickled (a dependent task's argument), it becomes a reference that does not own the
    file: a worker maps it for that task and never deletes it.
    """

    __slots__ = ("path", "nbytes", "_finalizer", "__weakref__")

    def __init__(self, path: str, nbytes: int, owner: bool = False):
        self.path = path
        self.nbytes = nbytes
        self._finalizer = weakref.finalize(self, _unlink_soon, path, nbytes) if owner else None

    def __reduce__(self) -> tuple:
        return SharedResult, (self.path, self.nbytes)  # not the owner: the receiver never deletes it

    def __repr__(self) -> str:
        return f"<SharedResult {self.nbytes} bytes>"

    def load(self) -> Any:
        """The value over a private (copy-on-write) mapping of the file: writable, no copy made."""
        try:
            chunks = read_chunks(self.path, private=True)
        except FileNotFoundError:
            from eugo_lab.contract.errors import BackendError

            raise BackendError(
                f"this task's result ({self.nbytes} bytes) was kept in the local pool's shared memory, which was "
                "freed when its runtime shut down (hpc.shutdown(), or hpc.init() starting another). Get large "
                "results before shutting the runtime down, or run the task again.") from None
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            # Each mapping holds a descriptor (Python's mmap duplicates it): with the process at its
            # limit of open files, read the file into this process's memory instead (one copy).
            chunks = _read_copy(self.path)
        return pickle.loads(chunks[0], buffers=chunks[1:])

    def release(self) -> None:
        """Delete the file now (idempotent); a mapping already made keeps its pages."""
        if self._finalizer is not None:
            self._finalizer()


def _read_copy(path: str) -> list[memoryview]:
    """The chunks of a file written by :func:`write_chunks`, read into a new writable buffer."""
    with open(path, "rb") as f:
        data = bytearray(os.fstat(f.fileno()).st_size)
        f.readinto(data)
    view = memoryview(data)
    chunks, off = [], 0
    while True:
        (n,) = _LEN.unpack_from(view, off)
        off += _LEN.size
        if n == _END:
            return chunks
        off += _padding(off)
        chunks.append(view[off : off + n])
        off += n
