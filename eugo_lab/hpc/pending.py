"""The runtime's record of a task in flight.

It is the engine's :class:`~eugo_lab.contract.task.Task` plus what only the runtime reads:
the future or the batch's items, the tokens that keep inputs alive, hpc.map's callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eugo_lab.contract.task import FunctionRecord, Task, TaskOptions
from eugo_lab.hpc.future import Future


class Pending(Task):
    """A submitted task as the runtime tracks it until its futures are final."""

    __slots__ = ("future", "items", "tokens", "on_batch_done")

    def __init__(self, task_id: int, fn: FunctionRecord, args: bytes, tokens: list, options: TaskOptions,
                 future: Future | None, items: Any = None, submit_time: float = 0.0, batch_id: int = -1):
        label = future.function if future is not None else (options.name or fn.name)
        super().__init__(task_id, fn, args, options, label, item_count=len(items) if items is not None else 0,
                         submit_time=submit_time, batch_id=batch_id)
        self.tokens = tokens  # futures and object refs the arguments refer to (kept alive)
        self.future = future  # single tasks
        self.items = items  # batches: one result slot per item (mapping._Batch), no future each
        self.on_batch_done: Callable[[Pending, Any], None] | None = None  # hpc.map's feeder
