"""Whether compiled code means what CPython means, for every input of the types seen, read from Numba's typed IR.

The automatic JIT keeps a compiled version only when :func:`unproven` finds nothing: a check on
the calls that happened cannot see a difference that depends on the data (an accumulator that
outgrows 64 bits on a larger input), so exactness is a property of the code, decided before any
compiled call runs. What is proven, per value of the function:

- **Python integers** (arguments, constants, ``len``, loop indices, arithmetic on those) stay within
  int64: each gets a bound on its bit length. A ``range`` loop's index is bounded by the range's
  ends and by ``STEPS_BITS``; an array dimension by ``DIM_BITS``; sums add a bit, products
  add their operands' bits. A value that grows across loop iterations (a cycle through the loop)
  is bounded only when every step adds or subtracts a bounded amount (a counter, ``c += 1``): then
  by ``STEPS_BITS`` steps of it. Products, powers and shifts across iterations, or sums of
  values that may each be large, are not bounded: Numba's int64 would wrap where Python's int grows.
- **NumPy integers** (array elements) wrap in NumPy too: int64 arithmetic is the same bits.
  Narrower or unsigned ones are promoted to int64 by Numba but keep their width in NumPy, so their
  arithmetic is allowed only when its result goes straight back into an array of the same dtype
  (the same bits modulo the width). A Python int combined with a fixed-width NumPy int must fit its dtype
  (a constant within the range, or a bound within it): NumPy 2 (NEP 50) raises OverflowError where it
  does not (``np.int8(1) - 128``), compiled code wraps.
- **Floats**: float64 ``+ - *``, ``/`` by a non-zero constant, comparisons: IEEE operations in
  source order (no fast-math). ``/ // %`` by a computed value of Python floats raises
  ZeroDivisionError in both (Numba's Python error model); where an operand is a NumPy scalar, NumPy
  gives inf or nan instead, so it is not proven. ``**`` on floats is not (Python raises
  OverflowError or returns a complex number where compiled code returns inf or nan, and ``x ** 0.5``
  is compiled as a square root that rounds differently from ``pow``). float32 arithmetic is not
  (NumPy and Numba promote it differently).
- **Library calls**, per function (:data:`EXACT_CALLS`): ``abs``, ``min``, ``max``, ``len``,
  ``range``, ``float``, ``bool``, ``math.fabs``/``copysign``/``isnan``/``isinf``/``isfinite``,
  ``np.sqrt``/``abs``/``isnan``... (correctly rounded or exact, and they raise nothing in either);
  ``math.sqrt`` of a value that is never negative (``x * x + y * y``, ``abs(x)``). ``math.sqrt`` of
  anything else, ``math.log``, ``math.exp`` and the rest are not: CPython raises ValueError or
  OverflowError on a domain or range error where compiled code returns nan or inf. Array methods
  (``a.sum()``: NumPy sums pairwise, a loop does not) and calls of other compiled functions are not.
- **Results**: Numba boxes a NumPy scalar it returns as a Python number; the compiled function is
  wrapped to cast it back to the plain call's type (:class:`CastResult`: ``np.float64`` stays
  ``np.float64``, ``np.float32`` stays ``np.float32``). A NumPy scalar on some paths and a Python
  constant on the others (``s = 0.0`` before a loop that adds array elements) is told apart by value
  (:class:`PathCast`); any other mix is :class:`ResultTypeVaries`, declined even under ``optimize=True``.
  What type an operation gives is NumPy's own rule, found by doing it (``np.float64 > 0`` is an ``np.bool_``).
- **Globals**: Numba freezes every global and module attribute it reads when it compiles
  (:func:`frozen_globals`); the automatic JIT checks they are still bound to the same objects before
  each compiled call and compiles anew when one was rebound.
- Array indexing is bounds-checked in the compiled code (:func:`eugo_lab.jit.checked.compile_for`),
  so an index out of range raises IndexError as in Python.

Two modelling assumptions, the only places where "for every input" is not literal:

- a CPython loop does not run 2**``STEPS_BITS`` steps (weeks at the fastest interpreter), so a
  counter that adds a bounded amount per step stays within int64;
- a product of two loop indices or dimensions that is used only to index an array (``flat[i * k + j]``)
  stays below 2**63 (``INDEX_ASSUMPTION``): each factor is below an array's dimension, and an index
  beyond the array raises IndexError in both. The bounds live in :mod:`eugo_lab.jit.exact_values`.
"""


from __future__ import annotations

import builtins
import math
import operator
from typing import Any

import numpy as np

from eugo_lab.jit.exact_values import (
    _CMP,
    _DIV,
    _NAMES,
    _WRAP_OPS,
    FLOAT_INT_BITS,
    INT_BITS,
    Values,
    _op_fn,
    _user_name,
)

# Calls whose compiled result is CPython's for every input (correctly rounded or exact, and raising nothing
# in either). Anything else is not proven.
EXACT_CALLS: frozenset[Any] = frozenset({
    builtins.abs, builtins.min, builtins.max, builtins.len, builtins.range, builtins.float, builtins.bool,
    builtins.int, math.fabs, math.copysign, math.isnan, math.isinf, math.isfinite,
    np.sqrt, np.abs, np.absolute, np.fabs, np.isnan, np.isinf, np.isfinite, np.copysign,
    np.empty, np.zeros, np.ones, np.empty_like, np.zeros_like, np.ones_like, np.full})
# Array attributes and methods that only describe or move data (no arithmetic): the same in NumPy and compiled.
_ARRAY_ATTRS = frozenset({"shape", "size", "ndim", "T", "dtype", "itemsize", "nbytes", "strides", "ravel", "reshape",
                          "copy", "flatten", "transpose"})
# Why a call that is not in EXACT_CALLS is not proven, for the ones a learner meets most.
_CALL_WHY = {
    math.sqrt: "math.sqrt raises ValueError for a negative number in Python; compiled, it returns nan",
    math.log: "math.log raises ValueError for 0 or a negative number in Python; compiled, it returns -inf or nan",
    math.exp: "math.exp raises OverflowError above 709.78 in Python; compiled, it returns inf",
    math.pow: "math.pow raises where Python has a domain or range error; compiled, it returns nan or inf",
    math.floor: "math.floor raises for inf or nan in Python; compiled, the result is undefined",
    math.ceil: "math.ceil raises for inf or nan in Python; compiled, the result is undefined",
}


def unproven(dispatcher: Any, types: tuple, pos: tuple) -> list[str]:
    """Why ``dispatcher``'s code for ``types`` may not mean what CPython means for the arguments ``pos``'s types.

    ``pos``: the call's positional arguments (their Python types and integer sizes bound the
    analysis: a Python int argument of k bytes is below 2**(8k)). Empty: proven for every input of
    these types and sizes. Each reason starts with ``line N:``.
    """
    return read(dispatcher, types, pos)[0]


def read(dispatcher: Any, types: tuple, pos: tuple) -> tuple[list[str], Any]:
    """:func:`unproven`'s reasons, and the casts the compiled result needs to have the plain one's types.

    The casts (see ``_Reader._result_casts``): None, a NumPy scalar type, or a tuple of those per item;
    :func:`cast_result` applies them.
    """
    cres = dispatcher.overloads.get(tuple(types))
    if cres is None:
        return ["the compiled code could not be read back"], None
    ta = cres.type_annotation
    r = _Reader(ta.blocks, ta.typemap, ta.calltypes, pos)
    return r.reasons(), getattr(r, "casts", None)


class ResultTypeVaries(str):
    """Why a function's result has no one type a cast could give it (``line N: why``).

    What :func:`read` returns as its casts then. Not proven, and not compiled even under ``optimize=True``: its
    compiled result is of another type than plain Python's on some paths, whatever a trial on one call saw.
    """


class PathCast:
    """The cast of a result that is a NumPy scalar on some paths and a Python number (a constant) on others.

    ``s = 0.0; for i in range(n): s += a[i]; return s``: plain Python returns the float ``0.0`` when the loop
    never ran and an ``np.float64`` once it did; compiled code returns a Python float on both. Every path
    that leaves ``s`` a Python number leaves it one of ``constants`` (the values it starts as), so a compiled
    result that is none of them came from a NumPy path: it is cast to ``type``. One that equals a constant
    could have come from either (a sum that is 0.0): the plain function runs instead (the function writes
    into none of its arguments, so running it after the compiled call changes nothing else).
    """

    def __init__(self, type_: type, constants: tuple):
        self.type = type_
        self.constants = constants

    def python_made(self, r: Any) -> bool:
        """Whether ``r`` may be one of the constants a Python-number path returns (same value, same zero sign)."""
        for c in self.constants:
            if isinstance(r, float) or isinstance(c, float):
                rf, cf = float(r), float(c)
                if (rf != rf and cf != cf) or (rf == cf and math.copysign(1.0, rf) == math.copysign(1.0, cf)):
                    return True
            elif r == c:
                return True
        return False

    def __repr__(self) -> str:
        return f"PathCast({self.type.__name__}, {self.constants!r})"


class CastResult:
    """A compiled function whose result is cast back to the NumPy scalar types the plain code returns.

    Numba boxes an ``np.float32`` (or any NumPy scalar) it returns as a Python number; this gives the
    caller what the plain call gives. Everything else (``overloads``, ``signatures``) is the dispatcher's.
    ``plain``: the plain function, which a :class:`PathCast` runs where the result's type cannot be told.
    """

    def __init__(self, dispatcher: Any, casts: Any, plain: Any = None):
        self.dispatcher = dispatcher
        self.casts = casts
        self.plain = plain

    def __call__(self, *args: Any) -> Any:
        """The compiled call, its result cast."""
        r = self.dispatcher(*args)
        c = self.casts
        if isinstance(c, tuple):
            return tuple(x if t is None else t(x) for x, t in zip(r, c))
        if isinstance(c, PathCast):
            if c.python_made(r):
                return self.plain(*args)
            return c.type(r)
        return c(r)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dispatcher, name)


def _narrow_dtype(d: str) -> bool:
    """A NumPy scalar type whose arithmetic Python's numbers do not share (float32, int32, uint8...)."""
    t = np.dtype(d)
    return t.kind in "iufc" and (t.itemsize < 8 or t.kind == "u") or t.kind == "c" and t.itemsize < 16


def with_casts(dispatcher: Any, casts: Any, plain: Any) -> Any:
    """``dispatcher``, or a :class:`CastResult` of it where its results need casts (see :func:`read`).

    ``plain``: the plain function (a :class:`PathCast` runs it where a result's type cannot be told).
    """
    return dispatcher if casts is None or isinstance(casts, ResultTypeVaries) else CastResult(dispatcher, casts, plain)


class _Reader(Values):
    """One pass over a function's typed IR: definitions, value bounds, then the checks (see the module)."""

    def reasons(self) -> list[str]:
        """Every reason the code may part from CPython's meaning, ``line N: why``, in line order."""
        try:
            self.compute()
        except Exception as exc:  # noqa: BLE001 - an IR this reader does not know: not proven, and say so
            return [f"line ?: the compiled code could not be analysed ({type(exc).__name__})"]
        reported = set()
        for st in self.stmts:
            self._check(st, reported)
        self.varies = ""
        casts = self._result_casts()
        self.casts = ResultTypeVaries(self.varies) if self.varies else casts
        return [f"line {line}: {why}" for line, why in sorted(self.out, key=lambda x: x[0])]

    def _result_casts(self) -> Any:
        """The NumPy scalar types the plain code returns, which Numba's boxing turns into Python numbers.

        ``np.float32(s)`` comes back from compiled code as a Python float: the same value, but later
        arithmetic differs (``r * 0.1`` rounds in float64, not float32). None: nothing to cast; a type: the
        result's; a tuple of types or None: item by item; a :class:`PathCast`: a NumPy scalar on some paths and
        a Python constant on the others (an accumulator that starts as ``0.0``). Any other mix of NumPy
        scalars and Python numbers (or of two dtypes) is a reason: no cast gives each path its type, and
        ``np.float64(x) / 0`` gives inf where ``x / 0`` raises ZeroDivisionError.
        """
        ir = self.ir
        rets = [st for st in self.stmts if isinstance(st, ir.Return)]
        if not rets:
            return None
        srcs = [self._returned(st.value.name) for st in rets]
        if all(self.kind(v) in ("int", "bool", "float", "complex") for v in srcs):
            return self._scalar_cast(rets[0], srcs, frozenset().union(*(self.np.get(v, frozenset()) for v in srcs)))
        d = self.defs.get(srcs[0]) or []
        if len(rets) == 1 and len(d) == 1 and isinstance(d[0].value, ir.Expr) and d[0].value.op == "build_tuple":
            items = tuple(self._scalar_cast(rets[0], [x.name], self.np.get(x.name, frozenset()), in_tuple=True)
                          for x in d[0].value.items)
            return items if any(i is not None for i in items) else None
        if any(x is not None for v in srcs for x in self.np.get(v, ())):
            self._say_varies(rets[0], "a tuple that may hold NumPy scalars, not built where it is returned: "
                                      "compiled code returns Python numbers in it")
        return None

    def _say_varies(self, st: Any, why: str) -> None:
        """A result whose type no cast gives on every path: a reason, and the reason :func:`read` returns."""
        self.say(st, why)
        self.varies = self.varies or f"line {getattr(st.loc, 'line', 0) or 0}: {why}"

    def _returned(self, var: str) -> str:
        """The variable a return statement returns, through the cast Numba puts before it and copies."""
        for _ in range(16):
            d = self.defs.get(var)
            if not d or len(d) != 1:
                break
            v = d[0].value
            if isinstance(v, self.ir.Var):
                var = v.name
            elif isinstance(v, self.ir.Expr) and v.op == "cast":
                var = v.value.name
            else:
                break
        return var

    def _scalar_cast(self, ret: Any, srcs: list[str], dts: frozenset, in_tuple: bool = False) -> Any:
        if not dts or dts == {None} or any(self.kind(v) not in ("int", "bool", "float", "complex") for v in srcs):
            return None
        if len(dts) == 1:
            return np.dtype(next(iter(dts))).type
        numpy = [d for d in dts if d is not None]
        if len(numpy) == 1 and not in_tuple:
            constants = self._python_constants(srcs)
            if constants is not None:
                return PathCast(np.dtype(numpy[0]).type, constants)
        name = next((_user_name(v) for v in srcs if _user_name(v)), "")
        self._say_varies(ret, f"{'`' + name + '`' if name else 'the result'} is a "
                      f"{'/'.join(sorted(str(np.dtype(d)) for d in numpy))} NumPy scalar on some paths and a "
                      f"{'Python number' if None in dts else 'NumPy scalar of another type'} on others: compiled "
                      "code returns one type for all (start it as the type it returns, np.float64(0.0), or "
                      "return float(...))")
        return None

    def _python_constants(self, srcs: list[str]) -> tuple | None:
        """The constants a result is where it is a Python number, when that is all it can be there; else None.

        Walks back from the returned variables through copies and casts to the definitions that compute a
        value: each must be a NumPy scalar on every path, or a number constant (a :class:`PathCast` tells them
        apart by value). None too where the function may write into an array (a plain run after the compiled
        one would write twice).
        """
        ir = self.ir
        for st in self.stmts:
            if isinstance(st, (ir.SetItem, ir.StaticSetItem)):
                return None
            if isinstance(st, ir.Assign) and isinstance(st.value, ir.Expr) and st.value.op == "call" and (
                    st.value.kws or st.value.vararg or isinstance(self.callee(st.value), np.ufunc)
                    and len(st.value.args) > self.callee(st.value).nin):
                return None  # an ``out=`` argument writes into an array
        constants: list = []
        seen: set[str] = set()
        todo = list(srcs)
        while todo:
            var = todo.pop()
            if var in seen:
                continue
            seen.add(var)
            for st in self.defs.get(var, []):
                v = st.value
                if isinstance(v, ir.Var):
                    todo.append(v.name)
                elif isinstance(v, ir.Expr) and v.op == "cast":
                    todo.append(v.value.name)
                elif isinstance(v, ir.Const) and isinstance(v.value, (bool, int, float)):
                    if v.value not in constants or isinstance(v.value, float) and math.isnan(v.value):
                        constants.append(v.value)
                elif not self.always_np(st.target.name):
                    return None
        return tuple(constants)

    def _check(self, st: Any, reported: set[str]) -> None:
        ir = self.ir
        if isinstance(st, (ir.SetItem, ir.StaticSetItem)):
            self._check_store(st)
            return
        if isinstance(st, (ir.SetAttr, ir.DelItem, ir.Print)):
            self.say(st, f"{type(st).__name__} is not analysed")
            return
        if not isinstance(st, ir.Assign):
            return
        target, v = st.target.name, st.value
        bits = self.bits.get(target, -1)
        if bits > INT_BITS and target not in reported and self.kind(target) in ("int", "bool"):
            ops = [x for x in self.operands(st) if self.bits.get(x, -1) > INT_BITS and self.kind(x) in ("int", "bool")]
            # (a call's unbounded int result is its own reason, said where the call is checked)
            own_reason = getattr(v, "op", "") == "call" and self.callee(v) not in (builtins.abs, builtins.min,
                                                                                    builtins.max)
            if not ops and not isinstance(v, ir.Var) and not own_reason:
                self._say_int(st)
            reported.add(target)
        if isinstance(v, ir.Var):
            self._check_unify(st, v.name)
        elif isinstance(v, ir.Global) and isinstance(v.value, np.ndarray):
            self.say(st, f"the global array `{v.name}` is frozen into the compiled code when it compiles; Python "
                         "reads its values at each call (pass it as an argument)")
        elif isinstance(v, ir.Arg):
            k, w, signed = self.width(target)
            if k == "int" and not signed and not self.always_np(target):
                self.say(st, f"`{_user_name(target) or 'an argument'}` is a Python int of 2**63 or more, which "
                             "Numba types as an unsigned int64: its arithmetic would differ")
        elif isinstance(v, ir.Expr):
            self._check_expr(st, v)

    def _say_int(self, st: Any) -> None:
        v = st.value
        fn = _op_fn(v)
        name = _user_name(st.target.name)
        what = f"`{name}`" if name else _NAMES.get(fn, "a value")
        self.say(st, f"{what} is a Python int that can outgrow 64 bits: Numba's int64 would wrap")

    def _check_unify(self, st: Any, src: str) -> None:
        """``s = 0`` then ``s += x[i]`` with float x: Numba makes ``s`` a float from the start, Python keeps an int."""
        a, b = self.kind(src), self.kind(st.target.name)
        if a != b and {a, b} <= {"int", "bool", "float", "complex"}:
            name = _user_name(st.target.name)
            an = {"int": "an", "bool": "a", "float": "a", "complex": "a"}
            self.say(st, f"`{name or 'a value'}` holds {an[a]} {a} here and {an[b]} {b} elsewhere: "
                         f"Numba makes it a {b} throughout, Python keeps the {a} "
                         "(start it with the type it will hold: 0.0, not 0)")

    def _check_store(self, st: Any) -> None:
        from numba.core import types

        arr = self.t(st.target.name)
        val = st.value.name
        if not isinstance(arr, types.Array):
            self.say(st, "a store into something other than a NumPy array is not analysed")
            return
        dt = np.dtype(str(arr.dtype))
        k = self.kind(val)
        if k == "array":
            if str(getattr(self.t(val), "dtype", "")) != str(arr.dtype):
                self.say(st, "an array of another dtype copied into an array is not analysed")
            return
        if dt.kind in "iu":
            if k == "float":
                self.say(st, f"a float stored into an {dt} array: NumPy raises for nan or inf, compiled code does not")
            elif k == "int" and not self.always_np(val):
                bits = self.bits.get(val, -1)
                if bits > dt.itemsize * 8 - (1 if dt.kind == "i" else 0):
                    self.say(st, f"a Python int stored into an {dt} array may not fit: NumPy raises OverflowError, "
                                 "compiled code keeps the low bits")
        elif dt.kind == "b" and k != "bool":
            self.say(st, "a non-bool stored into a bool array is not analysed")

    def _check_expr(self, st: Any, v: Any) -> None:
        from numba.core import types

        op, target = v.op, st.target.name
        if op in ("binop", "inplace_binop"):
            self._check_binop(st, v)
        elif op == "unary":
            if self._narrow(v.value.name) and self.kind(target) == "int" and not self._stored_as(st, v.value.name):
                self._say_narrow(st, v.value.name)
        elif op == "call":
            fn = self.callee(v)
            if isinstance(fn, types.BoundFunction):
                pass  # an array method: its getattr above says whether it is one that only moves data
            elif isinstance(fn, types.Type):
                self.say(st, f"a call of {fn} is not analysed (only NumPy, math and builtin functions are)")
            elif fn in (builtins.int,) and v.args and self.kind(v.args[0].name) == "float":
                self.say(st, "int() of a float raises for nan or inf in Python; compiled, the result is undefined")
            elif isinstance(fn, type) and issubclass(fn, np.generic):
                if v.args and self.kind(v.args[0].name) == "float" and np.dtype(fn).kind in "iu":
                    self.say(st, f"{fn.__name__}() of a float is not analysed")
            elif fn is math.sqrt and v.args and self._nonnegative(v.args[0].name):
                pass  # of a value that is never negative (x * x + y * y): Python cannot raise, both round correctly
            elif fn not in EXACT_CALLS:
                name = getattr(fn, "__name__", str(fn))
                mod = getattr(fn, "__module__", None) or ("numpy" if isinstance(fn, np.ufunc) else "")
                full = f"{'np' if mod.startswith('numpy') else mod}.{name}" if mod and mod != "builtins" else name
                self.say(st, _CALL_WHY.get(fn, f"{full}() is not one of the calls proven to match CPython"))
            elif fn in (builtins.min, builtins.max) and len({self.kind(x.name) for x in v.args}) > 1:
                self.say(st, f"{fn.__name__}() of an int and a float: Python returns the winner as it is, Numba "
                             "converts it to a float")
        elif op == "getattr":
            if self.kind(v.value.name) == "array" and v.attr not in _ARRAY_ATTRS:
                self.say(st, f"a.{v.attr} is not analysed (NumPy's array methods may compute differently)")
        elif op in ("arrayexpr",):
            self.say(st, "a whole-array expression (NumPy already runs it compiled) is not analysed")
        elif op in ("build_list", "build_map", "build_set", "make_function", "list_comprehension"):
            self.say(st, f"{op.replace('_', ' ')} is not analysed")
        elif op == "cast":
            self._check_unify(st, v.value.name)

    def _say_narrow(self, st: Any, src: str) -> None:
        d = next(d for d in self.np.get(src, ()) if d is not None)
        name = _user_name(st.target.name)
        self.say(st, f"{'`' + name + '`' if name else 'a value'} is computed from {np.dtype(d)} values: NumPy keeps "
                     f"{np.dtype(d)} and wraps at its width, Numba computes in int64")

    def _check_binop(self, st: Any, v: Any) -> None:
        fn = v.immutable_fn if v.op == "inplace_binop" else v.fn
        a, b, target = v.lhs.name, v.rhs.name, st.target.name
        ka, kb, kt = self.kind(a), self.kind(b), self.kind(target)
        if "array" in (ka, kb):
            if fn not in _CMP:
                self.say(st, "a whole-array operation (NumPy already runs it compiled) is not analysed")
            return
        if "other" in (ka, kb) or "complex" in (ka, kb):
            self.say(st, f"{_NAMES.get(fn, 'an operation')} of {self.t(a)} and {self.t(b)} is not analysed")
            return
        np_a, np_b = self._maybe_np(a), self._maybe_np(b)
        # Narrow NumPy ints: only when the result goes straight back into an array of their dtype.
        for x in (a, b):
            if self._narrow(x) and kt in ("int", "bool") and fn not in _CMP:
                if fn not in _WRAP_OPS or not self._stored_as(st, x):
                    self._say_narrow(st, x)
                    return
        if fn not in _CMP and fn != operator.truediv and self._python_int_out_of_range(st, a, b):
            return
        if kt == "bool" and fn not in _CMP and ka == kb == "bool" and (np_a or np_b):
            self.say(st, "arithmetic on NumPy bools (logical in NumPy, integer compiled) is not analysed")
        floats = "float" in (ka, kb)
        if floats:
            for x in (a, b):
                if self.kind(x) == "float" and self.width(x)[1] != 64 and not (ka == kb == "float" and
                                                                              self.t(a) == self.t(b)):
                    self.say(st, "float32 arithmetic with other types: NumPy keeps float32, Numba computes in float64")
                    return
            if fn == operator.pow:
                self.say(st, "`**` on floats: Python raises OverflowError or returns a complex number where compiled "
                             "code returns inf or nan, and x ** 0.5 is compiled as a square root, which rounds "
                             "differently from Python's pow")
                return
        if fn in _DIV:
            c = self.const(b)
            if not (isinstance(c, (int, float)) and c != 0) and (np_a or np_b):
                self.say(st, f"{_NAMES[fn]} of NumPy numbers by a computed value: NumPy gives inf, nan or 0 for "
                             "a zero divisor where compiled code raises ZeroDivisionError")
                return
        if fn == operator.truediv and ka in ("int", "bool") and kb in ("int", "bool"):
            if max(self.bits.get(a, -1), self.bits.get(b, -1)) > FLOAT_INT_BITS:
                self.say(st, "int / int with ints beyond 2**53: Python divides exactly, compiled code converts "
                             "each to a float first")
        if fn in _CMP and any(self.kind(x) == "int" and not self.width(x)[2] and self.width(x)[1] == 64
                              for x in (a, b)):
            self.say(st, "a comparison with a uint64: Numba converts the operands to a float first")
        if fn in _CMP and floats and {ka, kb} & {"int"}:
            x = a if ka == "int" else b
            if self.bits.get(x, -1) > FLOAT_INT_BITS or (self.always_np(x) or self._maybe_np(x)) and \
                    self.width(x)[1] == 64:
                self.say(st, "an int compared with a float where the int may be beyond 2**53: Python compares "
                             "exactly, compiled code converts the int to a float")
        if kt == "int" and (np_a or np_b) and fn not in _CMP:
            if fn == operator.pow or fn in (operator.lshift, operator.rshift) and not (
                    isinstance(self.const(b), int) and 0 <= self.const(b) < 64):
                self.say(st, f"{_NAMES.get(fn, 'a shift')} of NumPy ints by a computed amount is not analysed")
        elif kt == "int" and fn in (operator.lshift, operator.rshift, operator.pow):
            c = self.const(b)
            if not (isinstance(c, int) and 0 <= c < 64) and self.bits.get(target, -1) <= INT_BITS:
                self.say(st, f"{_NAMES.get(fn, 'a shift')} by a computed amount: Python raises for a negative one "
                             "and grows the int; compiled code does neither")

    def _python_int_out_of_range(self, st: Any, a: str, b: str) -> bool:
        """A fixed-width NumPy int with a Python int that may not fit its dtype: say so (True) or pass (False).

        NumPy 2 (NEP 50) converts the Python int to the NumPy operand's dtype and raises OverflowError when
        it does not fit (``np.int8(1) - 128``, ``np.uint8(1) + -1``); Numba widens both to int64 and wraps.
        Exact only when the Python int is a constant within the range, or bounded within it (a signed dtype;
        an argument's bound is its size class in bytes, so ``k`` up to 2**(8k) - 1).
        """
        for x, y in ((a, b), (b, a)):
            dts = {np.dtype(d) for d in self.np.get(x, ()) if d is not None and np.dtype(d).kind in "iu"}
            if not dts or self.kind(y) != "int" or self.always_np(y):
                continue
            c = self.const(y)
            for dt in dts:
                info = np.iinfo(dt)
                if isinstance(c, int) and not isinstance(c, bool):
                    fits = info.min <= c <= info.max
                else:
                    fits = dt.kind == "i" and 0 <= self.bits.get(y, INT_BITS + 1) <= dt.itemsize * 8 - 1
                if not fits:
                    name = _user_name(y)
                    self.say(st, f"{'`' + name + '`' if name else 'a Python int'} is a Python int combined with "
                                 f"{dt} values: NumPy 2 raises OverflowError when it is outside {dt}'s range "
                                 f"({info.min}..{info.max}), compiled code wraps (use a constant within the range)")
                    return True
        return False


_MISSING = object()


def frozen_globals(dispatcher: Any, types: tuple, fn: Any) -> tuple[tuple[Any, str, Any], ...]:
    """What the compiled code for ``types`` froze when it compiled: ``(namespace, name, value)`` triples.

    Numba reads a global (``X``, ``np``) or a module's attribute (``mod.X``, ``np.pi``) once, at compile
    time, and bakes its value in; Python reads it at each call. The compiled code means what Python
    means only while each is still bound to the same object: :func:`eugo_lab.jit.names.globals_unchanged` checks that
    before each compiled call (a few dict look-ups), and a change sends the function back to a compile
    that reads the new values. ``namespace`` is ``fn.__globals__`` (a dict) or a module.
    """
    from numba.core import ir

    cres = dispatcher.overloads.get(tuple(types))
    g = getattr(fn, "__globals__", None)
    if cres is None or g is None:
        return ()
    found: dict[tuple[int, str], tuple[Any, str, Any]] = {}
    modules: dict[str, Any] = {}  # variable -> the module a global or an attribute of one holds
    for block in cres.type_annotation.blocks.values():
        for st in block.body:
            if not isinstance(st, ir.Assign):
                continue
            v = st.value
            if isinstance(v, ir.Global):
                if v.name in g:  # a builtin (range, len) is not in the module's namespace: not rebindable there
                    found[(id(g), v.name)] = (g, v.name, v.value)  # the value the code froze (not a later one)
                if type(v.value).__name__ == "module":
                    modules[st.target.name] = v.value
            elif isinstance(v, ir.Expr) and v.op == "getattr" and v.value.name in modules:
                mod = modules[v.value.name]
                value = getattr(mod, v.attr, _MISSING)
                found[(id(mod), v.attr)] = (mod, v.attr, value)
                if type(value).__name__ == "module":
                    modules[st.target.name] = value
    return tuple(found.values())

