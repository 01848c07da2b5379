"""The CPU of the machine: architecture, model and logical cores, in one line for summaries and profiles."""

from __future__ import annotations

import functools
import os
import platform
import re
from dataclasses import dataclass

# Arm's "CPU part" numbers for its server cores (Arm Technical Reference Manuals, MIDR_EL1.PartNum).
_ARM_PARTS = {
    0xD0C: "Neoverse N1", 0xD40: "Neoverse V1", 0xD49: "Neoverse N2", 0xD4F: "Neoverse V2",
    0xD8E: "Neoverse N3", 0xD84: "Neoverse V3", 0xD83: "Neoverse V3AE", 0xD4A: "Neoverse E1",
}
_ARM_IMPLEMENTER = 0x41


@dataclass(frozen=True)
class CpuInfo:
    """A CPU: architecture, model, logical cores."""

    arch: str  # "x86-64", "aarch64", ...
    model: str  # "AMD EPYC 7763 64-Core Processor", "ARM Neoverse V2", ...
    cores: int

    def __str__(self) -> str:
        return f"{self.model} ({self.arch}, {self.cores} core{'s' if self.cores != 1 else ''})"


def parse_cpu(cpuinfo: str, machine: str, cores: int) -> CpuInfo:
    """A :class:`CpuInfo` from the text of ``/proc/cpuinfo`` and ``platform.machine()`` (pure, for tests)."""
    m = machine.lower()
    arch = {"x86_64": "x86-64", "amd64": "x86-64", "arm64": "aarch64"}.get(m, m or "unknown")
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() not in fields:
            fields[key.strip().lower()] = value.strip()
    if arch == "aarch64":
        model = _arm_model(fields)
    else:
        model = fields.get("model name") or fields.get("cpu model") or fields.get("cpu") or ""
        model = re.sub(r"\s+", " ", model).strip()
    return CpuInfo(arch, model or f"unknown {arch} CPU", cores)


def _arm_model(fields: dict[str, str]) -> str:
    try:
        implementer = int(fields.get("cpu implementer", ""), 16)
        part = int(fields.get("cpu part", ""), 16)
    except ValueError:
        return fields.get("model name", "")
    if implementer == _ARM_IMPLEMENTER and part in _ARM_PARTS:
        return f"ARM {_ARM_PARTS[part]}"  # the vocabulary term: "ARM Neoverse V2" (e.g. NVIDIA Grace)
    return f"ARM CPU (implementer 0x{implementer:02x}, part 0x{part:03x})"


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """The :class:`CpuInfo` of this machine (``/proc/cpuinfo`` on Linux, :mod:`platform` elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(200_000)
    except OSError:
        text = f"model name: {platform.processor()}"
    return parse_cpu(text, platform.machine(), os.cpu_count() or 1)


def describe_cpu() -> str:
    """The CPU in one line: ``AMD EPYC (x86-64, 2 cores)``, ``ARM Neoverse V2 (aarch64, 72 cores)``."""
    return str(cpu_info())
