"""The per-target table of spellings the shared printer consults, with C-like defaults.

A subclass overrides what its language spells differently: type names,
literals, casts, math function names, index builtins, memory accesses,
atomics, subgroup intrinsics, the kernel signature and the module around
it.  Everything here follows docs/ir.md; where a target's own operator
would differ from the IR's meaning (GLSL's ``%`` on negative ints, ``min``
on NaN, C's ``>>`` with a count past the width), the default already
spells the IR's meaning.
"""

from __future__ import annotations

import math
import struct
from itertools import accumulate
from typing import Any, ClassVar

import numpy as np

from ...core import dtypes as D
from ...core.errors import UnsupportedOnTarget
from ...core.ir import Op
from ...core.ops import OPS
from ...core.types import TILE_LAYOUTS, FragmentType, IRType, ScalarType, VectorType, tile_rows
from ..targets import TargetProfile
from .cstyle import ModuleParts, Operand

INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "band": "&", "bor": "|", "bxor": "^",
         "land": "&&", "lor": "||"}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
BOOL_BITS = {"band": "&&", "bor": "||", "bxor": "!="}
#: IR math op -> the C math function's base name (``expf`` / ``exp``).
C_MATH = {"exp": "exp", "exp2": "exp2", "fast_exp2": "exp2",
          "log": "log", "log2": "log2", "log1p": "log1p", "expm1": "expm1",
          "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
          "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "erf": "erf",
          "floor": "floor", "ceil": "ceil", "round": "rint", "trunc": "trunc", "abs": "fabs", "pow": "pow",
          "atan2": "atan2", "rem": "fmod", "min": "fmin", "max": "fmax", "fma": "fma"}


def shortest_float_text(value: float, dt: D.DType) -> str:
    """The shortest decimal that reads back as exactly ``value`` in ``dt`` (f16/bf16 values are exact in f32)."""
    text = repr(float(value)) if dt.bits == 64 else str(np.float32(value))
    if not any(c in text for c in ".en"):
        text += ".0"
    return text


def float_bits(value: float, dt: D.DType) -> int:
    """The IEEE bit pattern of ``value`` as ``dt`` (f32 for f16/bf16 values, which f32 holds exactly)."""
    if dt.bits == 64:
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _tile_offset(layout: Any, item: int, box_c: int) -> str:
    """The element offset of (iron_r, iron_c) in a tile of ``layout`` (TILE_LAYOUTS; docs/ir.md), as C."""
    if layout.swizzled:
        chunk = 16 // item
        return f"iron_r * {128 // item} + (((iron_c / {chunk}) ^ (iron_r % 8)) * {chunk}) + iron_c % {chunk}"
    return f"iron_r * {box_c} + iron_c"


def box_text(op: Op) -> str:
    """A tile copy's or store's box as its comment shows it ("64 x 64", "1 x 8 x 8 x 64")."""
    return " x ".join(map(str, (*op.attrs.get("box_outer", ()), op.attrs["box_rows"], op.attrs["box_cols"])))


class Dialect:
    """C spellings; each target subclasses it."""

    target = "c"
    language = "c"
    indent = "  "
    #: Identifiers the target reserves beyond names.RESERVED.
    reserved: frozenset[str] = frozenset()
    #: dtype -> scalar type name (``self.scalar_names`` is the instance's copy).
    SCALAR_NAMES: ClassVar[dict[D.DType, str]] = {}

    def __init__(self, profile: TargetProfile, kernel_name: str) -> None:
        self.profile = profile
        self.kernel_name = kernel_name
        self.scalar_names: dict[D.DType, str] = dict(self.SCALAR_NAMES)
        self.helpers: dict[str, str] = {}
        self.printer: Any = None
        #: Bytes of dynamic shared memory the printed module launches with (CUDA past its static limit).
        self.dynamic_shared_bytes = 0

    def attach(self, printer: Any) -> None:
        self.printer = printer

    def require(self, name: str, text: str) -> str:
        """Register a helper definition for the module's prelude (once); returns ``name``."""
        self.helpers.setdefault(name, text)
        return name

    def unsupported(self, op: Op, what: str) -> UnsupportedOnTarget:
        return UnsupportedOnTarget(f"{what} on {self.profile.target} ({self.profile.arch})", op.loc,
                                   kernel=self.kernel_name)

    # ------------------------------------------------------------ types and literals

    def type_name(self, t: IRType) -> str:
        if isinstance(t, ScalarType):
            return self.scalar_names[t.dtype]
        if isinstance(t, VectorType):
            return self.vector_type(t.dtype, t.width)
        raise TypeError(f"no {self.language} type for {t}")

    def vector_type(self, dt: D.DType, width: int) -> str:
        raise NotImplementedError

    def qualifier(self, t: IRType) -> str:
        """What precedes the type of a local of type ``t`` (GLSL: ``precise`` on floats)."""
        return ""

    def zero(self, t: IRType) -> str:
        if isinstance(t, VectorType):
            return self.vector_zero(t)
        return self.literal(False if t.dtype.is_bool else 0, t.dtype)

    def vector_zero(self, t: VectorType) -> str:
        raise NotImplementedError

    def literal(self, value: Any, dt: D.DType) -> str:
        if dt.is_bool:
            return "true" if value else "false"
        if dt.is_int:
            return self.int_literal(int(value), dt)
        if math.isfinite(value):
            return self.float_literal(shortest_float_text(value, dt), dt)
        return self.nonfinite_literal(float_bits(value, dt), dt)

    def int_literal(self, v: int, dt: D.DType) -> str:
        raise NotImplementedError

    def float_literal(self, text: str, dt: D.DType) -> str:
        raise NotImplementedError

    def nonfinite_literal(self, bits: int, dt: D.DType) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ entry

    def param_value(self, field_expr: str, storage: D.DType, dt: D.DType) -> str:
        """A scalar parameter's value from its parameter-block field (widened per abi.py)."""
        if storage == dt:
            return field_expr
        if dt.is_bool:
            return f"{field_expr} != {self.literal(0, storage)}"
        return self.convert(Operand(field_expr, ScalarType(storage)), storage, dt)

    def grid_guard(self) -> list[str]:
        ids = [self.global_id_unsigned(axis) for axis in range(3)]
        fields = [f"p.iron_grid_{c}" for c in "xyz"]
        tests = [f"{i} >= {f}" for i, f in zip(ids, fields)]
        cont = self.indent * 2 + "|| "
        return ["// Threads past the launch grid never run (docs/ir.md).", f"if ({tests[0]}",
                *(cont + t for t in tests[1:-1]), f"{cont}{tests[-1]}) {{", f"{self.indent}return;", "}"]

    def global_id_unsigned(self, axis: int) -> str:
        raise NotImplementedError

    def loop_hint(self, unroll: int | None) -> list[str]:
        return []

    def module(self, parts: ModuleParts) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ ops

    def render(self, op: Op, args: list[Operand]) -> str:
        code = op.opcode
        cat = OPS[code].category
        if cat == "index":
            return self.index(code, op.attrs.get("axis"))
        if cat == "unary":
            return self.unary(code, args[0])
        if cat == "binary":
            return self.binary(code, args[0], args[1])
        if cat == "compare":
            return f"{args[0].atom} {COMPARE[code]} {args[1].atom}"
        if code == "select":
            c, a, b = args
            return f"{c.atom} ? {a.atom} : {b.atom}"
        if code == "fma":
            return f"{self.math('fma', args[0].dtype)}({', '.join(a.text for a in args)})"
        if code == "cast":
            return self.convert(args[0], args[0].dtype, op.attrs["to"])
        if code == "bitcast":
            return self.bitcast(args[0], args[0].dtype, op.attrs["to"])
        if code == "vec_make":
            return self.vec_make(op.result.type, args)
        if code == "vec_extract":
            return self.vec_extract(args[0], op.attrs["index"])
        if code == "load":
            return f"{args[0].text}[{self.index_text(args[1])}]"
        if code == "store":
            return f"{args[0].text}[{self.index_text(args[1])}] = {args[2].text}"
        if code == "vload":
            return self.vload(args[0], args[1], op.attrs["width"])
        if code == "vstore":
            return self.vstore(args[0], args[1], args[2])
        if code == "tensor_size":
            return self.tensor_size(args[0])
        if code == "barrier":
            return self.barrier()
        if code == "fence":
            return self.fence(op)
        if cat == "atomic":
            return self.atomic(op, args)
        if cat == "subgroup":
            return self.subgroup(op, args)
        raise self.unsupported(op, f"'{code}' has no emitter")

    def index_text(self, i: Operand) -> str:
        return i.text

    def tensor_size(self, t: Operand) -> str:
        return self.convert(Operand(f"p.iron_size_{t.text}", ScalarType(D.u32)), D.u32, D.i32)

    # -- arithmetic

    def math(self, name: str, dt: D.DType) -> str:
        """The math function for IR op ``name`` on ``dt`` (f32 or f64 after legalisation)."""
        base = C_MATH[name]
        return base if dt == D.f64 else base + "f"

    def unary(self, code: str, a: Operand) -> str:
        dt = a.dtype
        if code == "neg":
            return f"-{a.atom}"
        if code == "lnot":
            return f"!{a.atom}"
        if code == "bnot":
            return f"~{a.atom}"
        if code in ("isnan", "isinf", "isfinite"):
            return self.classify(code, a)
        if dt.is_float:
            if code == "sign":
                one, zero = self.literal(1.0, dt), self.literal(0.0, dt)
                # sign(+-0) is +0 and sign(NaN) is NaN, as the interpreter's np.sign.
                return (f"{a.atom} > {zero} ? {one} : ({a.atom} < {zero} ? {self.literal(-1.0, dt)} : "
                        f"({a.atom} == {zero} ? {zero} : {a.atom}))")
            if code == "recip":
                return f"{self.literal(1.0, dt)} / {a.atom}"
            return f"{self.math(code, dt)}({a.text})"
        zero = self.literal(0, dt)
        if code == "abs":
            return f"{a.atom} < {zero} ? -{a.atom} : {a.atom}" if dt.is_signed else a.text
        if code == "sign":
            one = self.literal(1, dt)
            if not dt.is_signed:
                return f"{a.atom} != {zero} ? {one} : {zero}"
            return f"{a.atom} > {zero} ? {one} : ({a.atom} < {zero} ? {self.literal(-1, dt)} : {zero})"
        raise ValueError(f"unary {code} on {dt}")

    def classify(self, code: str, a: Operand) -> str:
        return f"{code}({a.text})"

    def binary(self, code: str, a: Operand, b: Operand) -> str:
        dt = a.dtype
        if dt.is_bool:
            return f"{a.atom} {BOOL_BITS.get(code) or INFIX[code]} {b.atom}"
        if dt.is_float:
            if code in ("add", "sub", "mul", "div"):
                return f"{a.atom} {INFIX[code]} {b.atom}"
            return self.float_binary(code, a, b)
        if code in ("min", "max"):
            return f"{a.atom} {'<' if code == 'min' else '>'} {b.atom} ? {a.atom} : {b.atom}"
        if code in ("shl", "shr"):
            return f"{a.atom} {'<<' if code == 'shl' else '>>'} {self.shift_count(b, dt)}"
        if code == "rem":
            return self.int_rem(a, b)
        return f"{a.atom} {INFIX[code]} {b.atom}"

    def float_binary(self, code: str, a: Operand, b: Operand) -> str:
        return f"{self.math(code, a.dtype)}({a.text}, {b.text})"

    def int_rem(self, a: Operand, b: Operand) -> str:
        return f"{a.atom} % {b.atom}"

    def shift_count(self, b: Operand, dt: D.DType) -> str:
        """The shift count modulo the bit width (the IR's rule; C leaves wide shifts undefined)."""
        mask = dt.bits - 1
        if b.is_const:
            return self.literal(b.const & mask, b.dtype)
        return f"({b.atom} & {self.literal(mask, b.dtype)})"

    # -- conversions (targets override)

    def convert(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        raise NotImplementedError

    def bitcast(self, x: Operand, src: D.DType, dst: D.DType) -> str:
        raise NotImplementedError

    # -- vectors, memory, sync (targets override)

    def vec_make(self, t: VectorType, args: list[Operand]) -> str:
        raise NotImplementedError

    def vec_extract(self, v: Operand, index: int) -> str:
        raise NotImplementedError

    def vload(self, t: Operand, i: Operand, width: int) -> str:
        raise NotImplementedError

    def vstore(self, t: Operand, i: Operand, v: Operand) -> str:
        raise NotImplementedError

    def index(self, code: str, axis: int | None) -> str:
        raise NotImplementedError

    def copy_async(self, op: Op, args: list[Operand]) -> None:
        """Print ``copy_async``, ``copy_async_commit`` and ``copy_async_wait``.  Here the portable form: the
        copy happens at once (zeros where not valid, the source unread), so there is nothing to wait for."""
        if op.opcode != "copy_async":
            return
        p = self.printer
        dst, di, src, si, valid = args
        width = op.attrs["width"]
        dt = dst.dtype
        if width == 1:
            load, zero = f"{src.text}[{self.index_text(si)}]", self.literal(0, dt)
            p.line(f"{dst.text}[{self.index_text(di)}] = {valid.text} ? {load} : {zero};")
            return
        vt = VectorType(dt, width)
        temp = Operand("iron_copy", vt)  # scoped to each branch; a vstore may name it once per element
        for head, value in ((f"if ({valid.text}) {{", self.vload(src, si, width)), ("} else {", self.zero(vt))):
            p.line(head)
            p.depth += 1
            p.line(f"{self.type_name(vt)} iron_copy = {value};")
            stored = self.vstore(dst, di, temp)  # may print the per-element stores itself (MSL, GLSL)
            if stored:
                p.line(f"{stored};")
            p.depth -= 1
        p.line("}")

    def tile_copy(self, op: Op, args: list[Operand]) -> None:
        """Print ``tile_copy``.  Here the portable form: the issuing thread copies the box element by element,
        zeros outside the matrix, into the tile's layout (``TILE_LAYOUTS``); the stores precede the arrival
        that announces them (the interpreter checks that order), which releases them to the waiters."""
        p = self.printer
        dst, di, src, rows, cols, ld, row, col = (self._as_i32(a) if n not in (0, 2) else a
                                                  for n, a in enumerate(args[:8]))
        layout, item = TILE_LAYOUTS[op.attrs["layout"]], dst.dtype.itemsize
        offset = _tile_offset(layout, item, op.attrs["box_cols"])
        axes, inside, at = self._box_walk(op, rows, cols, ld, row, col, [self._as_i32(a) for a in args[10:]])
        lines = [f"{{  // copy_tile: {box_text(op)} {dst.dtype}, {layout.name}", *axes,
                 f"      {dst.text}[{di.atom} + {offset}] = ({inside}) ? {src.text}[{at}] : "
                 f"{self.literal(0, dst.dtype)};",
                 "    }", "  }", "}"]
        for line in lines:
            p.line(line)

    def _box_walk(self, op: Op, rows: Operand, cols: Operand, ld: Operand, row: Operand, col: Operand,
                  outer: list[Operand]) -> tuple[list[str], str, str]:
        """The portable tile loops' heads (tile row ``iron_r``, column ``iron_c``; ``iron_gr``/``iron_gc`` the
        matrix element, ``iron_g<j>`` outer axis j's), whether the element lies inside the tensor, and its
        index (outer axes dense over the matrix, outermost first)."""
        i32 = self.type_name(ScalarType(D.i32))
        box_r, box_c, box_outer = op.attrs["box_rows"], op.attrs["box_cols"], op.attrs.get("box_outer", ())
        extents, coords = outer[:len(box_outer)], outer[len(box_outer):]
        lines = [f"  for ({i32} iron_r = 0; iron_r < {tile_rows(op.attrs)}; ++iron_r) {{",
                 f"    for ({i32} iron_c = 0; iron_c < {box_c}; ++iron_c) {{",
                 f"      {i32} iron_gr = {row.atom} + iron_r{f' % {box_r}' if box_outer else ''};",
                 f"      {i32} iron_gc = {col.atom} + iron_c;"]
        inside = f"iron_gr >= 0 && iron_gr < {rows.atom} && iron_gc >= 0 && iron_gc < {cols.atom}"
        at = "iron_gr"
        below = box_r
        for j in reversed(range(len(box_outer))):
            lines.append(f"      {i32} iron_g{j} = {coords[j].atom} + (iron_r / {below}) % {box_outer[j]};")
            inside += f" && iron_g{j} >= 0 && iron_g{j} < {extents[j].atom}"
            below *= box_outer[j]
        if box_outer:
            linear = "iron_g0"
            for j in range(1, len(box_outer)):
                linear = f"({linear} * {extents[j].atom} + iron_g{j})"
            at = f"({linear} * {rows.atom} + iron_gr)"
        return lines, inside, f"{at} * {ld.atom} + iron_gc"

    def tile_store(self, op: Op, args: list[Operand]) -> None:
        """Print ``tile_store``.  Here the portable form: the issuing thread stores the box element by element
        from the tile's layout, skipping elements outside the matrix; the stores are done when it moves on, so
        ``tile_store_wait`` prints nothing."""
        p = self.printer
        dst, rows, cols, ld, row, col, src, si = (a if n in (0, 6) else self._as_i32(a) for n, a in
                                                  enumerate(args[:8]))
        layout = TILE_LAYOUTS[op.attrs["layout"]]
        offset = _tile_offset(layout, src.dtype.itemsize, op.attrs["box_cols"])
        axes, inside, at = self._box_walk(op, rows, cols, ld, row, col, [self._as_i32(a) for a in args[8:]])
        lines = [f"{{  // store_tile: {box_text(op)} {dst.dtype}, {layout.name}", *axes,
                 f"      if ({inside}) {dst.text}[{at}] = {src.text}[{si.atom} + {offset}];",
                 "    }", "  }", "}"]
        for line in lines:
            p.line(line)

    def tile_store_wait(self, op: Op) -> list[str]:
        return []

    def _as_i32(self, x: Operand) -> Operand:
        return x if x.dtype == D.i32 else Operand(self.convert(x, x.dtype, D.i32), ScalarType(D.i32))

    #: Whether asynchronous barriers are words of shared memory, declared among the shared arrays.
    barrier_words = False

    def async_barrier(self, op: Op, args: list[Operand], name: str) -> list[str]:
        """The lines of an asynchronous-barrier op (``abar_*``).  Here the portable form, for targets without
        them: every thread runs the same arrivals and waits in program order (the capability check refuses a
        wait only some threads of a group reach), so a wait is a group barrier, which orders the memory
        accesses made before the arrivals; arrivals, announced bytes and tied copies (which ``copy_async``
        made at once here) need nothing."""
        return [f"{self.barrier()};"] if op.opcode == "abar_wait" else []

    def flat_thread_index(self) -> str:
        """The thread's number in its group, ``x + y*gx + z*gx*gy`` (an int expression)."""
        raise NotImplementedError

    def warp_role(self, op: Op) -> str:
        """The role of this thread after ``warp_roles(sizes)``: role i holds the ``sizes[i]`` threads after the
        earlier roles' (an int expression)."""
        return self.by_role(op, list(range(len(op.attrs["sizes"]))))

    def by_role(self, op: Op, values: list[int]) -> str:
        """An int expression: ``values[role]`` for this thread's role under ``op``'s sizes."""
        t, bounds = self.flat_thread_index(), list(accumulate(op.attrs["sizes"]))[:-1]
        expr = str(values[-1])
        for role in reversed(range(len(bounds))):
            expr = f"({t} < {bounds[role]} ? {values[role]} : {expr})"
        return expr

    def role_registers(self, op: Op, role: str) -> list[str]:
        """Lines that set each role's register budget (``warp_roles(..., registers=)``) after its split.  None
        here: a budget is a hint for the targets that can move registers between warps (CUDA sm_90)."""
        return []

    def branch_prologue(self, op: Op) -> tuple[list[str], list[str]]:
        """Lines that open the then- and the else-region of the ``if`` ``op`` (a role's register budget)."""
        return [], []

    def role_barrier(self, op: Op) -> list[str]:
        """A barrier among the threads of the caller's role.  Here a group barrier, for targets without named
        barriers: correct where every thread of the group reaches it (the capability check refuses the rest)."""
        return [f"{self.barrier()};"]

    #: The groups of the kernel's clusters (``cluster_groups``), once its op was printed; 1 without clusters.
    cluster_size = 1

    def cluster_rank(self, op: Op) -> str:
        """This group's rank in its cluster (an int expression).  Here 0: without clusters a cluster is one group
        (the capability check refuses more), so a multicast copy is a plain one and every arrival is local."""
        self.cluster_size = op.attrs["size"]
        return "0"

    def cluster_sync(self, op: Op) -> list[str]:
        """A barrier among the groups of the cluster; here, a cluster of one group, a group barrier."""
        return [f"{self.barrier()};"]

    def barrier(self) -> str:
        raise NotImplementedError

    def fence(self, op: Op) -> str:
        """A device-scope memory fence (the ``fence()`` builtin)."""
        raise self.unsupported(op, "fence() (a device-scope memory fence)")

    def atomic(self, op: Op, args: list[Operand]) -> str:
        raise NotImplementedError

    def subgroup(self, op: Op, args: list[Operand]) -> str:
        raise NotImplementedError

    # -- matrix fragments (fragments.py): registers are f32, every fragment value is exact in f32

    #: Where bf16 tensors that fragments access are stored as their 16 bits (GLSL, HIP; legalize.py):
    #: (bits -> f32 template, f32 -> bits template (exact: the value is a bf16 one), the source of the
    #: ``iron_round_bf16`` helper); None where bf16 is a type of the language.
    BF16_BITS: tuple[str, str, str] | None = None

    def frag_to_f32(self, text: str, dt: D.DType) -> str:
        """A fragment element of ``dt`` (a tensor element or fill value) as the f32 register value."""
        if dt == D.bf16 and self.BF16_BITS:
            return self.BF16_BITS[0].format(text)
        return self.convert(Operand(text, ScalarType(dt)), dt, D.f32)

    def frag_from_f32(self, text: str, dt: D.DType) -> str:
        """A register (holding a value of ``dt`` exactly) as a ``dt`` tensor element."""
        if dt == D.bf16 and self.BF16_BITS:
            return self.BF16_BITS[1].format(text)
        return self.convert(Operand(text, ScalarType(D.f32)), D.f32, dt)

    def frag_matrix_convert(self, op: Op, t: FragmentType, dt: D.DType, value: str) -> str:
        """A whole-matrix fragment ``value`` of type ``t`` as a matrix of ``dt`` (each element rounded once), for
        ``frag_store`` of an f32 accumulator to f16 / bf16; a located capability error where the target's
        matrices cannot convert."""
        raise self.unsupported(op, f"storing a {t.dtype.name} matrix fragment to a {dt.name} tensor")

    def frag_matrix_binary(self, op: Op, t: FragmentType, x: str, y: str) -> str:
        """``frag_binary`` of two whole-matrix fragments of type ``t`` (a scalar operand already filled into one),
        element by element; a located capability error where the target's matrices have no such arithmetic."""
        raise self.unsupported(op, f"elementwise '{op.attrs['fn']}' on whole-matrix {t.dtype.name} fragments")

    def frag_narrow(self, text: str, dt: D.DType) -> str:
        """An f32 register rounded once (nearest even) to ``dt`` as a ``dt`` tensor element (``frag_store`` of an f32
        accumulator to f16 / bf16); where bf16 is bits, rounded in f32 first, whose top half is then exact."""
        if dt == D.bf16 and self.BF16_BITS:
            return self.frag_from_f32(self.frag_round(text, dt), dt)
        return self.convert(Operand(text, ScalarType(D.f32)), D.f32, dt)

    def frag_round(self, text: str, dt: D.DType) -> str:
        """An f32 result rounded once to ``dt`` and held as f32 again (the accumulator's rounding)."""
        if dt == D.f32:
            return text
        if dt == D.bf16 and self.BF16_BITS:
            return f"{self.require('iron_round_bf16', self.BF16_BITS[2])}({text})"
        return self.frag_to_f32(self.frag_from_f32(text, dt), dt)

    def frag_lane_xor(self, value: str, mask: int) -> str:
        """The f32 ``value`` of the lane whose index differs from this one's by ``mask`` (every lane active)."""
        raise NotImplementedError

    def frag_subgroup_sync(self) -> list[str]:
        """Statements after which the subgroup's shared-memory writes are visible to all its lanes."""
        raise NotImplementedError

    #: Whether the matrix unit's 16-bit ``a``/``b`` fragments are held packed, slots 2i and 2i+1 in 32-bit
    #: word i (the lower-numbered slot low), as the unit takes them (CUDA's ``mma.sync``); else one f32
    #: register per slot.  A packing dialect provides :meth:`frag_pack` and :meth:`frag_ldmatrix`.
    packs_fragments: bool = False

    def frag_pack(self, lo: str, hi: str, dt: D.DType) -> str:
        """Two f32 values, each rounded once to ``dt`` (to nearest even; exact ones unchanged), as one packed
        word."""
        raise NotImplementedError

    def frag_ldmatrix(self, instruction: str, words: list[str], address: str) -> list[str]:
        """Statements loading ``words`` (packed registers) with ``ldmatrix`` from this lane's shared ``address``."""
        raise NotImplementedError

    def frag_warpgroup_mma(self, op: Op, out: str, args: list[Any]) -> list[str]:
        """Statements for ``mma_wg`` into the (declared) register array ``out``; only CUDA sm_90 has it, and
        the capability check refuses it everywhere else before emission."""
        raise self.unsupported(op, "'mma_wg' has no emitter")

    def warpgroup_wait(self, op: Op) -> list[str]:
        """Statements for ``mma_wg_wait`` (CUDA sm_90 alone, like ``mma_wg``)."""
        raise self.unsupported(op, "'mma_wg_wait' has no emitter")
