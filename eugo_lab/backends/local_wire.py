"""The byte layouts the local pool's processes exchange, defined once for both ends.

- driver <-> worker, task and result pipes: frames of :data:`LEN` (an 8-byte little-endian
  length) followed by that many bytes of pickle (protocol 5);
- driver -> worker, cancel pipe: bare task ids, :data:`TASK_ID` each (then SIGUSR1 wakes it);
- driver <-> template (``local_zygote``), a ``SOCK_SEQPACKET`` socket: :data:`TEMPLATE_MSG`
  reports ``(kind, a, b)`` and the four pipe ends of a fork request as :data:`TEMPLATE_FDS`.

Imports nothing but ``struct``: the worker, the template and the driver's template side
(``local_template``, imported first by ``hpc.init()``) all load it on their start-up path.
"""

from __future__ import annotations

import struct

#: The length prefix of every frame on a worker's task and result pipes.
LEN = struct.Struct("<Q")
#: One task id on a worker's cancel pipe.
TASK_ID = struct.Struct("<q")
#: A template's report: ``(b"F", index, pid)`` once it forked a worker, ``(b"X", pid, exit code)`` when one exited.
TEMPLATE_MSG = struct.Struct("<1sii")
#: The pipe ends (task, result, lifeline, cancel) sent with a fork request, as ``SCM_RIGHTS``.
TEMPLATE_FDS = struct.Struct("<4i")
