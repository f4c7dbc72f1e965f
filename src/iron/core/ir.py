"""The IR: typed SSA values, ops with structured regions, kernels.

Design (see docs/ir.md):

* every :class:`Value` is defined exactly once, by an op, a kernel parameter
  or a region argument (the ``for`` induction variable);
* control flow is structured: ``if`` (two regions), ``for`` (one region with
  the induction variable as its argument), ``loop`` (one region, left by
  ``break``), and the terminators ``break``, ``continue`` and ``return``,
  which may only end a block;
* mutable locals are explicit slots (``var`` / ``var_load`` / ``var_store``),
  the way LLVM front ends emit allocas, so ``break`` and early ``return`` need
  no block arguments.  Values themselves are immutable.

Ops are plain mutable objects so that passes can build new kernels cheaply;
passes never mutate their input (see :func:`clone_kernel`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator

from .errors import SourceLoc
from .types import IRType, TensorType

_ids = itertools.count()


class Value:
    """An SSA value.  ``hint`` is the user's variable name when there is one."""

    __slots__ = ("id", "type", "hint", "owner")

    def __init__(self, type: IRType, hint: str | None = None, owner: "Op | None" = None):
        self.id = next(_ids)
        self.type = type
        self.hint = hint
        self.owner = owner

    def __repr__(self) -> str:
        return f"%{self.hint or 'v'}#{self.id}:{self.type}"


class Op:
    __slots__ = ("opcode", "operands", "result", "attrs", "regions", "loc")

    def __init__(self, opcode: str, operands: list[Value], result_type: IRType | None = None,
                 attrs: dict[str, Any] | None = None, regions: list["Block"] | None = None,
                 loc: SourceLoc | None = None, hint: str | None = None):
        self.opcode = opcode
        self.operands = list(operands)
        self.attrs = dict(attrs or {})
        self.regions = list(regions or [])
        self.loc = loc
        self.result = Value(result_type, hint, self) if result_type is not None else None

    def __repr__(self) -> str:
        return f"Op({self.opcode}, {self.operands}, {self.attrs})"

    def walk(self) -> Iterator["Op"]:
        """This op and every op nested in its regions, in program order."""
        yield self
        for r in self.regions:
            yield from r.walk()


class Block:
    """A straight-line list of ops; a region of a structured op."""

    __slots__ = ("args", "ops")

    def __init__(self, ops: list[Op] | None = None, args: list[Value] | None = None):
        self.ops = list(ops or [])
        self.args = list(args or [])

    def walk(self) -> Iterator[Op]:
        for op in self.ops:
            yield from op.walk()

    @property
    def terminator(self) -> Op | None:
        from .ops import OPS

        if self.ops and OPS[self.ops[-1].opcode].terminator:
            return self.ops[-1]
        return None


@dataclass
class Param:
    """A kernel parameter: a tensor (buffer) or a scalar."""

    name: str
    value: Value
    #: For tensors: "read", "write" or "readwrite", as the body uses it
    #: (filled by :func:`iron.core.analysis.infer_access`); None for scalars.
    access: str | None = None

    @property
    def type(self) -> IRType:
        return self.value.type

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.value.type, TensorType)


@dataclass
class Function:
    """A helper (``@iron.func``) specialised for one tuple of argument types.

    Its body ends with ``return`` (with the result as operand when
    ``result_type`` is not None); the inline pass splices it into callers.
    """

    name: str
    params: list[Param]
    body: Block
    result_type: IRType | None = None
    loc: SourceLoc | None = None


@dataclass
class Kernel:
    """One specialised kernel: parameters, a body, and metadata.

    ``meta`` holds the variant bindings (``{"T": f32, "BLOCK": 128}``), the
    source file and line of the Python function, and options that passes
    and emitters may read.  It is part of the content hash (less source positions).
    """

    name: str
    params: list[Param]
    body: Block
    meta: dict[str, Any] = field(default_factory=dict)
    loc: SourceLoc | None = None
    #: Helper functions called from the body (by name), until inlining.
    functions: dict[str, Function] = field(default_factory=dict)

    def walk(self) -> Iterator[Op]:
        return self.body.walk()

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


def clone_kernel(k: Kernel) -> Kernel:
    """A deep copy with fresh values, so passes stay pure functions."""
    mapping: dict[Value, Value] = {}
    params = []
    for p in k.params:
        nv = Value(p.value.type, p.value.hint)
        mapping[p.value] = nv
        params.append(Param(p.name, nv, p.access))
    body = clone_block(k.body, mapping)
    funcs = {name: clone_function(f) for name, f in k.functions.items()}
    return Kernel(k.name, params, body, dict(k.meta), k.loc, funcs)


def clone_function(f: Function) -> Function:
    mapping: dict[Value, Value] = {}
    params = []
    for p in f.params:
        nv = Value(p.value.type, p.value.hint)
        mapping[p.value] = nv
        params.append(Param(p.name, nv, p.access))
    return Function(f.name, params, clone_block(f.body, mapping), f.result_type, f.loc)


def clone_block(b: Block, mapping: dict[Value, Value]) -> Block:
    """Copy ``b``, renaming every value it defines; ``mapping`` maps outer values."""
    args = []
    for a in b.args:
        na = Value(a.type, a.hint)
        mapping[a] = na
        args.append(na)
    return Block([clone_op(op, mapping) for op in b.ops], args)


def clone_op(op: Op, mapping: dict[Value, Value]) -> Op:
    operands = [mapping.get(v, v) for v in op.operands]
    regions = [clone_block(r, mapping) for r in op.regions]
    new = Op(op.opcode, operands, op.result.type if op.result else None, op.attrs, regions, op.loc,
             op.result.hint if op.result else None)
    if op.result is not None:
        mapping[op.result] = new.result
    return new
