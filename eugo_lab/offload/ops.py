"""How the dispatcher sees a NumPy call: its cost-model kind, the work per element, the result shape.

Tables, not heuristics hidden in code: a function that is not listed here is "not in the
cost model" and runs on the CPU, where NumPy is always right.
"""

from __future__ import annotations

import math
from typing import Any

#: Transcendental ufuncs (the CUDA math library spends ~20 instructions per element on them).
SPECIAL = frozenset("""exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh
arcsinh arccosh arctanh power float_power hypot cbrt logaddexp logaddexp2""".split())
#: Ufuncs a few times dearer than an add (division, square root).
MEDIUM = frozenset("divide true_divide floor_divide remainder mod fmod sqrt reciprocal divmod".split())

_REDUCTIONS = """sum prod mean std var max min amax amin argmax argmin any all nansum nanprod nanmean nanstd nanvar
nanmax nanmin count_nonzero ptp median average linalg.norm""".split()
_COPIES = """copy concatenate stack vstack hstack cumsum cumprod diff sort flip roll tile repeat""".split()
#: numpy function name -> cost-model kind.
FUNCTIONS: dict[str, str] = {
    **{n: "reduction" for n in _REDUCTIONS},
    **{n: "copy" for n in _COPIES},
    "dot": "matmul", "matmul": "matmul", "vdot": "matmul", "inner": "matmul",
    "where": "elementwise", "clip": "elementwise", "round": "elementwise", "around": "elementwise",
    "outer": "elementwise",
}
#: Views and shape queries: they run where the data is and cost nothing worth a row in the report.
VIEWS = frozenset("""reshape ravel transpose swapaxes squeeze expand_dims moveaxis broadcast_to atleast_1d atleast_2d
atleast_3d shape ndim size real imag""".split())
#: Functions that build arrays from Python data or other arrays: run on the host, result wrapped.
CREATION = frozenset("""array asarray asanyarray ascontiguousarray asfortranarray zeros ones empty full arange linspace
logspace geomspace eye identity zeros_like ones_like empty_like full_like fromfunction frombuffer fromiter loadtxt
load genfromtxt tri meshgrid indices""".split())
#: Reductions whose second positional argument is the axis.
_AXIS_SECOND = frozenset(_REDUCTIONS) - {"average", "linalg.norm"}


def qualname(func: Any) -> str:
    """``np.sum`` -> ``sum``, ``np.linalg.norm`` -> ``linalg.norm``."""
    name = getattr(func, "__name__", repr(func))
    mod = getattr(func, "__module__", "") or ""
    if mod == "numpy" or mod.startswith("numpy._") or not mod.startswith("numpy."):
        return name
    return f"{mod.removeprefix('numpy.')}.{name}"


def work_of(ufunc_name: str) -> str:
    """The cost class of an elementwise ufunc."""
    return "special" if ufunc_name in SPECIAL else "medium" if ufunc_name in MEDIUM else "cheap"


def reduced_shape(shape: tuple[int, ...], axis: Any, keepdims: bool = False) -> tuple[int, ...]:
    """The shape after reducing ``axis`` (``None``: all axes)."""
    nd = len(shape)
    if axis is None:
        axes = set(range(nd))
    else:
        try:
            axes = {a % nd for a in (axis if isinstance(axis, (tuple, list)) else (axis,))} if nd else set()
        except TypeError:
            axes = set(range(nd))
    return tuple((1 if keepdims else None) if i in axes else n for i, n in enumerate(shape)
                 if keepdims or i not in axes)


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The result shape of ``a @ b`` (1-d operands as NumPy treats them); ``a`` when the shapes do not fit."""
    if not a or not b:
        return a or b
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(b) == 1:
        return a[:-1]
    if len(a) == 1:
        return b[:-2] + b[-1:]
    try:
        import numpy as np

        batch = tuple(np.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:
        return a
    return batch + (a[-2], b[-1])


def output_shape(kind: str, name: str, shapes: list[tuple[int, ...]], args: tuple, kwargs: dict,
                 method: str = "__call__") -> tuple[int, ...]:
    """A good-enough result shape for the cost model (exact for the common cases)."""
    import numpy as np

    if not shapes:
        return ()
    if kind == "matmul":
        return matmul_shape(shapes[0], shapes[1] if len(shapes) > 1 else ())
    if kind == "reduction":
        if method == "reduce":
            axis = kwargs.get("axis", args[1] if len(args) > 1 else 0)
        else:
            axis = kwargs.get("axis", args[1] if len(args) > 1 and name in _AXIS_SECOND else None)
        return reduced_shape(shapes[0], axis, bool(kwargs.get("keepdims", False)))
    if kind == "elementwise":
        if method == "outer":
            return tuple(s for sh in shapes for s in sh)
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            return max(shapes, key=math.prod)
    if name in ("concatenate", "stack", "vstack", "hstack"):
        return (sum(math.prod(s) for s in shapes),)
    return shapes[0]
