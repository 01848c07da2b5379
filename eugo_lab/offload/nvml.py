"""GPU busy % sampled with NVML while a cell runs (a daemon thread; nothing when NVML is absent)."""

from __future__ import annotations

import threading
from typing import Any


class BusySampler:
    """Samples ``nvmlDeviceGetUtilizationRates(...).gpu`` every ``interval`` seconds between start and stop.

    NVML reports the share of its last sample period (1/6 s to 1 s, by GPU) in which a kernel ran,
    so a cell shorter than that gets one or two samples: the report says how many.
    """

    def __init__(self, index: int = 0, interval: float = 0.02) -> None:
        self.index = index
        self.interval = interval
        self.samples: list[int] = []
        self.note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handle: Any = None

    def start(self) -> BusySampler:
        """Begin sampling (no-op, with a note, when NVML cannot start)."""
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:  # noqa: BLE001 - ImportError or any NVML error: no busy % for this cell
            self.note = f"GPU busy % not sampled ({type(exc).__name__})"
            return self
        self._thread = threading.Thread(target=self._run, name="eugo-nvml-busy", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        try:
            self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
        except Exception:  # noqa: BLE001 - one failed read is one missing sample
            pass

    def _run(self) -> None:
        self._sample()
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> tuple[float, float, int] | None:
        """Stop; ``(mean %, max %, samples)`` or ``None`` when nothing was sampled."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=1)
            self._sample()  # the period that ended with the cell
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
        if not self.samples:
            return None
        return (sum(self.samples) / len(self.samples), float(max(self.samples)), len(self.samples))
