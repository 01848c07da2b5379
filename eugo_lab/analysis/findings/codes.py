"""The finding codes: one enumeration that every detector, checklist and exercise names.

A code is a stable id: saved traces' reports, the JSON the labextension reads and the
tests key on it. The members are strings (``Code.BLOCKING == "blocking"``, ``str()`` and
f-strings give the bare value), so a report that stores a code as text reads the same.
"""

from __future__ import annotations

import enum


class Code(enum.StrEnum):
    """What a :class:`~eugo_lab.analysis.findings.Finding` is about."""

    SPEEDUP = "speedup"
    BLOCKING = "blocking"
    SUBMISSION_ORDER = "submission-order"
    SLOW_SUBMISSION = "slow-submission"
    CRITICAL_PATH = "critical-path"
    UNBALANCED_PARTITIONS = "unbalanced-partitions"
    STRAGGLER = "straggler"
    WARM_UP = "warm-up"
    LONG_TAIL = "long-tail"
    TASKS_TOO_SMALL = "tasks-too-small"
    RECURSION_TOO_FINE = "recursion-too-fine"
    SERIALIZATION = "serialization"
    REPEATED_ARGUMENT = "repeated-argument"
    LARGE_RESULTS = "large-results"
    CAPTURED_OBJECT = "captured-object"
    IO_BOUND = "io-bound"
    IO_BOUND_PHASE = "io-bound-phase"
    COMPUTE_BOUND = "compute-bound"
    COMPUTE_BOUND_PHASE = "compute-bound-phase"
    CONTENTION = "contention"
    GIL_WAIT = "gil-wait"
    IDLE_CLUSTER = "idle-cluster"
