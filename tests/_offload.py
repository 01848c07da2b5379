"""Helpers for the offload tests: a fixed host profile and a stand-in for IPython's shell namespaces."""

from __future__ import annotations

from eugo_lab.offload.profiles import HostProfile

#: A host with round numbers, so the cost model's answers are exact and stable.
HOST = HostProfile("test host", call_overhead_s=1e-6, mem_bw=10e9, cache_bw=40e9, special_rate=1e9,
                   flops64=50e9, flops32=100e9, source="fixed for tests")


class Shell:
    """What offload.cell.run needs from an IPython shell: the user namespace."""

    def __init__(self) -> None:
        self.user_ns: dict = {"__builtins__": __builtins__}
        self.user_global_ns = self.user_ns
