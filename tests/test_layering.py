"""The package's imports point down: contract <- engines <- runtime <- tracing/analysis <- displays <- magic.

The rules, each checked against the real import graph (every import in a module counts, also
those inside functions: a lazy import is still a dependency):

- the contract (``eugo_lab.contract``: what runtime and engines share) imports nothing of the
  package but itself, ``settings`` and ``units``;
- engines (``backends``) never import the runtime (``hpc``);
- analyses never import the runtime or the displays;
- the runtime never imports displays, the cell runner, exercises or checklists;
- no circle between packages (``test_no_circle_between_packages``).

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
    # the runtime: never the displays, the cell runner, the courses' graders or the analyses of its traces
    "hpc": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.analysis", "eugo_lab.server",
            "eugo_lab.exercises", "eugo_lab.checklists"),
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


# The contract's only allowed imports of this package (besides itself): leaf modules of plain values.
CONTRACT_MAY_IMPORT = ("eugo_lab.contract", "eugo_lab.settings", "eugo_lab.units")


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import statement in ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
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
