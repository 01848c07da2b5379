"""The Warm-up finding: a new worker's first task pays for the libraries it imports.

Not skew (the input was not larger) and not serialization (the data was not larger): the worker
measured the time the task's own code spent importing modules (the trace's ``import_s`` fact), and
that cost is paid once per worker process. Only the part of a task's extra time that its imports
explain is warm-up: the Straggler and Serialization findings leave that part out and judge the
rest (``Context.warm_up``).
"""

from __future__ import annotations

import numpy as np

from eugo_lab.analysis import whatif
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.context import Context, listed, plural, priced
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.report import WARNING
from eugo_lab.units import fmt_seconds as fmt_s


def warm_up(ctx: Context) -> list[Finding]:
    """Per function: its tasks that were a worker's warm-up, priced as workers that had imported already."""
    extra, in_deser, modules, seconds = ctx.warm_up
    u, out = ctx.units, []
    for f in np.unique(u.function[extra > 0]):
        idx = np.flatnonzero((u.function == f) & (extra > 0))
        idx = idx[np.lexsort((u.task_id[idx], -extra[idx]))]
        name = ctx.fname(int(f))
        ids = [int(t) for t in u.task_id[idx]]
        workers = len(np.unique(u.worker[idx]))
        unpickling = float(in_deser[idx].sum())
        total = float(extra[idx].sum())
        where = f", {fmt_s(unpickling)} of it while unpickling the arguments" if unpickling >= 0.5 * total else ""
        imported = float(seconds[idx].sum())
        verdict = (f"{plural(len(idx), f'{name}() task')} (task {listed(ids, 3)}) took {fmt_s(total)} "
                   f"more than the function's other tasks{where}, and their code spent {fmt_s(imported)} importing "
                   f"{plural(int(modules[idx].sum()), 'module')} on {plural(workers, 'worker')} (measured on the "
                   "worker): that is a worker's warm-up (loading the libraries the task uses), not a bigger input "
                   "or more data to send.")
        advice = ("Warm-up is paid once per worker process, and workers keep their imports: the next run of this "
                  "code does not pay it. To keep it out of a timing, run a small task that imports the same "
                  "libraries first (or run the cell twice) before measuring.")
        finding = Finding(Code.WARM_UP, "Straggler", WARNING, verdict, advice,
                          {"function": name, "tasks": ids, "extra": float(extra[idx].sum()),
                           "unpickling": unpickling, "modules": int(modules[idx].sum()), "import_s": imported,
                           "workers": workers})
        fixed = whatif.shorter(ctx.replay, idx, extra[idx])
        out.append(priced(ctx, finding, fixed, f"warm the workers up before timing {name}() (import its libraries)"))
    return out
