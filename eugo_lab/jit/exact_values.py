"""What a function's values may hold, read from Numba's typed IR: the facts :mod:`eugo_lab.jit.exact` checks against.

Per variable: which NumPy dtypes its Python value may have (``None``: a Python number), and a bound
on the bit length of its Python-int values, from the bounds of what it is computed from; loop-carried
cycles of definitions are bounded as counters or not at all (see :mod:`eugo_lab.jit.exact`).
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

INDEX_ASSUMPTION = ("an index product of two values below array dimensions is below 2**63 (true unless two "
                    "arrays of more than 2**31 elements each are indexed together)")
# A CPython loop runs at most ~1e8 simple steps a second: 2**48 steps is about a month of one.
STEPS_BITS = 48
# An array's length, shape or size: its elements fit in a 64-bit address space of 2**47 bytes (x86-64, arm64).
DIM_BITS = 47
# The largest magnitude an int64 holds is below 2**63.
INT_BITS = 63
# A float64 represents every integer below 2**53 exactly: above that, int/float comparisons and int / int differ.
FLOAT_INT_BITS = 53
TOP = 1 << 20  # no bound

_ADD = (operator.add, operator.iadd, operator.sub, operator.isub)
_NAMES = {operator.add: "a sum", operator.sub: "a difference", operator.mul: "a product", operator.pow: "a power",
          operator.lshift: "a shift", operator.floordiv: "a floor division", operator.mod: "a remainder",
          operator.truediv: "a division", operator.neg: "a negation"}
_WRAP_OPS = frozenset({operator.add, operator.sub, operator.mul, operator.and_, operator.or_, operator.xor})
_CMP = frozenset({operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne})
_DIV = frozenset({operator.truediv, operator.floordiv, operator.mod})
# A Python number of each Numba kind, to find what an operation on it and a NumPy scalar gives (see _op_np).
_PY_STAND_IN: dict[str, Any] = {"int": 1, "bool": True, "float": 1.0, "complex": 1 + 0j}


def _user_name(var: str) -> str:
    """A variable's name as the source spells it (``s.2`` -> ``s``); "" for Numba's temporaries."""
    return "" if var.startswith("$") or var.startswith("arg.") else var.split(".")[0]


def _int_bits(v: Any) -> int:
    """The bound on a Python int argument: its size class in bytes (as the JIT's signature keys it), in bits."""
    return 8 * ((abs(v).bit_length() + 7) // 8)


class Values:
    """One function's typed IR: its definitions and uses, then (:meth:`compute`) what each variable may hold."""

    def __init__(self, blocks: dict, typemap: dict, calltypes: Any, pos: tuple):
        from numba.core import ir

        self.ir = ir
        self.typemap = typemap
        self.calltypes = calltypes
        self.pos = pos
        self.defs: dict[str, list[Any]] = {}  # var -> the statements that assign it
        self.uses: dict[str, list[Any]] = {}  # var -> the statements that read it
        self.stmts: list[Any] = []
        for label in sorted(blocks):
            for st in blocks[label].body:
                if isinstance(st, ir.Del):
                    continue
                self.stmts.append(st)
                if isinstance(st, ir.Assign):
                    self.defs.setdefault(st.target.name, []).append(st)
                for v in st.list_vars():
                    if not (isinstance(st, ir.Assign) and v.name == st.target.name):
                        self.uses.setdefault(v.name, []).append(st)
        self.np: dict[str, frozenset] = {}  # var -> the NumPy dtypes its Python value may have (None: a Python one)
        self.bits: dict[str, int] = {}  # var -> bound on the bit length of its Python-int values (-1: none)
        self.out: list[tuple[int, str]] = []

    # -- types -------------------------------------------------------------------------------------

    def t(self, var: str) -> Any:
        """Numba's type of a variable (None: not typed)."""
        return self.typemap.get(var)

    def kind(self, var: str) -> str:
        """``int``, ``bool``, ``float``, ``complex``, ``array`` or ``other`` for a variable's Numba type."""
        from numba.core import types

        t = self.t(var)
        if isinstance(t, (types.Boolean, types.BooleanLiteral)):
            return "bool"
        if isinstance(t, (types.Integer, types.IntegerLiteral)):
            return "int"
        if isinstance(t, types.Float):
            return "float"
        if isinstance(t, types.Complex):
            return "complex"
        if isinstance(t, types.Array):
            return "array"
        return "other"

    def width(self, var: str) -> tuple[str, int, bool]:
        """(kind, bits, signed) of a scalar's Numba type (int64 -> ("int", 64, True))."""
        t = self.t(var)
        k = self.kind(var)
        return k, getattr(t, "bitwidth", 64), bool(getattr(t, "signed", True))

    def operands(self, st: Any) -> list[str]:
        """The variables an assignment reads."""
        v = st.value
        if isinstance(v, self.ir.Var):
            return [v.name]
        if isinstance(v, self.ir.Expr):
            return [x.name for x in v.list_vars()]
        return []

    # -- NumPy or Python scalars -------------------------------------------------------------------------

    def _np_of(self, st: Any) -> frozenset:
        ir, v = self.ir, st.value
        if isinstance(v, ir.Arg):
            a = self.pos[v.index] if v.index < len(self.pos) else None
            return frozenset({np.asarray(a).dtype.str}) if isinstance(a, np.generic) else frozenset({None})
        if isinstance(v, ir.Var):
            return self.np.get(v.name, frozenset())
        if not isinstance(v, ir.Expr):
            return frozenset({None})
        op = v.op
        if op in ("getitem", "static_getitem", "typed_getitem", "exhaust_iter"):
            if self.kind(v.value.name) == "array":
                dtype = self.t(v.value.name).dtype
                return frozenset({np.dtype(str(dtype)).str}) if self.kind(st.target.name) != "array" else \
                    frozenset({None})
            return self._tuple_items_np(v.value.name)
        if op == "build_tuple":
            return frozenset().union(*(self.np.get(x.name, frozenset()) for x in v.items))
        if op == "pair_first":
            it = self._iter_source(v.value.name)
            dtype = getattr(self.t(it), "dtype", None) if it else None
            return frozenset({np.dtype(str(dtype)).str}) if dtype is not None and it and \
                self.kind(it) == "array" else frozenset({None})
        if op in ("binop", "inplace_binop", "unary"):
            names = [x.name for x in v.list_vars()]
            ins = [self.np.get(x, frozenset()) for x in names]
            return frozenset(self._op_np(_op_fn(v), names, combo) for combo in _product(ins))
        if op == "call":
            fn = self.callee(v)
            if fn in (builtins.abs, builtins.min, builtins.max):
                return frozenset().union(*(self.np.get(x.name, frozenset()) for x in v.args)) or frozenset({None})
            if isinstance(fn, np.ufunc):
                return frozenset({np.dtype(str(self.t(st.target.name))).str}) if self.kind(
                    st.target.name) in ("float", "int", "bool") else frozenset({None})
            if isinstance(fn, type) and issubclass(fn, np.generic):
                return frozenset({np.dtype(fn).str})
        return frozenset({None})

    def _op_np(self, fn: Any, names: list[str], combo: tuple) -> str | None:
        """The NumPy dtype (or None: a Python number) of ``fn`` applied to operands of those kinds, as NumPy has it.

        Found by doing the operation on a stand-in of each operand (one of its dtype, or a Python number of its
        Numba kind): NumPy's own rules then give the type, comparisons (``np.float64 > 0`` is an ``np.bool_``),
        true division of integers (a float64) and Python numbers mixed with NumPy ones (NEP 50) included.
        """
        dts = [d for d in combo if d is not None]
        if not dts:
            return None
        stand_ins = []
        for name, d in zip(names, combo):
            if d is not None:
                stand_ins.append(np.dtype(d).type(1))
            else:
                stand_ins.append(_PY_STAND_IN.get(self.kind(name)))
        if fn is not None and None not in stand_ins:
            try:
                with np.errstate(all="ignore"):
                    r = fn(*stand_ins)
            except Exception:  # noqa: BLE001 - an operation NumPy refuses on these: fall back to promotion
                r = None
            if r is not None:
                return np.asarray(r).dtype.str if isinstance(r, np.generic) else None
        return np.result_type(*[np.dtype(d) for d in dts]).str

    def _tuple_items_np(self, var: str) -> frozenset:
        """What the items of a tuple may be (NumPy dtypes or None), from where it was built or passed in."""
        d = self.defs.get(var, [])
        out: set = set()
        for st in d:
            v = st.value
            if isinstance(v, self.ir.Arg):
                a = self.pos[v.index] if v.index < len(self.pos) else ()
                out |= {np.asarray(x).dtype.str if isinstance(x, np.generic) else None
                        for x in (a if isinstance(a, tuple) else (a,))}
            else:
                out |= self.np.get(var, frozenset())
        return frozenset(out) or frozenset({None})

    def _iter_source(self, var: str) -> str:
        """The variable an iterator came from (``for x in a``: ``a``), through copies and ``iternext``."""
        seen = 0
        while seen < 32:
            seen += 1
            d = self.defs.get(var)
            if not d:
                return ""
            v = d[0].value
            if isinstance(v, self.ir.Var):
                var = v.name
            elif isinstance(v, self.ir.Expr) and v.op in ("iternext", "getiter"):
                var = v.value.name
            else:
                return var
        return ""

    def callee(self, expr: Any) -> Any:
        """The Python function a call expression calls (``math.sqrt``, ``range``...), or its Numba type."""
        from numba.core import types

        t = self.t(expr.func.name)
        if isinstance(t, types.Function):
            return t.typing_key
        if isinstance(t, types.NumberClass):
            return np.dtype(str(t.instance_type)).type
        return t

    # -- bounds of Python ints ----------------------------------------------------------------------------

    def always_np(self, var: str) -> bool:
        """Whether a variable's Python value is a NumPy scalar on every path (never a Python number)."""
        s = self.np.get(var, frozenset({None}))
        return bool(s) and None not in s

    def _bits_of(self, st: Any) -> int:
        """The bound of one definition's Python-int values, from its operands' bounds (-1: never a Python int)."""
        ir, v, target = self.ir, st.value, st.target.name
        k = self.kind(target)
        # Iterators, ranges and pairs carry their index's bound; floats and arrays have none.
        if k in ("float", "complex", "array") or self.always_np(target) and not isinstance(v, ir.Var):
            return -1
        if k == "bool":
            return 1
        b = self.bits.get
        if isinstance(v, ir.Arg):
            a = self.pos[v.index] if v.index < len(self.pos) else None
            if isinstance(a, bool):
                return 1
            # An int64 argument is below 2**63 (Numba types a larger one as uint64), whatever its size class.
            return min(_int_bits(a), INT_BITS) if isinstance(a, int) else 64
        if isinstance(v, (ir.Const, ir.Global, ir.FreeVar)):
            val = v.value
            return abs(int(val)).bit_length() if isinstance(val, (int, np.integer)) else -1
        if isinstance(v, ir.Var):
            return b(v.name, -1)
        op = v.op
        if op == "cast":
            return b(v.value.name, -1)
        if op in ("binop", "inplace_binop"):
            fn = v.immutable_fn if op == "inplace_binop" else v.fn
            x, y = max(b(v.lhs.name, -1), 0), max(b(v.rhs.name, -1), 0)
            if fn in (operator.add, operator.sub):
                return max(x, y) + 1
            if fn == operator.mul:
                if x + y > INT_BITS and max(x, y) <= STEPS_BITS + 1 and self._index_only(target):
                    return DIM_BITS + 1  # i * k used only to index an array: see INDEX_ASSUMPTION
                return x + y
            if fn == operator.floordiv:
                return x + 1
            if fn == operator.mod:
                return y
            if fn in (operator.and_, operator.or_, operator.xor):
                return max(x, y)
            if fn == operator.rshift:
                return x
            c = self.const(v.rhs.name)
            if fn == operator.lshift and isinstance(c, int) and 0 <= c < 64:
                return x + c
            if fn == operator.pow and isinstance(c, int) and 0 <= c < 64:
                return max(x * c, 1)
            return TOP
        if op == "unary":
            return b(v.value.name, -1) + (0 if v.fn == "+" else 1)
        if op in ("pair_first", "iternext", "getiter"):
            return b(v.value.name, -1)
        if op in ("static_getitem", "getitem", "typed_getitem", "exhaust_iter"):
            return self._tuple_bits(v.value.name)
        if op == "build_tuple":
            return max((b(x.name, -1) for x in v.items), default=-1)
        if op == "getattr":
            return DIM_BITS if v.attr in ("size", "ndim", "itemsize", "nbytes", "shape", "strides") else TOP
        if op == "call":
            fn = self.callee(v)
            args = [b(x.name, -1) for x in v.args]
            if fn is builtins.len:
                return DIM_BITS
            if fn is builtins.range:
                # The index lies between the range's ends, and cannot get further from its start than STEPS_BITS steps.
                start, stop = (args[0], args[1]) if len(args) > 1 else (0, args[0] if args else TOP)
                step = args[2] if len(args) > 2 else 1
                return max(start, min(stop, max(start, STEPS_BITS + step) + 1))
            if fn is builtins.abs:
                return args[0] + 1 if args else TOP
            if fn in (builtins.min, builtins.max):
                return max(args, default=TOP)
            if fn in (builtins.int, builtins.bool) and args and self.kind(v.args[0].name) in ("int", "bool"):
                return args[0]
            return TOP
        return TOP

    def _tuple_bits(self, var: str) -> int:
        """The bound of a tuple's (or an unpacked tuple's) int items: a shape's are dimensions."""
        ir = self.ir
        for _ in range(16):
            d = self.defs.get(var)
            if not d:
                return TOP
            bv = d[0].value
            if isinstance(bv, ir.Expr) and bv.op == "getattr" and bv.attr in ("shape", "strides"):
                return DIM_BITS
            if isinstance(bv, ir.Expr) and bv.op == "build_tuple" or len(d) > 1:
                return max(self.bits.get(var, -1), max((self.bits.get(x.name, -1) for st in d
                                                         for x in getattr(st.value, "items", ())), default=-1))
            if isinstance(bv, ir.Arg):
                a = self.pos[bv.index] if bv.index < len(self.pos) else ()
                ints = [x for x in a if isinstance(x, int)] if isinstance(a, tuple) else []
                return max((_int_bits(x) for x in ints), default=64)
            if isinstance(bv, ir.Var) or isinstance(bv, ir.Expr) and bv.op == "exhaust_iter":
                var = bv.name if isinstance(bv, ir.Var) else bv.value.name
                continue
            return TOP
        return TOP

    def _index_only(self, var: str, depth: int = 0) -> bool:
        """Whether ``var`` is used only as an array index, directly or through sums, differences and copies."""
        ir = self.ir
        uses = self.uses.get(var, [])
        if not uses or depth > 8:
            return False
        for u in uses:
            if isinstance(u, (ir.SetItem, ir.StaticSetItem)) and u.index.name == var and u.value.name != var:
                continue
            if not isinstance(u, ir.Assign):
                return False
            v = u.value
            if isinstance(v, ir.Var) or isinstance(v, ir.Expr) and v.op in ("binop", "inplace_binop") and \
                    _op_fn(v) in (operator.add, operator.sub):
                if self._index_only(u.target.name, depth + 1):
                    continue
                return False
            if isinstance(v, ir.Expr) and v.op in ("getitem", "typed_getitem") and v.index.name == var and \
                    v.value.name != var:
                continue
            return False
        return True

    def const(self, var: str) -> Any:
        """The constant a variable holds (through copies), or None."""
        for _ in range(16):
            d = self.defs.get(var)
            if not d or len(d) != 1:
                return None
            v = d[0].value
            if isinstance(v, (self.ir.Const, self.ir.Global, self.ir.FreeVar)):
                return v.value
            if not isinstance(v, self.ir.Var):
                return None
            var = v.name
        return None

    def compute(self) -> None:
        """Work out every variable's NumPy dtypes and Python-int bound (once, before the checks)."""
        names = list(self.defs)
        # NumPy-ness: a monotone fixpoint (sets only grow; few dtypes).
        for n in names:
            self.np[n] = frozenset()
        changed = True
        while changed:
            changed = False
            for n in names:
                new = self.np[n].union(*(self._np_of(st) for st in self.defs[n]))
                if new != self.np[n]:
                    self.np[n], changed = new, True
        for n in names:
            self.bits[n] = -1
        for comp in _sccs(names, lambda n: [x for st in self.defs[n] for x in self.operands(st) if x in self.defs]):
            if len(comp) == 1 and comp[0] not in {x for st in self.defs[comp[0]] for x in self.operands(st)}:
                n = comp[0]
                self.bits[n] = max(self._bits_of(st) for st in self.defs[n])
            else:
                self._cycle(set(comp))

    def _cycle(self, comp: set[str]) -> None:
        """Bound the values of one loop-carried cycle of definitions (see the module): counters, not accumulators."""
        ir = self.ir
        inputs, steps, grows = [-1], [], None
        for n in comp:
            if self.kind(n) not in ("int", "bool"):
                continue
            for st in self.defs[n]:
                v = st.value
                if self.always_np(n) and not isinstance(v, ir.Var):
                    continue
                if isinstance(v, ir.Var) or isinstance(v, ir.Expr) and v.op in ("cast", "unary") or \
                        isinstance(v, ir.Expr) and v.op == "call" and self.callee(v) in (builtins.min, builtins.max,
                                                                                          builtins.abs):
                    inputs += [self.bits.get(x, -1) for x in self.operands(st) if x not in comp]
                    continue
                if isinstance(v, ir.Expr) and v.op in ("binop", "inplace_binop"):
                    fn = v.immutable_fn if v.op == "inplace_binop" else v.fn
                    a, c = v.lhs.name, v.rhs.name
                    inside = [x for x in (a, c) if x in comp]
                    if any(self.always_np(x) for x in (a, c)):
                        continue  # a NumPy integer: wraps in NumPy as compiled
                    if fn in (operator.add, operator.sub) and len(inside) == 1:
                        steps.append(max(self.bits.get(c if a in comp else a, -1), 0))
                        continue
                    if fn == operator.mod and c not in comp:
                        inputs.append(self.bits.get(c, -1))
                        continue
                    if fn in (operator.floordiv, operator.rshift) and c not in comp:
                        continue  # shrinks
                    if fn == operator.and_ and len(inside) == 1:
                        inputs.append(self.bits.get(c if a in comp else a, -1))
                        continue
                grows = grows or (st, n, v)
                if isinstance(v, ir.Expr):
                    inputs += [self.bits.get(x, -1) for x in self.operands(st) if x not in comp]
                else:
                    inputs.append(self._bits_of(st))
        bound = max(inputs)
        if steps:
            bound = max(bound, STEPS_BITS + max(steps) + 1) + 1
        if grows is not None:
            bound = TOP
        for n in comp:
            if self.kind(n) in ("int", "bool"):
                self.bits[n] = -1 if self.always_np(n) else bound
        if bound > INT_BITS:
            self._say_cycle(comp, grows, steps, max(inputs))

    def _say_cycle(self, comp: set[str], grows: Any, steps: list[int], start_bits: int = -1) -> None:
        if grows is None and not steps:
            return  # a value from outside the loop is already too large: said where it is computed
        names = sorted({_user_name(n) for n in comp} - {""})
        who = f"`{names[0]}`" if names else "a value"
        if grows is not None:
            st, _, v = grows
            fn = _op_fn(v)
            how = f"it grows by {_NAMES.get(fn, 'an operation')} of itself on every pass of a loop"
        elif max(steps) > INT_BITS:
            st = self._step_stmt(comp)
            how = "each pass of a loop adds a value that can itself outgrow 64 bits"
        elif STEPS_BITS + max(steps) + 2 <= INT_BITS:
            # The steps alone stay in range: what can pass 2**63 is where it starts (``c = start; c += 1``).
            st = self._step_stmt(comp)
            how = (f"it starts from a value of up to {start_bits} bits, near int64's limit, and changes on every "
                   "pass of a loop: a few steps can take it past 2**63")
        else:
            st = self._step_stmt(comp)
            how = "it adds a value that is not a small constant on every pass of a loop"
        self.say(st, f"{who} is a Python int that can outgrow 64 bits ({how}): Numba's int64 would wrap")

    def _step_stmt(self, comp: set[str]) -> Any:
        for n in sorted(comp):
            for st in self.defs[n]:
                if isinstance(st.value, self.ir.Expr) and st.value.op in ("binop", "inplace_binop"):
                    return st
        return self.defs[sorted(comp)[0]][0]

    def say(self, st: Any, why: str) -> None:
        """Record a reason at a statement's line (once per line and reason)."""
        line = getattr(st.loc, "line", 0) or 0
        if not any(x == (line, why) for x in self.out):
            self.out.append((line, why))

    # -- the checks ----------------------------------------------------------------------------------

    def _nonnegative(self, var: str, depth: int = 0) -> bool:
        """Whether a float is never below zero (or is nan): squares, abs, square roots, their sums and products."""
        ir = self.ir
        defs = self.defs.get(var)
        if not defs or depth > 12:
            return False
        for st in defs:
            v = st.value
            if isinstance(v, (ir.Const, ir.Global, ir.FreeVar)):
                if not (isinstance(v.value, (int, float)) and v.value >= 0):
                    return False
            elif isinstance(v, ir.Var):
                if not self._nonnegative(v.name, depth + 1):
                    return False
            elif isinstance(v, ir.Expr) and v.op in ("binop", "inplace_binop"):
                fn = _op_fn(v)
                same = v.lhs.name == v.rhs.name or self._same_load(v.lhs.name, v.rhs.name)
                if fn == operator.mul and same:
                    continue
                if fn not in (operator.add, operator.mul) or not (
                        self._nonnegative(v.lhs.name, depth + 1) and self._nonnegative(v.rhs.name, depth + 1)):
                    return False
            elif isinstance(v, ir.Expr) and v.op == "call":
                if self.callee(v) not in (builtins.abs, math.fabs, math.sqrt, np.sqrt, np.abs, np.absolute, np.fabs):
                    return False
            else:
                return False
        return True

    def _same_load(self, a: str, b: str) -> bool:
        """Whether two variables load the same array element (``x[i] * x[i]``): the same array, the same index."""
        da, db = self.defs.get(a), self.defs.get(b)
        if not da or not db or len(da) != 1 or len(db) != 1:
            return False
        va, vb = da[0].value, db[0].value
        if not (isinstance(va, self.ir.Expr) and isinstance(vb, self.ir.Expr)) or va.op != vb.op or \
                va.op not in ("getitem", "static_getitem"):
            return False
        ia = va.index.name if va.op == "getitem" else va.index
        ib = vb.index.name if vb.op == "getitem" else vb.index
        return va.value.name == vb.value.name and ia == ib and self._not_written_between(va.value.name)

    def _not_written_between(self, array: str) -> bool:
        """Conservatively: the array is never written in the function (two loads of one element read one value)."""
        return not any(isinstance(u, (self.ir.SetItem, self.ir.StaticSetItem)) and u.target.name == array
                       for u in self.uses.get(array, []))

    def _narrow(self, var: str) -> bool:
        """A NumPy integer narrower than int64, or unsigned: NumPy keeps its width, Numba computes in int64."""
        for d in self.np.get(var, ()):
            if d is not None and np.dtype(d).kind in "iub" and (np.dtype(d).itemsize < 8 or np.dtype(d).kind == "u"):
                return True
        return False

    def _stored_as(self, st: Any, src: str) -> bool:
        """Whether ``st``'s result goes only into arrays of ``src``'s NumPy dtype (the same bits modulo the width)."""
        from numba.core import types

        dts = {d for d in self.np.get(src, ()) if d is not None}
        uses = self.uses.get(st.target.name, [])
        if not uses or len(dts) != 1:
            return False
        for u in uses:
            if not isinstance(u, (self.ir.SetItem, self.ir.StaticSetItem)) or u.value.name != st.target.name:
                return False
            arr = self.t(u.target.name)
            if not isinstance(arr, types.Array) or np.dtype(str(arr.dtype)).str not in dts:
                return False
        return True

    def _maybe_np(self, var: str) -> bool:
        return any(d is not None for d in self.np.get(var, ()))


def _op_fn(v: Any) -> Any:
    """The operator of a binop or unary expression (``operator.add`` for ``+=`` too); None for anything else."""
    kws = getattr(v, "_kws", None) or {}
    return kws.get("immutable_fn") if getattr(v, "op", "") == "inplace_binop" else kws.get("fn")


def _product(sets: list[frozenset]) -> Iterable[tuple]:
    """Every combination of one element per set (empty sets count as one Python value)."""
    out: list[tuple] = [()]
    for s in sets:
        out = [o + (x,) for o in out for x in (s or {None})]
    return out


def _sccs(nodes: list[str], succ: Any) -> list[list[str]]:
    """Tarjan's strongly connected components, dependencies first (iterative: loops make deep graphs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            pushed = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(succ(nxt))))
                    pushed = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if pushed:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                out.append(comp)
    return out
