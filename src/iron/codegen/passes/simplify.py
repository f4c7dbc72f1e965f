"""Algebraic simplification with rewrites that are exact for every input.

"Exact" means the rewritten op gives the same bits as the original for every
operand value: integer wrap-around, division by zero (0 in the IR), IEEE
signed zeros and infinities included.  For a NaN input both forms give a NaN;
which NaN (payload, sign, quiet bit) is not preserved: IEEE 754 does not fix
it (payload propagation is only recommended, the sign of a NaN result is
unspecified) and GPUs return a canonical NaN anyway.

Rules that look harmless but are *not* exact, and so are absent:

* ``x + 0.0 -> x`` (``-0.0 + 0.0`` is ``+0.0``); ``x - (-0.0) -> x`` likewise;
* ``x * 0 -> 0``, ``x - x -> 0``, ``x == x -> true`` on floats (Inf, NaN);
* ``0.0 - x -> -x`` (``0.0 - 0.0`` is ``+0.0``, ``-(0.0)`` is ``-0.0``);
* ``-(a - b) -> b - a`` on floats (``a == b`` gives ``-0.0`` against ``+0.0``);
* ``not (a < b) -> a >= b`` on floats (false for NaN, where ``not`` gives true);
* signed ``x / 2**k -> x >> k`` (``-1 / 2`` is ``0``, ``-1 >> 1`` is ``-1``) and
  signed ``x % 2**k -> x & (2**k - 1)``: left to the target compiler;
* ``x * 2.0 -> x + x`` is exact but would hide the multiply from FMA
  contraction and saves nothing on GPUs, so it is not done;
* swapping the operands of float ``min``/``max`` (see
  :func:`iron.core.analysis.is_commutative`).

Each rule below says why it is exact.  The pass repeats until nothing
changes, since one rewrite can enable another; the ops a rewrite bypasses
are left for ``dce``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from ...core.analysis import all_ones, const_value, is_commutative, is_const_equal, splat_value, value_dtype
from ...core.builder import round_float
from ...core.dtypes import DType
from ...core.ir import Block, Kernel, Op, Value
from ._rewrite import Substitution, make_const, make_op, own

if TYPE_CHECKING:
    from ..pipeline import PassContext

#: Rounds of the whole kernel before giving up on a fixed point (each round is cheap).
MAX_ROUNDS = 8

#: Float formats that hold every value of a narrower one: a cast there and back is the identity.
_FLOAT_WIDENINGS = {("f16", "f32"), ("f16", "f64"), ("bf16", "f32"), ("bf16", "f64"), ("f32", "f64")}

#: ``not (a OP b)`` for integer or bool operands (no NaN, so every pair is ordered).
_INVERSE_COMPARE = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le", "le": "gt"}


def run(kernel: Kernel, ctx: "PassContext | None" = None) -> Kernel:
    k = own(kernel, ctx)
    for _ in range(MAX_ROUNDS):
        s = _Simplifier()
        k.body = s.block(k.body)
        if not s.changed:
            break
    return k


def _int_const(v: Value) -> int | None:
    """The splat value of an integer constant (bools excluded)."""
    c = splat_value(v)
    return c if isinstance(c, int) and not isinstance(c, bool) else None


def _log2_exact(c: int) -> int | None:
    """k when ``c == 2**k`` with k >= 1, else None."""
    return c.bit_length() - 1 if c > 1 and c & (c - 1) == 0 else None


def _reciprocal_if_exact(c: Any, dt: DType) -> float | None:
    """``1/c`` when ``c`` is a power of two whose reciprocal ``dt`` represents exactly.

    Then ``x / c`` and ``x * (1/c)`` are both the exact ``x * 2**-k`` rounded
    once to ``dt`` (overflow, underflow and subnormals included), so they
    agree for every ``x``.
    """
    if not isinstance(c, float) or not math.isfinite(c) or c == 0.0:
        return None
    mantissa, _ = math.frexp(c)
    if abs(mantissa) != 0.5:
        return None
    r = 1.0 / c  # exact in binary64 for every power of two of a narrower format
    if r == 0.0 or not math.isfinite(r) or round_float(r, dt) != r:
        return None
    return r


class _Simplifier:
    def __init__(self) -> None:
        self.subst = Substitution()
        self.changed = False
        self._out: list[Op] = []
        self._hint: str | None = None
        self._loc: Any = None
        self._rules: dict[str, Callable[[Op, DType], Value | None]] = {
            "add": self._add, "sub": self._sub, "mul": self._mul, "div": self._div, "rem": self._rem,
            "band": self._band, "bor": self._bor, "bxor": self._bxor, "land": self._land, "lor": self._lor,
            "shl": self._shift, "shr": self._shift, "neg": self._neg, "bnot": self._bnot, "lnot": self._lnot,
            "abs": self._abs, "min": self._minmax, "max": self._minmax, "select": self._select,
            "cast": self._cast, "bitcast": self._bitcast, "vec_extract": self._vec_extract,
            "vec_make": self._vec_make, "fma": self._fma,
            "eq": self._compare, "ne": self._compare, "lt": self._compare, "le": self._compare,
            "gt": self._compare, "ge": self._compare,
        }

    # ------------------------------------------------------------ walking
    def block(self, b: Block) -> Block:
        saved = self._out
        self._out = []
        for op in b.ops:
            self.subst.rename_operands(op)
            op.regions = [self.block(r) for r in op.regions]
            rule = self._rules.get(op.opcode)
            if rule is None or op.result is None:
                self._out.append(op)
                continue
            self._canonicalise(op)
            dt = value_dtype(op.operands[-1]) if op.operands else None
            self._hint, self._loc = op.result.hint, op.loc
            new = rule(op, dt) if dt is not None else None
            if new is None:
                self._out.append(op)
            else:
                self.subst.replace(op.result, new)
                self.changed = True
        out, self._out = self._out, saved
        return Block(out, b.args)

    def _canonicalise(self, op: Op) -> None:
        """Put a constant operand of a commutative op second, so rules check one side."""
        if is_commutative(op):
            a, b = op.operands
            if const_value(a) is not None and const_value(b) is None:
                op.operands = [b, a]

    def emit(self, opcode: str, operands: list[Value], **attrs: Any) -> Value:
        op = make_op(opcode, operands, self._hint, self._loc, **attrs)
        self._out.append(op)
        return op.result

    def const(self, value: Any, like: Value) -> Value:
        op = make_const(value, like.type, self._loc)
        self._out.append(op)
        return op.result

    # ------------------------------------------------------------ arithmetic
    def _add(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        # x + (-y) and (-y) + x are x - y by definition (IEEE defines x - y as x + (-y)).
        if _defined_by(y, "neg"):
            return self.emit("sub", [x, y.owner.operands[0]])
        if _defined_by(x, "neg"):
            return self.emit("sub", [y, x.owner.operands[0]])
        if dt.is_float:
            # x + (-0.0) is x for every x: -0.0 + -0.0 = -0.0, +0.0 + -0.0 = +0.0.
            return x if is_const_equal(y, -0.0) else None
        return self._int_offset(op, dt)

    def _sub(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if _defined_by(y, "neg"):  # x - (-y) = x + y (IEEE: x - z = x + (-z))
            return self.emit("add", [x, y.owner.operands[0]])
        if dt.is_float:
            # x - (+0.0) = x + (-0.0) = x for every x.
            return x if is_const_equal(y, 0.0) else None
        if x is y:
            return self.const(0, x)  # x - x = 0 in wrapping arithmetic
        if _int_const(x) == 0 and _int_const(y) is None:
            return self.emit("neg", [y])  # 0 - y is -y modulo 2**bits
        return self._int_offset(op, dt)

    def _int_offset(self, op: Op, dt: DType) -> Value | None:
        """Integer ``x + c`` / ``x - c``: fold nested constant offsets and put the result in normal form.

        Addition modulo ``2**bits`` is associative, so ``(y + c1) - c2`` is
        ``y + (c1 - c2)``.  The normal form of ``y + d`` is ``y + d`` for
        ``d`` in ``[0, 2**(bits-1))`` and ``y - (-d)`` otherwise (so ``x - 1``
        stays ``x - 1`` and equal offsets meet in CSE).
        """
        x, y = op.operands
        c = _int_const(y)
        if c is None:
            return self._hoist_offsets(op, dt) if _int_const(x) is None else None
        delta = c if op.opcode == "add" else -c
        inner = _constant_offset(x)
        base, total = (x, delta) if inner is None else (inner[0], inner[1] + delta)
        d = _signed_residue(total, dt.bits)
        if d == 0:
            return base
        opcode, k = ("add", d) if d >= 0 or d == -(1 << (dt.bits - 1)) else ("sub", -d)
        if inner is None and opcode == op.opcode and _signed_residue(c, dt.bits) == k:
            return None  # already in normal form
        return self.emit(opcode, [base, self.const(k, y)])

    def _hoist_offsets(self, op: Op, dt: DType) -> Value | None:
        """Move constant offsets of integer operands outwards: ``x + (y + c)`` -> ``(x + y) + c``.

        Exact because integer addition modulo ``2**bits`` is associative and
        commutative.  Indices written ``row + (i + k)`` become ``(row + i) + k``,
        so the copies of an unrolled body share the base ``row + i`` (which
        CSE merges and the vectorizer needs).
        """
        x, y = op.operands
        ox, oy = _constant_offset(x), _constant_offset(y)
        if ox is None and oy is None:
            return None
        (x, cx), (y, cy) = ox or (x, 0), oy or (y, 0)
        inner = self.emit(op.opcode, [x, y])
        d = _signed_residue(cx + cy if op.opcode == "add" else cx - cy, dt.bits)
        if d == 0:
            return inner
        opcode, k = ("add", d) if d >= 0 or d == -(1 << (dt.bits - 1)) else ("sub", -d)
        return self.emit(opcode, [inner, self.const(k, inner)])

    def _mul(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if dt.is_float:
            # x * 1.0 is x exactly (signed zeros and infinities keep their sign).
            return x if is_const_equal(y, 1.0) else None
        c = _int_const(y)
        if c is None:
            return None
        bits = dt.bits
        c_mod = c % (1 << bits)
        if c_mod == 0:
            return self.const(0, x)  # x * 0 = 0 for integers
        if c_mod == 1:
            return x
        if c_mod == (1 << bits) - 1:
            return self.emit("neg", [x])  # x * -1 = -x modulo 2**bits
        k = _log2_exact(c_mod)
        if k is not None:
            # x * 2**k = x << k modulo 2**bits, signed or not (two's complement).
            return self.emit("shl", [x, self.const(k, y)])
        inner = x.owner
        if inner is not None and inner.opcode == "mul":
            c2 = _int_const(inner.operands[1])
            if c2 is not None:  # (z * c2) * c = z * (c2 * c): modular multiplication is associative
                return self.emit("mul", [inner.operands[0], self.const(c * c2, y)])
        return None

    def _div(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if dt.is_float:
            c = splat_value(y)
            if is_const_equal(y, 1.0):
                return x  # x / 1.0 is x exactly
            r = _reciprocal_if_exact(c, dt)
            if r is not None:
                return self.emit("mul", [x, self.const(r, y)])
            return None
        c = _int_const(y)
        if c == 1:
            return x
        if dt.is_signed and c == -1:
            return self.emit("neg", [x])  # truncating x / -1 is -x, and MIN / -1 wraps to MIN = -MIN
        if _int_const(x) == 0:
            return self.const(0, x)  # 0 / y is 0, and division by zero gives 0 in the IR
        if c is not None and not dt.is_signed:
            k = _log2_exact(c)
            if k is not None:
                return self.emit("shr", [x, self.const(k, y)])  # unsigned: floor division is a logical shift
        return None

    def _rem(self, op: Op, dt: DType) -> Value | None:
        if dt.is_float:
            return None
        x, y = op.operands
        c = _int_const(y)
        if c == 1 or (dt.is_signed and c == -1) or _int_const(x) == 0:
            return self.const(0, x)  # x % +-1 = 0; 0 % y = 0 (y = 0 gives 0 in the IR)
        if c is not None and not dt.is_signed:
            k = _log2_exact(c)
            if k is not None:
                return self.emit("band", [x, self.const(c - 1, y)])  # unsigned x % 2**k keeps the low k bits
        return None

    # ------------------------------------------------------------ bits and logic
    def _band(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if x is y or is_const_equal(y, all_ones(dt)):
            return x
        if is_const_equal(y, False if dt.is_bool else 0):
            return y
        return None

    def _bor(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if x is y or is_const_equal(y, False if dt.is_bool else 0):
            return x
        if is_const_equal(y, all_ones(dt)):
            return y
        return None

    def _bxor(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if is_const_equal(y, False if dt.is_bool else 0):
            return x
        if x is y:
            return self.const(False if dt.is_bool else 0, x)
        if is_const_equal(y, all_ones(dt)):  # flipping every bit
            return self.emit("lnot" if dt.is_bool else "bnot", [x])
        return None

    def _land(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if x is y or is_const_equal(y, True):
            return x
        return y if is_const_equal(y, False) else None

    def _lor(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if x is y or is_const_equal(y, False):
            return x
        return y if is_const_equal(y, True) else None

    def _shift(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        c = _int_const(y)
        if c is not None and c % dt.bits == 0:
            return x  # counts are taken modulo the bit width: a shift by 0
        if _int_const(x) == 0:
            return x  # zero shifted either way is zero
        inner = x.owner
        if op.opcode == "shl" and c is not None and inner is not None and inner.opcode == "shl":
            c2 = _int_const(inner.operands[1])
            if c2 is not None:
                total = c % dt.bits + c2 % dt.bits
                if total >= dt.bits:
                    return self.const(0, x)  # every bit shifted out
                return self.emit("shl", [inner.operands[0], self.const(total, y)])
        return None

    # ------------------------------------------------------------ unary
    def _neg(self, op: Op, dt: DType) -> Value | None:
        (x,) = op.operands
        if _defined_by(x, "neg"):
            return x.owner.operands[0]  # -(-x) = x, floats (sign flipped twice) and ints (wrap)
        if not dt.is_float and _defined_by(x, "sub"):
            a, b = x.owner.operands
            return self.emit("sub", [b, a])  # -(a - b) = b - a modulo 2**bits
        return None

    def _bnot(self, op: Op, dt: DType) -> Value | None:
        (x,) = op.operands
        return x.owner.operands[0] if _defined_by(x, "bnot") else None

    def _lnot(self, op: Op, dt: DType) -> Value | None:
        (x,) = op.operands
        if _defined_by(x, "lnot"):
            return x.owner.operands[0]
        inner = x.owner
        if inner is not None and inner.opcode in _INVERSE_COMPARE:
            operand_dt = value_dtype(inner.operands[0])
            if operand_dt is not None and not operand_dt.is_float:  # no NaN: exactly one of a<b, a>=b holds
                return self.emit(_INVERSE_COMPARE[inner.opcode], list(inner.operands))
        return None

    def _abs(self, op: Op, dt: DType) -> Value | None:
        (x,) = op.operands
        if _defined_by(x, "abs"):
            return x  # abs is idempotent (abs(INT_MIN) stays INT_MIN)
        if _defined_by(x, "neg") and (dt.is_float or dt.is_signed):
            # |-y| = |y|, INT_MIN included; not unsigned, where abs is the identity and -y is 2**n - y.
            return self.emit("abs", [x.owner.operands[0]])
        return None

    def _minmax(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        return x if x is y else None  # min(x, x) = x, NaN included

    def _compare(self, op: Op, dt: DType) -> Value | None:
        x, y = op.operands
        if x is y:
            if not dt.is_float:
                return self.const(op.opcode in ("eq", "le", "ge"), op.result)
            if op.opcode in ("lt", "gt"):
                return self.const(False, op.result)  # never true, NaN included
            return None
        if dt.is_bool and op.opcode in ("eq", "ne"):
            c = splat_value(y)
            if isinstance(c, bool):
                keep = c if op.opcode == "eq" else not c  # b == true is b; b != true is not b
                return x if keep else self.emit("lnot", [x])
        return None

    def _select(self, op: Op, dt: DType) -> Value | None:
        c, a, b = op.operands
        if a is b:
            return a
        cc = splat_value(c)
        if isinstance(cc, bool):
            return a if cc else b
        if c.type == op.result.type:
            if is_const_equal(a, True) and is_const_equal(b, False):
                return c
            if is_const_equal(a, False) and is_const_equal(b, True):
                return self.emit("lnot", [c])
        if _defined_by(c, "lnot"):
            return self.emit("select", [c.owner.operands[0], b, a])
        return None

    def _fma(self, op: Op, dt: DType) -> Value | None:
        a, b, c = op.operands
        # 1*b + c rounded once is b + c rounded once.
        if is_const_equal(a, 1.0):
            return self.emit("add", [b, c])
        if is_const_equal(b, 1.0):
            return self.emit("add", [a, c])
        # round(a*b + -0.0) = round(a*b): adding -0.0 changes no exact value, and an exact
        # zero product keeps its sign (-0 + -0 = -0, +0 + -0 = +0).
        if is_const_equal(c, -0.0):
            return self.emit("mul", [a, b])
        return None

    # ------------------------------------------------------------ conversions and vectors
    def _cast(self, op: Op, dt: DType) -> Value | None:
        (x,) = op.operands
        if x.type == op.result.type:
            return x
        inner = x.owner
        if inner is None or inner.opcode != "cast" or inner.operands[0].type != op.result.type:
            return None
        orig = value_dtype(inner.operands[0])
        mid = value_dtype(x)
        if _round_trips(orig, mid):
            return inner.operands[0]
        return None

    def _bitcast(self, op: Op, dt: DType) -> Value | None:
        (x,) = op.operands
        if x.type == op.result.type:
            return x
        inner = x.owner
        if (inner is not None and inner.opcode == "bitcast" and inner.operands[0].type == op.result.type
                and not value_dtype(x).is_bool and not value_dtype(op.result).is_bool):
            return inner.operands[0]  # reinterpreting bits and back (bool squashes bits, so not through bool)
        return None

    def _vec_extract(self, op: Op, dt: DType) -> Value | None:
        (v,) = op.operands
        if _defined_by(v, "vec_make"):
            return v.owner.operands[op.attrs["index"]]
        return None

    def _vec_make(self, op: Op, dt: DType) -> Value | None:
        parts = op.operands
        first = parts[0].owner
        if first is None or first.opcode != "vec_extract":
            return None
        src = first.operands[0]
        if src.type != op.result.type:
            return None
        for i, p in enumerate(parts):
            o = p.owner
            if o is None or o.opcode != "vec_extract" or o.operands[0] is not src or o.attrs["index"] != i:
                return None
        return src  # the elements of src, in order, are src


def _defined_by(v: Value, opcode: str) -> bool:
    return v.owner is not None and v.owner.opcode == opcode


def _signed_residue(c: int, bits: int) -> int:
    """``c`` modulo ``2**bits``, in ``[-2**(bits-1), 2**(bits-1))``."""
    r = c % (1 << bits)
    return r - (1 << bits) if r >= 1 << (bits - 1) else r


def _constant_offset(v: Value) -> tuple[Value, int] | None:
    """``(y, d)`` when ``v`` is the integer ``y + d`` or ``y - (-d)`` with a constant ``d``."""
    op = v.owner
    if op is None or op.opcode not in ("add", "sub"):
        return None
    c = _int_const(op.operands[1])
    if c is None:
        return None
    return op.operands[0], c if op.opcode == "add" else -c


def _round_trips(orig: DType | None, mid: DType | None) -> bool:
    """Whether casting ``orig -> mid -> orig`` is the identity for every ``orig`` value."""
    if orig is None or mid is None:
        return False
    if orig.is_int and mid.is_int:
        return mid.bits >= orig.bits  # int casts wrap: widening keeps every bit, narrowing back restores them
    if orig.is_float and mid.is_float:
        return (orig.name, mid.name) in _FLOAT_WIDENINGS  # mid holds every orig value exactly
    if orig.is_bool:
        return not mid.is_bool  # false/true -> 0/1 -> (x != 0)
    return False
