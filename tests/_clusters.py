"""Real clusters for the tests, started from the command line as an operator would, on loopback.

Every process started here is ended here, by pid (never by name: other test runs on the
same machine may have their own clusters).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from _processes import signal_all

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of cluster processes: they import this checkout's eugo_lab and the tests.

    The tests' modules sit in one folder per room (tests/backends/, tests/hpc/...): a task defined in
    one is sent by reference, so every room is on the workers' path.
    """
    env = dict(os.environ)
    rooms = sorted(str(p) for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    paths = [str(REPO), str(TESTS), *rooms] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


def _stop(procs: list[subprocess.Popen], timeout: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class DaskCLICluster:
    """``dask scheduler`` plus ``dask worker`` processes on 127.0.0.1."""

    def __init__(self) -> None:
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []

    def start_scheduler(self) -> None:
        """Start the scheduler; it gives a task up after one worker death (the eugo runtime retries)."""
        self.scheduler = subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"],
            env=worker_env(DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
        )

    def start_worker(self) -> subprocess.Popen:
        """Start one single-threaded worker without a nanny (a SIGKILL ends it for good)."""
        p = subprocess.Popen(
            [str(BIN / "dask"), "worker", self.address, "--host", "127.0.0.1", "--nthreads", "1", "--nworkers", "1",
             "--no-nanny", "--no-dashboard", "--death-timeout", "30"],
            env=worker_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
        )
        self.workers.append(p)
        return p

    def wait_for_workers(self, n: int, timeout: float = 60.0) -> None:
        """Block until ``n`` workers are registered with the scheduler."""
        import distributed

        deadline = time.monotonic() + timeout
        with distributed.Client(self.address, timeout=timeout, set_as_default=False) as client:
            while len(client.scheduler_info(n_workers=-1)["workers"]) != n:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} Dask workers did not register within {timeout} s")
                time.sleep(0.1)

    def stop(self) -> None:
        """End every worker, then the scheduler."""
        _stop(self.workers)
        if self.scheduler is not None:
            _stop([self.scheduler])


@contextlib.contextmanager
def dask_cli_cluster(n_workers: int = 2) -> Iterator[DaskCLICluster]:
    """A scheduler and ``n_workers`` workers, torn down afterwards."""
    c = DaskCLICluster()
    try:
        c.start_scheduler()
        for _ in range(n_workers):
            c.start_worker()
        c.wait_for_workers(n_workers)
        yield c
    finally:
        c.stop()


@contextlib.contextmanager
def ray_cli_cluster(num_cpus: int = 2) -> Iterator[str]:
    """``ray start --head``: a Ray cluster in its own processes (not children of the test run).

    Yields the GCS address. Ray daemonizes, so its processes are found afterwards by the
    unique temporary directory in their command lines and ended by pid, with their
    descendants (the worker processes).
    """
    temp = tempfile.mkdtemp(prefix="eray", dir="/tmp")  # Ray needs a short path for its sockets
    port = free_port()
    env = worker_env(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token")
    old_mode = os.environ.get("RAY_AUTH_MODE")
    # The driver authenticates with the token `ray start` created. Ray reads the mode when
    # it is imported (and this session may have imported it already): refresh it.
    os.environ["RAY_AUTH_MODE"] = "token"
    from ray._private.authentication.authentication_token_setup import generate_and_save_token
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    # `ray start` does not create the token it then insists on (ray.init does): a fresh
    # machine on which no ray.init() ran yet has none, so create it the way ray.init would.
    loader = AuthenticationTokenLoader.instance()
    if not loader.has_token(ignore_auth_mode=True):
        generate_and_save_token()
        loader.reset_cache()
    address = None
    try:
        out = subprocess.run(
            [str(BIN / "ray"), "start", "--head", f"--port={port}", f"--num-cpus={num_cpus}", "--num-gpus=0",
             "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats",
             f"--ray-client-server-port={free_port()}"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=180,
        )
        if out.returncode != 0:
            raise RuntimeError(f"ray start failed:\n{out.stdout}\n{out.stderr}")
        m = re.search(r"--address='([^']+)'", out.stdout + out.stderr)
        address = m.group(1) if m else f"127.0.0.1:{port}"
        yield address
    finally:
        # Ray's daemons name the temp dir; its client server names the GCS address instead.
        marks = [temp] + ([f"--address={address} "] if address else [])
        procs = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                line = " ".join(p.info["cmdline"] or []) + " "
                if p.pid != os.getpid() and any(m in line for m in marks):
                    procs.append(p)
                    procs.extend(p.children(recursive=True))
            except psutil.Error:
                pass
        signal_all(procs)
        psutil.wait_procs(procs, timeout=10)
        shutil.rmtree(temp, ignore_errors=True)
        if old_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = old_mode
        Config.initialize("")
