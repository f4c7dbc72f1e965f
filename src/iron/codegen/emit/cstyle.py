"""The one C-like printer every target shares: it walks legalised, call-free IR and prints statements.

The walk (this module) owns what is the same everywhere: one statement per
op, values named after the user's variables, constants inlined as
literals, ``var`` slots as zero-initialised locals declared where the IR
declares them, structured ``if``/``for``/``while (true)`` control flow, the
parameter-block locals and the grid guard at entry, and shared arrays
hoisted to where the target wants them.  A :class:`~.dialect.Dialect` says
how each of those is spelled on one target.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...core import dtypes as D
from ...core.analysis import same_code, warpgroup_tiles_copied_only
from ...core.ir import Block, Kernel, Op, Value
from ...core.ops import FRAGMENT_OPS, OPS
from ...core.types import TILE_LAYOUTS, FragmentType
from ..abi import KernelABI
from .fragments import FragmentPrinter
from .names import Namer, field_ident


@dataclass(frozen=True)
class Operand:
    """An op's operand as a dialect sees it: its text, IR type, and value when it is a constant."""

    text: str
    type: Any
    const: Any = None
    is_const: bool = False

    @property
    def dtype(self) -> Any:
        return self.type.dtype

    @property
    def atom(self) -> str:
        """The text, parenthesised where an operator next to it could bind into it."""
        t = self.text
        if t.startswith("-") or (" " in t and not (t.startswith("(") and t.endswith(")"))):
            return f"({t})"
        return t


@dataclass
class SharedArray:
    name: str
    value: Value
    dtype: Any
    count: int
    #: Bytes of alignment the widest vector access to the array needs.
    align: int


@dataclass
class ModuleParts:
    """What the walk produced, for the dialect to assemble into one source file."""

    kernel: Kernel
    abi: KernelABI
    tensors: list[tuple[str, Value]]
    shared: list[SharedArray]
    body: list[str]
    extra: dict[str, Any] = field(default_factory=dict)


class KernelPrinter:
    """Prints one kernel with one dialect."""

    def __init__(self, kernel: Kernel, dialect: Any, abi: KernelABI) -> None:
        self.kernel = kernel
        self.d = dialect
        self.abi = abi
        self.names = Namer(dialect.reserved)
        self.lines: list[str] = []
        self.depth = 1
        self.consts: dict[Value, tuple[Any, Any]] = {}
        self.uses: Counter[Value] = Counter(v for op in kernel.walk() for v in op.operands)
        self.tensor_names: dict[Value, str] = {}
        self.shared: list[SharedArray] = []
        #: tensor parameter name -> its ABI access ("read", "write", "readwrite")
        self.tensor_access: dict[str, str] = {}
        #: Statements every way out of the body runs first (each ``return`` and the end): none, except where a
        #: dialect sets some in ``attach`` (GLSL's loop guard reports cut loops, :mod:`.glsl_loops`).
        self.exit_lines: list[str] = []
        dialect.attach(self)
        self.fragments = FragmentPrinter(self)
        #: Whether the kernel multiplies on warpgroups (``mma_wg``): its barriers then fence the async proxy.
        self.uses_warpgroup_mma = any(op.opcode == "mma_wg" for op in kernel.walk())
        #: Whether tile stores read shared memory through the async proxy: group and role barriers fence it.
        self.uses_tile_store = any(op.opcode == "tile_store" for op in kernel.walk())
        #: Whether shared memory is read through the async proxy (``mma_wg``, tile stores): barriers fence it.
        self.uses_async_proxy = self.uses_warpgroup_mma or self.uses_tile_store
        #: Whether ``mma_wg``'s tiles are written by tile copies only (no proxy fence after their waits on TMA).
        self.warpgroup_tiles_copied = self.uses_warpgroup_mma and warpgroup_tiles_copied_only(kernel)

    # ------------------------------------------------------------ helpers for dialects

    def line(self, text: str) -> None:
        """Append one statement (or brace line) at the current depth."""
        self.lines.append(self.d.indent * self.depth + text)

    def temp(self, base: str) -> str:
        """A fresh identifier for a dialect's own temporaries."""
        return self.names.fresh(base)

    def operand(self, v: Value) -> Operand:
        if v in self.consts:
            value, t = self.consts[v]
            return Operand(self.d.literal(value, t.dtype), t, value, True)
        if v in self.tensor_names:
            return Operand(self.tensor_names[v], v.type)
        return Operand(self.names[v], v.type)

    # ------------------------------------------------------------ the walk

    def print(self) -> str:
        k = self.kernel
        tensors = []
        for p in k.params:
            name = self.names.define(p.value)
            if p.is_tensor:
                self.tensor_names[p.value] = name
                self.tensor_access[name] = self.abi.tensors[len(tensors)].access
                tensors.append((name, p.value))
        vector_bytes: Counter[Value] = Counter()
        for op in k.walk():
            if op.opcode in ("vload", "vstore"):
                width = op.attrs["width"] if op.opcode == "vload" else op.operands[2].type.width
                t = op.operands[0]
                vector_bytes[t] = max(vector_bytes[t], width * t.type.dtype.itemsize)
            elif op.opcode == "frag_load":  # a matrix unit may load 16-byte rows (CUDA's ldmatrix)
                vector_bytes[op.operands[0]] = max(vector_bytes[op.operands[0]], 16)
            elif op.opcode == "mma_wg":  # swizzled tiles start on 1024-byte atoms of their array
                for t in (op.operands[0], op.operands[2]):
                    vector_bytes[t] = max(vector_bytes[t], 1024)
            elif op.opcode in ("tile_copy", "tile_store"):  # tiles start at their layout's alignment in their array
                t = op.operands[0 if op.opcode == "tile_copy" else 6]
                vector_bytes[t] = max(vector_bytes[t], TILE_LAYOUTS[op.attrs["layout"]].align)
        for op in k.walk():
            if op.opcode == "shared_alloc":
                name = self.names.define(op.result)
                self.tensor_names[op.result] = name
                t = op.result.type
                align = max(vector_bytes[op.result], t.dtype.itemsize)
                self.shared.append(SharedArray(name, op.result, t.dtype, t.num_elements, align))
            elif op.opcode == "abar_alloc" and self.d.barrier_words:  # 8-byte words among the shared arrays
                self.shared.append(SharedArray(self.names.define(op.result, "bars"), op.result, D.u64,
                                               op.attrs["count"], 8))
        for p in k.params:
            if not p.is_tensor:
                field_ = _param_field(self.abi, p.name)
                member = field_ident(field_.name, self.d.reserved)
                value = self.d.param_value(f"p.{member}", field_.storage, p.type.dtype)
                self.line(f"const {self.d.type_name(p.type)} {self.names[p.value]} = {value};")
        for text in self.d.grid_guard():
            self.line(text)
        self.block(k.body)
        for text in self.exit_lines:
            self.line(text)
        parts = ModuleParts(k, self.abi, tensors, self.shared, self.lines)
        if self.fragments.scratch is not None:
            parts.extra["mma_scratch"] = self.fragments.scratch
        return self.d.module(parts)

    def block(self, b: Block) -> None:
        for op in b.ops:
            self.op(op)

    def op(self, op: Op) -> None:
        code = op.opcode
        if code == "const":
            self.consts[op.result] = (op.attrs["value"], op.result.type)
            return
        if code == "shared_alloc":
            return  # declared where the dialect hoists shared arrays
        if code == "if":
            self._if(op)
            return
        if code == "for":
            self._for(op)
            return
        if code == "loop":
            self.line("while (true) {")
            self._nested(op.regions[0])
            self.line("}")
            return
        if code in ("break", "continue"):
            self.line(f"{code};")
            return
        if code == "return":
            for text in self.exit_lines:
                self.line(text)
            self.line("return;")
            return
        args = [self.operand(v) for v in op.operands]
        if code in FRAGMENT_OPS:
            self.fragments.op(op, args)
            return
        if code in ("copy_async", "copy_async_commit", "copy_async_wait"):
            self.d.copy_async(op, args)
            return
        if code == "tile_copy":
            self.d.tile_copy(op, args)
            return
        if code == "tile_store":
            self.d.tile_store(op, args)
            return
        if code == "tile_store_wait":
            for text in self.d.tile_store_wait(op):
                self.line(text)
            return
        whole = self._whole_lines(op, args)
        if whole is not None:
            for text in whole:
                self.line(text)
            return
        if code == "var":
            t = op.attrs["type"]
            name = self.names.define(op.result)
            if isinstance(t, FragmentType):
                self.fragments.declare_slot(name, t)
            else:
                self.line(f"{self.d.qualifier(t)}{self.d.type_name(t)} {name} = {self.d.zero(t)};")
            return
        if code == "var_store":
            if isinstance(args[1].type, FragmentType):
                self.fragments.copy(args[0].text, args[1].text, args[1].type)
            else:
                self.line(f"{args[0].text} = {args[1].text};")
            return
        if code == "var_load":
            if isinstance(op.result.type, FragmentType):
                name = self.names.define(op.result)
                self.fragments.declare(name, op.result.type)
                self.fragments.copy(name, args[0].text, op.result.type)
            else:
                self._declare(op, args[0].text)
            return
        rendered = self.d.render(op, args)
        if op.result is None:
            if rendered:
                self.line(f"{rendered};")
            return
        if self.uses[op.result] == 0 and not OPS[code].pure:
            self.line(f"{rendered};")
            return
        self._declare(op, rendered)

    def _whole_lines(self, op: Op, args: list[Operand]) -> list[str] | None:
        """The lines of an op the dialect writes whole (warp roles, asynchronous barriers, waits), or None."""
        code = op.opcode
        if code == "warp_role":
            return self.d.role_registers(op, self._declare(op, self.d.warp_role(op)))
        if code == "role_barrier":
            return self.d.role_barrier(op)
        if code == "cluster_groups":
            self._declare(op, self.d.cluster_rank(op))
            return []
        if code == "cluster_sync":
            return self.d.cluster_sync(op)
        if OPS[code].category == "async_barrier":
            return self.d.async_barrier(op, args, self.names.define(op.result, "bars") if op.result is not None else "")
        if code == "mma_wg_wait":
            return self.d.warpgroup_wait(op)
        return None

    def _declare(self, op: Op, expr: str) -> str:
        name = self.names.define(op.result)
        t = op.result.type
        self.line(f"{self.d.qualifier(t)}{self.d.type_name(t)} {name} = {expr};")
        return name

    def _nested(self, b: Block, first: list[str] = ()) -> None:  # type: ignore[assignment]
        """``b`` one level in, after the lines ``first``."""
        self.depth += 1
        for text in first:
            self.line(text)
        self.block(b)
        self.depth -= 1

    def _if(self, op: Op) -> None:
        cond = self.operand(op.operands[0]).text
        then, other = op.regions
        # Only a top-level if (every thread of the group reaches it) may open with a role's register budget.
        first_then, first_else = self.d.branch_prologue(op) if self.depth == 1 else ([], [])
        if first_then == first_else and same_code(then, other):
            self.line("{  // both sides of an if are this code")
            self._nested(then, first_then)
            self.line("}")
            return
        self.line(f"if ({cond}) {{")
        self._nested(then, first_then)
        if other.ops or first_else:
            self.line("} else {")
            self._nested(other, first_else)
        self.line("}")

    def _for(self, op: Op) -> None:
        lo, hi, step = (self.operand(v) for v in op.operands)
        iv = op.regions[0].args[0]
        name = self.names.define(iv, "i")
        negative = step.is_const and step.const < 0
        cmp = ">" if negative else "<"
        if step.is_const and abs(step.const) == 1:
            advance = f"--{name}" if negative else f"++{name}"
        elif negative:
            advance = f"{name} -= {self.d.literal(-step.const, step.dtype)}"
        else:
            advance = f"{name} += {step.text}"
        for text in self.d.loop_hint(op.attrs.get("unroll")):
            self.line(text)
        self.line(f"for ({self.d.type_name(iv.type)} {name} = {lo.text}; {name} {cmp} {hi.atom}; {advance}) {{")
        self._nested(op.regions[0])
        self.line("}")


def _param_field(abi: KernelABI, name: str) -> Any:
    for f in abi.fields:
        if f.kind == "param" and f.name == name:
            return f
    raise KeyError(name)

