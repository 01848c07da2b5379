"""Each kernel's runtime status: published by the kernel, served by ``GET /eugo/api/status``."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
from jupyter_fixtures import Lab
from tasks import nap

from eugo_lab import hpc, settings
from eugo_lab.hpc import session, status


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_publisher_writes_on_start_and_stop_and_follows_the_counters(tmp_path, monkeypatch):
    monkeypatch.setattr(status, "PUBLISH_INTERVAL", 0.05)
    hpc.init(workers=2)
    pub = status.Publisher(str(tmp_path), "k1", lambda: session.current(start=False))
    path = tmp_path / "k1.json"
    pub.notify()
    doc = _read(path)
    assert doc["state"] == "running" and doc["backend"] == "local" and doc["workers"] == 2
    assert doc["schema"] == status.STATUS_SCHEMA and doc["submitted"] == 0 and doc["tracing"] is False
    assert not pub.publish(force=False)  # nothing changed: no write

    futures = [nap.remote(1.0) for _ in range(4)]  # 2 s of work: busy while the file is read
    deadline = time.monotonic() + 10
    while _read(path)["submitted"] != 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    busy = _read(path)
    assert busy["submitted"] == 4 and busy["running"] + busy["queued"] >= 1
    hpc.get(futures)
    deadline = time.monotonic() + 10
    while _read(path)["running"] + _read(path)["queued"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _read(path)["running"] + _read(path)["queued"] == 0

    hpc.shutdown()
    pub.notify()
    assert _read(path)["state"] == "none" and "backend" not in _read(path)
    assert list(tmp_path.iterdir()) == [path]  # written atomically: no temporary file left


def test_read_status_takes_kernel_ids_only(tmp_path):
    (tmp_path / "ok-1.json").write_text('{"state": "none"}')
    (tmp_path / "broken.json").write_text("{")
    assert status.read_status(str(tmp_path), "ok-1") == {"state": "none"}
    assert status.read_status(str(tmp_path), "broken") is None
    assert status.read_status(str(tmp_path), "missing") is None
    assert status.read_status(str(tmp_path), "../ok-1") is None  # never a path


def test_outside_a_kernel_nothing_is_published(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.STATUS_DIR_ENV, str(tmp_path))
    assert status.kernel_id() is None
    hpc.init(workers=1)
    hpc.shutdown()
    assert list(tmp_path.iterdir()) == []


def _api(lab: Lab, method: str, path: str) -> dict | list:
    req = urllib.request.Request(lab.url + path, method=method, data=b"{}" if method == "POST" else None)
    req.add_header("Authorization", f"token {lab.token}")
    with urllib.request.urlopen(req, timeout=30) as r:
        body = r.read()
    return json.loads(body) if body else {}


def _eugo_of(lab: Lab, kid: str) -> dict | None:
    kernels = {k["id"]: k for k in _api(lab, "GET", "eugo/api/status")["kernels"]}
    return kernels[kid]["eugo"]


@pytest.mark.slow
def test_status_endpoint_reports_each_kernels_runtime(tmp_path):
    from jupyter_client import BlockingKernelClient

    root = tmp_path / "root"
    root.mkdir()
    lab = Lab(root, tmp_path)
    clients = []
    try:
        lab.wait_ready()
        used, unused = _api(lab, "POST", "api/kernels")["id"], _api(lab, "POST", "api/kernels")["id"]
        client = BlockingKernelClient(connection_file=str(tmp_path / "runtime" / f"kernel-{used}.json"))
        client.load_connection_file()
        client.start_channels()
        clients.append(client)
        # A kernel still starting on a busy machine can miss its first heartbeats, and the client then takes it
        # for dead ("Kernel died before replying to kernel_info"): ask again while the server still runs it.
        for attempt in range(3):
            try:
                client.wait_for_ready(timeout=60)
                break
            except RuntimeError:
                if attempt == 2 or used not in {k["id"] for k in _api(lab, "GET", "api/kernels")}:
                    raise

        def run(code: str) -> None:
            reply = client.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
            assert reply["content"]["status"] == "ok", reply["content"]

        run("import time\nfrom eugo_lab import hpc\nhpc.init(workers=2)\n"
            "nap = hpc.remote(time.sleep)\nhpc.get([nap.remote(0.01) for _ in range(3)])")
        doc = _eugo_of(lab, used)
        assert doc["state"] == "running" and doc["backend"] == "local" and doc["workers"] == 2
        # the kernel is idle, its tasks are not: 5 tasks of 60 s on 2 workers, long enough that none ends
        # before the status shows them, however busy the machine (the shutdown below cancels them)
        run("futures = [nap.remote(60) for _ in range(5)]")
        deadline = time.monotonic() + 50
        while (_eugo_of(lab, used) or {}).get("running") != 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        busy = _eugo_of(lab, used)
        assert busy["submitted"] == 8 and busy["running"] == 2 and busy["queued"] == 3, busy
        run("hpc.shutdown()")
        assert _eugo_of(lab, used)["state"] == "none"
        assert _eugo_of(lab, unused) is None  # a kernel that never used eugo_lab
        for kid in (used, unused):
            _api(lab, "DELETE", f"api/kernels/{kid}")
    finally:
        for c in clients:
            c.stop_channels()
        lab.stop()


def test_a_server_removes_the_status_dirs_of_servers_that_died(tmp_path):
    import os
    import stat

    from eugo_lab.server.handlers import _make_status_dir

    dead = tmp_path / "eugo-status-4194999-abc"  # above Linux's largest pid: no such process
    alive = tmp_path / f"eugo-status-{os.getpid()}-def"
    dead.mkdir()
    alive.mkdir()
    (dead / "k.json").write_text("{}")
    path = Path(_make_status_dir(str(tmp_path)))
    assert not dead.exists() and alive.exists()
    assert path.name.startswith(f"eugo-status-{os.getpid()}-") and stat.S_IMODE(path.stat().st_mode) == 0o700
