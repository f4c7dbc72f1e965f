"""Hand-built IR kernels and oracles shared by the interpreter tests.

The kernels are built with :mod:`iron.core.builder` directly, so these tests
do not depend on the Python frontend.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from iron.core import dtypes as D
from iron.core.builder import Builder, new_kernel, tensor
from iron.core.eval import np_dtype
from iron.core.ir import Kernel, Value
from iron.core.types import IRType, ScalarType, VectorType
from iron.runtime.interp import run

F16, BF16, F32, F64 = (ScalarType(d) for d in (D.f16, D.bf16, D.f32, D.f64))
I8, I16, I32, I64 = (ScalarType(d) for d in (D.i8, D.i16, D.i32, D.i64))
U8, U16, U32, U64 = (ScalarType(d) for d in (D.u8, D.u16, D.u32, D.u64))
BOOL = ScalarType(D.bool_)


class KernelBuilder:
    """A kernel under construction, with its parameters by name."""

    def __init__(self, name: str, **params: IRType):
        self.kernel, self.b = new_kernel(name, list(params.items()))
        self.p = {p.name: p.value for p in self.kernel.params}

    def op(self, opcode: str, *operands: Value, hint: str | None = None, **attrs: Any) -> Value:
        return self.b.op(opcode, list(operands), hint=hint, **attrs)

    def const(self, value: Any, dt: D.DType | IRType) -> Value:
        return self.b.const(value, dt)

    def i32(self, value: int) -> Value:
        return self.b.const(value, D.i32)

    def gid(self, axis: int = 0) -> Value:
        return self.b.op("program_id", axis=axis, hint="gid")

    def tid(self, axis: int = 0) -> Value:
        return self.b.op("thread_id", axis=axis, hint="tid")


def elementwise_kernel(opcode: str, operand_types: Sequence[IRType], attrs: dict | None = None) -> Kernel:
    """``out[i] = opcode(a0[i], a1[i], ...)``; vector operands use vload/vstore at ``i * width``."""
    attrs = dict(attrs or {})
    params = {f"a{j}": tensor(t.dtype, readonly=True) for j, t in enumerate(operand_types)}
    from iron.core.ops import infer_type

    result_type = infer_type(opcode, list(operand_types), attrs)
    kb = KernelBuilder(f"ew_{opcode}", **params, out=tensor(result_type.dtype))
    i = kb.gid()
    values = []
    for j, t in enumerate(operand_types):
        values.append(_load(kb, kb.p[f"a{j}"], i, t))
    r = kb.op(opcode, *values, **attrs)
    if isinstance(result_type, VectorType):
        base = kb.op("mul", i, kb.i32(result_type.width))
        kb.op("vstore", kb.p["out"], base, r)
    else:
        kb.op("store", kb.p["out"], i, r)
    return kb.kernel


def _load(kb: KernelBuilder, t: Value, i: Value, ty: IRType) -> Value:
    if isinstance(ty, VectorType):
        base = kb.op("mul", i, kb.i32(ty.width))
        return kb.op("vload", t, base, width=ty.width)
    return kb.op("load", t, i)


def run_elementwise(opcode: str, operands: Sequence[np.ndarray], operand_types: Sequence[IRType],
                    attrs: dict | None = None, **launch: Any) -> np.ndarray:
    """Run ``opcode`` elementwise through the interpreter; operands are (n,) or (n, width) arrays."""
    from iron.core.ops import infer_type

    k = elementwise_kernel(opcode, operand_types, attrs)
    rt = infer_type(opcode, list(operand_types), dict(attrs or {}))
    n = operands[0].shape[0]
    shape = (n, rt.width) if isinstance(rt, VectorType) else (n,)
    out = np.zeros(shape, dtype=np_dtype(rt.dtype))
    run(k, [np.ascontiguousarray(o) for o in operands] + [out], (n,), (64,), **launch)
    return out


# ---------------------------------------------------------------- a shared-memory reduction

#: Group size of the shared-memory reduction kernel.
GROUP = 256


def reduction_kernel(barrier_in_loop: bool = True, block: int = GROUP) -> Kernel:
    """``out[g] = sum(x[g*block:(g+1)*block])`` by halving in shared memory."""
    kb = KernelBuilder("block_sum", x=tensor(D.f32, True), out=tensor(D.f32))
    i, t = kb.gid(), kb.tid()
    sh = kb.b.op("shared_alloc", [], hint="partial", dtype=D.f32, shape=(block,))
    kb.op("store", sh, t, kb.op("load", kb.p["x"], i))
    kb.b.op("barrier")
    s = kb.op("var", type=I32, hint="s")
    kb.op("var_store", s, kb.i32(block // 2))
    loop = kb.b.loop()
    with kb.b.at(loop.regions[0]):
        sv = kb.op("var_load", s)
        done = kb.b.if_(kb.op("le", sv, kb.i32(0)))
        with kb.b.at(done.regions[0]):
            kb.b.op("break")
        active = kb.b.if_(kb.op("lt", t, sv))
        with kb.b.at(active.regions[0]):
            mine = kb.op("load", sh, t)
            other = kb.op("load", sh, kb.op("add", t, sv))
            kb.op("store", sh, t, kb.op("add", mine, other))
        if barrier_in_loop:
            kb.b.op("barrier")
        kb.op("var_store", s, kb.op("shr", sv, kb.i32(1)))
    first = kb.b.if_(kb.op("eq", t, kb.i32(0)))
    with kb.b.at(first.regions[0]):
        kb.op("store", kb.p["out"], kb.op("group_id", axis=0), kb.op("load", sh, kb.i32(0)))
    return kb.kernel


def tree_sum(x: np.ndarray, block: int) -> np.ndarray:
    """The same halving order in f32, so the result must match bit for bit."""
    acc = x.reshape(-1, block).copy()
    s = block // 2
    while s > 0:
        acc[:, :s] += acc[:, s:2 * s]
        s //= 2
    return acc[:, 0]


# ---------------------------------------------------------------- oracles

def _finite_table(dt: D.DType) -> tuple[np.ndarray, np.ndarray]:
    """Every finite value of a 16-bit float type, sorted, with its bit pattern."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        vals = bits.view(np_dtype(dt)).astype(np.float64)
    ok = np.isfinite(vals) & (bits != 0x8000)  # one zero: exact zeros never get here
    order = np.argsort(vals[ok], kind="stable")
    return vals[ok][order], bits[ok][order]


_TABLES: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def round_exact_oracle(x: Fraction | float, dt: D.DType) -> float:
    """Round an exact value to a 16-bit float type by searching its table of values (ties to even)."""
    if isinstance(x, float) and (not np.isfinite(x) or x == 0):
        return x  # infinities, NaN and signed zeros are exact
    if dt.name not in _TABLES:
        _TABLES[dt.name] = _finite_table(dt)
    vals, bits = _TABLES[dt.name]
    xf = Fraction(x)
    top = Fraction(float(vals[-1]))
    ulp_top = top - Fraction(float(vals[-2]))
    if abs(xf) >= top + ulp_top / 2:
        return float(np.copysign(np.inf, float(xf)))
    j = int(np.searchsorted(vals, float(xf)))
    best, best_d = None, None
    for k in (j - 1, j, j + 1):
        if 0 <= k < len(vals):
            d = abs(Fraction(float(vals[k])) - xf)
            if best is None or d < best_d or (d == best_d and int(bits[k]) % 2 == 0):
                best, best_d = float(vals[k]), d
    return -0.0 if best == 0.0 and xf < 0 else best


def round_to(x: np.ndarray, dt: D.DType) -> np.ndarray:
    """An independent oracle: round exact f64 values to ``dt`` (tables for 16-bit types)."""
    if dt.bits == 64:
        return x.astype(np.float64)
    if dt.bits == 32:
        return x.astype(np.float32)  # numpy's f64 -> f32 conversion rounds once
    flat = [round_exact_oracle(float(v), dt) for v in np.asarray(x, dtype=np.float64).reshape(-1)]
    return np.array(flat, dtype=np.float64).astype(np_dtype(dt)).reshape(np.shape(x))


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal element for element, NaN matching NaN and -0.0 differing from +0.0."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        af, bf = a.astype(np.float64), b.astype(np.float64)
        both_nan = np.isnan(af) & np.isnan(bf)
        return bool(np.all(both_nan | ((af == bf) & (np.signbit(af) == np.signbit(bf)))))
    return bool(np.array_equal(a, b))


def builder_for(kernel: Kernel) -> Builder:
    return Builder(kernel.body)
