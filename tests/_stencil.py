"""The JIT benchmarks' 3-point stencil (``benchmarks/stencil.py``) as the source a notebook cell defines it with."""

from __future__ import annotations

import ast
import inspect

from benchmarks.stencil import smooth


def stencil_source(name: str) -> str:
    """``benchmarks.stencil.smooth``'s code, without its docstring, as a function named ``name``.

    A cell that defines it runs the very loop the benchmarks time, not a copy that could drift from it.
    """
    fn = ast.parse(inspect.getsource(smooth)).body[0]
    assert isinstance(fn, ast.FunctionDef) and isinstance(fn.body[0], ast.Expr)  # its docstring comes first
    fn.name, fn.body = name, fn.body[1:]
    return ast.unparse(fn)
