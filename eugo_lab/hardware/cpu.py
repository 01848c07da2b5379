"""The CPU of the machine: architecture, model, logical cores and SIMD extensions, for summaries and lessons."""

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

# The SIMD extensions worth naming, widest first, as /proc/cpuinfo's flag (x86 "flags", Arm
# "Features") -> (name, register bits). SVE's register width is the chip's choice (128 bits on
# Neoverse V2, 256 on V1), read from the kernel where it says; 128 is SVE's minimum.
_X86_SIMD = (("avx512f", "AVX-512", 512), ("avx2", "AVX2", 256), ("avx", "AVX", 256), ("sse4_2", "SSE4.2", 128),
             ("sse2", "SSE2", 128))
_ARM_SIMD = (("sve2", "SVE2", 128), ("sve", "SVE", 128), ("asimd", "NEON", 128))
# The kernel's SVE vector length for new processes, in bytes (Linux, arm64 only).
_SVE_LENGTH = "/proc/sys/abi/sve_default_vector_length"


@dataclass(frozen=True)
class CpuInfo:
    """A CPU: architecture, model, logical cores."""

    arch: str  # "x86-64", "aarch64", ...
    model: str  # "AMD EPYC 7763 64-Core Processor", "ARM Neoverse V2", ...
    cores: int
    simd: tuple[str, ...] = ()  # the SIMD extensions it has, widest first: ("AVX-512", "AVX2", ...), ("SVE", "NEON")
    vector_bits: int = 0  # the widest SIMD register, in bits (0: none found)

    @property
    def lanes(self) -> dict[str, int]:
        """Values one SIMD instruction processes at once, by dtype: ``{"float64": 4, "float32": 8}`` for 256 bits."""
        return {"float64": self.vector_bits // 64, "float32": self.vector_bits // 32}

    def __str__(self) -> str:
        return f"{self.model} ({self.arch}, {self.cores} core{'s' if self.cores != 1 else ''})"


def parse_cpu(cpuinfo: str, machine: str, cores: int, sve_bytes: int = 0) -> CpuInfo:
    """A :class:`CpuInfo` from the text of ``/proc/cpuinfo`` and ``platform.machine()`` (pure, for tests).

    ``sve_bytes``: the kernel's SVE vector length (0: not known, SVE's minimum of 128 bits is assumed).
    """
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
    simd, bits = _simd(fields, arch, sve_bytes)
    return CpuInfo(arch, model or f"unknown {arch} CPU", cores, simd, bits)


def _simd(fields: dict[str, str], arch: str, sve_bytes: int) -> tuple[tuple[str, ...], int]:
    """The SIMD extensions named in the CPU's flags, widest first, and the widest register's bits."""
    key, table = ("features", _ARM_SIMD) if arch == "aarch64" else ("flags", _X86_SIMD)
    flags = set(fields.get(key, "").split())
    found = [(name, bits) for flag, name, bits in table if flag in flags]
    if not found:
        return (), 0
    widest = max(bits for _, bits in found)
    if any(name.startswith("SVE") for name, _ in found) and sve_bytes * 8 > widest:
        widest = sve_bytes * 8
    return tuple(name for name, _ in found), widest


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
    try:
        with open(_SVE_LENGTH, encoding="ascii") as f:
            sve = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        sve = 0
    return parse_cpu(text, platform.machine(), os.cpu_count() or 1, sve)


def describe_cpu() -> str:
    """The CPU in one line: ``AMD EPYC (x86-64, 2 cores)``, ``ARM Neoverse V2 (aarch64, 72 cores)``."""
    return str(cpu_info())
