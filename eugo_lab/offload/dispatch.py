"""The per-operation dispatcher: one :class:`Offload` per ``%%eugo --gpu`` cell.

For each NumPy call on proxies it builds a :class:`~eugo_lab.offload.cost.Operation`, asks
the cost model where it runs, runs it there (moving operands that are not yet on that
side), records a :class:`~eugo_lab.offload.ledger.OpRecord`, and wraps the result so that it
stays where it was computed. A GPU failure re-runs the operation with NumPy and records why.
Without a device (``predictions_only``) every operation runs with NumPy and the ledger
records what the model would do on the named profile, tracking where the data would be.
"""

from __future__ import annotations

import contextlib
import threading
import time
import types
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from eugo_lab.offload import ops
from eugo_lab.offload.cost import Estimate, Operation, estimate, fmt_time
from eugo_lab.offload.devices import Device
from eugo_lab.offload.ledger import Ledger, OpRecord, predicted_words
from eugo_lab.offload.profiles import DeviceProfile, HostProfile
from eugo_lab.offload.proxy import AccelArray, ProxyModule

_ACTIVE: list[Offload] = []


def active() -> Offload | None:
    """The offload session of the running cell, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def _root(x: Any) -> Any:
    """The array that owns the memory of ``x`` (views share their base's write counter)."""
    x = getattr(x, "data", x) if type(x).__name__ == "FakeDeviceArray" else x
    while getattr(x, "base", None) is not None and hasattr(x.base, "shape"):
        x = x.base
    return x



class Offload:
    """Places NumPy operations of one cell on the CPU or the device, and keeps their ledger."""

    def __init__(self, mode: str, device: Device | None, profile: DeviceProfile,
                 host: HostProfile | None = None) -> None:
        if mode not in ("auto", "on"):
            raise ValueError(f"mode must be 'auto' or 'on', got {mode!r}")
        self.mode = mode
        self.device = device
        self.profile = profile  # what predictions are made for (the device's own, calibrated, when there is one)
        self._host = host  # measured on the first operation (a cell without NumPy work never pays for it)
        self.predictions_only = device is None
        self.ledger = Ledger(device=device.name if device else profile.name, predictions_only=device is None,
                             mode=mode, measured_by=device.measured_by if device else "host timer")
        self._live: dict[int, weakref.ref] = {}  # proxies are unhashable (as ndarrays are): keyed by id
        self._modules: dict[str, ProxyModule] = {}
        self._writes: dict[int, int] = {}  # id(buffer owner) -> writes through proxies (cache validity)
        self._h2d = self._d2h = 0  # bytes moved so far (an operation reads the difference)
        self._estimates: dict[tuple, Estimate] = {}
        self._failed: dict[tuple, str] = {}  # (op, shapes, dtype) -> why its device version failed
        self._reasons: dict[int, tuple[str, str]] = {}  # id of a cached Estimate -> its reason texts
        self.closed = False
        # Only the cell's own thread dispatches: a `-b threads` worker running a function defined in the
        # cell uses plain NumPy (the ledger and the device streams belong to the cell).
        self._thread = threading.get_ident()

    def _bypass(self) -> bool:
        return self.closed or threading.get_ident() != self._thread

    @property
    def host(self) -> HostProfile:
        """The host profile (this host's, measured once per process, unless one was given)."""
        if self._host is None:
            from eugo_lab.offload.profiles import host_profile

            self._host = host_profile()
            self.ledger.host = self._host.name
        return self._host

    # -- the proxy module ------------------------------------------------------------------------------
    def module(self, real: types.ModuleType) -> ProxyModule:
        """The proxy of ``numpy`` or one of its submodules for this cell."""
        m = self._modules.get(real.__name__)
        if m is None:
            m = self._modules[real.__name__] = ProxyModule(real, self)
        return m

    # -- placement of one array ------------------------------------------------------------------------
    def _new(self, host: Any = None, dev: Any = None, scalar: bool = False, v_dev: bool = False) -> AccelArray:
        a = AccelArray(self, host=host, dev=dev, scalar=scalar, v_dev=v_dev)
        live = self._live
        key = id(a)
        live[key] = weakref.ref(a, lambda _r: live.pop(key, None))
        return a

    def _count(self, buf: Any) -> int:
        return self._writes.get(id(_root(buf)), 0)

    def _wrote(self, buf: Any) -> None:
        k = id(_root(buf))
        self._writes[k] = self._writes.get(k, 0) + 1

    def _cache_ok(self, a: AccelArray) -> bool:
        return a._stamp == self._count(a._any())

    def _resident(self, a: Any) -> bool:
        """Whether operand ``a`` is (predictions-only: would be) on the device already."""
        if not isinstance(a, AccelArray):
            return False
        if self.predictions_only:
            return a._v_dev
        return a._auth == "dev" or (a._dev is not None and self._cache_ok(a))

    def host_value(self, a: AccelArray, expose: bool = False, row: bool = True) -> np.ndarray:
        """The host copy of ``a`` (moved from the device if needed); ``expose``: code outside may write it.

        ``row``: a move is its own "to host" row (the host asked: print, ``np.asarray``...); an
        operation that needs its operands on the host counts the bytes in its own row instead.
        """
        if self.predictions_only and row and not self._bypass() and not a._v_host:
            a._v_host = True
            self.ledger.add(OpRecord("to host", (a.shape,), str(a.dtype), "transfer", "host needed",
                                     "predicted: the host needed the value", "predicted: the host needed the value",
                                     d2h_bytes=a.nbytes), measured=False)
        if self.closed or a._auth == "host":
            h = a._host
        elif a._host is not None and self._cache_ok(a):
            h = a._host
        else:
            t0 = time.perf_counter()
            h = self.device.to_host(a._dev)  # type: ignore[union-attr]
            self._d2h += h.nbytes
            a._host, a._stamp = h, self._count(a._dev)
            if row and not self._bypass():
                self._transfer_row(a, "host needed", h.nbytes, time.perf_counter() - t0)
        if expose and a._auth == "host":
            self._wrote(h)  # the caller may write into it: device copies of this buffer are stale from now
        elif expose:  # the host copy becomes the authoritative one
            a._auth, a._dev = "host", None
            self._wrote(h)
        return h

    def device_value(self, a: Any) -> Any:
        """The device copy of ``a`` (an AccelArray or a NumPy array), moved there if needed."""
        dev = self.device
        assert dev is not None
        if isinstance(a, AccelArray):
            if a._auth == "dev":
                return a._dev
            if a._dev is not None and self._cache_ok(a):
                return a._dev
            d = dev.to_device(a._host)
            self._h2d += a._host.nbytes
            a._dev, a._stamp = d, self._count(a._host)
            return d
        d = dev.to_device(a)
        self._h2d += np.asarray(a).nbytes
        return d

    def _transfer_row(self, a: AccelArray, why: str, nbytes: int, seconds: float) -> None:
        self.ledger.add(OpRecord("to host", (a.shape,), str(a.dtype), "transfer", why,
                                 "the host needed the value", "the host needed the value", d2h_bytes=nbytes),
                        measured_s=seconds)

    # -- argument conversion ---------------------------------------------------------------------------
    def to_host_args(self, x: Any) -> Any:
        """``x`` with every proxy replaced by its host value (one level into lists, tuples and dicts)."""
        if isinstance(x, AccelArray):
            return self.host_value(x, row=False)
        if isinstance(x, (list, tuple)):
            return type(x)(self.to_host_args(v) if isinstance(v, (AccelArray, list, tuple)) else v for v in x)
        if isinstance(x, dict):
            return {k: self.to_host_args(v) for k, v in x.items()}
        return x

    def _to_device_args(self, x: Any) -> Any:
        if isinstance(x, (AccelArray, np.ndarray)):
            return self.device_value(x)
        if isinstance(x, (list, tuple)):
            return type(x)(self._to_device_args(v) for v in x)
        if isinstance(x, dict):
            return {k: self._to_device_args(v) for k, v in x.items()}
        return x

    def wrap_host(self, x: Any, v_dev: bool = False) -> Any:
        """NumPy results as proxies (host-resident); scalars and other values as they are."""
        if isinstance(x, np.ndarray):
            return self._new(host=x, v_dev=v_dev)
        if isinstance(x, tuple):
            return tuple(self.wrap_host(v, v_dev) for v in x)
        if isinstance(x, list) and x and all(isinstance(v, np.ndarray) for v in x):
            return [self.wrap_host(v, v_dev) for v in x]
        return x

    def _wrap_dev(self, x: Any, scalar_ok: bool) -> Any:
        if self.device is not None and self.device.is_device_array(x):
            return self._new(dev=x, scalar=scalar_ok and x.ndim == 0)
        if isinstance(x, tuple):
            return tuple(self._wrap_dev(v, scalar_ok) for v in x)
        if isinstance(x, list) and x and all(self.device.is_device_array(v) for v in x):  # type: ignore[union-attr]
            return [self._wrap_dev(v, scalar_ok) for v in x]
        return self.wrap_host(x)

    # -- entry points (from the proxy and the proxy module) --------------------------------------------
    def ufunc(self, uf: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
        """A ufunc call or method (``reduce``, ``outer``, ...) on proxies or arrays."""
        if self._bypass():
            return getattr(uf, method)(*self.to_host_args(inputs), **self.to_host_args(kwargs))
        name = uf.__name__
        if method == "__call__":
            kind = "matmul" if name == "matmul" else "elementwise"
        else:
            kind = {"reduce": "reduction", "accumulate": "copy", "outer": "elementwise"}.get(method)
        label = name if method == "__call__" else f"{name}.{method}"
        return self._dispatch(label, kind, ops.work_of(name), lambda: self.device.resolve(name, method, ufunc=True),
                              getattr(uf, method), inputs, kwargs, method=method)

    def function(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """A numpy function called with proxies or arrays (``__array_function__`` or the proxy module)."""
        if self._bypass():
            return func(*self.to_host_args(args), **self.to_host_args(kwargs))
        name = ops.qualname(func)
        if name in ("array", "asarray", "asanyarray", "ascontiguousarray") and args and isinstance(args[0], AccelArray):
            return self._as_array(name, args[0], args[1:], kwargs)
        arrays = _operands(args) + _operands(kwargs)
        if name in ops.CREATION or not arrays:
            return self.wrap_host(func(*self.to_host_args(args), **self.to_host_args(kwargs)))
        if name in ops.VIEWS:
            return self._where_the_data_is(name, func, args, kwargs, arrays)
        kind = ops.FUNCTIONS.get(name)
        return self._dispatch(name, kind, "cheap", lambda: self.device.resolve(name), func, args, kwargs)

    def _as_array(self, name: str, a: AccelArray, rest: tuple, kwargs: dict) -> Any:
        """``np.asarray(proxy)`` is the proxy itself (as NumPy returns the same array); ``np.array`` copies it."""
        dtype = kwargs.get("dtype", rest[0] if rest else None)
        if name == "array" and kwargs.get("copy", True) is not False:
            return self.astype(a, dtype, True) if dtype is not None else np.copy(a)
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return self.astype(a, dtype, True)
        return a

    def astype(self, a: AccelArray, dtype: Any, copy: bool) -> Any:
        """``a.astype(dtype)``, where ``a`` is."""
        if not copy and np.dtype(dtype) == a.dtype:
            return a
        if a._auth == "dev" and not self.closed:
            return _set_chain(self._new(dev=a._dev.astype(dtype)), a._chain)
        return _set_chain(self._new(host=self.host_value(a).astype(dtype), v_dev=a._v_dev), a._chain)

    def getitem(self, a: AccelArray, key: Any) -> Any:
        """``a[key]``, where ``a`` is (index arrays follow it there)."""
        if a._auth == "dev" and not self.closed:
            dkey = self._to_device_args(key) if _has_arrays(key) else key
            r = a._dev[dkey]
            scalar = r.ndim == 0 and _is_scalar_index(key, a.ndim)
            return _set_chain(self._new(dev=r, scalar=scalar), a._chain)
        r = self.host_value(a, row=not self.predictions_only)[self.to_host_args(key)]  # a view stays put
        if not isinstance(r, np.ndarray):
            return r
        v = self._new(host=r, v_dev=a._v_dev)
        v._v_host = a._v_host
        return _set_chain(v, a._chain)

    def setitem(self, a: AccelArray, key: Any, value: Any) -> None:
        """``a[key] = value``, where ``a`` is."""
        a._chain = max(a._chain, _chain_of([value]))
        if a._auth == "dev" and not self.closed:
            dkey = self._to_device_args(key) if _has_arrays(key) else key
            a._dev[dkey] = self._to_device_args(value)
            self._wrote(a._dev)
            return
        # Predictions only: a value the model keeps on the device alone is written there, as the GPU path
        # does, so nothing comes to the host (NumPy still writes the real, host, buffer).
        on_dev = self.predictions_only and a._v_dev and not a._v_host
        h = self.host_value(a, row=not on_dev)
        h[self.to_host_args(key)] = self.to_host_args(value)
        self._wrote(h)

    # -- the core --------------------------------------------------------------------------------------
    def _where_the_data_is(self, name: str, func: Any, args: tuple, kwargs: dict, arrays: list) -> Any:
        on_dev = self.device is not None and any(isinstance(a, AccelArray) and a._auth == "dev" for a in arrays)
        if on_dev:
            impl = self.device.resolve(name)  # type: ignore[union-attr]
            if impl is not None:
                with contextlib.suppress(Exception):  # no device version that works: NumPy below
                    return _set_chain(self._wrap_dev(impl(*self._to_device_args(args),
                                                          **self._to_device_args(kwargs)), False), _chain_of(arrays))
        v_dev = any(isinstance(a, AccelArray) and a._v_dev for a in arrays)
        return _set_chain(self.wrap_host(func(*self.to_host_args(args), **self.to_host_args(kwargs)), v_dev=v_dev),
                          _chain_of(arrays))

    def _dispatch(self, name: str, kind: str | None, work: str, resolve: Any, host_fn: Any, args: tuple,
                  kwargs: dict, method: str = "__call__") -> Any:
        """Place and run one operation; its results are one link longer than its longest operand's chain."""
        chain = 1 + _chain_of(_operands(args) + _operands(kwargs))
        return _set_chain(self._place(name, kind, work, resolve, host_fn, args, kwargs, method), chain)

    def _place(self, name: str, kind: str | None, work: str, resolve: Any, host_fn: Any, args: tuple,
               kwargs: dict, method: str) -> Any:
        kwargs = dict(kwargs)
        out = kwargs.pop("out", None)
        outs = out if isinstance(out, tuple) else (out,) if out is not None else ()
        arrays = _operands(args) + _operands({k: v for k, v in kwargs.items() if k != "where"})
        shapes = tuple(tuple(a.shape) for a in arrays)
        dtype = _result_dtype(args, arrays)
        est: Estimate | None = None
        key: tuple | None = None  # the estimate's identity; rows with the same one share their reason text
        if kind is not None and arrays:
            out_shape = ops.output_shape(kind, name, list(shapes), args, kwargs, method)
            # An operand given twice (x * x) crosses once: its second use finds the copy of its first.
            resident = tuple(self._resident(a) or any(a is b for b in arrays[:i]) for i, a in enumerate(arrays))
            sizes = tuple(a.dtype.itemsize for a in arrays)
            key = (name, kind, shapes, dtype, out_shape, resident, sizes)
            est = self._estimates.get(key)
            if est is None:  # a loop repeats the same operation: predict it (and word it) once
                op = Operation(name, kind, shapes, dtype.name, out_shape, resident, sizes,
                               work if kind == "elementwise" else "cheap")
                est = estimate(op, self.host, self.profile)
                if len(self._estimates) < 10_000:
                    self._estimates[key] = est
                    self._reasons[id(est)] = (est.reason(), est.reason(bucket=True))
        if self.predictions_only:
            return self._predicted(name, shapes, dtype, est, key, host_fn, args, kwargs, arrays, outs)
        target, why = ("gpu", "faster") if est is None else (est.where, est.why)
        if self.mode == "on":
            target, why = "gpu", "forced"
        if est is None and self.mode != "on":
            target, why = "cpu", "not offloaded"
        fallback = self._failed.get((name, shapes, dtype)) if target == "gpu" else None
        if fallback is not None:  # it failed on the device before: do not pay for failing again
            target, why = "cpu", "fallback"
        impl = resolve() if target == "gpu" else None
        if target == "gpu" and impl is None:
            target, why = "cpu", "not offloaded"
        h2d0, d2h0 = self._h2d, self._d2h
        if target == "gpu":
            timer = self.device.timer()  # type: ignore[union-attr]
            try:
                timer.start()
                res = impl(*self._to_device_args(args), **self._to_device_args(kwargs))
                timer.stop()
            except Exception as exc:  # noqa: BLE001 - any device failure: NumPy runs it instead, and we say why
                fallback = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}".rstrip(": ")
                target, why, timer = "cpu", "fallback", None
                self._failed[(name, shapes, dtype)] = fallback
            else:
                result = self._wrap_dev(res, scalar_ok=kind in ("reduction", "elementwise", "matmul"))
        if target == "cpu":
            t0 = time.perf_counter()
            res = host_fn(*self.to_host_args(args), **self.to_host_args(kwargs))
            seconds = time.perf_counter() - t0
            result = self.wrap_host(res)
        rdtype = getattr(res, "dtype", dtype)
        h2d, d2h = self._h2d - h2d0, self._d2h - d2h0
        cpu_s, gpu_s = (est.cpu_s, est.gpu_s) if est else (None, None)
        rkey = (name, shapes, rdtype, target, why, fallback, key)
        timer_arg = timer if target == "gpu" else None
        measured = 0.0 if target == "gpu" else seconds
        if not self.ledger.merge(rkey, h2d, d2h, cpu_s, gpu_s, measured, timer_arg):
            reason = self._reason(target, why, est, name, fallback)
            self.ledger.add(OpRecord(name, shapes, str(rdtype), target, why, reason[0], reason[1], h2d, d2h, cpu_s,
                                     gpu_s, measured_where=target, fallback=fallback,
                                     estimate=est if why == getattr(est, "why", None) else None),
                            timer=timer_arg, measured_s=measured, key=rkey)
        return self._store(outs, result) if outs else result

    def _predicted(self, name: str, shapes: tuple, dtype: np.dtype, est: Estimate | None, key: tuple | None,
                   host_fn: Any, args: tuple, kwargs: dict, arrays: list, outs: tuple) -> Any:
        t0 = time.perf_counter()
        res = host_fn(*self.to_host_args(args), **self.to_host_args(kwargs))
        seconds = time.perf_counter() - t0
        where = est.where if est else "cpu"
        why = est.why if est else "not offloaded"
        d2h = 0
        if where == "gpu":
            for a in arrays:  # their device copies would exist from now on
                if isinstance(a, AccelArray):
                    a._v_dev = True
        else:  # operands the model left only on the device would come back first
            for a in arrays:
                if isinstance(a, AccelArray) and not a._v_host:
                    d2h += a.nbytes
                    a._v_host = True
        rdtype = getattr(res, "dtype", dtype)
        h2d = est.h2d_bytes if est and where == "gpu" else 0
        cpu_s, gpu_s = (est.cpu_s, est.gpu_s) if est else (None, None)
        rkey = (name, shapes, rdtype, where, why, None, key)
        if not self.ledger.merge(rkey, h2d, d2h, cpu_s, gpu_s, seconds):
            reason = self._reason(where, why, est, name, None)
            if est is not None and why != "not offloaded":  # the model's times: predictions, and labelled so
                reason = (predicted_words(reason[0]), predicted_words(reason[1]))
            self.ledger.add(OpRecord(name, shapes, str(rdtype), where, why, reason[0], reason[1], h2d, d2h, cpu_s,
                                     gpu_s, measured_where="cpu", estimate=est, label_predicted=est is not None),
                            measured_s=seconds, key=rkey)
        result = self.wrap_host(res, v_dev=where == "gpu")
        if outs:
            for o in outs:
                if isinstance(o, AccelArray):
                    o._v_dev, o._v_host = where == "gpu", where != "gpu"
            return self._store(outs, result)
        return result

    def _reason(self, where: str, why: str, est: Estimate | None, name: str, fallback: str | None) -> tuple[str, str]:
        if why == "fallback":
            text = f"cpu: GPU failed ({fallback}), NumPy ran it"
            return text, text
        if why == "not offloaded":
            text = (f"cpu: numpy.{name} is not in the cost model" if est is None or self.device is None
                    else f"cpu: the device has no numpy.{name}")
            return text, text
        if why == "forced":
            if est is None:
                return "gpu: --gpu on", "gpu: --gpu on"
            return tuple(f"gpu: --gpu on (predicted {fmt_time(est.gpu_s or 0, b)} vs {fmt_time(est.cpu_s, b)} on CPU)"
                         for b in (False, True))  # type: ignore[return-value]
        assert est is not None
        cached = self._reasons.get(id(est))
        return cached if cached is not None else (est.reason(), est.reason(bucket=True))

    def _store(self, outs: tuple, result: Any) -> Any:
        """Write ``result`` into the ``out=`` arrays (where each of them lives) and return them."""
        results = result if isinstance(result, tuple) else (result,)
        for o, r in zip(outs, results):
            if o is None:
                continue
            if isinstance(o, AccelArray):
                if isinstance(r, AccelArray) and o._auth == "dev" and not self.closed:
                    o._dev[...] = self._to_device_args(r)
                    self._wrote(o._dev)
                else:
                    h = self.host_value(o, row=not self.predictions_only)
                    h[...] = self.to_host_args(r)
                    self._wrote(h)
                    if o._auth == "dev":
                        o._auth, o._dev = "host", None
            else:  # a plain NumPy array given as out=
                o[...] = self.to_host_args(r)
        return outs[0] if not isinstance(result, tuple) else outs

    # -- the end of the cell ---------------------------------------------------------------------------
    def close(self) -> Ledger:
        """Bring live device values to the host (they leave the cell), resolve timings, return the ledger."""
        if self.closed:
            return self.ledger
        for ref in list(self._live.values()):
            a = ref()
            if a is None:
                continue
            if self.predictions_only:
                if not a._v_host:
                    self.ledger.add(OpRecord("to host", (a.shape,), str(a.dtype), "transfer", "left the cell",
                                             "predicted: the value leaves the cell", "predicted: the value leaves the "
                                             "cell", d2h_bytes=a.nbytes), measured=False)
            elif a._auth == "dev":
                t0 = time.perf_counter()
                h = self.device.to_host(a._dev)  # type: ignore[union-attr]
                self.ledger.add(OpRecord("to host", (a.shape,), str(a.dtype), "transfer", "left the cell",
                                         "the value leaves the cell", "the value leaves the cell", d2h_bytes=h.nbytes),
                                measured_s=time.perf_counter() - t0)
                a._host, a._auth = h, "host"
            a._dev = None
        self.closed = True
        self.ledger.finish()
        return self.ledger

    @contextlib.contextmanager
    def activate(self) -> Iterator[Offload]:
        """Make this the active session (the cell's ``import numpy`` hook reads it)."""
        _ACTIVE.append(self)
        try:
            yield self
        finally:
            _ACTIVE.remove(self)


def _chain_of(values: list) -> int:
    """The longest chain of placed operations behind any of ``values`` (0: none is a proxy)."""
    return max((v._chain for v in values if isinstance(v, AccelArray)), default=0)


def _set_chain(result: Any, chain: int) -> Any:
    """Stamp ``chain`` on the proxies of an operation's result (one, or a tuple or list of them); returns it."""
    for r in result if isinstance(result, (tuple, list)) else (result,):
        if isinstance(r, AccelArray):
            r._chain = chain
    return result


def _operands(x: Any) -> list:
    """Arrays among the arguments (one level into lists, tuples and dict values)."""
    if isinstance(x, (AccelArray, np.ndarray)):
        return [x]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in ([item] if isinstance(item, (AccelArray, np.ndarray))
                                          else [w for w in item if isinstance(w, (AccelArray, np.ndarray))]
                                          if isinstance(item, (list, tuple)) else [])]
    if isinstance(x, dict):
        return _operands(list(x.values()))
    return []


def _result_dtype(args: tuple, arrays: list) -> np.dtype:
    scalars = [a for a in args if isinstance(a, (int, float, complex)) and not isinstance(a, bool)]
    try:
        return np.result_type(*[a.dtype for a in arrays], *scalars) if arrays else np.dtype("float64")
    except TypeError:
        return arrays[0].dtype


def _has_arrays(key: Any) -> bool:
    return isinstance(key, (AccelArray, np.ndarray, list)) or (
        isinstance(key, tuple) and any(isinstance(k, (AccelArray, np.ndarray, list)) for k in key))


def _is_scalar_index(key: Any, ndim: int) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return len(keys) == ndim and all(isinstance(k, (int, np.integer)) for k in keys)


def offload(mode: str = "auto", device: Device | None = None, profile: DeviceProfile | None = None,
            host: HostProfile | None = None) -> Offload:
    """A new :class:`Offload` session for use outside the magic: run NumPy code inside its ``activate()`` block."""
    from eugo_lab.offload.profiles import prediction_profile

    return Offload(mode, device, profile or (device.profile if device else prediction_profile()), host)
