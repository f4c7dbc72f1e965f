"""A small builder that appends typed ops to the current block.

The frontend, the passes and hand-written tests all build IR through it, so
every op is type-checked (through the opcode table) the moment it is made.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from . import dtypes as D
from .errors import SourceLoc
from .ir import Block, Kernel, Op, Param, Value
from .ops import infer_type
from .types import IRType, ScalarType, TensorType, VectorType


class Builder:
    def __init__(self, block: Block | None = None):
        self.block = block if block is not None else Block()
        self.loc: SourceLoc | None = None

    # ------------------------------------------------------------ placement
    @contextmanager
    def at(self, block: Block) -> Iterator[Block]:
        """Append to ``block`` inside the ``with``; restore afterwards."""
        saved = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = saved

    @contextmanager
    def located(self, loc: SourceLoc | None) -> Iterator[None]:
        saved = self.loc
        if loc is not None:
            self.loc = loc
        try:
            yield
        finally:
            self.loc = saved

    # ------------------------------------------------------------ generic
    def op(self, opcode: str, operands: list[Value] | tuple[Value, ...] = (), hint: str | None = None,
           regions: list[Block] | None = None, **attrs: Any) -> Value | None:
        """Append ``opcode`` and return its result (None for ops without one)."""
        rtype = infer_type(opcode, [v.type for v in operands], attrs)
        o = Op(opcode, list(operands), rtype, attrs, regions, self.loc, hint)
        self.block.ops.append(o)
        return o.result

    def append(self, op: Op) -> Op:
        self.block.ops.append(op)
        return op

    def const(self, value: Any, t: IRType | D.DType) -> Value:
        if isinstance(t, D.DType):
            t = ScalarType(t)
        return self.op("const", (), value=normalize_const(value, t), type=t)

    # ------------------------------------------------------------ structured ops
    def if_(self, cond: Value) -> Op:
        o = Op("if", [cond], None, {}, [Block(), Block()], self.loc)
        infer_type("if", [cond.type], {})
        self.block.ops.append(o)
        return o

    def for_(self, lo: Value, hi: Value, step: Value, unroll: int | None = None,
             hint: str | None = None) -> Op:
        infer_type("for", [lo.type, hi.type, step.type], {"unroll": unroll})
        iv = Value(lo.type, hint)
        o = Op("for", [lo, hi, step], None, {"unroll": unroll}, [Block(args=[iv])], self.loc)
        self.block.ops.append(o)
        return o

    def loop(self) -> Op:
        o = Op("loop", [], None, {}, [Block()], self.loc)
        self.block.ops.append(o)
        return o


def normalize_const(value: Any, t: IRType) -> Any:
    """Constants are stored as Python scalars (or tuples for vectors) of the right kind."""
    dt = t.dtype if isinstance(t, (ScalarType, VectorType)) else None
    if dt is None:
        raise TypeError(f"constant of non-value type {t}")

    def one(v: Any) -> Any:
        if dt.is_bool:
            return bool(v)
        if dt.is_int:
            iv = int(v)
            bits = dt.bits
            if dt.is_signed:
                iv = ((iv + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
            else:
                iv %= 1 << bits
            return iv
        return round_float(float(v), dt)

    if isinstance(t, VectorType):
        if isinstance(value, (tuple, list)):
            return tuple(one(v) for v in value)
        return tuple(one(value) for _ in range(t.width))
    return one(value)


def round_float(v: float, dt: D.DType) -> float:
    """``v`` rounded to the precision of ``dt`` (constants keep their dtype's exact value)."""
    if dt.bits == 64:
        return v
    import numpy as np

    with np.errstate(over="ignore"):
        return float(np.asarray(v, dtype=D.numpy_dtype(dt)))


def new_kernel(name: str, params: list[tuple[str, IRType]], meta: dict | None = None) -> tuple[Kernel, Builder]:
    """A kernel with the given parameters and an empty body, and a builder at its body."""
    ps = [Param(n, Value(t, n)) for n, t in params]
    k = Kernel(name, ps, Block(), dict(meta or {}))
    return k, Builder(k.body)


def tensor(dt: D.DType, readonly: bool = False) -> TensorType:
    return TensorType(dt, "global", readonly)
