"""Run a cell body the way IPython runs a cell, so tracebacks point at the user's lines.

The body is transformed like any cell (``%magics`` and ``!shell`` inside it work), cached
under IPython's own cell name so a traceback reads ``Cell In[7], line 4`` with the line
numbers the notebook shows (line 1 is the ``%%eugo`` line), and the value of a final
expression is returned (the magic returns it, so it shows as the cell's ``Out``).
Compiling happens before the runtime starts: a syntax error costs nothing.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CompiledCell:
    """A cell body compiled for repeated execution (``--compare`` and ``--scaling`` run it several times)."""

    body: Any
    last_expr: Any  # code for eval(), or None when the cell does not end with an expression
    source: str = ""  # the body as Python (IPython's syntax, %magics and !shell, transformed): what was compiled


def _cell_number(shell: Any) -> int:
    """The ``In[N]`` of the cell running this magic (IPython has already advanced its counter)."""
    names = getattr(shell.compile, "_filename_map", {})
    f = sys._getframe(1)
    while f is not None:
        n = names.get(f.f_code.co_filename)
        if n is not None:
            return int(n)
        f = f.f_back  # type: ignore[assignment]
    return max(int(shell.execution_count) - 1, 0)


def compile_cell(shell: Any, cell: str, transform: Any = None) -> CompiledCell:
    """Transform and compile ``cell``; raises ``SyntaxError`` with the user's line numbers.

    ``transform(tree) -> tree``: applied to the cell's AST before compiling (the automatic JIT
    marks the cell's top-level functions there, see :mod:`eugo_lab.cellrun.optimize`).
    """
    transformed = shell.transform_cell(cell)
    # One leading newline: line 1 of the notebook cell is the %%eugo line itself.
    source = "\n" + transformed
    filename = shell.compile.cache(source, _cell_number(shell), raw_code="\n" + cell)
    tree = shell.compile.ast_parse(source, filename=filename)
    _refuse_top_level_await(tree, filename)
    if transform is not None:
        tree = transform(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not cell.rstrip().endswith(";"):
        last = ast.Expression(tree.body.pop().value)
    body = shell.compile(tree, filename, "exec")
    last_code = shell.compile(last, filename, "eval") if last is not None else None
    return CompiledCell(body, last_code, transformed)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_AWAITS = (ast.Await, ast.AsyncFor, ast.AsyncWith)


def _top_level_await(node: ast.AST) -> ast.AST | None:
    """The first ``await``/``async for``/``async with`` of the cell itself (not inside a def)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _AWAITS):
            return child
        if isinstance(child, ast.comprehension) and child.is_async:
            return child.iter
        if not isinstance(child, _SCOPES):
            found = _top_level_await(child)
            if found is not None:
                return found
    return None


def _refuse_top_level_await(tree: ast.AST, filename: str) -> None:
    """A plain notebook cell may ``await`` at top level; a ``%%eugo`` body cannot: say so, and what to do.

    IPython calls cell magics synchronously from inside the kernel's running event loop,
    so the magic has no way to run the cell as a coroutine to completion.
    """
    node = _top_level_await(tree)
    if node is not None:
        err = SyntaxError(
            "%%eugo runs its cell as ordinary code, so it cannot use top-level await. Wait for hpc "
            "futures with hpc.get(futures) instead (the timeline shows the same), or drop %%eugo to "
            "await them in a plain cell."
        )
        err.filename, err.lineno, err.offset = filename, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1
        raise err


def execute(shell: Any, compiled: CompiledCell) -> Any:
    """Run the compiled cell in the user's namespace; return the final expression's value."""
    __tracebackhide__ = True  # IPython hides this frame in tracebacks
    exec(compiled.body, shell.user_global_ns, shell.user_ns)  # running the user's own cell
    if compiled.last_expr is not None:
        return eval(compiled.last_expr, shell.user_global_ns, shell.user_ns)  # the user's own cell
    return None
