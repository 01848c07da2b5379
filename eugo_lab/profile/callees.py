"""Which function a call instruction calls, and whether that function runs bytecode or machine code.

The thread sampler (:mod:`eugo_lab.profile.collect`) often finds a task's frame at a call
instruction, just back from the call: the interpreter hands the GIL over right after a call
returns. The time before that sample went into the callee. When the callee is a Python
function, the samples taken inside it hold most of that time and the rest is bytecode too.
When it is machine code that kept the GIL (a Numba-compiled function, ``sorted`` of a long
list, a C extension), no sample could be taken inside it, and that time is native, not the
caller's bytecode: without this, a loop that calls a compiled kernel was reported as Python
bytecode and named a JIT candidate.

:func:`callee_kind` answers for one frame at one call: ``NATIVE``, ``PYTHON`` or ``UNKNOWN``
(the sampler then keeps its other evidence). The callee is read from the code object's
instructions (a small stack simulation of the names loaded before the call, once per code
object), then looked up in the frame: globals, builtins, locals, attributes of modules, and
attributes of other objects through their type only (``inspect.getattr_static``), so that
looking never runs the program's code.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types
from typing import Any

NATIVE, PYTHON, UNKNOWN = "native", "python", "unknown"

# Instructions that load a name, and where the name lives.
_LOADS = {"LOAD_GLOBAL": "global", "LOAD_NAME": "global", "LOAD_FAST": "local", "LOAD_DEREF": "local",
          "LOAD_CLOSURE": "local"}
_CALLS = {"CALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW", "CALL_KW"}
# (Python 3.11: LOAD_GLOBAL with its low bit set also pushes a NULL under the name; PRECALL leaves the stack.)
_PYTHON_CALLABLES = (types.FunctionType, types.MethodType, types.GeneratorType, types.CoroutineType)


@functools.lru_cache(maxsize=512)
def _callees(code: types.CodeType) -> dict[int, tuple]:
    """``{offset of a call: the callee's expression}`` for the calls of ``code`` whose callee is a name chain.

    An expression is ``("global" | "local", name)`` or ``("attr", expression, name)``. The
    simulation follows the instructions in order and ignores jumps: a call whose stack it cannot
    follow (its callee was not a plain name chain) is left out.
    """
    out: dict[int, tuple] = {}
    stack: list[Any] = []
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op in _LOADS:
            if op == "LOAD_GLOBAL" and ins.arg is not None and ins.arg & 1:
                stack.append(None)  # the NULL 3.11 pushes under a global it calls
            stack.append((_LOADS[op], ins.argval))
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            base = stack.pop() if stack else None
            expr = ("attr", base, ins.argval) if isinstance(base, tuple) else None
            if op == "LOAD_METHOD":
                stack.append(None)
            stack.append(expr)
        elif op in ("PRECALL", "KW_NAMES", "CACHE", "EXTENDED_ARG"):
            continue
        elif op in _CALLS:
            n = ins.arg or 0
            del stack[max(len(stack) - n, 0):]
            # Under the arguments (3.11): the callable on top, a NULL (or, for a method, its object) below it.
            if stack and isinstance(stack[-1], tuple) and (len(stack) < 2 or stack[-2] is None):
                out[ins.offset] = stack[-1]
            del stack[max(len(stack) - 2, 0):]
            stack.append(None)
        else:
            try:
                effect = dis.stack_effect(ins.opcode, ins.arg, jump=False) if ins.opcode >= dis.HAVE_ARGUMENT \
                    else dis.stack_effect(ins.opcode)
            except ValueError:
                stack.clear()
                continue
            if effect < 0:
                del stack[max(len(stack) + effect, 0):]
            else:
                stack.extend([None] * effect)
    return out


def _value(expr: tuple, frame: Any, local: dict | None) -> tuple[bool, Any]:
    """``(found, value)`` of ``expr`` in ``frame``, without running any of the program's code."""
    kind = expr[0]
    if kind == "global":
        name = expr[1]
        g = frame.f_globals
        if name in g:
            return True, g[name]
        b = frame.f_builtins
        return (True, b[name]) if name in b else (False, None)
    if kind == "local":
        if local is None or expr[1] not in local:
            return False, None
        return True, local[expr[1]]
    found, base = _value(expr[1], frame, local)
    if not found:
        return False, None
    try:
        if isinstance(base, types.ModuleType):
            return True, base.__dict__[expr[2]]
        return True, inspect.getattr_static(base, expr[2])
    except (AttributeError, KeyError):
        return False, None


def kind_of(fn: Any) -> str:
    """``PYTHON`` if calling ``fn`` runs bytecode, ``NATIVE`` if it runs machine code, else ``UNKNOWN``."""
    for _ in range(4):  # through the C wrappers that run the function they hold (not ``__wrapped__``:
        # a Numba dispatcher names its Python source there, yet runs machine code)
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif isinstance(getattr(fn, "_implementation", None), types.FunctionType):  # NumPy's array-function dispatch
            fn = fn._implementation
        else:
            break
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    if isinstance(fn, _PYTHON_CALLABLES):
        return PYTHON
    if isinstance(fn, type):
        return UNKNOWN  # a class: its __init__ may be either
    if isinstance(fn, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                       types.MethodWrapperType, types.ClassMethodDescriptorType)):
        return NATIVE
    call = inspect.getattr_static(type(fn), "__call__", None)
    if call is None:
        return UNKNOWN
    if isinstance(call, types.FunctionType):
        return PYTHON
    # A type implemented in C (a NumPy ufunc, a Numba dispatcher, a Cython function): its call is machine code.
    return NATIVE if isinstance(call, (types.WrapperDescriptorType, types.MethodWrapperType)) else UNKNOWN


def callee_kind(frame: Any, offset: int) -> str:
    """Whether the call at ``offset`` of ``frame``'s code called bytecode (``PYTHON``) or machine code (``NATIVE``)."""
    try:
        expr = _callees(frame.f_code).get(offset)
    except Exception:  # noqa: BLE001 - an instruction stream the simulation does not know: no answer
        return UNKNOWN
    if expr is None:
        return UNKNOWN
    local = None
    if _needs_locals(expr):
        try:
            local = frame.f_locals
        except Exception:  # noqa: BLE001
            return UNKNOWN
    found, fn = _value(expr, frame, local)
    return kind_of(fn) if found else UNKNOWN


def _needs_locals(expr: tuple) -> bool:
    while expr[0] == "attr":
        expr = expr[1]
    return expr[0] == "local"
