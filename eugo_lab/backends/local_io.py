"""The local pool's pipe traffic: framing messages, writing without blocking, reading whole frames.

One I/O thread owns every pipe (``LocalBackend``). It writes a worker's task pipe only as far as
the pipe takes without blocking (a 100 MB argument never stalls the other workers): what is left
waits in the worker's ``outbuf`` and the selector wakes the thread when the pipe drains. It reads
results up to 1 MiB at a time and hands back each complete frame (``local_wire.LEN`` + pickle).
"""

from __future__ import annotations

import os
import pickle
import selectors

from eugo_lab.backends.local_process import Worker
from eugo_lab.backends.local_wire import LEN
from eugo_lab.contract.task import Task


def frame(msg: tuple) -> bytes:
    """``msg`` as one frame of a worker's task pipe."""
    data = pickle.dumps(msg, 5)
    return LEN.pack(len(data)) + data


def queue_task(w: Worker, task: Task, keep_functions: int) -> None:
    """Append to ``w``'s output the frames that run ``task``: its function first, if ``w`` does not hold it.

    A worker keeps ``keep_functions`` functions loaded at most; past that, it is told to forget the
    least recently used one (and gets it sent again when a later task needs it).
    """
    fn = task.fn
    known = w.known_fns
    if fn.fid in known:
        known.move_to_end(fn.fid)
    else:
        w.outbuf += frame(("fn", fn.fid, fn.name, fn.payload))
        known[fn.fid] = None
        fn.count_send()
        if len(known) > keep_functions:
            # The worker reads its pipe in order: a task of the evicted function already sent runs
            # before the worker forgets it, and a later one gets the function sent again.
            w.outbuf += frame(("forget", known.popitem(last=False)[0]))
    # A batch's flag says how its items run: 2, each alone (a group of its own; see Task.alone).
    w.outbuf += frame(("run", task.task_id, fn.fid, task.args, task.deps_payload,
                       2 if task.alone else task.is_batch, task.staged, task.probe))


def flush(sel: selectors.BaseSelector, w: Worker) -> None:
    """Write as much of ``w``'s output as its task pipe takes now; watch the pipe for room while some is left."""
    buf = w.outbuf
    if buf:
        try:
            n = os.write(w.task_w, buf)
            del buf[:n]
        except BlockingIOError:
            pass
        except OSError:  # the worker is gone; its death is handled on read EOF
            buf.clear()
    _watch_write(sel, w, bool(buf))


def _watch_write(sel: selectors.BaseSelector, w: Worker, want: bool) -> None:
    try:
        registered = sel.get_key(w.task_w)
    except (KeyError, ValueError):
        registered = None
    if want and registered is None:
        sel.register(w.task_w, selectors.EVENT_WRITE, w)
    elif not want and registered is not None:
        sel.unregister(w.task_w)


def read_messages(w: Worker) -> list[tuple] | None:
    """The messages of every whole frame ``w`` sent since the last read; ``None`` at end of file (it died).

    A frame cut by the read waits in ``w.inbuf`` for the rest.
    """
    try:
        data = os.read(w.result_r, 1 << 20)
    except BlockingIOError:
        return []
    except OSError:
        data = b""
    if not data:
        return None
    buf = w.inbuf
    buf += data
    off = 0
    size = LEN.size
    messages = []
    while len(buf) - off >= size:
        (n,) = LEN.unpack_from(buf, off)
        if len(buf) - off - size < n:
            break
        messages.append(pickle.loads(memoryview(buf)[off + size : off + size + n]))
        off += size + n
    del buf[:off]
    return messages
