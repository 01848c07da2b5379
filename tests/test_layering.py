"""The package's data flow points one way: hpc -> backends -> worker shim -> tracing -> analysis -> render -> magic.

Every import in a module counts, also those inside functions (a lazy import is still a
dependency). A rule broken here is a seam pointing the wrong way: move the code to the
layer it belongs to rather than adding an exception.
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
    "hpc": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.analysis", "eugo_lab.server"),
    "backends": ("eugo_lab.tracing.recorder", "eugo_lab.tracing.trace", "eugo_lab.analysis", "eugo_lab.render",
                 "eugo_lab.cellrun", "eugo_lab.magics", "eugo_lab.server"),
    "tracing": ("eugo_lab.hpc", "eugo_lab.backends", "eugo_lab.analysis", "eugo_lab.render", "eugo_lab.cellrun",
                "eugo_lab.magics", "eugo_lab.server"),
    "analysis": ("eugo_lab.render", "eugo_lab.cellrun", "eugo_lab.magics", "eugo_lab.server", "IPython",
                 "ipywidgets", "bokeh"),
    "render": ("eugo_lab.cellrun", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends"),
    "cellrun": ("eugo_lab.magics", "eugo_lab.server"),
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
    # and the server extension reads their progress store, so neither may be imported from here
    "exercises": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
                  "IPython", "ipywidgets", "bokeh"),
    # checklists: items as data, measured through the public runtime API and the analyses; their widget draws
    # itself (ipywidgets only); the magic shows it and the server extension reads the ticks, never the reverse
    "checklists": ("eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics", "eugo_lab.server", "eugo_lab.backends",
                   "IPython", "bokeh"),
    # profiling: collect (in workers) -> model -> renderers, as in pyinstrument; the region API is the runtime's
    # (hpc.profiling), showing it in a cell is the cell runner's (cellrun.profile_display)
    "profile": ("eugo_lab.hpc", "eugo_lab.backends", "eugo_lab.cellrun", "eugo_lab.render", "eugo_lab.magics",
                "eugo_lab.server", "eugo_lab.analysis", "IPython", "ipywidgets", "bokeh"),
}


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
    assert "eugo_lab.tracing.row" in loaded
    assert not loaded & {"eugo_lab.tracing.recorder", "eugo_lab.tracing.trace", "eugo_lab.hpc.session",
                         "eugo_lab.analysis", "eugo_lab.render"}, loaded
