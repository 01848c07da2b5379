"""Was the hot loop vectorized? Read from the machine code Numba produced (``dispatcher.inspect_asm(signature)``).

Pure text parsing, no Numba import: :func:`analyze` takes the assembly text of one compiled
function and returns a :class:`SimdVerdict`:

- the *loops* are the spans from a label to a jump back to it; only the function's own code
  counts (Numba's ``cpython.`` and ``cfunc.`` wrappers, which unbox the arguments, are skipped);
- a loop is *vectorized* when it does packed work on the loop's data: on x86-64 an AVX/SSE
  ``...pd``/``...ps`` or packed-integer instruction (``vaddpd``, ``vfmadd231pd``, ``vpaddq``...),
  whose register names its width (``xmm`` 128-bit SSE, ``ymm`` 256-bit AVX2, ``zmm`` 512-bit
  AVX-512); on aarch64 an instruction on NEON ``v`` registers with an arrangement (``v0.2d``,
  ``v1.4s``: 128-bit; ``.2s``/``.4h``/``.8b``: 64-bit) or on SVE ``z`` registers (scalable width);
- what does not count: packed moves (Numba's wrappers copy structs with them), and packed
  arithmetic or bit operations on one lane. LLVM computes ``abs``, negation and ``copysign`` of a
  scalar with a packed ``and``/``xor``/``or`` against a sign mask (``vandpd %xmm1, %xmm0, %xmm0``
  after a scalar ``vsubsd``): the instruction is packed, the loop is not. So each register in a
  loop is followed: a scalar load or scalar arithmetic makes it one lane, a full-width load from
  the loop's arrays (not a constant from ``(%rip)``) or a counted packed instruction makes it
  packed data. A bit operation or compare counts only when it reads packed data; packed
  arithmetic counts unless everything it reads is one lane;
- otherwise the likely reason, read from the innermost loop with the most arithmetic, in this
  order: a call in the loop, int/float conversions (mixed types), a second conditional jump
  (a branch), a scalar result feeding the next iteration (a dependency between iterations:
  a running sum, or ``a[i]`` from ``a[i-1]``).

These are heuristics about what LLVM did, worded as "likely"; the packed instructions and
their width are read, not guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# x86-64 (AT&T syntax, as LLVM prints it): packed float arithmetic ends in pd/ps; packed integer starts with p.
_X86_PACKED_FLOAT = re.compile(
    r"^v?(add|sub|mul|div|sqrt|max|min|fn?m(add|sub)(132|213|231)?|and|andn|or|xor|hadd|hsub|addsub|rcp|rsqrt"
    r"|round|cmp\w*)p[sd]$")
_X86_PACKED_INT = re.compile(r"^v?p(add|sub|mul|mull|madd|max|min|and|andn|or|xor|sll|srl|sra|cmp\w*|abs|avg|sad)"
                             r"[bwdq]?\w*$")
_X86_SCALAR_FLOAT = re.compile(r"^v?(add|sub|mul|div|sqrt|max|min|fn?m(add|sub)(132|213|231)?)s[sd]$")
_X86_CONVERT = re.compile(r"^v?cvt\w+$")
_X86_WIDTH = (("zmm", 512, "AVX-512"), ("ymm", 256, "AVX2"), ("xmm", 128, "SSE"))
# aarch64: NEON vector registers with an arrangement; SVE scalable registers.
_NEON_REG = re.compile(r"\bv\d+\.(\d+)([bhsd])\b")
_SVE_REG = re.compile(r"\bz\d+\.[bhsd]\b")
_A64_ARITH = re.compile(r"^(f?(add|sub|mul|div|mla|mls|max|min|sqrt|neg|abs)|fmla|fmls|fmadd|fmsub|and|orr|eor"
                        r"|addp|faddp|fmaxnm|fminnm)\w*$")
_A64_CONVERT = re.compile(r"^(scvtf|ucvtf|fcvt\w*)$")
_A64_SCALAR_REG = re.compile(r"\b[dsh]\d+\b")
_ELEMENT_BITS = {"b": 8, "h": 16, "s": 32, "d": 64}

_LABEL = re.compile(r"^([.\w$@]+):")
_JUMP_X86 = re.compile(r"^j\w*$")
_JUMP_A64 = re.compile(r"^(b(\.\w+)?|cbn?z|tbn?z)$")
_CALL = re.compile(r"^(call\w*|bl|blr)$")


@dataclass(frozen=True)
class SimdVerdict:
    """What the machine code of one compiled function says about its hot loop."""

    arch: str  # "x86-64" | "aarch64" | "?"
    vectorized: bool
    width_bits: int = 0  # widest packed register in a loop (0: none; -1: SVE, scalable)
    isa: str = ""  # "AVX2", "AVX-512", "SSE", "NEON", "SVE"
    packed: int = 0  # packed instructions inside loops that work on more than one lane of data
    loops: int = 0  # loops found in the function's own code
    reason: str = ""  # when not vectorized: the likely reason, in plain words

    def summary(self) -> str:
        """One line: ``vectorized: AVX2, 256-bit (12 packed instructions in its loops)`` or ``not vectorized: ...``."""
        if self.vectorized:
            width = "scalable width" if self.width_bits < 0 else f"{self.width_bits}-bit"
            return f"vectorized: {self.isa}, {width} ({self.packed} packed instructions in its loops)"
        if not self.loops:
            return "no loop in the compiled code"
        return f"not vectorized: {self.reason}" if self.reason else "not vectorized"


def _own_code(asm: str) -> list[str]:
    """The instruction and label lines of the function itself (not Numba's wrappers), comments stripped."""
    out: list[str] = []
    keep = True
    for raw in asm.splitlines():
        line = raw.split("#", 1)[0].split("//", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        m = _LABEL.match(line)
        if m and not m.group(1).startswith("."):  # a symbol: a new function begins
            name = m.group(1)
            keep = not (name.startswith("cfunc.") or "cpython" in name or name.startswith("NRT_"))
            continue
        if not keep or (line.startswith(".") and not m):  # directives
            continue
        out.append(line)
    return out


def _split(line: str) -> tuple[str, str]:
    op, _, rest = line.partition("\t") if "\t" in line else line.partition(" ")
    return op.strip().lower(), rest.strip()


def _arch(lines: list[str]) -> str:
    text = "\n".join(lines)
    if re.search(r"%[re]?[a-z]{2}\b|%[xyz]mm\d+", text):
        return "x86-64"
    if re.search(r"\b[xw]\d+\b|\bv\d+\.\d*[bhsd]\b|\bz\d+\.[bhsd]\b", text):
        return "aarch64"
    return "?"


def _loops(lines: list[str], arch: str) -> list[tuple[int, int]]:
    """``(first, last)`` line indexes of every loop: a label and a later jump back to it."""
    labels: dict[str, int] = {}
    loops = []
    jump = _JUMP_X86 if arch == "x86-64" else _JUMP_A64
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = i
            continue
        op, rest = _split(line)
        if jump.match(op):
            target = rest.split(",")[-1].strip()
            if target in labels:
                loops.append((labels[target], i))
    return loops


def _packed(op: str, rest: str, arch: str) -> tuple[int, str] | None:
    """``(width in bits, ISA)`` when this is a packed arithmetic instruction, else None."""
    if arch == "x86-64":
        if not (_X86_PACKED_FLOAT.match(op) or _X86_PACKED_INT.match(op)):
            return None
        for reg, bits, isa in _X86_WIDTH:
            if f"%{reg}" in rest:
                return bits, isa
        return None
    if _SVE_REG.search(rest) and _A64_ARITH.match(op):
        return -1, "SVE"
    m = _NEON_REG.search(rest)
    if m and _A64_ARITH.match(op):
        lanes, kind = int(m.group(1)), m.group(2)
        return lanes * _ELEMENT_BITS[kind], "NEON"
    return None


# Bit operations and compares: how LLVM takes abs, negation and copysign of a scalar (a sign mask), so
# they count only when they read packed data.
_X86_LOGIC = re.compile(r"^v?(andn?|x?or)p[sd]$|^v?p(andn?|x?or)[dq]?$|^vpternlog[dq]$|^v?p?cmp\w*$|^v?\w*blend\w*$")
_X86_SCALAR_OUT = re.compile(r"^v?movs[sd]$|^v?mov[dq]$|^v?cvt\w*2s[sd]$|^v?(rcp|rsqrt|round)s[sd]$")
_X86_PACKED_MOVE = re.compile(r"^v?mov(u|a)p[sd]$|^v?movdq[au]\w*$")
_X86_NO_DEST = re.compile(r"^v?u?comis[sd]$|^v?p?test\w*$")
_X86_VREG = re.compile(r"%[xyz]mm(\d+)")
_A64_LOGIC = re.compile(r"^(and|orr|eor|bic|orn|bsl|bif|bit|cm\w+|fcm\w+|fac\w+)$")
_A64_VREG = re.compile(r"\b([vqdshbz])(\d+)(\.\w+)?\b")


def _operands(rest: str) -> list[str]:
    """The comma-separated operands of one instruction, commas inside ``(...)``, ``[...]`` or ``{...}`` kept."""
    out, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _packed_work(body: list[str], arch: str) -> list[tuple[int, str]]:
    """``(width, ISA)`` of each packed instruction of one loop that works on more than one lane of its data.

    Registers are followed through the body twice (a value made at the bottom of the loop is read at its
    top on the next iteration); the second pass counts.
    """
    state: dict[str, str] = {}  # register number -> "scalar" (one lane) | "packed" (loop data, full width)
    found: list[tuple[int, str]] = []
    for counting in (False, True):
        found = []
        for line in body:
            if _LABEL.match(line):
                continue
            op, rest = _split(line)
            hit = (_x86_step if arch == "x86-64" else _a64_step)(op, rest, state)
            if hit is not None and counting:
                found.append(hit)
    return found


def _x86_step(op: str, rest: str, state: dict[str, str]) -> tuple[int, str] | None:
    """Update ``state`` for one x86-64 instruction; its width and ISA when it is packed work on loop data."""
    ops = _operands(rest)
    if not ops:
        return None
    last = _X86_VREG.fullmatch(ops[-1].split()[0]) if ops[-1].startswith("%") else None
    dest = last.group(1) if last and not _X86_NO_DEST.match(op) else None
    # Two-operand SSE forms and FMA read their destination too.
    reads = ops if (dest is not None and (not op.startswith("v") or "fm" in op)) else ops[:-1] if dest else ops
    src_regs = [m.group(1) for o in reads for m in _X86_VREG.finditer(o)]
    loads_data = any("(" in o and "%rip" not in o and "{1to" not in o for o in reads)
    kinds = {state.get(r) for r in src_regs}
    counted = None
    if _X86_LOGIC.match(op):
        is_data = loads_data or "packed" in kinds
    elif _X86_PACKED_FLOAT.match(op) or _X86_PACKED_INT.match(op):
        is_data = loads_data or "packed" in kinds or not (src_regs and kinds == {"scalar"})
    elif _X86_PACKED_MOVE.match(op):
        if dest is not None:
            state[dest] = "packed" if loads_data else state.get(src_regs[0], "") if src_regs else ""
        return None
    else:
        if dest is not None:
            scalar = _X86_SCALAR_OUT.match(op) or _X86_SCALAR_FLOAT.match(op)
            state[dest] = "scalar" if scalar else ""
        return None
    if is_data:
        counted = _packed(op, rest, "x86-64")
    if dest is not None:
        state[dest] = "packed" if counted else "scalar" if "scalar" in kinds else ""
    return counted


def _a64_step(op: str, rest: str, state: dict[str, str]) -> tuple[int, str] | None:
    """Update ``state`` for one aarch64 instruction; its width and ISA when it is packed work on loop data."""
    regs = [(m.group(1), m.group(2), m.group(3)) for m in _A64_VREG.finditer(rest)]
    if not regs or op.startswith("st"):
        return None
    if op.startswith("ld"):  # ldr d1 / ldr q1 / ldp q1, q2 / ld1 {v0.2d}
        for reg in regs:  # every register a load names is written (addresses are x/w registers)
            state[reg[1]] = "scalar" if _a64_scalar(reg) else "packed"
        return None
    dest, sources = regs[0], regs[1:]
    kinds = {state.get(num) for _, num, _ in sources}
    if all(_a64_scalar(r) for r in regs):
        state[dest[1]] = "scalar"
        return None
    if _A64_LOGIC.match(op):
        is_data = "packed" in kinds
    else:
        is_data = "packed" in kinds or not (sources and kinds == {"scalar"})
    counted = _packed(op, rest, "aarch64") if is_data else None
    state[dest[1]] = "packed" if counted else "scalar" if "scalar" in kinds else ""
    return counted


def _a64_scalar(reg: tuple[str, str, str | None]) -> bool:
    """True for an aarch64 scalar FP register (``d1``, ``s0``), false for a vector one (``q1``, ``v1.2d``)."""
    return reg[0] in "dshb" and not reg[2]


def _is_arith(op: str, rest: str, arch: str) -> bool:
    if arch == "x86-64":
        return bool(_X86_SCALAR_FLOAT.match(op) or _X86_PACKED_FLOAT.match(op) or _X86_PACKED_INT.match(op)
                    or op.rstrip("bwlq") in ("add", "sub", "imul", "mul", "inc", "dec"))
    return bool(_A64_ARITH.match(op))


def _reason(body: list[str], arch: str) -> str:
    """The likely reason a loop body stayed scalar."""
    ops = [_split(line) for line in body if not _LABEL.match(line)]
    if any(_CALL.match(op) for op, _ in ops):
        return "a call inside the loop (a function Numba could not inline, e.g. a math call with no vector form)"
    convert = _X86_CONVERT if arch == "x86-64" else _A64_CONVERT
    if any(convert.match(op) for op, _ in ops):
        return "mixed types: the loop converts between integers and floats each iteration"
    # A scalar float result that is an input of the same instruction: each iteration needs the previous one.
    for op, rest in ops:
        scalar = _X86_SCALAR_FLOAT.match(op) if arch == "x86-64" else (
            _A64_ARITH.match(op) and op.startswith("f") and _A64_SCALAR_REG.search(rest))
        if not scalar:
            continue
        regs = re.findall(r"%xmm\d+" if arch == "x86-64" else r"\b[dsh]\d+\b", rest)
        dest = regs[-1] if arch == "x86-64" and regs else (regs[0] if regs else None)
        if dest is not None and regs.count(dest) > 1:
            return ("a dependency between iterations: each one needs the previous one's result (a running sum, "
                    "or a[i] computed from a[i-1]), so the elements cannot be done side by side")
    # After the dependency: the JIT compiles with bounds checks (an index out of range raises IndexError, as in
    # Python), which put a branch in a loop that reads a[i - 1]; the dependency is what keeps that loop scalar.
    jump = _JUMP_X86 if arch == "x86-64" else _JUMP_A64
    if sum(1 for op, _ in ops if jump.match(op) and op not in ("jmp", "b")) > 1:
        return "a branch inside the loop (an if that decides per element)"
    return "LLVM kept it scalar (no packed instructions in the loop)"


def analyze(asm: str) -> SimdVerdict:
    """Read the compiled function's assembly (``dispatcher.inspect_asm(sig)``) into a :class:`SimdVerdict`."""
    if not isinstance(asm, str):
        raise TypeError(f"analyze() reads assembly text, got {type(asm).__name__}")
    lines = _own_code(asm)
    arch = _arch(lines)
    loops = _loops(lines, arch)
    if not loops:
        return SimdVerdict(arch, False)
    best_bits, best_isa, packed = 0, "", 0
    for first, last in loops:
        for bits, isa in _packed_work(lines[first:last + 1], arch):
            packed += 1
            if bits < 0 or (best_bits >= 0 and bits > best_bits):
                best_bits, best_isa = bits, isa
    if packed:
        return SimdVerdict(arch, True, best_bits, best_isa, packed, len(loops))
    # Not vectorized: the innermost loop with the most arithmetic is the hot one.
    inner = [(a, b) for a, b in loops if not any(a < c and d <= b and (c, d) != (a, b) for c, d in loops)]
    first, last = max(inner or loops, key=lambda ab: sum(_is_arith(*_split(x), arch) for x in lines[ab[0]:ab[1] + 1]))
    return SimdVerdict(arch, False, loops=len(loops), reason=_reason(lines[first:last + 1], arch))


def of_dispatcher(dispatcher: object, signature: object) -> SimdVerdict | None:
    """:func:`analyze` of a Numba dispatcher's code for ``signature`` (None where Numba cannot show it)."""
    try:
        asm = dispatcher.inspect_asm(signature)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the verdict is extra evidence: a compiled function stands without it
        return None
    return analyze(asm)
