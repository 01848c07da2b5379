"""Starting the local pool's workers: forked by a template process when one fits, else spawned afresh.

Workers are forked from a pre-imported template process (``local_zygote``, driven through
``local_template``): ~1 ms a worker instead of ~20 ms of CPU for a fresh interpreter, at
start-up and after a crash. A template that dies is replaced on the next worker start, at most
:data:`MAX_TEMPLATE_STARTS` times per pool; past that, or when one cannot start, workers are
spawned as fresh interpreters (``local_process.spawn_worker``) and the pool stays usable.

:class:`Spawner` runs on the pool's I/O thread (workers die with that thread, never earlier)
and registers each worker's result pipe, and the template's socket, with the pool's selector.
"""

from __future__ import annotations

import selectors

from eugo_lab.backends import local_process, local_template
from eugo_lab.backends.local_gpus import Devices
from eugo_lab.backends.local_process import Worker

MAX_TEMPLATE_STARTS = 3
# EUGO_LOCAL_TEMPLATE=0 spawns every worker afresh; tests turn it off here to compare both ways.
USE_TEMPLATE = local_template.USE_TEMPLATE
# The spawner the template stands in for: a test that replaces it (to slow or break a worker) gets spawned workers.
_SPAWN_WORKER = local_process.spawn_worker

#: A start asked of the template and not yet answered: (worker indices, their environments, what it forked so far).
Asked = tuple[list[int], list[dict[str, str]], list[Worker | None]]


class Spawner:
    """Starts workers ``0 .. n-1`` of one pool with its environment, through the template it keeps.

    ``gpu_envs[i]``: the variables that give GPU worker ``i`` its device (``None``: no GPU workers).
    """

    def __init__(self, sel: selectors.BaseSelector, devices: Devices, n_gpu: int,
                 gpu_envs: list[dict[str, str]] | None, threads_per_worker: int, extra_env: dict[str, str],
                 threads_explicit: bool):
        self.sel = sel
        self.devices = devices
        self.n_gpu = n_gpu
        self.gpu_envs = gpu_envs
        self.threads_per_worker = threads_per_worker
        self.extra_env = extra_env
        self.threads_explicit = threads_explicit
        self.store_dir = ""  # the pool's object store, set when it starts
        self.template: local_template.Template | None = None
        self.template_starts = 0
        self.prestarted: local_template.Template | None = None

    def take_prestarted(self) -> None:
        """Adopt the template ``hpc.init()`` started early, if any (on the thread that started the runtime).

        Taken there, not on the I/O thread: an older pool's I/O thread, still spawning while it
        shuts down, must not take the template started for this one.
        """
        self.prestarted = local_template.take_prestarted()

    def spawn(self, index: int) -> Worker:
        """Start worker ``index`` (a replacement) and wait for it to be forked or spawned."""
        return self.finish(*self.ask([index]))[0]

    def ask(self, indices: list[int]) -> Asked:
        """Ask the template for these workers (if one fits) without waiting for it; see :meth:`finish`."""
        env = local_process.worker_env(self.threads_per_worker, self.extra_env, self.threads_explicit)
        envs = [env] * len(indices)
        if self.gpu_envs is not None:
            # CUDA reads CUDA_VISIBLE_DEVICES once, when a library first initialises it in the
            # process (cuInit). A worker forked by the template sets its environment before it
            # serves (local_zygote._fork) and the template never initialises CUDA, so a forked
            # GPU worker sees only its device, as a spawned one does; the variable is not one
            # read at process start (_startup_env), so GPU and CPU workers fork from one template.
            envs = [{**env, **self.gpu_envs[i]} for i in indices]
        template = self._template_for(env)
        asked: list[Worker | None] = [None] * len(indices)
        if template is not None:
            asked = local_process.ask_workers(template, indices, self.store_dir, envs)
        return indices, envs, asked

    def finish(self, indices: list[int], envs: list[dict[str, str]], asked: list[Worker | None]) -> list[Worker]:
        """The workers asked for: those the template forked, the others spawned now; each registered for reading."""
        template = self.template
        found = asked
        if template is not None and any(w is not None for w in asked):
            found = local_process.answered(template, asked)
            if not template.alive:
                self.drop_template()
        workers = [w or local_process.spawn_worker(i, self.store_dir, env)
                   for i, w, env in zip(indices, found, envs)]
        for w in workers:
            if w.index < self.n_gpu:
                w.gpu = self.devices.indices[w.index]
            self.sel.register(w.result_r, selectors.EVENT_READ, w)
        return workers

    def _template_for(self, env: dict[str, str]) -> local_template.Template | None:
        """The template to fork a worker with this environment from (started if need be), or None to spawn."""
        pre, self.prestarted = self.prestarted, None  # one this pool does not use is closed, not leaked
        t = self.template
        if not USE_TEMPLATE or local_process._WORKER_CMD != local_process.DEFAULT_WORKER_CMD \
                or local_process.spawn_worker is not _SPAWN_WORKER:
            t = None  # a replaced worker command or spawner (tests) is not what the template runs
        elif t is not None and t.alive:
            # A forked worker keeps the template's variables read at process start (PYTHON*, LD_*):
            # one that should start with others (sys.path changed since, say) is spawned.
            t = t if t.fits(env) else None
        else:
            if t is not None:
                self.drop_template()
            t = None
            if self.template_starts < MAX_TEMPLATE_STARTS:
                self.template_starts += 1
                if pre is not None and pre.fits(env):  # else started for another environment (init(env=...))
                    t, pre = pre, None
                else:
                    try:
                        t = local_template.Template(env)
                    except OSError:
                        t = None
                if t is not None:
                    self.template = t
                    self.sel.register(t.fileno(), selectors.EVENT_READ, t)
        if pre is not None:
            pre.close()
        return t

    def drop_template(self) -> None:
        """Stop using the template (it died, or the pool ends): close it and stop watching its socket."""
        t, self.template = self.template, None
        if t is None:
            return
        try:
            self.sel.unregister(t.fileno())
        except (KeyError, ValueError):
            pass
        t.close()

    def on_template(self, t: local_template.Template) -> None:
        """The template's socket is readable: exit reports of its workers, or EOF when it died."""
        t.poll()
        if not t.alive and t is self.template:
            self.drop_template()

    def template_pid(self) -> int | None:
        """Process id of the live template, if workers are forked from one."""
        t = self.template
        return t.pid if t is not None and t.alive else None

    def close(self) -> None:
        """The pool ends (after its workers: the template reports their exits until they are gone)."""
        self.drop_template()
        if self.prestarted is not None:  # the I/O thread failed before it started any worker
            self.prestarted.close()
            self.prestarted = None
