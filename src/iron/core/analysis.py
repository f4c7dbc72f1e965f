"""Reusable analyses of the IR: uses, constants, index arithmetic, memory effects.

The passes (``iron.codegen.passes``) and the frontend share these.  Each one
reads the IR and never changes it (except :func:`infer_access`, which fills
the parameters of a kernel being built).  Like the rest of ``iron.core`` this
module imports no numpy.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

from .dtypes import DType
from .ir import Block, Kernel, Op, Value
from .ops import FENCE_OPS, OPS, READ_OPS, WRITE_OPS
from .types import ScalarType, TensorType, VectorType

# ---------------------------------------------------------------- traversal and uses


def walk_blocks(block: Block) -> Iterator[Block]:
    """``block`` and every block nested in it, outer blocks first."""
    yield block
    for op in block.ops:
        for region in op.regions:
            yield from walk_blocks(region)


def kernel_blocks(k: Kernel) -> Iterator[Block]:
    """Every block of ``k``: the body's and its helper functions'."""
    yield from walk_blocks(k.body)
    for f in k.functions.values():
        yield from walk_blocks(f.body)


def kernel_ops(k: Kernel) -> Iterator[Op]:
    """Every op of ``k`` in program order (an op before the ops nested in it), then its helpers'."""
    yield from k.body.walk()
    for f in k.functions.values():
        yield from f.body.walk()


def use_counts(k: Kernel) -> dict[Value, int]:
    """How many operand slots name each value (values never used are absent)."""
    counts: dict[Value, int] = {}
    for op in kernel_ops(k):
        for v in op.operands:
            counts[v] = counts.get(v, 0) + 1
    return counts


def users(k: Kernel) -> dict[Value, list[Op]]:
    """The ops using each value, in program order (an op using a value twice appears twice)."""
    out: dict[Value, list[Op]] = {}
    for op in kernel_ops(k):
        for v in op.operands:
            out.setdefault(v, []).append(op)
    return out


def induction_loops(k: Kernel) -> dict[Value, Op]:
    """Each ``for`` induction variable mapped to its ``for`` op."""
    return {op.regions[0].args[0]: op for op in kernel_ops(k) if op.opcode == "for"}


# ---------------------------------------------------------------- constants


def const_value(v: Value) -> Any | None:
    """The value of a ``const`` op's result (a Python scalar, or a tuple for a vector), else None."""
    op = v.owner
    if op is not None and op.opcode == "const":
        return op.attrs["value"]
    return None


def splat_value(v: Value) -> Any | None:
    """A constant's single element value: a scalar constant, or a vector constant whose elements are equal."""
    c = const_value(v)
    if isinstance(c, tuple):
        first = c[0]
        return first if all(_same_constant(x, first) for x in c) else None
    return c


def _same_constant(a: Any, b: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and treats NaN as equal to itself."""
    if isinstance(a, float) or isinstance(b, float):
        return constant_key(a) == constant_key(b)
    return type(a) is type(b) and a == b


def constant_key(x: Any) -> Any:
    """A hashable key that compares constants bit for bit.

    Python's ``==`` says ``0.0 == -0.0`` and ``nan != nan`` and ``True == 1``;
    keying CSE or comparisons on raw values would merge or split the wrong
    constants.  Floats are keyed by their IEEE bits, other values by type
    and value; tuples and lists element by element.
    """
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, float):
        return ("float", struct.pack("<d", x))
    if isinstance(x, (tuple, list)):
        return ("seq", tuple(constant_key(e) for e in x))
    if isinstance(x, dict):
        return ("dict", tuple(sorted((k, constant_key(v)) for k, v in x.items())))
    return ("obj", x)


def is_const_equal(v: Value, x: Any) -> bool:
    """``v`` is a constant whose every element equals ``x`` (bitwise for floats)."""
    s = splat_value(v)
    return s is not None and _same_constant(s, x)


def all_ones(dt: DType) -> int | bool:
    """The constant with every bit set, as the builder normalises it: -1 (signed), 2**n-1 (unsigned), True."""
    if dt.is_bool:
        return True
    return -1 if dt.is_signed else (1 << dt.bits) - 1


def value_dtype(v: Value) -> DType | None:
    """The element dtype of a scalar or vector value, else None."""
    t = v.type
    return t.dtype if isinstance(t, (ScalarType, VectorType)) else None


# ---------------------------------------------------------------- commutativity


def is_commutative(op: Op) -> bool:
    """Whether swapping the two operands of ``op`` gives the same bits.

    Float ``min``/``max`` are IEEE minNum/maxNum with -0 ordered below +0
    (``iron.core.eval``), so they commute bit for bit too.  (For float
    ``add``/``mul`` the only difference is which NaN payload a NaN + NaN
    returns, which IEEE 754 leaves unspecified; we accept it.)
    """
    return OPS[op.opcode].commutative and len(op.operands) == 2


# ---------------------------------------------------------------- integer index arithmetic


def _int_bits(v: Value) -> int | None:
    t = v.type
    if isinstance(t, ScalarType) and t.dtype.is_int:
        return t.dtype.bits
    return None


def _trailing_zeros(x: int, bits: int) -> int:
    x %= 1 << bits
    if x == 0:
        return bits
    return (x & -x).bit_length() - 1


class IndexAnalysis:
    """Facts about integer index expressions of one kernel: known factors and offsets.

    Build one per kernel (it maps ``for`` induction variables to their loops)
    and query it; results are memoised.  Every fact holds under the IR's
    wrapping integer arithmetic: divisibility by a power of two survives
    wrap-around modulo ``2**bits``, which is why only powers of two are
    tracked.
    """

    def __init__(self, k: Kernel):
        self._loops = induction_loops(k)
        self._tz: dict[Value, int] = {}

    # ---- divisibility
    def trailing_zero_bits(self, v: Value) -> int:
        """How many low bits of the integer ``v`` are provably zero, for every thread (0 if unknown)."""
        bits = _int_bits(v)
        if bits is None:
            return 0
        if v in self._tz:
            return self._tz[v]
        self._tz[v] = 0  # a safe answer while we recurse (the IR has no cycles, but be defensive)
        result = min(bits, self._compute_tz(v, bits))
        self._tz[v] = result
        return result

    def known_multiple(self, v: Value, n: int) -> bool:
        """``v`` is provably a multiple of ``n`` (a power of two) in every thread."""
        if n <= 0 or n & (n - 1):
            raise ValueError(f"known_multiple tracks powers of two, got {n}")
        return self.trailing_zero_bits(v) >= n.bit_length() - 1

    def _compute_tz(self, v: Value, bits: int) -> int:
        loop = self._loops.get(v)
        if loop is not None:
            lo, _, step = loop.operands
            # The induction variable is lo + k*step (mod 2**bits).
            return min(self.trailing_zero_bits(lo), self.trailing_zero_bits(step))
        op = v.owner
        if op is None:
            return 0
        opc = op.opcode
        if opc == "const":
            c = op.attrs["value"]
            return _trailing_zeros(c, bits) if isinstance(c, int) and not isinstance(c, bool) else 0
        tz = self.trailing_zero_bits
        if opc in ("add", "sub", "min", "max", "bor", "bxor"):
            # Bit k of a sum, difference, or/xor is zero when bits 0..k of both are.
            # min and max return one of the operands.
            return min(tz(op.operands[0]), tz(op.operands[1]))
        if opc == "select":
            return min(tz(op.operands[1]), tz(op.operands[2]))
        if opc == "band":
            return max(tz(op.operands[0]), tz(op.operands[1]))
        if opc == "mul":
            return tz(op.operands[0]) + tz(op.operands[1])
        if opc == "neg":
            return tz(op.operands[0])
        if opc == "shl":
            s = const_value(op.operands[1])
            if isinstance(s, int):
                return tz(op.operands[0]) + s % bits
            return tz(op.operands[0])
        if opc == "shr":
            s = const_value(op.operands[1])
            t = tz(op.operands[0])
            if t >= bits:
                return bits  # zero shifted stays zero
            if isinstance(s, int):
                return max(0, t - s % bits)
            return 0
        if opc == "cast":
            src = op.operands[0]
            src_bits = _int_bits(src)
            if src_bits is None:
                return 0
            t = tz(src)
            # Casts between integer types keep the low bits (sign or zero
            # extension, or truncation); a zero stays zero.
            return bits if t >= src_bits else t
        return 0

    # ---- offsets
    def base_and_offset(self, v: Value) -> tuple[Value | None, int]:
        """Split the integer ``v`` into ``base + offset`` with a constant ``offset``.

        ``base`` is None when ``v`` is a constant.  Follows ``add``/``sub``
        with a constant operand; the identity holds modulo ``2**bits``.
        """
        offset = 0
        while True:
            c = const_value(v)
            if isinstance(c, int) and not isinstance(c, bool):
                return None, offset + c
            op = v.owner
            if op is None or op.opcode not in ("add", "sub"):
                return v, offset
            a, b = op.operands
            cb, ca = const_value(b), const_value(a)
            if isinstance(cb, int) and not isinstance(cb, bool):
                offset += cb if op.opcode == "add" else -cb
                v = a
            elif op.opcode == "add" and isinstance(ca, int) and not isinstance(ca, bool):
                offset += ca
                v = b
            else:
                return v, offset


# ---------------------------------------------------------------- control flow


def same_code(a: Block, b: Block) -> bool:
    """Whether two blocks do the same thing: op for op the same opcodes, attributes and types, each operand the
    same outer value or the matching value defined inside (source locations and names aside).  An ``if`` whose
    two sides are the same code needs no branch on a compiled target; the interpreter keeps it (warpgroups that
    take turns run its sides as fibers)."""
    return _same_block(a, b, {})


def _same_block(a: Block, b: Block, inner: dict[Value, Value]) -> bool:
    if len(a.ops) != len(b.ops) or len(a.args) != len(b.args):
        return False
    for x, y in zip(a.args, b.args):
        if x.type != y.type:
            return False
        inner[x] = y
    return all(_same_op(x, y, inner) for x, y in zip(a.ops, b.ops))


def _same_op(x: Op, y: Op, inner: dict[Value, Value]) -> bool:
    if (x.opcode != y.opcode or len(x.operands) != len(y.operands) or len(x.regions) != len(y.regions)
            or constant_key(x.attrs) != constant_key(y.attrs)):
        return False
    if any(inner.get(u, u) is not w for u, w in zip(x.operands, y.operands)):
        return False
    if (x.result is None) != (y.result is None) or (x.result is not None and x.result.type != y.result.type):
        return False
    if x.result is not None:
        inner[x.result] = y.result
    return all(_same_block(r, s, inner) for r, s in zip(x.regions, y.regions))


def has_escaping_control(block: Block) -> bool:
    """Whether running ``block`` may leave it early for an enclosing construct.

    True when it contains a ``return`` anywhere, or a ``break``/``continue``
    that is not inside a loop nested in ``block`` (so it would apply to a
    loop around ``block``).
    """
    return _escapes(block, in_loop=False)


def may_exit_early(op: Op) -> bool:
    """Whether running ``op`` may skip the rest of the block holding it.

    True when a ``return`` is nested in it, or a ``break``/``continue`` that
    applies to a loop around ``op`` (not to a loop inside it, including
    ``op`` itself).
    """
    if op.opcode in ("return", "break", "continue"):
        return True
    inner = op.opcode in ("for", "loop")
    return any(_escapes(r, inner) for r in op.regions)


def _escapes(block: Block, in_loop: bool) -> bool:
    for op in block.ops:
        if op.opcode == "return":
            return True
        if op.opcode in ("break", "continue") and not in_loop:
            return True
        inner = in_loop or op.opcode in ("for", "loop")
        if any(_escapes(r, inner) for r in op.regions):
            return True
    return False


def int_range(dt: DType) -> tuple[int, int]:
    """The smallest and largest value of the integer type ``dt``."""
    if dt.is_signed:
        return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1
    return 0, (1 << dt.bits) - 1


def constant_trip_count(lo: int, hi: int, step: int, dt: DType) -> int | None:
    """How many times ``for i = lo to hi step step`` (constants of ``dt``) runs its body.

    Follows the IR's rule (``i < hi`` for a positive step, ``i > hi`` for a
    negative one).  None when the step is zero or the induction variable
    would wrap around before the loop ends (such a loop never ends the way
    it reads; passes leave it alone).
    """
    if step == 0:
        return None
    if (step > 0 and lo >= hi) or (step < 0 and lo <= hi):
        return 0
    trips = -(-(hi - lo) // step)  # ceil((hi - lo) / step), both signs
    lo_b, hi_b = int_range(dt)
    # The increment after the last iteration must not wrap.
    return trips if lo_b <= lo + trips * step <= hi_b else None


def constant_trip_values(lo: int, hi: int, step: int, dt: DType, limit: int) -> list[int] | None:
    """The induction values of a constant-bound ``for``; None if more than ``limit`` or no finite count."""
    n = constant_trip_count(lo, hi, step, dt)
    if n is None or n > limit:
        return None
    return [lo + k * step for k in range(n)]


def for_terminates(op: Op) -> bool:
    """Whether a ``for`` provably stops without its induction variable wrapping around.

    True for constant bounds with a finite trip count, and for a constant
    step of +1 or -1 (``i < hi <= MAX`` leaves room for ``i + 1``).
    """
    lo, hi, step = (const_value(v) for v in op.operands)
    t = op.operands[0].type
    if not (isinstance(t, ScalarType) and t.dtype.is_int):
        return False
    if step in (1, -1):
        return True
    if isinstance(lo, int) and isinstance(hi, int) and isinstance(step, int):
        return constant_trip_count(lo, hi, step, t.dtype) is not None
    return False


# ---------------------------------------------------------------- memory




def may_alias(a: Value, b: Value) -> bool:
    """Whether two tensor values may name overlapping memory.

    Two global tensors may be the same buffer passed twice; shared arrays
    are distinct allocations, and never overlap global memory.
    """
    if a is b:
        return True
    ta, tb = a.type, b.type
    if not (isinstance(ta, TensorType) and isinstance(tb, TensorType)):
        return False
    return ta.space == "global" and tb.space == "global"


def touches_memory(op: Op, tensor: Value, writes_only: bool) -> bool:
    """Whether ``op`` (or anything nested in it) may access memory that ``tensor`` names.

    With ``writes_only``, only writes count.  Fences and calls count as
    touching everything.
    """
    kinds = WRITE_OPS if writes_only else (READ_OPS | WRITE_OPS)
    for o in op.walk():
        if o.opcode in FENCE_OPS:
            return True
        if o.opcode in kinds and may_alias(o.operands[0], tensor):
            return True
    return False


def tensor_access(k: Kernel) -> dict[str, str]:
    """How the body (and its helpers) use each tensor parameter: "read", "write" or "readwrite".

    Helper arguments are followed through calls; a tensor the kernel never
    touches counts as "read".
    """
    reads: set[Value] = set()
    writes: set[Value] = set()
    _collect_access(k, k.body, {}, reads, writes, set())
    out: dict[str, str] = {}
    for p in k.params:
        if not p.is_tensor:
            continue
        r, w = p.value in reads, p.value in writes
        out[p.name] = "readwrite" if r and w else "write" if w else "read"
    return out


def _collect_access(k: Kernel, block: Block, alias: dict[Value, Value], reads: set[Value], writes: set[Value],
                    active: set[str]) -> None:
    for op in block.walk():
        if op.opcode in READ_OPS:
            reads.add(alias.get(op.operands[0], op.operands[0]))
        if op.opcode in WRITE_OPS:
            writes.add(alias.get(op.operands[0], op.operands[0]))
        if op.opcode in ("copy_async", "tile_copy"):  # the source, a global tensor
            reads.add(alias.get(op.operands[2], op.operands[2]))
        if op.opcode == "mma_wg":  # reads both tiles (shared arrays: never parameters, listed for completeness)
            reads.update(alias.get(op.operands[i], op.operands[i]) for i in (0, 2))
        if op.opcode == "call":
            name = op.attrs["callee"]
            f = k.functions.get(name)
            if f is None or name in active:
                continue
            inner = {p.value: alias.get(a, a) for p, a in zip(f.params, op.operands)}
            _collect_access(k, f.body, inner, reads, writes, active | {name})


def warpgroup_tiles_copied_only(k: Kernel) -> bool:
    """Whether every shared array ``mma_wg`` reads (in the body or a helper) is written by tile copies only.

    Tile copies on sm_90 write through the async proxy that ``wgmma`` reads through, so a wait on their
    barrier needs no proxy fence; a store or ``cp.async`` copy into such an array goes through the generic
    proxy and does.  Helper arguments are followed through calls.
    """
    tiles: set[Value] = set()
    generic: set[Value] = set()
    _collect_tile_writers(k, k.body, {}, tiles, generic, set())
    return not (tiles & generic)


def _collect_tile_writers(k: Kernel, block: Block, alias: dict[Value, Value], tiles: set[Value],
                          generic: set[Value], active: set[str]) -> None:
    for op in block.walk():
        if op.opcode == "mma_wg":
            tiles.update(alias.get(op.operands[i], op.operands[i]) for i in (0, 2))
        elif op.opcode in WRITE_OPS and op.opcode != "tile_copy":
            generic.add(alias.get(op.operands[0], op.operands[0]))
        elif op.opcode == "call" and op.attrs["callee"] not in active:
            f = k.functions.get(op.attrs["callee"])
            if f is not None:
                inner = {p.value: alias.get(a, a) for p, a in zip(f.params, op.operands)}
                _collect_tile_writers(k, f.body, inner, tiles, generic, active | {op.attrs["callee"]})


def infer_access(k: Kernel) -> None:
    """Fill ``Param.access`` of ``k``'s tensor parameters from :func:`tensor_access` (in place)."""
    access = tensor_access(k)
    for p in k.params:
        if p.is_tensor:
            p.access = access[p.name]
