"""The driver half of recording a Dask cell: when each task was submitted, what it carried, where the driver waited.

Dask's workers know when a task ran; only the driver knows when the notebook asked for it and
when it sat waiting for results. For the cell's duration :class:`DriverCalls` wraps, on the
classes themselves (so names the notebook imported earlier are covered too), the calls that
submit work (``Client.submit``, ``map``, ``compute``, ``persist``, ``get``: what
``dask.compute`` runs on a distributed client), ``Client.scatter``, the one gateway every
blocking call of a synchronous client goes through (``Client.sync``: ``gather``,
``Future.result``, ``wait``) and ``as_completed``'s iteration. Each wrapper calls the original
and only takes notes; :meth:`DriverCalls.uninstall` puts the originals back.

Argument and scatter sizes are the bytes they travel as (``contract.serialization.wire_bytes``), never what an
object reports of itself; results are sized with Dask's own ``dask.sizeof`` (only to keep the small ones).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import distributed
import distributed.client as dclient
from dask.sizeof import sizeof

from eugo_lab.contract import given
from eugo_lab.contract.row import ARG_KEY_MIN_BYTES
from eugo_lab.contract.serialization import wire_bytes
from eugo_lab.tracing.returned import MAX_FUTURES_NOTED, DriverValues, loaded_names, stored_name, user_frame

#: Results of at most this many bytes (``dask.sizeof``) are kept by the driver for the trace's result digests:
#: enough for the numbers and short lists a grader compares, while a large array result is not held a second time.
RESULT_KEEP_BYTES = 64 * 1024
# Frames in these folders are not the notebook's line: a wait is attributed to the first frame outside them.
_SKIP_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (
    sys.modules["eugo_lab"], distributed, sys.modules["dask"]))
# Client.sync's coroutine functions that wait for task results, and the kind the trace's driver lane calls them.
_WAITS = {"_gather": "get", "_result": "get", "_wait": "wait"}


def caller_source() -> str:
    """``file:line`` of the notebook's code that called into Dask (the first frame outside eugo_lab and Dask)."""
    f: Any = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(_SKIP_DIRS) or "/concurrent/" in f.f_code.co_filename):
        f = f.f_back
    return "?" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def _count_futures(obj: Any) -> int:
    """How many futures a gather/wait was given (``futures_of`` walks lists, dicts and collections)."""
    if isinstance(obj, distributed.Future):
        return 1
    return len(dclient.futures_of(obj))  # anything else it does not walk counts none



def _function_name(func: Any) -> str:
    """The name a task of ``func`` goes by (its key's prefix, for a plain function)."""
    return getattr(func, "__name__", type(func).__name__)

@dataclass
class DriverCalls:
    """What the driver did in the cell: submissions, large arguments, scatters and waits (``time.time()``)."""

    submitted: dict[str, float] = field(default_factory=dict)  # future key -> when its submission call began
    calls: list[float] = field(default_factory=list)  # every submission call's start, in order
    #: (start, end, key) of each client.submit call: the driver's time in Dask's submit (naming the task by
    #: hashing its arguments, building its graph), which the breakdown shows as submitting.
    submit_spans: list[tuple[float, float, str]] = field(default_factory=list)
    bytes_in: dict[str, int] = field(default_factory=dict)  # key -> bytes of its by-value arguments
    arg_key: dict[str, int] = field(default_factory=dict)  # key -> identity of its large argument
    received: dict[str, float] = field(default_factory=dict)  # future key -> when the driver learnt it finished
    scatters: list[tuple[float, int]] = field(default_factory=list)  # (when, bytes)
    blocks: list[tuple[str, float, float, int, str]] = field(default_factory=list)  # kind, start, end, n, source
    _objects: dict[int, int] = field(default_factory=dict)  # id(large argument) -> its identity number
    _keep: list[Any] = field(default_factory=list)  # large arguments kept alive so their ids stay unique
    _saved: dict[tuple[Any, str], Any] = field(default_factory=dict)
    _local: threading.local = field(default_factory=threading.local)
    _handlers: list[tuple[dict, str, Any]] = field(default_factory=list)  # (table, op, original handler)
    _hears_results: bool = False
    #: key -> keys of the tasks whose returned values it was passed (a dependency through the driver).
    driver_deps: dict[str, list[str]] = field(default_factory=dict)
    _values: DriverValues = field(default_factory=DriverValues)
    #: Calls that sent work to (or scattered on) a client other than the recorded one: their tasks are not in the
    #: recording (a comparison run reads it to tell that the cell reached the notebook's own cluster anyway).
    other_client_calls: int = 0
    _client: Any = None
    #: key -> the value the driver received for it (values of up to RESULT_KEEP_BYTES: what a grader compares).
    results: dict[str, Any] = field(default_factory=dict)
    #: key of scattered data -> the number of the scatter call that made it.
    scattered: dict[str, int] = field(default_factory=dict)
    #: id(function) -> [function, name, tasks submitted with it]: what the driver pickled with each task.
    functions: dict[int, list[Any]] = field(default_factory=dict)

    def _note_client(self, client: Any) -> None:
        if client is not self._client:
            self.other_client_calls += 1

    # -- notes ------------------------------------------------------------------------------------
    def _identity(self, obj: Any) -> int:
        """A small number naming one large argument object (the same object, the same number)."""
        n = self._objects.get(id(obj))
        if n is None:
            n = self._objects[id(obj)] = len(self._objects)
            self._keep.append(obj)
        return n

    def _note_args(self, key: str, values: Iterable[Any]) -> None:
        total, largest, big = 0, 0, None
        for v in values:
            if isinstance(v, distributed.Future):
                continue  # a dependency: Dask moves it between workers, it is not sent by the driver
            size = wire_bytes(v)
            total += size
            if size > largest:
                largest, big = size, v
        self.bytes_in[key] = total
        if largest >= ARG_KEY_MIN_BYTES:
            self.arg_key[key] = self._identity(big)

    def _keep_result(self, key: str, value: Any) -> None:
        """Keep a small value the driver received as ``key``'s result (the first one: a task's result is one value)."""
        if key not in self.results and int(sizeof(value)) <= RESULT_KEEP_BYTES:
            self.results[key] = value

    def _returned(self, owner: Any, args: tuple, out: Any) -> None:
        """Note the values a ``result()``/``gather`` handed to the notebook, by the keys they came from."""
        try:
            if isinstance(owner, distributed.Future):
                self._keep_result(str(owner.key), out)
                self._values.note(self, out, str(owner.key), stored=lambda: stored_name(user_frame(_SKIP_DIRS)))
            elif args and isinstance(args[0], (list, tuple)) and isinstance(out, (list, tuple)) \
                    and len(args[0]) == len(out):
                for f, v in zip(args[0], out):
                    if isinstance(f, distributed.Future):
                        self._keep_result(str(f.key), v)
                        if len(out) <= MAX_FUTURES_NOTED:
                            self._values.note(self, v, str(f.key))
        except Exception:  # noqa: BLE001 - a tracing aid: a value that misbehaves is simply not noted
            pass

    def _note_function(self, func: Any, tasks: int) -> None:
        """Count ``tasks`` submitted with ``func``: Dask pickles the function into each task it sends."""
        entry = self.functions.get(id(func))
        if entry is None:
            entry = self.functions[id(func)] = [func, _function_name(func), 0]
        entry[2] += tasks

    def _passed(self, key: str, args: tuple, kwargs: dict) -> None:
        """Record the tasks whose returned values the submission of ``key`` was passed."""
        def loaded() -> list[str | None] | None:
            # client.submit(fn, *args, **kwargs): the call's first argument is the function; keywords
            # (the task's and Dask's options mixed) are not read.
            names = loaded_names(user_frame(_SKIP_DIRS))
            return None if names is None else [*names[1:1 + len(args)], *[None] * len(kwargs)]

        on = self._values.sources(self, args, kwargs, loaded=loaded)
        if on:
            self.driver_deps[key] = on

    def _watch(self, futures: Iterable[Any], when: float) -> None:
        for fut in futures:
            key = str(fut.key)
            self.submitted.setdefault(key, when)
            if not self._hears_results:
                fut.add_done_callback(self._done)

    def _done(self, fut: Any) -> None:
        self._got([fut], time.time())

    def _listen(self, client: Any) -> None:
        """Note when ``client`` hears that a task finished, from the scheduler's own message to it.

        The client dispatches the scheduler's ``key-in-memory`` and ``task-erred`` messages through
        its handler table; a wrapper there costs ~1 us a task on the client's event loop. The public
        route, ``Future.add_done_callback``, costs a coroutine and a thread hand-off per future
        (measured ~0.6 ms each on this machine, a third of a tiny task's round trip), so it is only
        the fallback for a client without that table.
        """
        handlers = getattr(client, "_stream_handlers", None)
        if not isinstance(handlers, dict) or not {"key-in-memory", "task-erred"} <= handlers.keys():
            return
        received = self.received

        def heard(orig: Any) -> Any:
            def handler(*args: Any, **kwargs: Any) -> Any:
                key = kwargs.get("key", args[0] if args else None)
                if key is not None:
                    received.setdefault(str(key), time.time())
                return orig(*args, **kwargs)
            return handler

        for op in ("key-in-memory", "task-erred"):
            self._handlers.append((handlers, op, handlers[op]))
            handlers[op] = heard(handlers[op])
        self._hears_results = True

    def _got(self, futures: Iterable[Any], when: float) -> None:
        """The driver knew ``futures`` were done by ``when``: the earliest of the done callback and the wait's end.

        The done callback runs on Dask's callback thread and can come after the ``result()`` that
        returned the value, which would draw the result arriving after the notebook used it.
        """
        for fut in futures:
            key = str(fut.key)
            self.received[key] = min(self.received.get(key, when), when)

    # -- wrappers ---------------------------------------------------------------------------------
    def _wrap(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__.get(name)
        self._saved[(owner, name)] = original
        setattr(owner, name, make(getattr(owner, name)))

    def install(self, client: Any) -> None:
        """Wrap Dask's submitting and blocking calls, and listen to ``client``'s results, until :meth:`uninstall`."""
        notes = self
        self._client = client
        self._listen(client)

        def submit(orig: Any) -> Any:
            def wrapper(client: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
                notes._note_client(client)
                t = time.time()
                fut = orig(client, func, *args, **kwargs)
                t_end = time.time()  # before our own notes below: their time is not Dask's
                notes.calls.append(t)
                if isinstance(fut, distributed.Future):
                    notes.submit_spans.append((t, t_end, str(fut.key)))
                    notes._note_function(func, 1)
                    task_kwargs = {k: v for k, v in kwargs.items() if k not in _SUBMIT_OPTIONS}
                    notes._passed(str(fut.key), args, task_kwargs)
                    notes._note_args(str(fut.key), [*args, *task_kwargs.values()])
                    given.note(_function_name(func), args, task_kwargs)
                    notes._watch([fut], t)
                return fut
            return wrapper

        def map_(orig: Any) -> Any:
            def wrapper(client: Any, func: Any, *iterables: Any, **kwargs: Any) -> Any:
                notes._note_client(client)
                t = time.time()
                # Lists in, so each task's own items can be sized; client.map makes lists of them itself.
                seqs = [list(it) if not isinstance(it, (list, tuple, range)) and _plain_iterable(it) else it
                        for it in iterables]
                futs = orig(client, func, *seqs, **kwargs)
                notes.calls.append(t)
                if isinstance(futs, list):
                    notes._note_function(func, len(futs))
                    shared = [v for k, v in kwargs.items() if k not in _MAP_OPTIONS]
                    for i, fut in enumerate(futs):
                        items = [s[i] for s in seqs if isinstance(s, (list, tuple, range)) and i < len(s)]
                        notes._note_args(str(fut.key), [*items, *shared])
                        given.note(_function_name(func), [*items, *shared])
                    notes._watch(futs, t)
                return futs
            return wrapper

        def collection(orig: Any) -> Any:  # compute, persist: the futures (or collections of them) they return
            def wrapper(client: Any, *args: Any, **kwargs: Any) -> Any:
                notes._note_client(client)
                t = time.time()
                out = orig(client, *args, **kwargs)
                notes.calls.append(t)
                # (an asynchronous client returns a coroutine: no futures, its keys get the call's time)
                notes._watch(dclient.futures_of(out), t)
                return out
            return wrapper

        def get(orig: Any) -> Any:  # dask.compute on a distributed client: submits the graph, then gathers
            def wrapper(client: Any, *args: Any, **kwargs: Any) -> Any:
                notes._note_client(client)
                notes.calls.append(time.time())
                return orig(client, *args, **kwargs)
            return wrapper

        def scatter(orig: Any) -> Any:
            def wrapper(client: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
                notes._note_client(client)
                t = time.time()
                out = orig(client, data, *args, **kwargs)
                for fut in dclient.futures_of(out):  # (an asynchronous client's coroutine holds none yet)
                    notes.scattered.setdefault(str(fut.key), len(notes.scatters))
                notes.scatters.append((t, wire_bytes(data)))
                return out
            return wrapper

        def sync(orig: Any) -> Any:
            def wrapper(client: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
                kind = _WAITS.get(getattr(func, "__name__", ""))
                if kind is None or getattr(notes._local, "waiting", False):
                    return orig(client, func, *args, **kwargs)
                n = 1 if kind == "get" and not args else _count_futures(args[0] if args else None)
                source = caller_source()
                notes._local.waiting = True  # a gather inside compute() is one wait, not two
                start = time.time()
                try:
                    out = orig(client, func, *args, **kwargs)
                finally:
                    notes._local.waiting = False
                    end = time.time()
                    notes.blocks.append((kind, start, end, n, source))
                if kind == "get":  # what a get returned had arrived by its end
                    owner = getattr(func, "__self__", None)
                    notes._returned(owner, args, out)
                    notes._got([owner] if isinstance(owner, distributed.Future) else _futures(args), end)
                return out
            return wrapper

        def next_(orig: Any) -> Any:
            def wrapper(it: Any) -> Any:
                source = caller_source()
                start = time.time()
                try:
                    fut = orig(it)
                finally:
                    end = time.time()
                    notes.blocks.append(("as_completed", start, end, 1, source))
                if isinstance(fut, distributed.Future):
                    notes._got([fut], end)
                elif isinstance(fut, tuple) and fut and isinstance(fut[0], distributed.Future):  # with_results=True
                    notes._got([fut[0]], end)
                    if len(fut) == 2:
                        notes._keep_result(str(fut[0].key), fut[1])
                return fut
            return wrapper

        self._wrap(distributed.Client, "submit", submit)
        self._wrap(distributed.Client, "map", map_)
        self._wrap(distributed.Client, "compute", collection)
        self._wrap(distributed.Client, "persist", collection)
        self._wrap(distributed.Client, "get", get)
        self._wrap(distributed.Client, "scatter", scatter)
        self._wrap(distributed.Client, "sync", sync)
        self._wrap(dclient.as_completed, "__next__", next_)

    def uninstall(self) -> None:
        """Put Dask's own methods back (a method the class only inherited is removed again)."""
        for (owner, name), original in self._saved.items():
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._saved.clear()
        for table, op, original in self._handlers:
            table[op] = original
        self._handlers.clear()
        self._hears_results = False
        self._keep.clear()
        self._client = None
        # (results, scattered and functions stay: the recording writes them into the trace after this)

    def submit_time(self, key: str, start: float, default: float) -> float:
        """When ``key`` was submitted: its future's call, else the last submission call before it ran.

        Tasks inside a graph (``dask.compute``, ``persist``) have no future of their own: the
        call that sent their graph is their submission.
        """
        t = self.submitted.get(key)
        if t is not None:
            return t
        before = [c for c in self.calls if c <= start]
        return before[-1] if before else default


# Keyword arguments of Client.submit/map that configure the call; the others go to the task.
_SUBMIT_OPTIONS = frozenset({"key", "workers", "resources", "retries", "priority", "fifo_timeout",
                             "allow_other_workers", "actor", "actors", "pure", "annotations"})
_MAP_OPTIONS = _SUBMIT_OPTIONS | {"batch_size"}


def _futures(args: tuple) -> list[Any]:
    """The futures in a gather's first argument (none when it has no arguments)."""
    return list(dclient.futures_of(args[0])) if args else []


def _plain_iterable(obj: Any) -> bool:
    """An iterator or generator client.map would turn into a list itself (not a Dask collection or a future)."""
    return not isinstance(obj, distributed.Future) and not hasattr(obj, "__dask_graph__") and hasattr(obj, "__iter__")
