"""How a task that waits on futures keeps its engine's slots free, where an engine runs tasks on threads.

A task on the ``threads`` engine that blocks in ``hpc.get`` on its children holds its pool thread: with
as many parents waiting as threads, no child could ever start. The engine sets :data:`local`'s ``wait``
on each of its task threads (``(futures, how many, timeout) -> done in time``), which runs the waited-for
tasks still queued on the waiting thread itself; the runtime's waits call it there
(``eugo_lab.hpc.blocking.waiter``). It lives in the contract so that neither side imports the other.
"""

from __future__ import annotations

import threading

#: Per thread: ``wait`` where an engine's task thread waits on futures in a way of its own; absent elsewhere.
local = threading.local()
