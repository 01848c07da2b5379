"""The driver's side of the local pool's worker template (``local_zygote``), and how workers start with it.

Kept apart from ``local_process`` and light to import: ``hpc.init()`` imports this module
first and starts the template, so that it boots while the rest of the runtime is imported.
It imports no ``typing``, ``socket``, ``subprocess`` or ``eugo_lab.hpc``: what it imports delays
that start (``subprocess`` with ``signal`` and ``selectors`` alone is ~7 ms, a third of the template's boot).
"""

from __future__ import annotations

import _socket
import os
import select
import sys
import time

# local_zygote's wire format (see its docstring)
from eugo_lab.backends.local_wire import TEMPLATE_FDS
from eugo_lab.backends.local_wire import TEMPLATE_MSG as _MSG

_TEMPLATE_CMD = "from eugo_lab.backends.local_zygote import main; main()"
_STARTUP_PREFIXES = ("PYTHON", "LD_", "MALLOC_", "GLIBC_", "LC_", "LANG")
# How long a fork request may wait for its answer: the template's first answer waits for it to
# boot (~20 ms of CPU, far more on a loaded machine); one stuck longer is replaced by spawning.
TEMPLATE_ANSWER_SECONDS = 20.0
# EUGO_LOCAL_TEMPLATE=0 spawns every worker afresh (diagnosis, and timing one way against the other).
USE_TEMPLATE = os.environ.get("EUGO_LOCAL_TEMPLATE", "1") != "0"
# How long a dead forked worker's exit status may take to arrive after its result pipe closed.
EXIT_REPORT_SECONDS = 5.0


def worker_env(threads_per_worker: int, extra_env: dict[str, str], explicit: bool = False) -> dict[str, str]:
    """The environment a worker starts with: the driver's, its sys.path, and thread limits.

    ``explicit``: the user passed ``threads_per_worker`` themselves (it then wins over the
    thread variables of the driver's environment).
    """
    from eugo_lab.threadguard import variables as thread_vars  # not limits: its dataclasses would delay the start

    env = dict(os.environ)
    # Workers must import what the driver imports: give them the driver's sys.path.
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Two processes each running a BLAS with one thread per core oversubscribe the
    # machine (we measured small BLAS calls 3-11x slower): split the cores instead,
    # unless the user chose a value (a thread variable set here, or threads_per_worker=).
    user = thread_vars.user_thread_vars()
    if user and not explicit:
        env[thread_vars.USER_ENV] = ",".join(user)
    else:
        env.update({v: str(threads_per_worker) for v in thread_vars.THREAD_VARS})
        env[thread_vars.LIMIT_ENV] = str(threads_per_worker)
    env.update(extra_env)
    return env


class Template:
    """The driver's side of the template process (``local_zygote``) that forks workers.

    Only one thread at a time uses it: the thread that pre-starts it, then the pool's I/O thread.
    Its environment is fixed when it starts: ``fits`` says whether a worker may fork from it.
    """

    def __init__(self, env: dict[str, str]):
        self.env = env
        self._base = _startup_env(env)
        self.exits: dict[int, int] = {}  # exit codes reported and not yet asked for
        self.forked: set[int] = set()  # pids forked whose exit was not reported yet
        self.alive = True
        self.sock, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            self.proc = _Child.spawn([sys.executable, "-c", _TEMPLATE_CMD, str(theirs.fileno()), str(os.getpid())],
                                     env, theirs.fileno())
        except BaseException:
            self.sock.close()
            raise
        finally:
            theirs.close()
        self.sock.setblocking(False)

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a worker that should start with ``env`` may be forked from this template."""
        return self.alive and _startup_env(env) == self._base

    @property
    def pid(self) -> int:
        """The template's process id."""
        return self.proc.pid

    def fileno(self) -> int:
        """The socket the I/O thread watches (exit reports, and EOF when the template dies)."""
        return self.sock.fileno()

    def request(self, index: int, fds: tuple[int, int, int, int], store_dir: str, env: dict[str, str]) -> bool:
        """Ask for worker ``index`` on these pipe ends; False if the template is gone."""
        if not self.alive:
            return False
        import pickle  # here: imported by then, and not on the way to the template's start

        msg = pickle.dumps((index, store_dir, env, os.getcwd()))
        try:
            self.sock.sendmsg([msg], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, TEMPLATE_FDS.pack(*fds))])
            return True
        except OSError:  # the template died (EPIPE), or its socket is full of unread requests
            self._died()
            return False

    def answer(self, timeout: float = TEMPLATE_ANSWER_SECONDS) -> int | None:
        """The pid of the next worker forked, in request order; None if the template failed or died."""
        deadline = time.monotonic() + timeout
        while self.alive:
            msg = self._recv(deadline - time.monotonic())
            if msg is None:
                if self.alive:  # no answer in time: a template that hangs is no template
                    self.kill()
                return None
            kind, a, b = msg
            if kind == b"F":
                if b > 0:
                    self.forked.add(b)
                    return b
                return None  # fork failed in the template
        return None

    def poll(self) -> None:
        """Take every report that arrived (the I/O thread calls this when the socket is readable)."""
        while self.alive and self._recv(0) is not None:
            pass

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        """The exit code of forked worker ``pid``; None if the template died before reporting it.

        ``timeout`` None: give up (None) after EXIT_REPORT_SECONDS rather than raise.
        """
        deadline = time.monotonic() + (EXIT_REPORT_SECONDS if timeout is None else timeout)
        while pid not in self.exits:
            if not self.alive or pid not in self.forked:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                if timeout is None:
                    return None
                import subprocess  # imported by then (the pool's own modules import it)

                raise subprocess.TimeoutExpired(f"worker {pid}", timeout)
            self._recv(left)
        return self.exits.pop(pid)

    def _recv(self, timeout: float) -> tuple[bytes, int, int] | None:
        """One message (exit reports are filed in ``exits``), or None after ``timeout`` or at EOF."""
        try:
            data = self.sock.recv(_MSG.size)
        except BlockingIOError:
            if timeout <= 0 or not select.select([self.sock], [], [], timeout)[0]:
                return None
            try:
                data = self.sock.recv(_MSG.size)
            except BlockingIOError:  # pragma: no cover - readable, then not
                return None
            except OSError:
                data = b""
        except OSError:
            data = b""
        if len(data) != _MSG.size:
            self._died()
            return None
        kind, a, b = _MSG.unpack(data)
        if kind == b"X":
            self.forked.discard(a)
            self.exits[a] = b
        return kind, a, b

    def _died(self) -> None:
        # Its workers live on (re-parented), but their exit statuses can no longer be read.
        self.alive = False

    def kill(self) -> None:
        """Stop the template now (its workers keep running)."""
        self._died()
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self, timeout: float = 3.0) -> None:
        """Close the socket (the template's lifeline) and wait for the template to exit."""
        self._died()
        self.sock.close()
        if self.proc.wait(timeout) is None:
            self.proc.kill()
            self.proc.wait(None)


_SIGKILL = 9  # signal.SIGKILL, without importing signal (its enums cost ~3 ms) before the template starts


class _Child:
    """The template process, started with ``os.posix_spawn``: what ``Template`` needs of a ``Popen``.

    Not ``subprocess.Popen``: importing ``subprocess`` would hold the template's start back by
    ~4 ms. ``posix_spawn`` passes on every inheritable descriptor, not only ``keep_fd``: the
    template closes all others first thing (``local_zygote.main``), as ``close_fds`` would.
    """

    __slots__ = ("pid", "returncode")

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    @classmethod
    def spawn(cls, argv: list[str], env: dict[str, str], keep_fd: int) -> _Child | _Popened:
        """Start ``argv`` in its own session, stdin on /dev/null, ``keep_fd`` inherited."""
        os.set_inheritable(keep_fd, True)
        stdin = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
        try:
            # setsigmask=(): nothing blocked in the template, whatever this thread blocks (its SIGCHLD
            # and SIGTERM handlers must run); subprocess would pass the caller's mask on.
            return cls(os.posix_spawn(argv[0], argv, env, file_actions=stdin, setsid=True, setsigmask=()))
        except NotImplementedError:  # a libc without POSIX_SPAWN_SETSID: the portable way, a few ms later
            return _Popened(argv, env, keep_fd)

    def wait(self, timeout: float | None) -> int | None:
        """Its exit code (negative: the signal that killed it); None if it still runs after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): as subprocess, exit 0
                self.returncode = 0
                break
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                time.sleep(min(delay, left))  # the template exits within ms of its socket closing
                delay = min(2 * delay, 0.05)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL it, unless it was already reaped."""
        if self.returncode is None:
            try:
                os.kill(self.pid, _SIGKILL)
            except ProcessLookupError:
                pass


class _Popened:
    """``_Child``'s interface over ``subprocess.Popen``, where ``posix_spawn`` cannot start a session."""

    __slots__ = ("proc",)

    def __init__(self, argv: list[str], env: dict[str, str], keep_fd: int):
        import subprocess

        self.proc = subprocess.Popen(argv, pass_fds=(keep_fd,), start_new_session=True, stdin=subprocess.DEVNULL,
                                     env=env)

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    def wait(self, timeout: float | None) -> int | None:
        """As :meth:`_Child.wait`."""
        import subprocess

        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL it, unless it was already reaped."""
        self.proc.kill()


class Forked:
    """A worker process forked by the template: what ``Worker.proc`` offers, by way of the template."""

    __slots__ = ("pid", "template")

    def __init__(self, template: Template, pid: int):
        self.pid = pid
        self.template = template

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code the template reported (None if it died first); subprocess.TimeoutExpired."""
        return self.template.wait_exit(self.pid, timeout)

    def kill(self) -> None:
        """SIGKILL the worker, unless it was already reported dead (its pid may name another process now)."""
        if self.pid in self.template.forked or not self.template.alive:
            try:
                os.kill(self.pid, _SIGKILL)
            except ProcessLookupError:
                pass


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    # The variables read only when a process starts (the interpreter's, the dynamic linker's,
    # glibc malloc's, the locale Python takes its encodings from): a forked worker keeps the
    # template's, so they must be what it should get.
    # The rest is set in the forked worker; tools do change os.environ while a pool runs.
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_PREFIXES)}


# A template started by hpc.init() before it imports the rest of the runtime (prestart_template),
# for the pool that init() then starts to adopt (take_prestarted).
_prestarted: Template | None = None


def prestart_template() -> None:
    """Start the worker template now, so its boot (~20 ms of CPU) overlaps the driver's imports.

    Only on the main thread: the template dies with the thread that started it (PR_SET_PDEATHSIG
    follows the thread), and the main thread lives as long as the driver.
    """
    global _prestarted
    if _prestarted is not None or not USE_TEMPLATE:
        return
    import _thread  # not threading: its import (functools, collections) would delay the start by ~2 ms

    if _thread.get_native_id() != os.getpid():  # on Linux only the main thread's id is the process id
        return
    try:
        _prestarted = Template(worker_env(1, {}))
    except OSError:
        pass


def take_prestarted() -> Template | None:
    """The pre-started template, now the caller's (to close), or None."""
    global _prestarted
    t, _prestarted = _prestarted, None
    return t


def discard_prestarted() -> None:
    """Close the pre-started template if no pool took it (its hpc.init() failed)."""
    t = take_prestarted()
    if t is not None:
        t.close()
