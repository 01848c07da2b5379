"""The findings: what :func:`eugo_lab.analysis.analyze` notices in a trace, one module per family of mistake.

- :mod:`.codes`: :class:`Code`, the one enumeration of finding codes.
- :mod:`.finding`: the :class:`Finding` record; :mod:`.context`: the :class:`Context` every
  detector shares, and pricing a mistake by replaying the trace with its fix.
- The families, each with its thresholds (and the reasons for their values, so a course can
  quote them and a test can pin them): :mod:`.speedup`, :mod:`.blocking` (get() in the
  submission loop), :mod:`.submission` (submission order, slow submission), :mod:`.critical`
  (critical path), :mod:`.warmup` (a new worker's imports), :mod:`.imbalance` (stragglers, long
  tail, unbalanced partitions), :mod:`.batching` (tasks too small), :mod:`.serialization`
  (pickling, repeated arguments), :mod:`.results` (large results), :mod:`.boundness` (I/O- vs
  compute-bound), :mod:`.contention` (tasks slower side by side, measured by :mod:`.overlap`,
  or waiting for a core, with the runtime's own compiles from :mod:`.runtime_work`), :mod:`.idle`
  (an idle cluster's bill).
- :mod:`.registry`: the detectors in the order they run, and :func:`detect`, which folds the
  findings one cause explains into it (:mod:`.explained`).
"""

from eugo_lab.analysis.findings.batching import BATCHES_PER_WORKER, OVERHEAD_RATIO
from eugo_lab.analysis.findings.boundness import BOUND_MIN_ITEM_S, COMPUTE_BOUND_RATIO, IO_BOUND_RATIO
from eugo_lab.analysis.findings.codes import Code
from eugo_lab.analysis.findings.contention import CONTENTION_MIN
from eugo_lab.analysis.findings.context import NOTE_SHARE, Context
from eugo_lab.analysis.findings.finding import Finding
from eugo_lab.analysis.findings.idle import IDLE_CLUSTER_SHARE, idle_cluster
from eugo_lab.analysis.findings.imbalance import STRAGGLER_FLOOR_S, STRAGGLER_RATIO
from eugo_lab.analysis.findings.registry import COST_REGISTRY, REGISTRY, Detector, detect
from eugo_lab.analysis.findings.serialization import REPEAT_MIN_BYTES
from eugo_lab.analysis.findings.speedup import GOOD_EFFICIENCY

__all__ = [
    "Code", "Finding", "Context", "Detector", "REGISTRY", "COST_REGISTRY", "detect", "idle_cluster",
    "NOTE_SHARE", "GOOD_EFFICIENCY", "STRAGGLER_RATIO", "STRAGGLER_FLOOR_S", "BATCHES_PER_WORKER", "OVERHEAD_RATIO",
    "IO_BOUND_RATIO", "COMPUTE_BOUND_RATIO", "BOUND_MIN_ITEM_S", "REPEAT_MIN_BYTES", "CONTENTION_MIN",
    "IDLE_CLUSTER_SHARE",
]
