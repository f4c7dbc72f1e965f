"""The 8-bit floats on every target: f8e4m3 / f8e5m2 become u8 storage, converted with integer bit operations.

No target Iron emits for has an 8-bit float scalar type it could print in every context (CUDA's
``__nv_fp8_e4m3`` is a header class, HIP's differs between MI300's FNUZ and the OCP formats, GLSL and MSL
have none), so the values travel as their bytes and every conversion is spelled out in the IR, where the
interpreter can prove it exact against ``iron.core.eval``'s meaning (round to nearest even, saturating to the
largest finite value, NaN kept with its sign):

* f32 -> f8 rounds the f32's bits once at the format's precision (normal numbers: add half an ulp minus one
  plus the kept bit, shift; subnormals: the significand shifted by how far the exponent lies below the
  format's smallest, rounded the same way); past the largest value, infinities included, it saturates.
* f8 -> f32 is exact: the exponent re-biased and the mantissa moved up, subnormals as mantissa x 2^(1-B-M).
* Other sources reach f32 first: f16 and bf16 exactly; integers exactly wherever the result does not
  saturate (every f8 value and its rounding neighbourhood is an integer or fraction f32 holds exactly);
  f64 rounded to odd first, so the second rounding is the only one that counts.

Arithmetic never sees f8 here: ``promote_narrow_floats`` runs first and leaves only casts, copies and selects.
Tensors a warpgroup multiply reads keep their f8 type (the multiply needs to know the format), together with
the tensors tile copies or asynchronous copies move them from; besides those ops only scalar loads and stores
may touch them, each reinterpreting the byte at the access (``bitcast``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import dtypes as D
from ..core.errors import UnsupportedOnTarget
from ..core.ir import Kernel, Op, Param, Value
from ..core.ops import OPS
from ..core.types import IRType, ScalarType, TensorType, VarType, VectorType, with_dtype
from .passes._rewrite import KEEP, Emitter, rebuild

_U8, _U32 = D.u8, D.u32


@dataclass(frozen=True)
class F8Format:
    """An 8-bit float's fields: exponent and mantissa widths, bias, largest finite and NaN encodings."""

    exp_bits: int
    man_bits: int
    bias: int
    largest: int
    nan: int
    has_inf: bool

    @property
    def smallest_normal_f32_exponent(self) -> int:
        """The f32 biased exponent of the format's smallest normal number."""
        return 127 + 1 - self.bias


FORMATS: dict[D.DType, F8Format] = {
    D.f8e4m3: F8Format(exp_bits=4, man_bits=3, bias=7, largest=0x7E, nan=0x7F, has_inf=False),
    D.f8e5m2: F8Format(exp_bits=5, man_bits=2, bias=15, largest=0x7B, nan=0x7E, has_inf=True),
}

#: Ops that may touch an f8 tensor kept for a warpgroup multiply: the multiply, the copies that feed it, and
#: scalar loads and stores (which move the bytes, reinterpreted at the access).
_MATRIX_OPS = frozenset({"mma_wg", "tile_copy", "tile_store", "copy_async", "shared_alloc", "load", "store"})
_COPIES = frozenset({"tile_copy", "tile_store", "copy_async"})
_COMPUTING_CATEGORIES = frozenset({"atomic", "subgroup", "unary", "binary", "compare", "ternary", "fragment"})


def _bits_type(t: IRType) -> IRType:
    if isinstance(t, (ScalarType, VectorType)) and t.dtype in FORMATS:
        return with_dtype(t, _U8)
    if isinstance(t, TensorType) and t.dtype in FORMATS:
        return TensorType(_U8, t.space, t.readonly, t.shape)
    if isinstance(t, VarType):
        return VarType(_bits_type(t.elem))
    return t


def _mentions_f8(t: IRType) -> bool:
    return isinstance(t, (ScalarType, VectorType, TensorType)) and t.dtype in FORMATS


def _f8_type(t: Any) -> bool:
    return isinstance(t, IRType) and (_mentions_f8(t) or (isinstance(t, VarType) and _f8_type(t.elem)))


def _uses_f8(kernel: Kernel) -> bool:
    """Whether any parameter, result or type attribute of ``kernel`` is an 8-bit float."""
    if any(_mentions_f8(p.type) for p in kernel.params):
        return True
    for op in kernel.walk():
        if op.result is not None and _f8_type(op.result.type):
            return True
        if any(op.attrs.get(key) in FORMATS for key in ("dtype", "to")) or _f8_type(op.attrs.get("type")):
            return True
    return False


def f8_bits(value: float, dt: D.DType) -> int:
    """The byte of an f8 value (given exactly, as the IR stores f8 constants)."""
    import numpy as np

    from ..core.eval import round_f64

    return int(round_f64(np.asarray([value], dtype=np.float64), dt).view(np.uint8)[0])


def matrix_tensors(kernel: Kernel, target: str) -> frozenset[Value]:
    """The f8 tensors warpgroup multiplies read, and those copies move them from or to; refuse other uses."""
    kept = {v for op in kernel.walk() if op.opcode == "mma_wg"
            for v in op.operands if isinstance(v.type, TensorType) and v.type.dtype in FORMATS}
    grown = True
    while grown:
        grown = False
        for op in kernel.walk():
            if op.opcode in _COPIES and kept.intersection(op.operands):
                new = {v for v in op.operands if isinstance(v.type, TensorType)} - kept
                kept |= new
                grown = grown or bool(new)
    for op in kernel.walk():
        if op.opcode not in _MATRIX_OPS and kept.intersection(op.operands):
            raise UnsupportedOnTarget(
                f"an f8 tensor that a warpgroup multiply reads is also accessed by '{op.opcode}'; {target} keeps "
                "such tensors as the multiply's operand bytes, which only copies, scalar loads and stores and the "
                "multiply may touch", op.loc, "load and store one element at a time, or pass the data as two tensors")
    return frozenset(kept)


def lower_f8_to_bits(kernel: Kernel, target: str) -> Kernel:
    """f8 becomes u8 storage; conversions become integer bit operations (see the module doc)."""
    if not _uses_f8(kernel):
        return kernel  # most kernels: nothing to rewrite, so no copy of the IR
    kept = matrix_tensors(kernel, target)

    def param_rule(p: Param, e: Emitter) -> tuple[Param, Value] | None:
        t = p.type
        if p.value in kept:
            return None
        if isinstance(t, TensorType) and t.dtype in FORMATS:
            new = Param(p.name, Value(_bits_type(t), p.value.hint), p.access)
            return new, new.value
        if isinstance(t, ScalarType) and t.dtype in FORMATS:
            # The parameter block carries f8 as the f32 of the same value (abi.py): exact to encode.
            new = Param(p.name, Value(ScalarType(D.f32), p.value.hint), p.access)
            return new, encode_f8(e, new.value, t.dtype, hint=p.value.hint)
        return None

    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        code = op.opcode
        if code == "const" and isinstance(op.result.type, ScalarType) and op.result.type.dtype in FORMATS:
            return e.op("const", value=f8_bits(op.attrs["value"], op.result.type.dtype), type=ScalarType(_U8))
        if code == "var":
            return e.op(code, hint=_hint(op), **{**op.attrs, "type": _bits_type(op.attrs["type"])})
        if code == "shared_alloc" and op.attrs["dtype"] in FORMATS and op.result not in kept:
            return e.op(code, hint=_hint(op), **{**op.attrs, "dtype": _U8})
        if code == "cast":
            return _cast(op, args[0], e, target)
        if code == "load" and op.operands[0] in kept:
            return e.op("bitcast", e.op("load", *args), hint=_hint(op), to=_U8)
        if code == "store" and op.operands[0] in kept:
            tensor, index, value = args
            return e.op("store", tensor, index, e.op("bitcast", value, to=op.operands[0].type.dtype))
        if code == "bitcast":
            src, dst = op.operands[0].type.dtype, op.attrs["to"]
            if src not in FORMATS and dst not in FORMATS:
                return KEEP
            to = _U8 if dst in FORMATS else dst
            return args[0] if args[0].type == ScalarType(to) else e.op("bitcast", args[0], hint=_hint(op), to=to)
        computes = OPS[code].category in _COMPUTING_CATEGORIES and code not in _MATRIX_OPS and code != "select"
        if computes and any(_mentions_f8(v.type) for v in op.operands):
            # promote_narrow_floats runs first, so this is an atomic, a fragment op or one it does not cover.
            raise UnsupportedOnTarget(f"'{code}' on f8 values has no {target} form", op.loc,
                                      "convert to f16 or f32 first")
        return KEEP

    return rebuild(kernel, rule, param_rule)


def _hint(op: Op) -> str | None:
    return op.result.hint if op.result is not None else None


def _cast(op: Op, x: Value, e: Emitter, target: str) -> Any:
    src, dst = op.operands[0].type.dtype, op.attrs["to"]
    hint = _hint(op)
    if src not in FORMATS and dst not in FORMATS:
        return KEEP
    if src == dst:
        return x
    if src in FORMATS:
        f = decode_f8(e, x, src, hint=hint if dst == D.f32 else None)
        if dst in FORMATS:
            return encode_f8(e, f, dst, hint=hint)
        return f if dst == D.f32 else e.cast(f, dst, hint=hint)
    if src == D.f64:
        from .legalize import _f64_to_f32_odd

        return encode_f8(e, _f64_to_f32_odd(e, x), dst, hint=hint)
    if src == D.f32:
        return encode_f8(e, x, dst, hint=hint)
    # f16 and bf16 are exact in f32; so is every integer the result does not saturate (|x| < 2**24).
    return encode_f8(e, e.cast(x, D.f32), dst, hint=hint)


def encode_f8(e: Emitter, x: Value, dt: D.DType, hint: str | None = None) -> Value:
    """f32 -> the f8 byte of ``dt``: rounded to nearest even, saturated, NaN kept with its sign."""
    fmt = FORMATS[dt]

    def c(v: int) -> Value:
        return e.const(v, _U32)

    u = e.op("bitcast", x, to=_U32)
    sign = e.op("band", e.op("shr", u, c(24)), c(0x80))
    a = e.op("band", u, c(0x7FFFFFFF))
    exponent = e.op("shr", a, c(23))
    # Normal results: round the f32 bits at the format's precision, then re-bias the exponent.
    drop = 23 - fmt.man_bits
    kept_bit = e.op("band", e.op("shr", a, c(drop)), c(1))
    rounded = e.op("shr", e.op("add", a, e.op("add", kept_bit, c((1 << (drop - 1)) - 1))), c(drop))
    normal = e.op("sub", rounded, c((127 - fmt.bias) << fmt.man_bits))
    # Subnormal results: the significand (implicit bit included) shifted by the exponent's distance below.
    low = fmt.smallest_normal_f32_exponent
    is_f32_subnormal = e.op("eq", exponent, c(0))
    significand = e.op("bor", e.op("band", a, c(0x7FFFFF)), e.op("select", is_f32_subnormal, c(0), c(0x800000)))
    effective = e.op("select", is_f32_subnormal, c(1), exponent)
    shift = e.op("sub", c(low + drop), effective)
    shift = e.op("select", e.op("lt", shift, c(31)), shift, c(31))
    half_less_one = e.op("sub", e.op("shl", c(1), e.op("sub", shift, c(1))), c(1))
    odd = e.op("band", e.op("shr", significand, shift), c(1))
    subnormal = e.op("shr", e.op("add", significand, e.op("add", half_less_one, odd)), shift)
    bits = e.op("select", e.op("ge", exponent, c(low)), normal, subnormal)
    bits = e.op("select", e.op("gt", bits, c(fmt.largest)), c(fmt.largest), bits)
    bits = e.op("select", e.op("gt", a, c(0x7F800000)), c(fmt.nan), bits)
    return e.cast(e.op("bor", bits, sign), _U8, hint=hint)


def decode_f8(e: Emitter, byte: Value, dt: D.DType, hint: str | None = None) -> Value:
    """The f8 byte of ``dt`` -> the f32 of the same value (exact)."""
    fmt = FORMATS[dt]

    def c(v: int) -> Value:
        return e.const(v, _U32)

    b = e.cast(byte, _U32)
    sign = e.op("shl", e.op("band", b, c(0x80)), c(24))
    exponent = e.op("band", e.op("shr", b, c(fmt.man_bits)), c((1 << fmt.exp_bits) - 1))
    mantissa = e.op("band", b, c((1 << fmt.man_bits) - 1))
    normal = e.op("bor", e.op("shl", e.op("add", exponent, c(127 - fmt.bias)), c(23)),
                  e.op("shl", mantissa, c(23 - fmt.man_bits)))
    scale = e.const(2.0 ** (1 - fmt.bias - fmt.man_bits), D.f32)
    subnormal = e.op("bitcast", e.op("mul", e.cast(mantissa, D.f32), scale), to=_U32)
    magnitude = e.op("select", e.op("eq", exponent, c(0)), subnormal, normal)
    top = (1 << fmt.exp_bits) - 1
    if fmt.has_inf:
        special = e.op("select", e.op("eq", mantissa, c(0)), c(0x7F800000), c(0x7FC00000))
        magnitude = e.op("select", e.op("eq", exponent, c(top)), special, magnitude)
    else:
        is_nan = e.op("eq", e.op("band", b, c(0x7F)), c(fmt.nan))
        magnitude = e.op("select", is_nan, c(0x7FC00000), magnitude)
    return e.op("bitcast", e.op("bor", magnitude, sign), hint=hint, to=D.f32)
