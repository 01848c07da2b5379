"""What the cost model knows about a machine: a host (CPU) profile and device (GPU) profiles.

The host profile is measured on first use (a few short NumPy timings, cached per process,
about 0.2 s), because the break-even size depends on the host: a laptop core and a
64-core server move memory at very different rates. Device profiles start from published
peak figures (cited next to each number) scaled by achievable fractions, and are replaced by
an on-device calibration (:mod:`eugo_lab.offload.calibrate`) when a GPU is present.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any

from eugo_lab.settings import GPU_PROFILE_ENV


@dataclass(frozen=True)
class HostProfile:
    """How fast this host runs NumPy: per-call overhead, memory bandwidth, special-function and BLAS rates."""

    name: str
    call_overhead_s: float  # one tiny ufunc call: Python + NumPy dispatch
    mem_bw: float  # bytes/s moved by a large elementwise ufunc (read + write), operands in main memory
    cache_bw: float  # the same for operands that fit in the caches (below CACHE_BYTES)
    special_rate: float  # float64 exp() evaluations per second (transcendental ufuncs)
    flops64: float  # float64 matmul flop/s (BLAS, all its threads)
    flops32: float  # float32 matmul flop/s
    source: str = "measured"
    #: Each transcendental ufunc's cost per element in exp()s, as measured here; one not listed costs
    #: one exp. They differ by 15x on one host (float64 on this VM, as measure_host reads them: log 1.0,
    #: power 2.3, hypot 7, sin 14), and by host: how many have SIMD loops depends on the CPU NumPy finds.
    special_costs: tuple[tuple[str, float], ...] = ()

    def special_cost(self, ufunc: str) -> float:
        """Cost of one element of ``ufunc`` in float64 exp() evaluations (1.0 when not measured)."""
        for name, cost in self.special_costs:
            if name == ufunc:
                return cost
        return 1.0


@dataclass(frozen=True)
class DeviceProfile:
    """A GPU as the cost model sees it: peak figures and the fraction of them NumPy-style code reaches."""

    key: str
    name: str
    mem_bw: float  # device memory bandwidth, bytes/s (peak)
    fp32: float  # flop/s (peak, non-tensor-core)
    fp64: float  # flop/s (peak, non-tensor-core)
    link_bw: float  # host<->device bandwidth per direction, bytes/s (peak)
    link: str  # what the link is, for the report
    launch_s: float  # one kernel launch including CuPy's Python dispatch
    memory: int  # device memory, bytes
    mem_eff: float = 0.8  # STREAM-like kernels reach ~80-90% of peak HBM/GDDR bandwidth
    link_eff: float = 0.5  # NumPy arrays are pageable: the driver stages them, about half the pinned rate
    flop_eff: float = 0.7  # cuBLAS GEMM on large square matrices reaches ~70% of the non-tensor peak
    transfer_s: float = 10e-6  # fixed cost of one cudaMemcpy (setup + synchronisation)
    source: str = "published figures"

    @property
    def calibrated(self) -> bool:
        """True when the figures were measured on this device, not taken from a datasheet."""
        return self.source.startswith("calibrated")


#: Working sets (bytes read + written) up to this size run at ``cache_bw`` on the host: a few MB of
#: L2 + L3 per core group is typical of current x86-64 and Neoverse server parts. Larger ones are priced
#: at ``mem_bw`` (measured past the last-level cache): conservative for a 16 MB operand on a host with
#: a 32 MB L3, which may partly hit it, but never the cache rate for data that does not fit.
CACHE_BYTES = 4 * 10**6

_T = 1e12
_G = 1e9
# Kernel launch: ~3-5 us in the CUDA driver (NVIDIA CUDA C++ Best Practices Guide, "Kernel launch
# overhead"), plus CuPy's per-call Python work (argument checks, kernel cache lookup), ~5 us.
_LAUNCH = 10e-6

#: Published profiles, keyed by a short name (``EUGO_LAB_GPU_PROFILE`` picks one for predictions).
PUBLISHED: dict[str, DeviceProfile] = {
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP64 34 TFLOPS, FP32 67 TFLOPS, HBM3 3.35 TB/s,
    # 80 GB; host link PCIe Gen5 x16, 128 GB/s both directions = 64 GB/s each way.
    "h100": DeviceProfile("h100", "NVIDIA H100 SXM (published)", mem_bw=3.35 * _T, fp32=67 * _T, fp64=34 * _T,
                          link_bw=64 * _G, link="PCIe Gen5 x16", launch_s=_LAUNCH, memory=80 * 10**9),
    # NVIDIA H200 datasheet (SXM): same compute as H100 SXM, HBM3e 4.8 TB/s, 141 GB; PCIe Gen5 x16.
    "h200": DeviceProfile("h200", "NVIDIA H200 SXM (published)", mem_bw=4.8 * _T, fp32=67 * _T, fp64=34 * _T,
                          link_bw=64 * _G, link="PCIe Gen5 x16", launch_s=_LAUNCH, memory=141 * 10**9),
    # NVIDIA GH200 Grace Hopper datasheet: H100 with 96 GB HBM3 at 4 TB/s; NVLink-C2C to the Grace
    # CPU, 900 GB/s total = 450 GB/s each way (coherent: pageable memory is not staged, so link_eff 0.8).
    "gh200": DeviceProfile("gh200", "NVIDIA GH200 (published)", mem_bw=4.0 * _T, fp32=67 * _T, fp64=34 * _T,
                           link_bw=450 * _G, link="NVLink-C2C", launch_s=_LAUNCH, memory=96 * 10**9,
                           link_eff=0.8),
    # NVIDIA A100 datasheet (SXM4 80GB): FP64 9.7 TFLOPS, FP32 19.5 TFLOPS, HBM2e 2,039 GB/s;
    # PCIe Gen4 x16, 64 GB/s both directions = 32 GB/s each way.
    "a100": DeviceProfile("a100", "NVIDIA A100 SXM 80GB (published)", mem_bw=2.039 * _T, fp32=19.5 * _T,
                          fp64=9.7 * _T, link_bw=32 * _G, link="PCIe Gen4 x16", launch_s=_LAUNCH, memory=80 * 10**9),
    # NVIDIA A10 datasheet: FP32 31.2 TFLOPS, GDDR6 600 GB/s, 24 GB, PCIe Gen4 x16 (32 GB/s each way).
    # FP64 is not on the datasheet: GA102 runs it at 1/64 of FP32 (CUDA Programming Guide, arithmetic
    # instruction throughput, compute capability 8.6), ~0.49 TFLOPS.
    "a10": DeviceProfile("a10", "NVIDIA A10 (published)", mem_bw=600 * _G, fp32=31.2 * _T, fp64=0.49 * _T,
                         link_bw=32 * _G, link="PCIe Gen4 x16", launch_s=_LAUNCH, memory=24 * 10**9),
    # NVIDIA T4 datasheet: FP32 8.1 TFLOPS, GDDR6 320 GB/s, 16 GB, PCIe Gen3 x16 (32 GB/s both ways =
    # 16 GB/s each). FP64 not on the datasheet: TU104 runs it at 1/32 of FP32 (compute capability 7.5), ~0.25.
    "t4": DeviceProfile("t4", "NVIDIA T4 (published)", mem_bw=320 * _G, fp32=8.1 * _T, fp64=0.25 * _T,
                        link_bw=16 * _G, link="PCIe Gen3 x16", launch_s=_LAUNCH, memory=16 * 10**9),
}

#: The profile predictions are made for when this machine has no GPU (``EUGO_LAB_GPU_PROFILE`` overrides).
DEFAULT_PROFILE = "h100"


def published(key: str) -> DeviceProfile:
    """A published profile by short name; a bad name lists the valid ones."""
    k = str(key).strip().lower()
    if k not in PUBLISHED:
        raise ValueError(f"no GPU profile named {key!r}; choose one of {', '.join(PUBLISHED)} "
                         f"(set {GPU_PROFILE_ENV} or pass the name)")
    return PUBLISHED[k]


def prediction_profile() -> DeviceProfile:
    """The named profile to predict for on a machine without a GPU (``EUGO_LAB_GPU_PROFILE``, default H100)."""
    return published(os.environ.get(GPU_PROFILE_ENV) or DEFAULT_PROFILE)


def profile_for_name(gpu_name: str) -> DeviceProfile:
    """The closest published profile for a device name such as ``"NVIDIA H200"`` (H100 when unknown)."""
    low = gpu_name.lower().replace(" ", "")
    for key in ("gh200", "h200", "h100", "a100", "a10", "t4"):
        if key in low and not (key == "a10" and "a100" in low):
            return replace(PUBLISHED[key], name=f"{gpu_name} (published {key.upper()} figures)")
    return replace(PUBLISHED["h100"], name=f"{gpu_name} (no published profile: H100 figures)")


def _best_time(fn, repeat: int, budget_s: float = 0.0) -> float:  # a zero-argument callable
    # The best of a few runs, as timeit advises: on a shared machine the slower runs measure the
    # neighbours (a BLAS call whose threads lose their cores runs 100x slower), not what this host can
    # do. With a budget, keep trying (up to 4x `repeat`) while the runs so far are within it.
    best = math.inf
    start = time.perf_counter()
    for i in range(repeat * 4 if budget_s else repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        if i + 1 >= repeat and (not budget_s or time.perf_counter() - start > budget_s or best < budget_s / 100):
            break
    return best


#: Per-operand size for the main-memory timing where the last-level cache size cannot be read: twice the
#: 32 MB L3 of a current server CCX, so the operands cannot sit in it.
_FALLBACK_MEM_OPERAND = 64 * 2**20
_CACHE_SYSFS = "/sys/devices/system/cpu/cpu0/cache"


def last_level_cache_bytes(root: str = _CACHE_SYSFS) -> int | None:
    """The largest data/unified cache of CPU 0 (``index*/size``, e.g. ``32768K``) in bytes; ``None`` if unknown."""
    sizes = []
    try:
        entries = [e for e in os.listdir(root) if e.startswith("index")]
    except OSError:
        return None
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "size")) as f:
                text = f.read().strip().upper()
            kind = ""
            with contextlib.suppress(OSError), open(os.path.join(root, entry, "type")) as f:
                kind = f.read().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def mem_operand_bytes(llc: int | None) -> int:
    """Bytes per operand for the main-memory timing: twice the last-level cache (the fallback when unknown)."""
    if not llc:
        return _FALLBACK_MEM_OPERAND
    return max(2 * llc, 16 * 2**20)


def measure_host(name: str | None = None) -> HostProfile:
    """Time a few NumPy operations on this host (about 0.3 s); prefer :func:`host_profile` (cached)."""
    import numpy as np

    from eugo_lab.hardware.cpu import describe_cpu

    # Main-memory bandwidth needs operands the last-level cache cannot hold: 16 MB operands partly sit
    # in a 32 MB L3 (an EPYC CCX) and then "memory" bandwidth reads 2-5x too fast, which would make the
    # model keep large arrays on the CPU that main memory could not feed that fast.
    n = mem_operand_bytes(last_level_cache_bytes()) // 8
    a = np.full(n, 1.5)  # np.full, not a random fill: an 8 M-element random draw alone takes ~50 ms
    b = np.full(n, 2.5)
    c = 1 << 15  # 256 kB per operand: in L2/L3, the bandwidth small arrays see
    tiny = np.ones(8)
    np.add(a, b)  # warm the allocator's path for a result this large, not part of the timing
    reps = 200

    def tiny_calls() -> None:
        for _ in range(reps):
            np.add(tiny, tiny)  # allocates its result, as most calls in a cell do

    overhead = _best_time(tiny_calls, 3) / reps
    # Results allocated fresh, as in a cell: a large result is new pages (faulted in) every time.
    add_s = _best_time(lambda: np.add(a, b), 3)
    cache_s = _best_time(lambda: np.add(a[:c], b[:c]), 7)
    r = np.random.default_rng(0).random(1 << 19)  # exp and matmul on varied values (4 MB)
    m = r.size
    exp_s = _best_time(lambda: np.exp(r), 3)
    k = 192  # 14 MFLOP: long enough for BLAS to reach speed, short enough to stay ~1 ms
    x64 = r[: k * k].reshape(k, k)
    x32 = x64.astype(np.float32)
    for _ in range(2):  # wake the BLAS threads: the first calls of a process pay for starting them
        x64 @ x64
        x32 @ x32
    mm64 = _best_time(lambda: x64 @ x64, 3, budget_s=0.03)
    mm32 = _best_time(lambda: x32 @ x32, 3, budget_s=0.03)
    eps = 1e-9  # a timer that reads 0 must not give an infinite rate
    special_rate = m / max(exp_s - overhead, eps)
    return HostProfile(
        name=name or describe_cpu(),
        call_overhead_s=overhead,
        mem_bw=3 * 8 * n / max(add_s - overhead, eps),
        cache_bw=3 * 8 * c / max(cache_s - overhead, eps),
        special_rate=special_rate,
        flops64=2 * k**3 / max(mm64 - overhead, eps),
        # Single precision moves half the bytes in twice the SIMD lanes: no BLAS runs it slower per flop than
        # double. A lower reading is the timer catching BLAS threads waking on a busy machine (seen: 4x lower,
        # and a 400x400 float32 matmul then predicted at 254 ms where it measured 18 ms).
        flops32=max(2 * k**3 / max(mm32 - overhead, eps), 2 * k**3 / max(mm64 - overhead, eps)),
        special_costs=_special_costs(r[:_SPECIAL_ELEMENTS], special_rate, overhead),
    )


#: Elements per special-function timing: 256 kB operands (cache-resident), ~0.02-0.5 ms a call here.
_SPECIAL_ELEMENTS = 1 << 15
#: Inputs in each function's domain (r in [0, 1)): outside it NumPy takes slow NaN paths.
_DOMAIN = {"arcsin": lambda r: 0.9 * r, "arccos": lambda r: 0.9 * r, "arctanh": lambda r: 0.9 * r,
           "arccosh": lambda r: 1.0 + r}


def _special_costs(r: Any, special_rate: float, overhead: float) -> tuple[tuple[str, float], ...]:
    """Each transcendental ufunc's cost per element in exp()s (:data:`ops.SPECIAL`; ~15 ms in all)."""
    import numpy as np

    from eugo_lab.offload.ops import SPECIAL

    out = np.empty_like(r)
    costs = []
    for name in sorted(SPECIAL):
        fn = getattr(np, name, None)
        if not isinstance(fn, np.ufunc):
            continue
        x = _DOMAIN.get(name, lambda v: 0.5 + v)(r)
        args = (x,) * fn.nin
        with np.errstate(all="ignore"):
            t = _best_time(lambda fn=fn, args=args: fn(*args, out=out), 3)
        costs.append((name, round(max(t - overhead, 1e-9) * special_rate / r.size, 3)))
    return tuple(costs)


@functools.lru_cache(maxsize=1)
def host_profile() -> HostProfile:
    """The profile of this host, measured once per process on first use."""
    return measure_host()
