"""The SIMD verdict read from machine code: real Numba compiles here, and snippets of both architectures."""

from __future__ import annotations

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
