"""Turning functions, arguments and results into bytes, with errors that name the culprit.

Driver and workers share this module. Arguments are pickled once, at ``.remote()`` time,
with a pickler whose ``persistent_id`` replaces every :class:`Future` and ``put()``
reference by a small token. The worker's unpickler swaps the tokens back for values, so
futures nested anywhere in the arguments are resolved without a second walk over them,
and a dependency's result bytes travel to the worker without being unpickled on the driver.
"""

from __future__ import annotations

import functools
import io
import pickle
import types
from collections import ChainMap
from collections.abc import Callable, Iterable
from typing import Any

from eugo_lab.contract.errors import SerializationError

PROTOCOL = 5

# Types whose tuples the standard pickler handles exactly like cloudpickle, only faster.
_SIMPLE_TYPES = frozenset({int, float, str, bytes, bool, type(None), complex})


# cloudpickle (with the dataclasses, inspect and logging it imports: ~20 ms) loads on first
# use. A local-pool worker imports this module before it says hello, and most workers only
# unpickle arguments and pickle plain results, which the standard pickle does.
@functools.cache
def _picklers() -> tuple[type, type]:
    """The cloudpickle-based picklers ``(_Pickler, _TokenPickler)``, built on first use."""
    import cloudpickle

    try:
        from cloudpickle.cloudpickle import _code_reduce as _cloudpickle_code_reduce

        def _code_reduce_keeping_filename(code: types.CodeType) -> Any:
            # cloudpickle >= 3.1 replaces co_filename by "<dynamic-code>" to make payloads
            # deterministic; we want worker tracebacks to name the user's file (or notebook cell).
            ctor, args = _cloudpickle_code_reduce(code)
            return ctor, tuple(code.co_filename if a == "<dynamic-code>" else a for a in args)

        dispatch = ChainMap({types.CodeType: _code_reduce_keeping_filename}, cloudpickle.CloudPickler.dispatch_table)
    except ImportError:  # pragma: no cover - a cloudpickle without that helper keeps its own behaviour
        dispatch = cloudpickle.CloudPickler.dispatch_table
    dispatch = ChainMap({functools._lru_cache_wrapper: _lru_cache_reduce}, dispatch)
    # cloudpickle sends an open text file as a new file holding a copy of its contents; binary files and
    # every other route refuse open files. One rule everywhere: refused, with _HINT saying what to pass.
    dispatch = ChainMap({io.TextIOWrapper: _refuse_open_file(dispatch.get(io.TextIOWrapper))}, dispatch)

    class _Pickler(cloudpickle.CloudPickler):
        """cloudpickle, keeping code objects' file names for readable remote tracebacks."""

        dispatch_table = dispatch

    class _TokenPickler(_Pickler):
        """A cloudpickler that records futures and object references instead of pickling them."""

        def __init__(self, file: io.BytesIO, token_of: Callable[[Any], Any],
                     buffer_callback: Callable[[pickle.PickleBuffer], bool] | None = None):
            super().__init__(file, protocol=PROTOCOL, buffer_callback=buffer_callback)
            self._token_of = token_of
            self.tokens: list[Any] = []

        def persistent_id(self, obj: Any) -> Any:  # pickle protocol hook
            token = self._token_of(obj)
            if token is not None:
                self.tokens.append(obj)
            return token

    return _Pickler, _TokenPickler


def _refuse_open_file(standard: Callable | None) -> Callable[[io.TextIOWrapper], Any]:
    """A reducer for text files that refuses open files (``standard`` still handles sys.stdout/stderr by name)."""
    import sys

    def reduce(f: io.TextIOWrapper) -> Any:
        if standard is not None and f in (sys.stdout, sys.stderr):  # the worker's own stream, not a copy
            return standard(f)
        raise TypeError(f"an open file ({getattr(f, 'name', '?')!r}) is not sent to workers: a worker would get "
                        "a copy of its contents, not the file (its reads, writes and close would not reach this one)")

    return reduce


def _lru_cache_reduce(wrapper: Any) -> Any:
    """Pickle a ``functools.lru_cache``/``cache`` wrapper by value when the function it wraps is (a cell's).

    The wrapper's own ``__reduce__`` names it (``__main__.helper``), which a worker cannot import: a
    task that called an ``@lru_cache`` helper defined in a notebook cell failed to load. A wrapped
    function cloudpickle would send by value goes by value, wrapped again on the worker with the
    same ``maxsize`` and ``typed`` (each worker keeps its own, empty cache); an importable one is
    still sent by name.
    """
    fn = getattr(wrapper, "__wrapped__", None)
    if fn is None or _importable(wrapper):
        return wrapper.__reduce__()
    params = wrapper.cache_parameters()
    return _lru_cached, (fn, params["maxsize"], params["typed"])


def _importable(obj: Any) -> bool:
    """True if a worker finds ``obj`` by its name: an attribute of an imported module other than ``__main__``."""
    import sys

    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is None or module.__name__ == "__main__":
        return False
    found: Any = module
    for part in str(getattr(obj, "__qualname__", "")).split("."):
        found = getattr(found, part, None)  # "<locals>" of a function's body: not found, so by value
    return found is obj


def _lru_cached(fn: Callable, maxsize: int | None, typed: bool) -> Callable:
    """``functools.lru_cache(maxsize, typed)(fn)``: a cell's cached helper, rebuilt on a worker."""
    return functools.lru_cache(maxsize=maxsize, typed=typed)(fn)


def _cloud_dumps(obj: Any, **kwargs: Any) -> bytes:
    buf = io.BytesIO()
    _picklers()[0](buf, protocol=PROTOCOL, **kwargs).dump(obj)
    return buf.getvalue()


def wire_bytes(value: Any) -> int:
    """Bytes ``value`` travels as when an engine pickles it; 0 for a value no pickler takes.

    The pickle plus its out-of-band buffers (an array's data is counted, not copied). Never what the
    object says of itself (``nbytes``, ``__sizeof__``, Dask's ``sizeof``): a wrapper reporting a small
    size still carries what it pickles. A plain ndarray's ``nbytes`` is its buffer, so it is read as is.
    """
    t = type(value)
    if t.__name__ == "ndarray" and t.__module__ == "numpy":  # (numpy is not imported here: workers stay lean)
        return int(value.nbytes)
    buffers: list[int] = []

    def keep(buffer: pickle.PickleBuffer) -> bool:
        buffers.append(buffer.raw().nbytes)
        return False  # out of band: counted, not copied into the pickle

    try:
        return len(_cloud_dumps(value, buffer_callback=keep)) + sum(buffers)
    except Exception:  # noqa: BLE001 - what no pickler takes travels as nothing we can count
        return 0


class _TokenUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, load_token: Callable[[Any], Any], buffers: Any = None):
        super().__init__(file, buffers=buffers)
        self._load_token = load_token

    def persistent_load(self, pid: Any) -> Any:  # pickle protocol hook
        return self._load_token(pid)


def _no_tokens(obj: Any) -> None:
    return None


def dumps_args(
    args: tuple, kwargs: dict, *, function: str, token_of: Callable[[Any], Any] = _no_tokens,
    oob_threshold: int | None = None,
) -> tuple[bytes, list[Any], list[memoryview]]:
    """Pickle ``(args, kwargs)``; return the bytes, the objects that became tokens, and large buffers.

    ``token_of(obj)`` returns a picklable token for a future or reference, else ``None``.
    With ``oob_threshold``, contiguous buffers (NumPy arrays, bytes-likes) of at least that
    many bytes are left out of the pickle (protocol 5, out of band) and returned as views
    of the caller's memory; the caller must copy them before the caller's code runs on.
    Raises :class:`SerializationError` naming the argument that could not be pickled.
    """
    if all(type(a) in _SIMPLE_TYPES for a in args) and all(type(v) in _SIMPLE_TYPES for v in kwargs.values()):
        return pickle.dumps((args, kwargs), PROTOCOL), [], []
    buffers: list[memoryview] = []
    callback = None
    if oob_threshold is not None:
        def callback(pb: pickle.PickleBuffer) -> bool:
            view = pb.raw()
            if view.nbytes < oob_threshold:
                return True  # small: keep it inside the pickle
            buffers.append(view)
            return False
    buf = io.BytesIO()
    pickler = _picklers()[1](buf, token_of, callback)
    try:
        pickler.dump((args, kwargs))
    except Exception as exc:  # noqa: BLE001 - pickle raises many types; each becomes a SerializationError naming the argument
        raise _diagnose_args(args, kwargs, function, exc) from None
    return buf.getvalue(), pickler.tokens, buffers


def loads_args(data: bytes, load_token: Callable[[Any], Any] | None = None,
               buffers: Any = None) -> tuple[tuple, dict]:
    """Inverse of :func:`dumps_args`; ``load_token(token)`` returns the value a token stands for."""
    if load_token is None:
        return pickle.loads(data, buffers=buffers)
    return _TokenUnpickler(io.BytesIO(data), load_token, buffers).load()


def warm() -> None:
    """Import cloudpickle and build the picklers now (the driver, while its workers start).

    The first ``.remote()`` pickles its function with them: ~15 ms of imports (cloudpickle,
    logging, platform, uuid) that would otherwise run after the workers are up, with them idle.
    """
    _picklers()


def dumps_function(fn: Callable, *, function: str) -> bytes:
    """Pickle a function by value where needed (notebook functions, lambdas, closures)."""
    try:
        return _cloud_dumps(fn)
    except Exception as exc:  # noqa: BLE001 - any pickling failure becomes one naming the captured variable
        raise _diagnose_function(fn, function, exc) from None


def dumps_value(value: Any) -> bytes:
    """Pickle a task's result: the fast standard pickler first, cloudpickle when it must."""
    try:
        return pickle.dumps(value, PROTOCOL)
    except Exception:  # noqa: BLE001 - whatever plain pickle refuses (lambdas, local classes) cloudpickle may take
        return _cloud_dumps(value)


def dumps_value_oob(value: Any, threshold: int) -> tuple[bytes, list[memoryview]]:
    """Pickle a result with its buffers of ``threshold`` bytes or more left out of band (protocol 5).

    Returns the pickle and the large buffers, as views of ``value``'s own memory (no copy): what
    an engine that moves results through shared memory writes out. With no buffer that large, the
    pickle is exactly :func:`dumps_value`'s. A large NumPy array that is not contiguous (a slice
    with a step, a transpose of a C array) would be pickled in band, as a copy of its data made by
    ``tobytes()``: it is made contiguous first, which gives the same array back (the in-band route
    also rebuilds a C-ordered copy) at memory speed; large ``bytes`` and ``bytearray`` leave the pickle too
    (pickle keeps them in band) and come back as themselves. Subclasses keep their own pickling.
    """
    t = type(value)
    if t in _SIMPLE_TYPES and t is not bytes:  # a number or a string: no buffer, and the hot path of tiny tasks
        return pickle.dumps(value, PROTOCOL), []
    value = _contiguous(value, threshold)
    buffers: list[memoryview] = []

    def callback(pb: pickle.PickleBuffer) -> bool:
        view = pb.raw()
        if view.nbytes < threshold:
            return True  # small: inside the pickle
        buffers.append(view)
        return False

    try:
        data = pickle.dumps(value, PROTOCOL, buffer_callback=callback)
    except Exception:  # noqa: BLE001 - whatever plain pickle refuses (lambdas, local classes) cloudpickle may take
        buffers.clear()
        data = _cloud_dumps(value, buffer_callback=callback)
    return data, buffers


class _LargeBytes:
    """A large ``bytes``/``bytearray`` result, pickled as a buffer out of band (pickle keeps both in band)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | bytearray):
        self.data = data

    def __reduce__(self) -> tuple:
        return _bytes_from, (pickle.PickleBuffer(self.data), type(self.data) is bytearray)


def _bytes_from(buffer: Any, mutable: bool = False) -> bytes | bytearray:
    """The ``bytes`` (or ``bytearray``) of a :class:`_LargeBytes` again: one copy, out of the shared mapping."""
    return bytearray(buffer) if mutable else bytes(buffer)


def _contiguous(value: Any, threshold: int) -> Any:
    """``value`` ready for out-of-band pickling when it is large ``bytes`` or a non-contiguous array.

    A plain NumPy array that is neither C- nor F-contiguous becomes a C-ordered copy; ``bytes``
    and ``bytearray`` are wrapped so their data leaves the pickle (they come back as themselves).
    """
    import sys

    if type(value) is bytes or type(value) is bytearray:
        return _LargeBytes(value) if len(value) >= threshold else value
    np = sys.modules.get("numpy")
    if np is None or type(value) is not np.ndarray or value.nbytes < threshold or value.dtype.hasobject:
        return value
    flags = value.flags
    if flags.c_contiguous or flags.f_contiguous:
        return value
    return np.ascontiguousarray(value)


class StoredValue:
    """A task's result kept outside the driver's heap (the local pool's shared memory).

    ``Outcome.payload`` and a future's payload are the pickled result (``bytes``) or one of
    these: :func:`loads_value` decodes either, and the engine's subclass frees its storage when
    the last reference to it goes. ``nbytes``: the bytes it holds (pickle plus buffers).
    """

    __slots__ = ()
    nbytes: int

    def load(self) -> Any:
        """The value (a new object on each call, like unpickling bytes again)."""
        raise NotImplementedError

    def inline(self) -> bytes:
        """The value pickled in band: for a route that can only carry bytes."""
        return dumps_value(self.load())


def loads_value(data: bytes | StoredValue) -> Any:
    """Inverse of :func:`dumps_value` (a :class:`StoredValue` decodes itself)."""
    if isinstance(data, StoredValue):
        return data.load()
    return pickle.loads(data)


def _first_unpicklable(value: Any) -> BaseException | None:
    try:
        _cloud_dumps(value)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is what we look for
        return exc
    return None


_HINT = (
    "Objects such as locks, open files, sockets, generators and database connections "
    "cannot be sent to another process. Create them inside the task instead, or pass "
    "what is needed to rebuild them (a path, a URL, a seed): for a file, pass its path "
    "and open it in the task."
)


def _first_unpicklable_of(named: Iterable[tuple[str, Any]]) -> tuple[str, Any, BaseException] | None:
    """The first ``(name, value, error)`` of ``named`` whose value cannot be pickled, else None.

    Each value is pickled on its own, so the error names the culprit rather than the whole call.
    """
    for name, value in named:
        err = _first_unpicklable(value)
        if err is not None:
            return name, value, err
    return None


def _describe(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


def _diagnose_args(args: tuple, kwargs: dict, function: str, exc: BaseException) -> SerializationError:
    """Find which argument failed and say so; fall back to the raw error."""
    named = [(f"argument {i}", v) for i, v in enumerate(args)] + [(f"argument {k!r}", v) for k, v in kwargs.items()]
    found = _first_unpicklable_of(named)
    if found is None:
        return SerializationError(f"cannot send the arguments of {function}() to a worker: {exc}. {_HINT}")
    what, value, err = found
    return SerializationError(f"cannot send {what} of {function}() to a worker: a {_describe(value)} "
                              f"cannot be pickled ({err}). {_HINT}")


def _diagnose_function(fn: Callable, function: str, exc: BaseException) -> SerializationError:
    """Name the captured variable (closure cell or referenced global) that failed."""
    import inspect

    try:
        captured = inspect.getclosurevars(fn)
        candidates = {**captured.globals, **captured.nonlocals}
    except (TypeError, ValueError):
        candidates = {}
    found = _first_unpicklable_of((name, value) for name, value in candidates.items() if not inspect.ismodule(value))
    if found is None:
        return SerializationError(f"cannot send {function}() to a worker: {exc}. {_HINT}")
    name, value, err = found
    return SerializationError(f"cannot send {function}() to a worker: it uses the variable {name!r}, a "
                              f"{_describe(value)}, which cannot be pickled ({err}). {_HINT}")


def _captured_size(value: Any) -> int:
    """Bytes ``value`` adds to a function's pickle: its data for buffers, else the length of its own pickle."""
    nbytes = getattr(value, "nbytes", None)  # NumPy arrays (and anything that says what its data holds)
    if isinstance(nbytes, int) and hasattr(value, "dtype"):
        return nbytes
    if isinstance(value, (bytes, bytearray, memoryview)):
        return memoryview(value).nbytes
    try:
        return len(_cloud_dumps(value))
    except Exception:  # noqa: BLE001 - the function's own pickle succeeded; this is only a measure
        return 0


#: How :func:`captured_sizes` names a ``functools.partial``'s bound argument (then the parameter's name, or its
#: position): the captured-object finding words it as a bound argument, not a global.
BOUND_PREFIX = "bound argument "


def _bound_names(p: functools.partial) -> dict[Any, str]:
    """Names for ``p``'s bound arguments: position or keyword -> ``"bound argument 'name'"``."""
    import inspect

    names: dict[Any, str] = {k: f"{BOUND_PREFIX}{k!r}" for k in p.keywords}
    try:
        params = list(inspect.signature(p.func).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: positions only
        params = []
    for k in range(len(p.args)):
        names[k] = f"{BOUND_PREFIX}{params[k]!r}" if k < len(params) else f"{BOUND_PREFIX}{k + 1}"
    return names


def _loaded_globals(code: types.CodeType) -> set[str]:
    """Names ``code`` (and the code nested in it) reads or writes as globals, from its instructions."""
    import dis

    names = {ins.argval for ins in dis.get_instructions(code)
             if ins.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _loaded_globals(const)
    return names


def captured_sizes(fn: Callable, payload_bytes: int) -> tuple[tuple[str, int], ...]:
    """``((name, bytes), ...)``: the globals and closure cells ``fn`` uses, largest first (modules left out).

    What a task function carries besides its code: a global array it reads travels inside the
    function's pickle, not as an argument, so a task's ``bytes_in`` never shows it. Measured once,
    when the function is pickled (``FunctionRecord.payload``); each size is capped at the
    pickle's own ``payload_bytes`` (an object referenced by name is never larger than what carried it).
    """
    import inspect

    # The runtime may hand over a wrapper (the JIT trial, profiling, batch="auto"'s spreader): what
    # travels with it is the user's function inside, with the globals that one reads.
    while not inspect.isfunction(fn) and callable(getattr(fn, "fn", None)):
        fn = fn.fn
    if isinstance(fn, functools.partial):
        # A partial's bound arguments travel inside its pickle, with every new partial object, like
        # a captured global: hpc.map(partial(f, big), items) sends big with the function, never as an
        # argument. Named as the wrapped function's parameters, with what that function captures.
        bound = _bound_names(fn)
        sizes = [(bound.get(k, f"{BOUND_PREFIX}{k}"), min(_captured_size(v), payload_bytes))
                 for k, v in [*enumerate(fn.args), *fn.keywords.items()]]
        inner = list(captured_sizes(fn.func, payload_bytes))
        return tuple(sorted(sizes + inner, key=lambda kv: (-kv[1], kv[0])))
    try:
        from cloudpickle.cloudpickle import _should_pickle_by_reference

        if _should_pickle_by_reference(fn):  # an importable function: workers import it, its globals stay behind
            return ()
    except (ImportError, TypeError, AttributeError):  # another cloudpickle: measure anyway (sizes are capped)
        pass
    try:
        captured = inspect.getclosurevars(fn)
    except (TypeError, ValueError):  # not a plain function (a partial, a callable object)
        return ()
    # The globals the code loads, not every name it spells: getclosurevars also counts an attribute
    # (``gains[picks].mean()``) as the global ``mean`` when the namespace happens to hold one.
    # (Read from the function's globals, so a nested function's globals count too, as cloudpickle sends them.)
    module_globals = getattr(fn, "__globals__", {})
    globals_read = {k: module_globals[k] for k in sorted(_loaded_globals(fn.__code__)) if k in module_globals}
    sizes = []
    for name, value in {**globals_read, **captured.nonlocals}.items():
        if inspect.ismodule(value):
            continue
        sizes.append((name, min(_captured_size(value), payload_bytes)))
    return tuple(sorted(sizes, key=lambda kv: (-kv[1], kv[0])))
