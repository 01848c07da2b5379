"""Binder's image installs what the courses use: the lab, and Numba for the optimization and GPU courses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (the project supports 3.10, where it is missing)

ROOT = Path(__file__).resolve().parents[2]


def _installed_extras() -> set[str]:
    text = (ROOT / "binder" / "postBuild").read_text()
    found = re.findall(r'pip install[^\n]*"\.\[([a-z,\-]+)\]"', text)
    assert len(found) == 1, f"binder/postBuild should install the package once with its extras: {found}"
    return set(found[0].split(","))


def test_binder_installs_the_lab_and_numba_extras_that_exist():
    extras = _installed_extras()
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras <= set(declared), f"unknown extras in binder/postBuild: {extras - set(declared)}"
    assert {"lab", "optimize"} <= extras
    assert any(dep.startswith("numba") for dep in declared["optimize"])  # --optimize and the CUDA simulator


# -- the Binder install, for real -------------------------------------------------------------------

START_CONFIG = ROOT / "binder" / "jupyter-config" / "jupyter_server_config.json"
# Runs a notebook with nbclient in the venv; a first cell (in memory only) checks that the kernel is
# the venv's Python with the venv's eugo_lab, not this worktree's.
RUN_NOTEBOOK = """
import sys
from pathlib import Path

import nbclient
import nbformat

path = Path(sys.argv[1])
nb = nbformat.read(path, as_version=4)
check = f"import sys, eugo_lab\\nassert sys.prefix == {sys.prefix!r}, sys.prefix\\n" \\
        f"assert eugo_lab.__file__.startswith({sys.prefix!r}), eugo_lab.__file__"
nb.cells.insert(0, nbformat.v4.new_code_cell(check))
client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                 resources={"metadata": {"path": str(path.parent)}})
client.execute()
print("ran", len(nb.cells), "cells of", path)
"""


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)  # `jupyter ... list` colours its words


def _http(url: str, token: str) -> tuple[int, dict[str, str], bytes]:
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_binder_steps_in_a_fresh_venv_serve_the_courses_and_run_the_index(tmp_path):
    """postBuild in a new venv (as repo2docker runs it), then binder/start around JupyterLab."""
    import json
    import os
    import secrets
    import subprocess
    import sys
    import time

    from _clusters import free_port
    from jupyter_fixtures import kill_tree

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(venv), EUGO_LAB_BINDER_PIP_CACHE="1",
               HOME=str(tmp_path / "home"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
               PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")))
    build = subprocess.run(["bash", str(ROOT / "binder" / "postBuild")], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=800)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]

    # the venv's own eugo_lab, not this worktree's (nothing on PYTHONPATH)
    where = subprocess.run([str(bin_dir / "python"), "-c", "import eugo_lab; print(eugo_lab.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)), where
    listed = _plain(subprocess.run([str(bin_dir / "jupyter"), "server", "extension", "list"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout)
    assert re.search(r"^ +eugo_lab\.server enabled", listed, re.M), listed
    assert re.search(r"^ +eugo_lab\.server .*OK", listed, re.M), listed

    start_url = json.loads(START_CONFIG.read_text())["LabApp"]["default_url"]
    assert start_url == "/lab/tree/courses/index.ipynb"
    token, port = secrets.token_hex(16), free_port()
    log = open(tmp_path / "lab.log", "wb")
    lab = subprocess.Popen(["bash", str(ROOT / "binder" / "start"), str(bin_dir / "jupyter"), "lab", "--no-browser",
                            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                            "--ServerApp.allow_root=True", f"--IdentityProvider.token={token}",
                            f"--ServerApp.root_dir={ROOT}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert lab.poll() is None, (tmp_path / "lab.log").read_text()[-3000:]
            try:
                code, headers, _ = _http(f"{base}/", token)
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "lab.log").read_text()[-3000:]
                time.sleep(0.5)
        assert code == 302 and headers["Location"].split("?")[0] == start_url, (code, headers)

        code, _, body = _http(f"{base}/eugo/api/courses", token)
        assert code == 200, body[:500]
        doc = json.loads(body)
        assert [c["id"] for c in doc["courses"]][:2] == ["01-distributed-python", "02-gpu-acceleration"]
        assert doc["courses"][0]["lessons"][0]["path"] == "courses/01-distributed-python/" \
            "01-remote-functions-and-futures.ipynb"
        assert doc["vocabulary"]["path"] == "courses/vocabulary.ipynb"
        code, _, _ = _http(f"{base}/eugo/api/courses", "wrong")
        assert code == 403
    finally:
        kill_tree(lab)
        log.close()

    index = ROOT / start_url.removeprefix("/lab/tree/")
    assert index.is_file(), f"Binder opens {index}, which does not exist"
    script = tmp_path / "run_index.py"
    script.write_text(RUN_NOTEBOOK)
    run = subprocess.run([str(bin_dir / "python"), str(script), str(index)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
