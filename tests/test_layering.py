"""The package's imports point down: contract <- engines <- runtime <- tracing/analysis <- displays <- magic.

The rules, each checked against the real import graph (every import in a module counts, also
those inside functions: a lazy import is still a dependency; an import under ``if TYPE_CHECKING:``
loads nothing and does not count, so a renderer may name the report it draws):

- every package and top-level module has a layer (``LAYERS``; a new one fails until it is placed),
  and imports only rooms of its own layer or below;
- the contract (``eugo_lab.contract``: what runtime and engines share) imports nothing of the
  package but itself, ``settings`` and ``units``;
- engines (``backends``) never import the runtime (``hpc``);
- analyses never import the runtime or the displays;
- the runtime never imports displays, the cell runner, exercises, checklists or a feature package
  (``jit``, ``offload``, ``optimizations``, ``profile``, ``threadguard``: it reaches them by name,
  through ``eugo_lab.contract.hooks``);
- no circle between packages (``test_no_circle_between_packages``), nor between the modules of one
  package (``test_no_circle_between_modules_of_one_package``);
- no private name (a leading underscore) of one package imported or read by another
  (``PRIVATE_ALLOWED`` lists the exceptions, each with its reason);
- the server extension loads no runtime, and a worker loads the trace row but not the recorder.

A rule broken here is a seam pointing the wrong way: move the code to the layer it belongs to
rather than adding an exception.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "eugo_lab"

# package (a folder of eugo_lab) -> modules it must never import, however lazily.
FORBIDDEN = {
    # the runtime: never the displays, the cell runner, the courses' graders or the analyses of its traces; nor
    # the features that change how code runs: they are reached by name (eugo_lab.contract.hooks), never imported
    "hpc": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.analysis", "eugo_lab.server",
            "eugo_lab.exercises", "eugo_lab.checklists", "eugo_lab.jit", "eugo_lab.offload",
            "eugo_lab.optimizations", "eugo_lab.profile", "eugo_lab.threadguard"),
    # engines run tasks and report outcomes through the contract; the runtime above them is not theirs to read
    "backends": ("eugo_lab.hpc", "eugo_lab.tracing", "eugo_lab.analysis", "eugo_lab.render",
                 "eugo_lab.cellrun", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.exercises",
                 "eugo_lab.checklists"),
    "tracing": ("eugo_lab.hpc", "eugo_lab.backends", "eugo_lab.analysis", "eugo_lab.render", "eugo_lab.cellrun",
                "eugo_lab.magics", "eugo_lab.server"),
    "analysis": ("eugo_lab.hpc", "eugo_lab.backends", "eugo_lab.render", "eugo_lab.cellrun", "eugo_lab.magics",
                 "eugo_lab.server", "eugo_lab.exercises", "eugo_lab.checklists", "IPython", "ipywidgets", "bokeh"),
    # renderers draw the reports and ledgers they are handed; what is in them is computed where they are built
    "render": ("eugo_lab.cellrun", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
               "eugo_lab.offload", "eugo_lab.jit", "eugo_lab.threadguard", "eugo_lab.optimizations"),
    "cellrun": ("eugo_lab.magics", "eugo_lab.server"),
    # recording a cell written with an engine's own API (Dask's, Ray's): the recorder's layer, beside tracing;
    # the cell runner uses it, and it knows nothing of the runtime, its engines or what reads its traces
    "native": ("eugo_lab.hpc", "eugo_lab.backends", "eugo_lab.analysis", "eugo_lab.render", "eugo_lab.cellrun",
               "eugo_lab.magics", "eugo_lab.server", "eugo_lab.exercises", "eugo_lab.checklists"),
    # The features below the runtime (GPU offload, the JIT, the thread guard) and the optimization report: pure
    # models and worker-side code; the cell hands them the shell, the renderers draw their results. Each feature
    # stands alone: none imports another, and what they share about this machine is in hardware.
    # GPU offload: cost model, dispatching proxy, per-operation ledger.
    "offload": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
                "eugo_lab.hpc", "eugo_lab.jit", "eugo_lab.threadguard", "eugo_lab.optimizations", "IPython",
                "ipywidgets", "bokeh"),
    # checked Numba compilation: the trial on a worker, the verdicts read back from a trace
    "jit": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
            "eugo_lab.hpc", "eugo_lab.offload", "eugo_lab.threadguard", "eugo_lab.optimizations", "IPython",
            "ipywidgets", "bokeh"),
    # BLAS/OpenMP thread limits: workers import it at start-up
    "threadguard": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
                    "eugo_lab.hpc", "eugo_lab.offload", "eugo_lab.jit", "eugo_lab.optimizations", "IPython",
                    "ipywidgets", "bokeh"),
    # the --optimize report: data built from the JIT's verdicts, the guard's plan and the batching counters
    "optimizations": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server",
                      "eugo_lab.backends", "eugo_lab.hpc", "IPython", "ipywidgets", "bokeh"),
    # what compute this machine has: a leaf that the engines, offload and the summary all read
    "hardware": ("eugo_lab.offload", "eugo_lab.jit", "eugo_lab.threadguard", "eugo_lab.optimizations",
                 "eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
                 "eugo_lab.hpc", "eugo_lab.profile", "IPython", "ipywidgets", "bokeh"),
    # course workloads run inside tasks: they may mark hpc.phase spans, never reach the runtime's machinery or
    # the layers that read traces (a workload is what gets measured, not what measures)
    "workloads": ("eugo_lab.hpc.api", "eugo_lab.hpc.session", "eugo_lab.backends", "eugo_lab.tracing",
                  "eugo_lab.analysis", "eugo_lab.render", "eugo_lab.cellrun", "eugo_lab.magics", "eugo_lab.server",
                  "eugo_lab.exercises", "IPython", "ipywidgets", "bokeh"),
    # course exercises: graded on the trace and its analysis; the magic (cellrun) runs them and draws the verdict,
    # and the server extension reads the progress store (eugo_lab.progress), so neither may be imported from here;
    # exercises and checklists are siblings that share only that store
    "exercises": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
                  "eugo_lab.checklists", "IPython", "ipywidgets", "bokeh"),
    # checklists: items as data, measured through the public runtime API and the analyses; their widget draws
    # itself (ipywidgets only); the magic shows it and the server extension reads the ticks, never the reverse
    "checklists": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
                   "eugo_lab.exercises", "IPython", "bokeh"),
    # profiling: collect (in workers) -> model -> renderers, as in pyinstrument; the region API is the runtime's
    # (hpc.profiling), showing it in a cell is the cell runner's (cellrun.profile_display)
    "profile": ("eugo_lab.hpc", "eugo_lab.backends", "eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics",
                "eugo_lab.server", "eugo_lab.analysis", "IPython", "ipywidgets", "bokeh"),
}


# Every package and top-level module of eugo_lab, with its layer (ARCHITECTURE.md, from the bottom): a room
# imports only rooms of its own layer or below. A new package or module fails test_every_room_has_a_layer
# until it is placed here, so nothing joins the house unconstrained.
LAYERS = {
    # 1. leaves: plain values and helpers that import nothing of the package above settings
    "settings": 1, "units": 1, "jsonfile": 1, "discovery": 1, "glossary": 1, "lazy": 1, "renderable": 1,
    "status_files": 1,
    # 2. what the runtime and the engines share, and what this machine has
    "contract": 2, "hardware": 2,
    # 3. the engines, and the features that run inside workers (each importing only the contract and leaves)
    "backends": 3, "jit": 3, "threadguard": 3, "profile": 3, "offload": 3,
    # 4. recording and the pure analyses of a trace
    "tracing": 4, "analysis": 4,
    # a cell written with Dask's or Ray's own API, recorded from the engine's records into a Trace
    "native": 4,
    # 5. the runtime
    "hpc": 5,
    # 6. what is built on the runtime: the optimizations report, the courses' graders, the learner's store
    "optimizations": 6, "exercises": 6, "checklists": 6, "progress": 6, "workloads": 6, "guesses": 6,
    # 7. displays, the cell runner, the magics, the Jupyter server extension
    "render": 7, "cellrun": 7, "magics": 7, "server": 7,
}

# The contract's only allowed imports of this package (besides itself): leaf modules of plain values.
CONTRACT_MAY_IMPORT = ("eugo_lab.contract", "eugo_lab.settings", "eugo_lab.units")


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` that runs: the body of an ``if TYPE_CHECKING:`` is left out (its ``else`` is not).

    Type-only imports load nothing, so a renderer may name the report it draws without depending on the
    layer that builds it.
    """
    found: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(reversed(node.orelse))
            continue
        todo.extend(reversed(list(ast.iter_child_nodes(node))))  # reversed: popped in the source's order
    return found


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` statement in ``package`` imports from (relative imports resolved)."""
    if node.level:
        base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        return f"{base}.{node.module}" if node.module else base
    return node.module or ""


def import_statements(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of ``path`` that runs (type-only ones skipped), with a from-import's module resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    return [(node, _from_module(node, package) if isinstance(node, ast.ImportFrom) else "")
            for node in _runtime_nodes(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import statement in ``path`` (relative imports resolved; type-only skipped)."""
    found = []
    for node, module in import_statements(path):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        else:
            found.append((node.lineno, module))
            # `from eugo_lab import render` imports a forbidden package too
            found.extend((node.lineno, f"{module}.{a.name}") for a in node.names)
    return found


def _violations(layer: str) -> list[str]:
    bad = []
    for path in sorted((PKG / layer).rglob("*.py")):
        for line, module in imports_of(path):
            for banned in FORBIDDEN[layer]:
                if module == banned or module.startswith(banned + "."):
                    bad.append(f"{path.relative_to(PKG.parent)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_import_points_back_up_the_data_flow(layer):
    assert _violations(layer) == []


def test_the_progress_store_stands_below_everything_that_shares_it():
    # exercises, checklists and the server extension all read and write it, so it may import none of them
    found = {m for _, m in imports_of(PKG / "progress.py") if m.startswith("eugo_lab")}
    assert found <= {"eugo_lab.settings", "eugo_lab.settings.PROGRESS_DIR_ENV"}, found


def test_the_checker_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    # The rule must be able to fail: a module with a lazy import of the renderer is caught.
    fake = tmp_path / "eugo_lab" / "hpc"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text("def f():\n    from eugo_lab.render import text\n    from ..cellrun import runner\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "eugo_lab")
    assert _violations("hpc") == [
        "eugo_lab/hpc/bad.py:2 imports eugo_lab.render",
        "eugo_lab/hpc/bad.py:2 imports eugo_lab.render.text",
        "eugo_lab/hpc/bad.py:3 imports eugo_lab.cellrun",
        "eugo_lab/hpc/bad.py:3 imports eugo_lab.cellrun.runner",
    ]


def test_a_worker_process_loads_the_trace_row_but_not_the_recorder():
    # What a local-pool worker imports before its first task (its start-up cost).
    code = ("import sys\nfrom eugo_lab.backends.local_worker import main\nfrom eugo_lab.backends import _worker\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('eugo_lab'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(out.stdout.split())
    assert "eugo_lab.contract.row" in loaded
    assert not loaded & {"eugo_lab.tracing.recorder", "eugo_lab.tracing.trace", "eugo_lab.hpc.session",
                         "eugo_lab.analysis", "eugo_lab.render"}, loaded


def test_the_contract_imports_nothing_above_it():
    bad = []
    for path in sorted((PKG / "contract").rglob("*.py")):
        for line, module in imports_of(path):
            if module == "eugo_lab" or not module.startswith("eugo_lab."):
                continue
            if not any(module == ok or module.startswith(ok + ".") for ok in CONTRACT_MAY_IMPORT):
                bad.append(f"{path.relative_to(PKG.parent)}:{line} imports {module}")
    assert bad == []


def _room(module: str) -> str | None:
    """The package (or top-level module) of ``eugo_lab`` that ``module`` belongs to."""
    parts = module.split(".")
    if parts[0] != "eugo_lab" or len(parts) < 2 or parts[1] in ("__init__", "__version__"):
        return None
    return parts[1]


def package_graph() -> dict[str, dict[str, list[str]]]:
    """``{package: {package it imports: [where]}}`` over every module of eugo_lab, lazy imports included."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("").parts
        if rel == ("__init__",):
            continue  # the package's own entry point: its hooks name the packages that serve them
        src = rel[0]
        for line, module in imports_of(path):
            dst = _room(module)
            if dst is not None and dst != src:
                graph.setdefault(src, {}).setdefault(dst, []).append(f"{path.relative_to(PKG.parent)}:{line}")
    return graph


def circles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected sets of more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_circle_between_packages():
    graph = package_graph()
    found = circles(graph)
    detail = [f"{a} -> {b}: {graph[a][b][0]}" for c in found for a in c for b in c if b in graph.get(a, {})]
    assert found == [], detail


def test_the_circle_check_can_fail():
    graph = {"hpc": {"backends": ["x"]}, "backends": {"contract": ["y"], "hpc": ["z"]}, "contract": {}}
    assert circles(graph) == [["backends", "hpc"]]
    assert circles({"a": {"b": ["x"]}, "b": {}}) == []


def test_the_server_extension_loads_no_runtime():
    # The server reads status files through a leaf (eugo_lab.status_files): loading the runtime, its
    # futures and its recorder into the Jupyter server process would only cost memory and start-up.
    modules = [f"eugo_lab.server.{p.stem}" for p in sorted((PKG / "server").glob("*.py")) if p.stem != "__init__"]
    code = ("import sys, importlib\nimportlib.import_module('eugo_lab.server')\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('eugo_lab'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(out.stdout.split())
    assert "eugo_lab.server.handlers" in loaded and "eugo_lab.status_files" in loaded
    runtime = sorted(m for m in loaded if m.split(".")[:2] in (["eugo_lab", "hpc"], ["eugo_lab", "tracing"],
                                                                ["eugo_lab", "backends"]))
    assert runtime == []


def rooms() -> set[str]:
    """Every package (a folder with Python files) and top-level module of eugo_lab."""
    found = set()
    for p in PKG.iterdir():
        if p.is_file() and p.suffix == ".py" and p.name != "__init__.py":
            found.add(p.stem)
        elif p.is_dir() and any(p.rglob("*.py")):
            found.add(p.name)
    return found


def test_every_room_has_a_layer():
    assert rooms() == set(LAYERS), {"not placed": sorted(rooms() - set(LAYERS)),
                                    "gone": sorted(set(LAYERS) - rooms())}


def upward_imports(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """Each import of a room from a higher layer than its own, with where it is."""
    return [f"{a} (layer {LAYERS[a]}) imports {b} (layer {LAYERS[b]}): {where[0]}"
            for a, targets in sorted(graph.items()) for b, where in sorted(targets.items()) if LAYERS[b] > LAYERS[a]]


def test_imports_point_down_the_layers():
    assert upward_imports(package_graph()) == []


def test_the_layer_check_can_fail():
    assert upward_imports({"contract": {"hpc": ["eugo_lab/contract/x.py:3"]}, "hpc": {"contract": ["y"]}}) == [
        "contract (layer 2) imports hpc (layer 5): eugo_lab/contract/x.py:3"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(package: Path) -> dict[str, dict[str, list[str]]]:
    """``{module: {module of the same folder it imports: [where]}}`` for the modules directly in ``package``.

    A package's ``__init__`` counts as one of its modules; ``from pkg import mod`` is an import of ``mod``
    (not of ``pkg``'s ``__init__``) when ``mod`` is a module; type-only imports load nothing and do not count.
    """
    paths = sorted(package.glob("*.py"))
    names = {_module_name(p): p for p in paths}
    graph: dict[str, dict[str, list[str]]] = {}
    for path in paths:
        src = _module_name(path)
        for line, module in import_targets(path):
            if module in names and module != src:
                graph.setdefault(src, {}).setdefault(module, []).append(f"{path.relative_to(PKG.parent)}:{line}")
    return graph


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of eugo_lab (not a name defined in one)."""
    base = PKG.parent.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or base.is_dir()


def import_targets(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for what each import in ``path`` loads: for ``from pkg import x``, ``pkg.x`` when ``x``
    is a module, else ``pkg`` (type-only imports skipped, relative ones resolved)."""
    found = []
    for node, module in import_statements(path):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        else:
            for a in node.names:
                sub = f"{module}.{a.name}"
                found.append((node.lineno, sub if sub.startswith("eugo_lab.") and _is_module(sub) else module))
    return found


def _packages() -> list[Path]:
    return sorted({p.parent for p in PKG.rglob("*.py")})


@pytest.mark.parametrize("package", _packages(), ids=lambda p: str(p.relative_to(PKG.parent)))
def test_no_circle_between_modules_of_one_package(package):
    # A circle inside a package is as tangled as one between packages: neither module can be read, tested
    # or moved without the other. Break it with a hook the lower module reads (see hpc.blocking.active_runtime).
    graph = module_graph(package)
    found = circles(graph)
    detail = [f"{a} -> {b}: {graph[a][b][0]}" for c in found for a in c for b in c if b in graph.get(a, {})]
    assert found == [], detail


def test_the_module_circle_check_sees_lazy_imports_and_skips_type_only_ones(tmp_path, monkeypatch):
    fake = tmp_path / "eugo_lab" / "hpc"
    fake.mkdir(parents=True)
    (fake / "a.py").write_text("from eugo_lab.hpc import b\n")
    (fake / "b.py").write_text("def f():\n    from eugo_lab.hpc.a import x\n")
    (fake / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from eugo_lab.hpc import a\n")
    (fake / "d.py").write_text("from eugo_lab.hpc import c\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "eugo_lab")
    assert circles(module_graph(fake)) == [["eugo_lab.hpc.a", "eugo_lab.hpc.b"]]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# Private names reached across packages that stay, each with why (empty: none today). A private name is free
# to change inside its package; read from another one it is an interface nobody declared.
PRIVATE_ALLOWED: dict[str, str] = {}


def private_reaches(path: Path) -> list[str]:
    """Private modules or names of another room that ``path`` imports, or reads off a module it imported.

    ``from eugo_lab.backends import _worker``, ``from eugo_lab.hpc.session import _current`` and
    ``session._current`` after ``from eugo_lab.hpc import session`` all count; within one room they are free.
    """
    rel = path.relative_to(PKG).with_suffix("").parts
    src = rel[0]
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    where = path.relative_to(PKG.parent)
    bound: dict[str, str] = {}  # a local name -> what of another room it is bound to
    found = []
    nodes = _runtime_nodes(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] != "eugo_lab" or len(parts) < 2 or parts[1] == src:
                    continue
                if any(_private(x) for x in parts):
                    found.append(f"{where}:{node.lineno} imports {a.name}")
                if a.asname:
                    bound[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, package)
            parts = module.split(".")
            if parts[0] != "eugo_lab":
                continue
            for a in node.names:
                if (parts[1] if len(parts) > 1 else a.name) == src:
                    continue
                if any(_private(x) for x in parts) or _private(a.name):
                    found.append(f"{where}:{node.lineno} imports {module}.{a.name}")
                bound[a.asname or a.name] = f"{module}.{a.name}"
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound \
                and _private(node.attr):
            found.append(f"{where}:{node.lineno} reads {bound[node.value.id]}.{node.attr}")
    return found


def test_no_private_name_is_reached_across_packages():
    found = [f for p in sorted(PKG.rglob("*.py")) if p.relative_to(PKG).parts != ("__init__.py",)
             for f in private_reaches(p)]
    assert [f for f in found if f.split(" ", 1)[1] not in PRIVATE_ALLOWED] == []


def test_the_private_name_check_can_fail(tmp_path, monkeypatch):
    fake = tmp_path / "eugo_lab" / "cellrun"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text("from eugo_lab.backends import _worker\nfrom eugo_lab.hpc import session\n"
                                 "from eugo_lab.cellrun import _mine\n\ndef f():\n    return session._current\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "eugo_lab")
    assert private_reaches(fake / "bad.py") == ["eugo_lab/cellrun/bad.py:1 imports eugo_lab.backends._worker",
                                                "eugo_lab/cellrun/bad.py:6 reads eugo_lab.hpc.session._current"]


# What the runtime uses of each feature it reaches by name (eugo_lab.contract.hooks): a rename in the feature
# fails here, not in a learner's first call.
PROVIDED = {
    "jit": ("Optimized", "code_key"),
    "auto_jit": ("AutoJit", "Packed"),
    "profile": ("DEFAULT_INTERVAL", "PYINSTRUMENT_INTERVAL", "SAMPLERS", "Profiled", "Profile"),
    "profile_display": ("mimebundle",),
    "optimizations": ("OPTIMIZATIONS",),
}


def test_every_feature_the_runtime_reaches_by_name_provides_what_it_uses():
    from eugo_lab.contract import hooks

    assert set(PROVIDED) == set(hooks.PROVIDERS)
    missing = {kind: [n for n in names if not hasattr(hooks.provider(kind), n)] for kind, names in PROVIDED.items()}
    assert {k: v for k, v in missing.items() if v} == {}
    with pytest.raises(LookupError, match="known: auto_jit, jit, optimizations, profile, profile_display"):
        hooks.provider("gpu")
    hooks.preload_worker_modules()
    assert set(hooks.WORKER_PRELOADS) <= set(sys.modules)


def test_the_tests_mirror_the_house():
    # A test lives in the folder of the room it tests (tests/analysis/ for eugo_lab/analysis/...), so the next
    # engineer finds a room's tests where the room is; only the house-wide checks stay at the top.
    tests = Path(__file__).resolve().parent
    rooms = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("data", "__pycache__")}
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms <= packages | {"courses"}, sorted(rooms - packages - {"courses"})
    house_wide = ["test_benchmarks.py", "test_contributing.py", "test_layering.py"]
    assert sorted(p.name for p in tests.glob("test_*.py")) == house_wide
