"""The SIMD verdict read from machine code: real Numba compiles here, and snippets of both architectures."""

from __future__ import annotations

import math
import platform

import numpy as np
import pytest

from eugo_lab.jit import simd
from eugo_lab.jit.checked import compile_for, numba_types, simd_detail


def scale(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * 2.0 + 1.0


def running_sum(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]  # each iteration needs the previous one's s: a loop-carried dependency
    return s


def sum_of_abs(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += abs(a[i])  # abs is a packed and with a sign mask on one lane; the sum stays scalar
    return s


def carried_abs(a, out):
    out[0] = a[0]
    for i in range(1, a.shape[0]):
        out[i] = abs(out[i - 1] - a[i])


def carried_copysign(a, out):
    out[0] = a[0]
    for i in range(1, a.shape[0]):
        out[i] = math.copysign(out[i - 1] * 0.5, a[i])


def carried_negation(a, out):
    out[0] = a[0]
    for i in range(1, a.shape[0]):
        out[i] = -(out[i - 1] * a[i])


def elementwise_abs(a, out):
    for i in range(a.shape[0]):
        out[i] = abs(a[i])


def elementwise_copysign(a, out):
    for i in range(a.shape[0]):
        out[i] = math.copysign(a[i], -1.0)


def elementwise_negation(a, out):
    for i in range(a.shape[0]):
        out[i] = -a[i]


def _asm(fn, *args):
    d = compile_for(fn, numba_types(args))
    return d.inspect_asm(d.signatures[-1]), d


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86-64 registers")
def test_a_real_compile_of_an_elementwise_loop_is_vectorized_with_packed_registers():
    a = np.ones(64)
    asm, d = _asm(scale, a, np.empty_like(a))
    v = simd.analyze(asm)
    assert v.arch == "x86-64" and v.vectorized and v.packed > 0
    assert v.width_bits in (128, 256, 512) and v.isa in ("SSE", "AVX2", "AVX-512")
    assert simd_detail(d).startswith("vectorized: ")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86-64 registers")
def test_a_real_compile_of_a_running_sum_is_scalar_because_of_the_dependency():
    asm, _ = _asm(running_sum, np.ones(64))
    v = simd.analyze(asm)
    assert not v.vectorized and v.loops >= 1
    assert "dependency between iterations" in v.reason, v


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86-64 registers")
@pytest.mark.parametrize("fn", [sum_of_abs, carried_abs, carried_copysign, carried_negation])
def test_a_scalar_loop_whose_only_packed_instructions_are_sign_masks_is_not_vectorized(fn):
    a = np.ones(64)
    asm, _ = _asm(fn, *((a,) if fn is sum_of_abs else (a, np.empty_like(a))))
    v = simd.analyze(asm)
    assert not v.vectorized and v.packed == 0, v
    assert "dependency between iterations" in v.reason, v


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86-64 registers")
@pytest.mark.parametrize("fn", [elementwise_abs, elementwise_copysign, elementwise_negation])
def test_abs_copysign_and_negation_over_whole_registers_of_data_are_vectorized(fn):
    a = np.ones(64)
    asm, _ = _asm(fn, a, np.empty_like(a))
    v = simd.analyze(asm)
    assert v.vectorized and v.width_bits in (128, 256, 512), v


# LLVM's code for out[i] = abs(out[i-1] - a[i]): a scalar subtract, then abs as a packed and with a mask.
X86_CARRIED_ABS = """
_ZN8__main__11carried_abs:
\tvmovapd\t.LCPI0_0(%rip), %xmm1
.LBB0_7:
\tvsubsd\t(%rdx,%r8,8), %xmm0, %xmm0
\tvandpd\t%xmm1, %xmm0, %xmm0
\tvmovlpd\t%xmm0, (%rcx,%r8,8)
\tincq\t%r8
\tcmpq\t%r8, %rax
\tjne\t.LBB0_7
"""

# copysign of a loaded scalar: two masks and an or, each on one lane; the mask is a constant, not loop data.
X86_SCALAR_COPYSIGN = """
_ZN8__main__1c:
.LBB0_7:
\tvmovsd\t(%rdx,%r10,8), %xmm4
\tvmulsd\t%xmm1, %xmm0, %xmm0
\tvandpd\t.LCPI0_1(%rip), %xmm0, %xmm0
\tvandnpd\t%xmm4, %xmm3, %xmm4
\tvorpd\t%xmm4, %xmm0, %xmm0
\tvmovlpd\t%xmm0, (%rcx,%r10,8)
\tincq\t%r10
\tcmpq\t%r10, %rax
\tjne\t.LBB0_7
"""

# Negation of four lanes at once, read straight from the array: packed work on the data.
X86_PACKED_NEGATION = """
_ZN8__main__1n:
.LBB0_6:
\tvxorps\t(%rdx,%r10,8), %ymm0, %ymm1
\tvmovups\t%ymm1, (%rcx,%r10,8)
\taddq\t$4, %r10
\tcmpq\t%r10, %rsi
\tjne\t.LBB0_6
"""

# aarch64 abs of a scalar through a vector and (LLVM does this for copysign with bif too).
A64_SCALAR_MASK = """
_ZN8__main__1m:
.LBB0_2:
\tldr\td1, [x8], #8
\tfsub\td0, d0, d1
\tand\tv0.16b, v0.16b, v2.16b
\tstr\td0, [x9], #8
\tsubs\tx10, x10, #1
\tb.ne\t.LBB0_2
"""


def test_masks_on_one_lane_are_not_packed_work_and_packed_data_still_is():
    for snippet in (X86_CARRIED_ABS, X86_SCALAR_COPYSIGN, A64_SCALAR_MASK):
        v = simd.analyze(snippet)
        assert not v.vectorized and v.packed == 0 and v.loops == 1, (snippet, v)
    assert "dependency" in simd.analyze(X86_CARRIED_ABS).reason
    v = simd.analyze(X86_PACKED_NEGATION)
    assert (v.vectorized, v.isa, v.width_bits, v.packed) == (True, "AVX2", 256, 1)
    neon = A64_SCALAR_MASK.replace("ldr\td1", "ldr\tq0").replace("fsub\td0, d0, d1", "fneg\tv0.2d, v0.2d")
    v = simd.analyze(neon)
    assert v.vectorized and v.isa == "NEON" and v.packed == 2


X86_PACKED = """
_ZN8__main__5scale:
\tvbroadcastsd\t(%r9), %ymm0
.LBB0_6:
\tvmovupd\t(%rdx,%r10,8), %zmm1
\tvaddpd\t%zmm1, %zmm1, %zmm1
\tvfmadd231pd\t%zmm0, %zmm1, %zmm2
\taddq\t$8, %r10
\tcmpq\t%r10, %rsi
\tjne\t.LBB0_6
\tretq
_ZN7cpython8__main__5scale:
\tvmovups\t%ymm0, 48(%rsp)
"""

X86_CALL = """
_ZN8__main__1f:
.LBB0_2:
\tvmovsd\t(%rbx,%r14,8), %xmm0
\tcallq\t*%r12
\tvmovsd\t%xmm0, (%r15,%r14,8)
\tincq\t%r14
\tcmpq\t%r14, %r13
\tjne\t.LBB0_2
"""

A64_NEON = """
_ZN8__main__5scale:
.LBB0_4:
\tldp\tq1, q2, [x9, #-16]
\tfadd\tv1.2d, v1.2d, v1.2d
\tfmla\tv2.2d, v0.2d, v1.2d
\tstp\tq1, q2, [x10, #-16]
\tsubs\tx11, x11, #4
\tb.ne\t.LBB0_4
\tret
"""

A64_SVE = """
_ZN8__main__5scale:
.LBB0_3:
\tld1d\t{ z0.d }, p0/z, [x0, x8, lsl #3]
\tfadd\tz0.d, z0.d, z0.d
\tst1d\t{ z0.d }, p0, [x1, x8, lsl #3]
\tincd\tx8
\tb.mi\t.LBB0_3
"""

A64_SCALAR_SUM = """
_ZN8__main__3sum:
.LBB0_2:
\tldr\td1, [x8], #8
\tfadd\td0, d0, d1
\tsubs\tx9, x9, #1
\tb.ne\t.LBB0_2
"""

X86_CONVERT = """
_ZN8__main__1g:
.LBB0_3:
\tvcvtsi2sd\t%rax, %xmm2, %xmm1
\tvmulsd\t%xmm1, %xmm3, %xmm1
\tvmovsd\t%xmm1, (%rcx,%rax,8)
\tincq\t%rax
\tcmpq\t%rax, %rdx
\tjne\t.LBB0_3
"""

X86_BRANCH = """
_ZN8__main__1h:
.LBB0_3:
\tvmovsd\t(%rcx,%rax,8), %xmm1
\tvucomisd\t%xmm0, %xmm1
\tjbe\t.LBB0_5
\tvmovsd\t%xmm1, (%rdx,%rax,8)
.LBB0_5:
\tincq\t%rax
\tcmpq\t%rax, %rsi
\tjne\t.LBB0_3
"""


def test_snippets_of_both_architectures():
    v = simd.analyze(X86_PACKED)
    assert (v.arch, v.vectorized, v.width_bits, v.isa, v.packed) == ("x86-64", True, 512, "AVX-512", 2)
    assert simd.analyze(X86_PACKED.replace("zmm", "ymm")).isa == "AVX2"
    assert simd.analyze(X86_PACKED.replace("zmm", "xmm")).width_bits == 128
    v = simd.analyze(A64_NEON)
    assert (v.arch, v.vectorized, v.width_bits, v.isa) == ("aarch64", True, 128, "NEON")
    v = simd.analyze(A64_SVE)
    assert (v.vectorized, v.isa, v.width_bits) == (True, "SVE", -1) and "scalable" in v.summary()
    v = simd.analyze(A64_SCALAR_SUM)
    assert not v.vectorized and "dependency" in v.reason


def test_the_likely_reason_a_loop_stayed_scalar():
    assert "a call inside the loop" in simd.analyze(X86_CALL).reason
    assert "mixed types" in simd.analyze(X86_CONVERT).reason
    assert "a branch" in simd.analyze(X86_BRANCH).reason
    # The wrappers' packed moves (struct copies) are not the function's vectorized loop.
    wrapper_only = X86_CALL.replace("_ZN8__main__1f:", "_ZN7cpython8__main__1f:")
    assert simd.analyze(wrapper_only).summary() == "no loop in the compiled code"
    with pytest.raises(TypeError, match="assembly text"):
        simd.analyze(b"bytes")  # type: ignore[arg-type]
