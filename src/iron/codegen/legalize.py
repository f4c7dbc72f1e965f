"""Per-target legalisation: IR -> IR rewrites that remove what a target cannot print directly.

The emitters print one statement per op, so every op that reaches them must
have a direct, semantics-preserving spelling on the target.  These rewrites
close the gaps *in the IR*, where the interpreter can run the result and
prove it unchanged (tests/codegen/test_legalize.py runs each one against the
original kernel):

* :func:`lower_bool_tensors` (GLSL): std430 has no 1-byte bool, so bool
  buffers become u8 buffers with an explicit ``!= 0`` / ``0 or 1``.
* :func:`scalarize_vectors` (all): vector arithmetic, comparisons, selects
  and casts become per-element scalar ops.  Only vector memory accesses and
  vector values (``vload``/``vstore``/``vec_make``/``vec_extract``, slots)
  stay vectors, so no target's vector-operator rules (CUDA has none, GLSL's
  ``min`` on NaN is undefined) leak into the semantics.
* :func:`promote_narrow_floats` (all): f16/bf16/f8 arithmetic runs in f32 and is
  rounded back after every op.  For ``+ - * / sqrt`` and the exact ops this
  is bit for bit the interpreter's once-rounded result (f32 carries more than
  twice the precision plus two bits); transcendentals and ``fma`` may differ
  by a rounding in rare ties, as a GPU's own f16 math does.
* :func:`widen_subgroup_values` (all): subgroup ops on 8/16-bit ints and bools
  run on 32-bit ints (shuffle intrinsics have no narrower forms everywhere).
* :func:`lower_lane_shuffles` (all): ``simd_shuffle_up/down/xor`` become a
  ``simd_shuffle`` from an explicitly computed lane, which gives the IR's
  off-the-end rule (keep your own value) on every target, whatever its
  intrinsic does there; plain shuffle lanes are reduced modulo the width.
* :func:`lower_bf16_to_bits` (GLSL, HIP): bf16 becomes u16 storage; values
  are converted with integer bit operations (f32 -> bf16 rounds to nearest
  even, NaN stays a quiet NaN of the same sign, as ml_dtypes does), exact
  also from i32/u32/f64 sources (round to odd first, then to bf16).
* :func:`iron.codegen.f8_bits.lower_f8_to_bits` (all): f8e4m3 / f8e5m2
  become u8 storage, converted with integer bit operations the same way.

:func:`small_int_powers` (GLSL) is not exact: see its docstring.  Each is
a registered pass (:data:`LEGALIZE_PASSES`); a backend's record lists the
ones it runs, in order (``iron.codegen.backends``), and :func:`legalize`
runs them through the same pass manager as the optimisation pipeline,
visible in ``iron inspect --passes --target T``.  Every function is pure
(the input kernel is not changed).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from dataclasses import dataclass

from .. import config
from ..core import dtypes as D
from ..core.errors import UnsupportedOnTarget
from ..core.ir import Kernel, Op, Param, Value
from ..core.ops import OPS
from ..core.types import IRType, ScalarType, TensorType, VarType, VectorType, with_dtype
from .backends import get_target
from .f8_bits import lower_f8_to_bits
from .passes import Pass, run_passes
from .passes._rewrite import KEEP, Emitter, rebuild

def _rebuild_param(p: Param, new_type: IRType) -> Param:
    return Param(p.name, Value(new_type, p.value.hint), p.access)


# ---------------------------------------------------------------- bool tensors (GLSL)

def lower_bool_tensors(kernel: Kernel) -> Kernel:
    """Global bool tensors become u8 tensors: loads compare with 0, stores write 0 or 1."""
    was_bool: set[Value] = set()

    def param_rule(p: Param, e: Emitter) -> tuple[Param, Value] | None:
        t = p.type
        if isinstance(t, TensorType) and t.dtype == D.bool_:
            new = _rebuild_param(p, TensorType(D.u8, t.space, t.readonly, t.shape))
            was_bool.add(new.value)
            return new, new.value
        return None

    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        if not args or args[0] not in was_bool:
            return KEEP
        if op.opcode in ("load", "vload"):
            raw = e.op(op.opcode, *args, **op.attrs)
            return e.op("ne", raw, _splat_zero(e, raw.type), hint=_hint(op))
        if op.opcode in ("store", "vstore"):
            return e.op(op.opcode, args[0], args[1], e.cast(args[2], D.u8))
        raise UnsupportedOnTarget(f"'{op.opcode}' on a bool tensor has no GLSL form", op.loc)

    return rebuild(kernel, rule, param_rule)


def _splat_zero(e: Emitter, t: IRType) -> Value:
    zero = e.const(0, t.dtype)
    if isinstance(t, VectorType):
        return e.op("vec_make", *([zero] * t.width))
    return zero


def _hint(op: Op) -> str | None:
    return op.result.hint if op.result is not None else None


# ---------------------------------------------------------------- vectors

_ELEMENTWISE = frozenset({"unary", "binary", "compare", "ternary", "cast"})


def scalarize_vectors(kernel: Kernel) -> Kernel:
    """Vector arithmetic, comparisons, selects, casts and constants become per-element ops."""
    elements: dict[Value, list[Value]] = {}  # vec_make results -> their elements (which dominate every use)

    def lanes(v: Value, width: int, e: Emitter) -> list[Value]:
        if not isinstance(v.type, VectorType):
            return [v] * width  # a scalar select condition applies to every element
        if v in elements:
            return elements[v]
        return [e.op("vec_extract", v, index=i) for i in range(width)]

    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        t = op.result.type if op.result is not None else None
        if op.opcode == "vec_make":
            made = e.op("vec_make", *args, hint=_hint(op))
            elements[made] = list(args)
            return made
        if op.opcode == "vec_extract" and args[0] in elements:
            return elements[args[0]][op.attrs["index"]]
        if op.opcode == "const" and isinstance(t, VectorType):
            parts = [e.const(x, t.dtype) for x in op.attrs["value"]]
            made = e.op("vec_make", *parts, hint=_hint(op))
            elements[made] = parts
            return made
        if OPS[op.opcode].category not in _ELEMENTWISE or not isinstance(t, VectorType):
            return KEEP
        per_lane = [lanes(a, t.width, e) for a in args]
        parts = [e.op(op.opcode, *(pl[i] for pl in per_lane), **op.attrs) for i in range(t.width)]
        made = e.op("vec_make", *parts, hint=_hint(op))
        elements[made] = parts
        return made

    return rebuild(kernel, rule)


# ---------------------------------------------------------------- narrow floats

NARROW_FLOATS = frozenset({D.f16, D.bf16, D.f8e4m3, D.f8e5m2})
_PROMOTED_CATEGORIES = frozenset({"unary", "binary", "compare"})
_PROMOTED_SUBGROUP = frozenset({"simd_sum", "simd_max", "simd_min", "simd_shuffle", "simd_broadcast",
                                "simd_shuffle_xor", "simd_shuffle_up", "simd_shuffle_down"})


def promote_narrow_floats(kernel: Kernel, dtypes: frozenset[D.DType] = NARROW_FLOATS) -> Kernel:
    """Arithmetic on ``dtypes`` runs in f32; each result is rounded back once."""
    def narrow(v: Value) -> bool:
        return isinstance(v.type, ScalarType) and v.type.dtype in dtypes

    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        cat = OPS[op.opcode].category
        promoted = (cat in _PROMOTED_CATEGORIES or op.opcode == "fma" or op.opcode in _PROMOTED_SUBGROUP)
        if not promoted or not args or not narrow(args[0]):
            return KEEP
        dt = args[0].type.dtype
        wide = [e.cast(a, D.f32) if narrow(a) else a for a in args]
        if op.opcode == "fma":
            return e.cast(_fma_to_odd(e, *wide), dt, hint=_hint(op))
        r = e.op(op.opcode, *wide, **op.attrs)
        return e.cast(r, dt, hint=_hint(op)) if r.type == ScalarType(D.f32) else _rename(r, op)

    return rebuild(kernel, rule)


def _fma_to_odd(e: Emitter, a: Value, b: Value, c: Value) -> Value:
    """``a*b + c`` of f16/bf16 values in f32, rounded to odd so that one more rounding is exact.

    The product of two 8- or 11-bit significands is exact in f32 (barring
    f32 overflow or underflow, far outside f16's range; bf16 products beyond
    f32's range are the documented exception); TwoSum gives the sum's error.
    """
    prod = e.op("mul", a, b)
    s = e.op("add", prod, c)
    bb = e.op("sub", s, prod)
    err = e.op("add", e.op("sub", prod, e.op("sub", s, bb)), e.op("sub", c, bb))
    return _round_to_odd(e, s, err, e.const(0.0, D.f32))


def _rename(v: Value, op: Op) -> Value:
    if op.result is not None and op.result.hint:
        v.hint = op.result.hint
    return v


# ---------------------------------------------------------------- subgroup operands

_NARROW_INTS = {D.i8: D.i32, D.i16: D.i32, D.u8: D.u32, D.u16: D.u32, D.bool_: D.u32}


def widen_subgroup_values(kernel: Kernel) -> Kernel:
    """Subgroup reductions and shuffles of 8/16-bit ints and bools run on 32-bit ints."""
    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        if op.opcode not in _PROMOTED_SUBGROUP or not isinstance(args[0].type, ScalarType):
            return KEEP
        dt = args[0].type.dtype
        if dt not in _NARROW_INTS:
            return KEEP
        wide = e.cast(args[0], _NARROW_INTS[dt])
        r = e.op(op.opcode, wide, *args[1:], **op.attrs)
        return e.cast(r, dt, hint=_hint(op))

    return rebuild(kernel, rule)


# ---------------------------------------------------------------- shuffles

def lower_lane_shuffles(kernel: Kernel, min_lane_width: int) -> Kernel:
    """``simd_shuffle_up/down/xor`` read from an explicitly computed lane; lanes are taken modulo the width.

    A constant broadcast lane below ``min_lane_width`` (no device of the
    profile has fewer lanes) is left as a constant, so targets can use their
    broadcast-from-constant-lane intrinsic.
    """
    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        if op.opcode not in ("simd_shuffle", "simd_broadcast", "simd_shuffle_up", "simd_shuffle_down",
                             "simd_shuffle_xor"):
            return KEEP
        x, arg = args
        if arg.type.dtype != D.i32:
            arg = e.cast(arg, D.i32)
        if op.opcode == "simd_broadcast" and arg.owner is not None and arg.owner.opcode == "const" \
                and 0 <= arg.owner.attrs["value"] < min_lane_width:
            return e.op("simd_broadcast", x, arg, hint=_hint(op))
        width = e.op("simd_size")
        if op.opcode in ("simd_shuffle", "simd_broadcast", "simd_shuffle_xor"):
            last = e.op("sub", width, e.const(1, D.i32))
            if op.opcode == "simd_shuffle_xor":
                arg = e.op("bxor", e.op("lane_id"), arg)
            src = e.op("band", arg, last, hint="src_lane")
        else:
            lane = e.op("lane_id")
            moved = e.op("sub" if op.opcode == "simd_shuffle_up" else "add", lane, arg)
            inside = e.op("land", e.op("ge", moved, e.const(0, D.i32)), e.op("lt", moved, width))
            src = e.op("select", inside, moved, lane, hint="src_lane")
        return e.op("simd_broadcast" if op.opcode == "simd_broadcast" else "simd_shuffle", x, src, hint=_hint(op))

    return rebuild(kernel, rule)


# ---------------------------------------------------------------- bf16 as bits

_U16 = D.u16


def _bits_type(t: IRType) -> IRType:
    if isinstance(t, (ScalarType, VectorType)) and t.dtype == D.bf16:
        return with_dtype(t, _U16)
    if isinstance(t, TensorType) and t.dtype == D.bf16:
        return TensorType(_U16, t.space, t.readonly, t.shape)
    if isinstance(t, VarType):
        return VarType(_bits_type(t.elem))
    return t


def bf16_bits(value: float) -> int:
    """The bit pattern of a bf16 value (given exactly, as the IR stores bf16 constants)."""
    (u,) = struct.unpack("<I", struct.pack("<f", value))
    return u >> 16


def lower_bf16_to_bits(kernel: Kernel, target: str) -> Kernel:
    """bf16 becomes u16 storage; conversions become integer bit operations (see the module doc).

    Matrix fragments are the exception: the IR types a fragment by its
    element dtype, so a bf16 tensor that fragment ops read or write keeps
    its bf16 type (the emitter declares it as 16-bit storage and decodes the
    bits itself), and a constant bf16 fill value stays a bf16 constant.
    """
    fragment_tensors = _fragment_bf16_tensors(kernel, target)
    fragment_fills = _constant_bf16_fills(kernel, target)

    def param_rule(p: Param, e: Emitter) -> tuple[Param, Value] | None:
        t = p.type
        if p.value in fragment_tensors:
            return None
        if isinstance(t, TensorType) and t.dtype == D.bf16:
            new = _rebuild_param(p, _bits_type(t))
            return new, new.value
        if t == ScalarType(D.bf16):
            # The parameter block carries bf16 as the f32 of the same value (abi.py): exact to encode.
            new = _rebuild_param(p, ScalarType(D.f32))
            return new, encode_bf16(e, new.value, hint=p.value.hint)
        return None

    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        code = op.opcode
        if code == "frag_fill" and op.attrs["dtype"] == D.bf16:
            fill = e.op("const", value=fragment_fills[op.operands[0]], type=ScalarType(D.bf16))
            return e.op("frag_fill", fill, hint=_hint(op), **op.attrs)
        if code == "const" and op.result.type == ScalarType(D.bf16):
            return e.op("const", value=bf16_bits(op.attrs["value"]), type=ScalarType(_U16))
        if code in ("var", "shared_alloc"):
            attrs = dict(op.attrs)
            if code == "var":
                attrs["type"] = _bits_type(attrs["type"])
            elif attrs["dtype"] == D.bf16:
                attrs["dtype"] = _U16
            return e.op(code, hint=_hint(op), **attrs)
        if code == "cast":
            return _cast_via_bits(op, args[0], e, target)
        if code == "bitcast":
            src_dt = op.operands[0].type.dtype
            dst_dt = op.attrs["to"]
            if D.bf16 not in (src_dt, dst_dt):
                return KEEP
            to = _U16 if dst_dt == D.bf16 else dst_dt
            if args[0].type == ScalarType(to):
                return args[0]
            return e.op("bitcast", args[0], hint=_hint(op), to=to)
        computes = OPS[code].category in _COMPUTING_CATEGORIES and code != "select"
        if computes and any(_mentions_bf16(v.type) for v in op.operands):
            # promote_narrow_floats runs first, so this is an atomic or an op it does not cover.
            raise UnsupportedOnTarget(f"'{code}' on bf16 values has no {target} form", op.loc)
        return KEEP

    return rebuild(kernel, rule, param_rule)


_COMPUTING_CATEGORIES = frozenset({"atomic", "subgroup", "unary", "binary", "compare", "ternary"})
_FRAGMENT_MEMORY = frozenset({"frag_load", "frag_store"})


def _fragment_bf16_tensors(kernel: Kernel, target: str) -> frozenset[Value]:
    """The bf16 tensor parameters fragment ops access; refuse one that other ops access too."""
    by_fragments = {op.operands[0] for op in kernel.walk()
                    if op.opcode in _FRAGMENT_MEMORY and op.operands[0].type.dtype == D.bf16}
    for op in kernel.walk():
        if op.opcode not in _FRAGMENT_MEMORY and by_fragments.intersection(op.operands):
            raise UnsupportedOnTarget(f"a bf16 tensor used by matrix fragments is also accessed by '{op.opcode}'; "
                                      f"{target} stores bf16 as bits, which fragment ops and '{op.opcode}' cannot "
                                      "share", op.loc, "pass the data as two tensors, or use f16")
    params = {p.value for p in kernel.params}
    if not by_fragments <= params:
        raise UnsupportedOnTarget(f"a shared bf16 array cannot hold matrix fragments on {target}",
                                  kernel.loc, "stage fragments through a global tensor, or use f16")
    return frozenset(by_fragments)


def _constant_bf16_fills(kernel: Kernel, target: str) -> dict[Value, float]:
    """The constant value of every bf16 ``frag_fill``'s operand (a bf16 fill must be a constant here)."""
    consts = {op.result: op.attrs["value"] for op in kernel.walk() if op.opcode == "const"}
    fills: dict[Value, float] = {}
    for op in kernel.walk():
        if op.opcode == "frag_fill" and op.attrs["dtype"] == D.bf16:
            if op.operands[0] not in consts:
                raise UnsupportedOnTarget(f"a bf16 fragment fill on {target} needs a constant value", op.loc,
                                          "fill with a constant, or load the fragment from a tensor")
            fills[op.operands[0]] = consts[op.operands[0]]
    return fills


def _mentions_bf16(t: IRType) -> bool:
    return isinstance(t, (ScalarType, VectorType, TensorType)) and t.dtype == D.bf16


def _cast_via_bits(op: Op, x: Value, e: Emitter, target: str) -> Any:
    src = op.operands[0].type.dtype
    dst = op.attrs["to"]
    hint = _hint(op)
    if src == D.bf16 and dst == D.bf16:
        return x
    if src == D.bf16:
        f = decode_bf16(e, x, hint=hint if dst == D.f32 else None)
        return f if dst == D.f32 else e.cast(f, dst, hint=hint)
    if dst != D.bf16:
        return KEEP
    if src == D.f32:
        return encode_bf16(e, x, hint=hint)
    if src in (D.f16, D.bool_) or (src.is_int and src.bits <= 16):
        return encode_bf16(e, e.cast(x, D.f32), hint=hint)  # exact in f32
    if src in (D.i32, D.u32):
        return encode_bf16(e, _int32_to_f32_odd(e, x, src), hint=hint)
    if src == D.f64:
        return encode_bf16(e, _f64_to_f32_odd(e, x), hint=hint)
    raise UnsupportedOnTarget(f"a cast from {src} to bf16 has no exact {target} form: cast through i32 first",
                              op.loc)


def decode_bf16(e: Emitter, bits: Value, hint: str | None = None) -> Value:
    """u16 bf16 bits -> the f32 of the same value (exact)."""
    wide = e.cast(bits, D.u32)
    return e.op("bitcast", e.op("shl", wide, e.const(16, D.u32)), hint=hint, to=D.f32)


def encode_bf16(e: Emitter, x: Value, hint: str | None = None) -> Value:
    """f32 -> u16 bf16 bits, rounded to nearest even; NaN becomes the quiet NaN of its sign."""
    u = e.op("bitcast", x, to=D.u32)
    high = e.op("shr", u, e.const(16, D.u32))
    lsb = e.op("band", high, e.const(1, D.u32))
    rounded = e.op("shr", e.op("add", u, e.op("add", lsb, e.const(0x7FFF, D.u32))), e.const(16, D.u32))
    quiet_nan = e.op("bor", e.op("band", high, e.const(0x8000, D.u32)), e.const(0x7FC0, D.u32))
    chosen = e.op("select", e.op("isnan", x), quiet_nan, rounded)
    return e.cast(chosen, _U16, hint=hint)


def _round_to_odd(e: Emitter, s: Value, err: Value, zero: Value) -> Value:
    """f32 ``s`` nudged to the odd neighbour toward ``s + err`` when inexact and even.

    Rounding to odd at 24 bits, then to nearest even at 8 bits, is one
    rounding to nearest of the exact value ``s + err``: no double rounding.
    """
    bits = e.op("bitcast", s, to=D.u32)
    even = e.op("eq", e.op("band", bits, e.const(1, D.u32)), e.const(0, D.u32))
    inexact = e.op("ne", err, zero)
    usable = e.op("land", e.op("isfinite", s), e.op("ne", s, e.const(0.0, D.f32)))
    fix = e.op("land", e.op("land", inexact, even), usable)
    away = e.op("eq", e.op("lt", s, e.const(0.0, D.f32)), e.op("lt", err, zero))  # |exact| > |s|
    one = e.const(1, D.u32)
    nudged = e.op("select", away, e.op("add", bits, one), e.op("sub", bits, one))
    return e.op("bitcast", e.op("select", fix, nudged, bits), to=D.f32)


def _int32_to_f32_odd(e: Emitter, x: Value, src: D.DType) -> Value:
    """A 32-bit int as f32 rounded to odd: its two 16-bit halves convert exactly, TwoSum keeps the error."""
    high_mask = e.const(-65536 if src.is_signed else 0xFFFF0000, src)
    fh = e.cast(e.op("band", x, high_mask), D.f32)
    fl = e.cast(e.op("band", x, e.const(0xFFFF, src)), D.f32)
    s = e.op("add", fh, fl)
    bb = e.op("sub", s, fh)
    err = e.op("add", e.op("sub", fh, e.op("sub", s, bb)), e.op("sub", fl, bb))
    return _round_to_odd(e, s, err, e.const(0.0, D.f32))


def _f64_to_f32_odd(e: Emitter, x: Value) -> Value:
    """An f64 as f32 rounded to odd: the rounding error of the f32 cast is exact in f64."""
    s = e.cast(x, D.f32)
    err = e.op("sub", x, e.cast(s, D.f64))
    return _round_to_odd(e, s, err, e.const(0.0, D.f64))


# ---------------------------------------------------------------- per target

#: Constant exponents turned into multiplications there: positive and small, so that no
#: intermediate overflows where pow would not (x**4 overflows exactly when x*x*x*x does).
SMALL_POWERS = (2, 3, 4)


def small_int_powers(kernel: Kernel) -> Kernel:
    """``pow(x, c)`` with ``c`` in 2, 3, 4 becomes ``x*x``, ``x*x*x``, ``(x*x)*(x*x)``.

    Unlike :func:`legalize`'s rewrites this is not bit-exact (a product rounds per step where
    the interpreter's pow rounds once), so it is a precision substitution the emitter applies for
    targets whose native function is much further off (a backend's ``legalize`` list names it).

    Vulkan lets ``pow`` be as far off as ``exp2(y * log2(x))`` (~2e-6 relative for
    ``x**3`` on lavapipe); the products are within 1.5 ulp, and agree with C's ``pow``
    on every special value (signed zeros, infinities, NaN, negative bases).
    """
    consts: dict[Value, Any] = {}

    def rule(op: Op, args: list[Value], e: Emitter) -> Any:
        if op.opcode == "const" and isinstance(op.result.type, ScalarType):
            nv = e.op("const", value=op.attrs["value"], type=op.attrs["type"], hint=_hint(op))
            consts[nv] = op.attrs["value"]
            return nv
        if op.opcode != "pow" or not isinstance(args[1].type, ScalarType) or consts.get(args[1]) not in SMALL_POWERS:
            return KEEP
        x, c = args[0], int(consts[args[1]])
        sq = e.op("mul", x, x)
        if c == 2:
            return _rename(sq, op)
        return _rename(e.op("mul", sq, x) if c == 3 else e.op("mul", sq, sq), op)

    return rebuild(kernel, rule)


@dataclass(frozen=True)
class LegalizeContext:
    """What a legalisation pass may need to know: the target and its narrowest subgroup."""

    target: str
    min_lane_width: int = 8


#: Every legalisation pass; a backend's ``legalize`` field names the ones it runs, in order.
LEGALIZE_PASSES: dict[str, Pass] = {p.name: p for p in (
    Pass("lower_bool_tensors", lambda k, c: lower_bool_tensors(k), "bool buffers as u8 with explicit != 0 / 0 or 1"),
    Pass("scalarize_vectors", lambda k, c: scalarize_vectors(k), "vector arithmetic as per-element scalar ops"),
    Pass("promote_narrow_floats", lambda k, c: promote_narrow_floats(k),
         "f16/bf16/f8 arithmetic in f32, rounded back after every op"),
    Pass("widen_subgroup_values", lambda k, c: widen_subgroup_values(k), "subgroup ops on narrow ints in 32 bits"),
    Pass("lower_lane_shuffles", lambda k, c: lower_lane_shuffles(k, c.min_lane_width),
         "relative shuffles as a shuffle from a computed lane"),
    Pass("lower_f8_to_bits", lambda k, c: lower_f8_to_bits(k, c.target), "f8 as u8 bits, converted exactly"),
    Pass("lower_bf16_to_bits", lambda k, c: lower_bf16_to_bits(k, c.target), "bf16 as u16 bits, converted exactly"),
    Pass("small_int_powers", lambda k, c: small_int_powers(k),
         "pow by 2, 3, 4 as products where the native pow is inexact", exact=False),
)}


def legalize(kernel: Kernel, target: str, min_lane_width: int = 8,
             dump: Callable[[str, Kernel], None] | None = None, exact_only: bool = False) -> Kernel:
    """The passes of ``target``'s legalisation pipeline (its backend's ``legalize``), verified as the
    ``verify`` option says; ``kernel`` must be call-free (after the optimisation pipeline).  ``exact_only``
    leaves out the precision substitutions (the tests prove the rest bit-exact on the interpreter)."""
    passes = [LEGALIZE_PASSES[name] for name in get_target(target).legalize]
    if exact_only:
        passes = [p for p in passes if p.exact]
    return run_passes(kernel, passes, LegalizeContext(target, min_lane_width), config.get("verify"),
                      stage="legalize:", dump=dump)
