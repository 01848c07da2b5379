"""The array proxy and the proxy ``numpy`` module a ``%%eugo --gpu`` cell imports.

:class:`AccelArray` holds its data on the host (a NumPy array), on the device (a CuPy
array), or both (one is authoritative, the other a cache checked against a write counter),
and routes every NumPy operation to the active :class:`~eugo_lab.offload.dispatch.Offload`
through the NumPy protocols (``__array_ufunc__``, ``__array_function__``; ``__array__`` gives
the host value), so it works with any code that takes arrays. :class:`ProxyModule` wraps
the real ``numpy`` module for one cell: its ufuncs and functions dispatch, its creation
functions return proxies; types, constants and dtypes are the real ones. The global
``numpy`` module is never modified.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin


class AccelArray(NDArrayOperatorsMixin):
    """An array whose operations are placed one by one on the CPU or the GPU by the cost model."""

    __slots__ = ("_s", "_host", "_dev", "_auth", "_stamp", "_v_dev", "_v_host", "_scalar", "_chain", "__weakref__")
    __array_priority__ = 100  # binary operators with a plain ndarray defer to the proxy

    def __init__(self, session: Any, host: Any = None, dev: Any = None, scalar: bool = False,
                 v_dev: bool = False) -> None:
        self._s = session
        self._host = host
        self._dev = dev
        self._auth = "dev" if host is None else "host"
        self._stamp = -1  # write count of the authoritative buffer when the other copy was made
        self._v_dev = v_dev  # predictions-only: the model would have a copy of this value on the device
        self._v_host = not v_dev  # predictions-only: ... and a valid copy on the host
        self._scalar = scalar  # NumPy would have returned a scalar here (a 0-d reduction result)
        #: Placed operations in the longest chain that made this value from what the cell was handed
        #: (a view adds none): a grader tells a loop's result from a copy of an earlier answer.
        self._chain = 0

    # -- what it is ---------------------------------------------------------------------------------
    def _any(self) -> Any:
        return self._host if self._auth == "host" else self._dev

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, as ``ndarray.shape``."""
        return tuple(self._any().shape)

    @property
    def dtype(self) -> np.dtype:
        """The dtype, as ``ndarray.dtype``."""
        return np.dtype(self._any().dtype)

    ndim = property(lambda self: len(self.shape), doc="Number of dimensions.")
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)), doc="Number of elements.")
    nbytes = property(lambda self: self.size * self.dtype.itemsize, doc="Bytes of the data.")
    itemsize = property(lambda self: self.dtype.itemsize, doc="Bytes per element.")

    @property
    def on_device(self) -> bool:
        """Whether the authoritative copy is on the device."""
        return self._auth == "dev"

    # -- the NumPy protocols -------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return self._s.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return self._s.function(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        h = self._s.host_value(self, expose=True)
        if dtype is not None and np.dtype(dtype) != h.dtype:
            return h.astype(dtype)
        return h.copy() if copy else h

    def __reduce__(self) -> tuple:
        # Pickled (sent to a worker, saved) as the plain NumPy value: workers never see proxies.
        return (_from_pickle, (self._s.host_value(self), self._scalar))

    # -- indexing and Python conversions -------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        return self._s.getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._s.setitem(self, key, value)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __contains__(self, value: Any) -> bool:
        return bool((self == value).any())

    def _value(self) -> Any:
        h = self._s.host_value(self)
        return h[()] if self._scalar else h

    def __bool__(self) -> bool:
        return bool(self._value())

    def __float__(self) -> float:
        return float(self._value())

    def __int__(self) -> int:
        return int(self._value())

    def __index__(self) -> int:
        return self._value().__index__()

    def __complex__(self) -> complex:
        return complex(self._value())

    def __format__(self, spec: str) -> str:
        return format(self._value(), spec)

    def __repr__(self) -> str:
        return repr(self._value())

    def __str__(self) -> str:
        return str(self._value())

    def __hash__(self) -> int:  # ndarrays are unhashable; 0-d results hash like the scalar NumPy returns
        if self._scalar:
            return hash(self._value())
        raise TypeError("unhashable type: 'numpy.ndarray'")

    # -- ndarray methods: each goes through the dispatcher like the matching numpy function ------------
    T = property(lambda self: np.transpose(self), doc="Transposed view.")

    def reshape(self, *shape: Any, **kw: Any) -> Any:
        """As ``ndarray.reshape``."""
        return np.reshape(self, shape[0] if len(shape) == 1 else shape, **kw)

    def transpose(self, *axes: Any) -> Any:
        """As ``ndarray.transpose``."""
        return np.transpose(self, (axes[0] if len(axes) == 1 else axes) if axes else None)

    def ravel(self, order: str = "C") -> Any:
        """As ``ndarray.ravel``."""
        return np.ravel(self, order=order)

    def flatten(self) -> Any:
        """As ``ndarray.flatten`` (a copy)."""
        return np.copy(np.ravel(self))

    def copy(self) -> Any:
        """As ``ndarray.copy``."""
        return np.copy(self)

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        """As ``ndarray.astype``."""
        return self._s.astype(self, dtype, copy)

    def tolist(self) -> Any:
        """As ``ndarray.tolist`` (the host value)."""
        return self._s.host_value(self).tolist()

    def item(self, *args: Any) -> Any:
        """As ``ndarray.item``."""
        return self._s.host_value(self).item(*args)

    def fill(self, value: Any) -> None:
        """As ``ndarray.fill``."""
        self[...] = value

    def __getattr__(self, name: str) -> Any:
        # Anything else an ndarray has (flags, strides, tobytes, ...) is answered by the host value.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._s.host_value(self, expose=True), name)


def _method(fname: str) -> Any:
    def method(self: AccelArray, *args: Any, **kwargs: Any) -> Any:
        return getattr(np, fname)(self, *args, **kwargs)

    method.__name__ = fname
    method.__doc__ = f"As ``ndarray.{fname}`` (dispatched like ``numpy.{fname}``)."
    return method


for _name in ("sum", "prod", "mean", "std", "var", "max", "min", "argmax", "argmin", "any", "all", "cumsum",
              "cumprod", "clip", "round", "dot", "nonzero", "squeeze", "swapaxes", "repeat", "conj", "ptp"):
    setattr(AccelArray, _name, _method(_name if _name != "ptp" else "ptp"))


def _from_pickle(host: np.ndarray, scalar: bool) -> Any:
    return host[()] if scalar else host


class ProxyUfunc:
    """A ufunc of the proxy module: calls and methods (``reduce``, ``outer``...) go to the dispatcher."""

    def __init__(self, ufunc: np.ufunc, session: Any) -> None:
        self._ufunc = ufunc
        self._s = session
        self.__name__ = ufunc.__name__
        self.__doc__ = ufunc.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the ufunc through the dispatcher."""
        return self._s.ufunc(self._ufunc, "__call__", args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in ("reduce", "accumulate", "outer", "reduceat", "at"):
            return lambda *args, **kwargs: self._s.ufunc(self._ufunc, name, args, kwargs)
        return getattr(self._ufunc, name)

    def __repr__(self) -> str:
        return repr(self._ufunc)


class _ResultWrapper:
    """An object (a random ``Generator``) whose methods' array results come back as proxies."""

    def __init__(self, obj: Any, session: Any) -> None:
        self._obj = obj
        self._s = session

    def __getattr__(self, name: str) -> Any:
        v = getattr(self._obj, name)
        if not callable(v):
            return v
        return lambda *args, **kwargs: self._s.wrap_host(v(*self._s.to_host_args(args), **kwargs))

    def __repr__(self) -> str:
        return repr(self._obj)


_WRAPPED_FACTORIES = ("default_rng", "RandomState", "Generator")


class ProxyModule(types.ModuleType):
    """``numpy`` (or a submodule) for one cell: functions and ufuncs dispatch, everything else is the real one."""

    def __init__(self, real: types.ModuleType, session: Any) -> None:
        super().__init__(real.__name__, real.__doc__)
        self.__dict__["_real"] = real
        self.__dict__["_s"] = session

    def __getattr__(self, name: str) -> Any:
        real, s = self.__dict__["_real"], self.__dict__["_s"]
        v = getattr(real, name)
        if isinstance(v, np.ufunc):
            w: Any = ProxyUfunc(v, s)
        elif isinstance(v, types.ModuleType) and v.__name__.startswith("numpy."):
            w = s.module(v)
        elif name in _WRAPPED_FACTORIES:
            def w(*args: Any, _f: Any = v, **kwargs: Any) -> Any:
                return _ResultWrapper(_f(*args, **kwargs), s)
        elif callable(v) and not isinstance(v, type) and not name.startswith("_"):
            def w(*args: Any, _f: Any = v, **kwargs: Any) -> Any:
                return s.function(_f, args, kwargs)
            w.__name__, w.__doc__, w.__wrapped__ = name, getattr(v, "__doc__", None), v
        else:
            return v  # types, dtypes, constants: the real ones (not cached, so nothing can go stale)
        self.__dict__[name] = w
        return w

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["_real"])

    def __reduce__(self) -> tuple:
        # A function defined in the cell refers to `np`; pickled to a worker it gets the real numpy.
        return (importlib.import_module, (self.__name__,))

    def __repr__(self) -> str:
        return f"<module {self.__name__!r} (eugo_lab.offload proxy: operations placed on CPU or GPU one by one)>"
